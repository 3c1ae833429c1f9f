"""Fuzz every dashboard page's inputs through Streamlit's AppTest (seeded, bounded in time).

Each round sets one random input (one not set yet, until every input of the page has been set once) to a
random or out-of-range value: numbers typed beyond their
limits (and huge, negative, zero), empty and random multiselect choices, random options, slider
ends, toggled checkboxes, odd text (select_sliders are left alone: AppTest sets
them by formatted label only). The page must never show an exception, and a number outside
its limits must be said on the page (st.error / st.warning naming the allowed range), not
silently clamped or ignored. Run buttons are not pressed (they start minutes-long experiments);
test_app.py drives them. A non-tensor upload on the Codecs page has its own test.
"""
from __future__ import annotations

import random
import time

import pytest

import page_list  # app/ is on pytest's pythonpath
from apptest_runs import shared_components
from lazy_import import lazy

tables = lazy("static_table", "tables")  # pandas: loaded by the first test that reads a table

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection

PAGES = [p.module for p in page_list.PAGES]
ROUNDS = 20         # random inputs per page, at most (more only where the page has more inputs)
EXTRA = 4           # rounds beyond one per input of the default view (each input is set once first)
KINDS = ("number_input", "multiselect", "selectbox", "radio", "checkbox", "slider", "text_input")
BUDGET_S = 20.0     # per page: stop fuzzing (not fail) when spent, the machine may be loaded
NUMBERS = (-1e12, -1, 0, 1e12, 3, 0.5)


def _messages(at: AppTest) -> str:
    return " ".join(str(m.value) for m in [*at.error, *at.warning])


def _limits(w) -> tuple[float | None, float | None]:
    p = w.proto
    lo = p.min if p.has_min else None
    hi = p.max if p.has_max else None
    return lo, hi


def _fuzz_one(at: AppTest, rng: random.Random, touched: set[str]) -> tuple[str, object, bool]:
    """Set one random widget, one not `touched` yet while there is one (so every input of the page is set
    within its first rounds); add its key to `touched` and return (key, value, out_of_range)."""
    widgets = [(k, w) for k in KINDS for w in at.get(k)]
    fresh = [(k, w) for k, w in widgets if w.key not in touched]
    kind, w = rng.choice(fresh or widgets)
    touched.add(w.key)
    if kind == "number_input":
        lo, hi = _limits(w)
        choices = list(NUMBERS) + [v for v in ((lo - 1) if lo is not None else None,
                                              (hi + 1) if hi is not None else None) if v is not None]
        v = rng.choice(choices)
        if w.proto.data_type == w.proto.INT:
            v = int(v)
        out = (lo is not None and v < lo) or (hi is not None and v > hi)
        w.set_value(v)
        return w.key, v, out
    if kind == "multiselect":  # subsets of the current choice: options may be formatted labels
        cur = list(w.value)
        v = rng.sample(cur, rng.choice([0, 0, min(1, len(cur)), len(cur)]))
        w.set_value(v)
    elif kind == "selectbox":
        i = rng.randrange(len(w.options))
        v = w.options[i]
        w.select_index(i)
    elif kind == "radio":
        v = rng.choice(list(w.options))
        w.set_value(v)
    elif kind == "checkbox":
        v = not w.value
        w.set_value(v)
    elif kind == "slider":
        p = w.proto
        ends = [p.min, p.max]
        if isinstance(w.value, (tuple, list)):
            v = sorted(rng.sample([p.min, p.max, (p.min + p.max) / 2], 2))
            v = [type(w.value[0])(x) for x in v]
        else:
            v = type(w.value)(rng.choice(ends + [(p.min + p.max) / 2]))
        w.set_value(v)
    else:
        v = rng.choice(["", "-1", "x" * 300, "0,0,0", "nan", "1e309"])
        w.set_value(v)
    return w.key, v, False


def _render(module: str) -> None:
    import importlib

    importlib.import_module(module).render()


def page(module: str) -> AppTest:
    """The page `module` of the page list on its own (not run yet)."""
    return shared_components(AppTest.from_function(_render, args=(module,), default_timeout=90))


@pytest.mark.parametrize("name", PAGES)
def test_fuzz_page_inputs(name: str) -> None:
    rng = random.Random(f"paralab-{name.split('.')[-1]}")
    at = page(name).run()
    assert not at.exception, (name, at.exception)
    end = time.monotonic() + BUDGET_S
    touched: set[str] = set()
    inputs = len([w for k in KINDS for w in at.get(k)])
    rounds = max(inputs, min(ROUNDS, inputs + EXTRA))  # every input once, then a few more
    for i in range(rounds):
        if time.monotonic() > end:
            break
        if not any(at.get(k) for k in KINDS):
            break
        key, v, out = _fuzz_one(at, rng, touched)
        at.run()
        assert not at.exception, f"{name}: {key} = {v!r} (round {i}): {at.exception[0].message}"
        if out:
            msg = _messages(at)
            assert "allowed" in msg, f"{name}: {key} = {v!r} is out of range, yet the page says nothing: {msg!r}"


class _Upload:
    """What st.file_uploader returns, enough for the Codecs page."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.size, self._data = name, len(data), data

    def getvalue(self) -> bytes:
        return self._data


def _npy(arr) -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _pt(obj) -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_codecs_page_non_tensor_uploads_are_messages(monkeypatch):
    """AppTest cannot upload a file: st.file_uploader is replaced by one that returns each file."""
    import numpy as np
    import streamlit as st
    import torch

    bad = [("notes.pt", b"this is not a torch file"), ("junk.npy", b"\x93NUMPY junk"),
           ("words.npy", _npy(np.array(["a", "b"]))), ("ints.pt", _pt({"step": 3})),
           ("empty.pt", _pt(torch.zeros(0))), ("nan.npy", _npy(np.array([1.0, np.nan]))),
           ("complex.pt", _pt(torch.ones(4, dtype=torch.complex64)))]
    for name, data in bad:
        monkeypatch.setattr(st, "file_uploader", lambda *a, _f=_Upload(name, data), **kw: _f)
        at = page("views.codecs")
        at.query_params["source"] = "upload"
        at.run()
        assert not at.exception, (name, at.exception)
        assert at.error and name in at.error[0].value and "allowed" in at.error[0].value, (name, _messages(at))
    monkeypatch.setattr(st, "file_uploader", lambda *a, **kw: _Upload("good.pt", _pt(torch.randn(1000))))
    at = page("views.codecs")
    at.query_params["source"] = "upload"
    at.query_params["guess"] = "skip"  # the error table shows once the prediction is made or skipped
    at.run()
    assert not at.exception and not at.error
    assert "good.pt" in set(tables(at)[0].Data)
