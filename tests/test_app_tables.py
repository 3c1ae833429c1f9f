"""Every table of every dashboard page is for people (streamlit AppTest): human headers (no identifiers such as
`steps_penalty_measured`), the unit in the header of a column of measured quantities, at most MAX_COLUMNS columns
in the default view (the rest behind an "All columns" tick or in an expander), and numbers as people write them
(no `2.637e+05`, no 12-digit floats, no `True`/`nan`).

Each page of app/page_list.py is opened in its default view, after its prediction (`guess=skip`), in each paper
view, and in each option of its radios, its tabs and the selectboxes named in MODES, one at a time; every "All
columns" box is then ticked. Tables that need a run of seconds to minutes are checked where the page's own test
runs them (`assert_for_people`, used by tests/test_fsdp_page.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl

import pytest

import page_list
from apptest_runs import shared_components
from lazy_import import lazy

AppTest = lazy("streamlit.testing.v1", "AppTest")

MAX_COLUMNS = 10
ALL_COLUMNS = "All columns"  # the label of the tick that shows a table's every column
# URL keys of a page's tabs and main-mode selectboxes (its radios are found on the page); each option is opened
MODES = {"collectives": ["part"], "training": ["view"], "planner": ["check", "plan_show"], "step_through": ["op"]}
SKIP_RADIOS = {"guess"}  # the prediction's answer: `guess=skip` reveals what every answer reveals
# a quantity with a unit: a numeric column whose header names one must say its unit
QUANTITY = re.compile(r"\b(time|times|bytes|bandwidth|latency|size|throughput|memory|duration|wall|speed|speedup)\b",
                      re.I)
UNIT = re.compile(r"\([^)]*(?<![\w/])(ns|µs|us|ms|s|min|h|B|kB|KB|MB|GB|TB|KiB|MiB|GiB|bits?|bytes|x|×|%|GB/s|MB/s|"
                  r"B/s|Gbit/s|Gb/s|values?/s|images?/s|ns/value)(?![\w])[^)]*\)")  # in brackets
MAX_DIGITS = 9  # significant digits of a float a person reads (float32's round trip); 12 are a machine's
PYTHON = {"True", "False", "nan", "NaN", "None", "inf", "-inf"}
LOWER_OK = ("busbw", "algbw", "hpZ")  # field terms written in lower case


@dataclass
class Table:
    where: str
    headers: list[str]
    rows: list[list[str]]  # the text a reader sees in each cell
    folded: bool = False  # inside an expander: behind a toggle


class _Shown(HTMLParser):
    """The headers and cells of an app/static_table.py table as displayed (not the exact tooltips)."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._head = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "thead":
            self._head = True
        elif tag == "tbody":
            self._head = False
        elif tag == "tr" and not self._head:
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            (self.headers if self._head else self.rows[-1]).append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _pipe_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """The markdown pipe tables in `text`: (headers, rows)."""
    out, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if len(block) >= 2 and all(re.fullmatch(r":?-+:?", c) for c in block[1] if c):
            out.append((block[0], block[2:]))
        block = []
    return out


def shown_tables(at: Any, where: str) -> list[Table]:
    """Every table the AppTest run `at` shows: app/static_table.py's, markdown pipe tables, st.dataframe, st.table."""
    import static_table

    folded = {id(m) for e in at.expander for m in e.markdown} | {id(d) for e in at.expander for d in e.dataframe}
    out = []
    for m in at.markdown:
        if f'class="{static_table.CLASS}"' in m.value:
            p = _Shown()
            p.feed(m.value)
            out.append(Table(where, p.headers, p.rows, id(m) in folded))
        else:
            out += [Table(where, h, r, id(m) in folded) for h, r in _pipe_tables(m.value)]
    for d in [*at.dataframe, *at.table]:
        df = d.value
        out.append(Table(where, [str(c) for c in df.columns], [[str(v) for v in r] for r in df.itertuples(index=False)],
                         id(d) in folded))
    return out


def _number(text: str) -> bool:
    return re.fullmatch(r"[-+−]?[\d,.]+(\s*(%|x|×))?", text.strip()) is not None and any(ch.isdigit() for ch in text)


def machine(cell: str) -> str | None:
    """Why `cell` reads as a machine's number (None: it does not): an exponent, more than MAX_DIGITS significant
    digits after a decimal point, a Python value."""
    if re.search(r"\d[eE][+-]?\d", cell):
        return "an exponent"
    if cell.strip() in PYTHON:
        return "a Python value"
    for num in re.findall(r"\d[\d,]*\.\d+", cell):
        if len(num.replace(",", "").replace(".", "").lstrip("0")) > MAX_DIGITS:
            return f"more than {MAX_DIGITS} digits"
    return None


def problems(t: Table, every_column: bool = False) -> list[str]:
    """What keeps `t` from being read by people (empty: nothing)."""
    from lab.experiments import codec_names

    bad = []
    names = sorted(codec_names(), key=len, reverse=True)  # a codec's name is the name the learner picks it by
    for h in t.headers:
        plain = re.sub("|".join(rf"\b{re.escape(n)}\b" for n in names), "codec", h)
        if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", plain) or re.fullmatch(r"[a-z]+[A-Z]\w*", plain):
            bad.append(f"identifier header {h!r}")
        elif plain and plain[0].islower() and not plain.startswith(LOWER_OK):
            bad.append(f"lower-case header {h!r} (a column name?)")
    for i, h in enumerate(t.headers):
        cells = [r[i] for r in t.rows if i < len(r) and r[i]]
        if QUANTITY.search(h) and cells and all(_number(c) for c in cells) and not UNIT.search(h):
            bad.append(f"no unit in header {h!r}")
    if not (every_column or t.folded) and len(t.headers) > MAX_COLUMNS:
        bad.append(f"{len(t.headers)} columns in the default view (at most {MAX_COLUMNS}): {t.headers}")
    for r in t.rows:
        for h, c in zip(t.headers, r):
            if (what := machine(c)) is not None:
                bad.append(f"{what} in {h!r}: {c!r}")
    return [f"{t.where}: {b}" for b in dict.fromkeys(bad)]


def assert_for_people(at: Any, where: str) -> None:
    """Every table `at` shows is for people (`problems`), the "All columns" boxes as they are."""
    every = any(c.label == ALL_COLUMNS and c.value for c in at.checkbox)
    found = [p for t in shown_tables(at, where) for p in problems(t, every)]
    assert not found, "\n".join(found)


def _render(module: str) -> None:
    import importlib

    importlib.import_module(module).render()


def _open(module: str, query: dict[str, str]) -> Any:
    at = shared_components(AppTest.from_function(_render, args=(module,), default_timeout=300))
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _views(at: Any, name: str) -> list[dict[str, str]]:
    """One query per option of the page's radios (not the prediction) and its MODES, each alone."""
    out = []
    for r in at.radio:
        key = (r.key or "").removeprefix("w_")
        if key and key not in SKIP_RADIOS:
            out += [{key: str(o)} for o in r.options if o != r.value]
    boxes = {(w.key or "").removeprefix("w_"): w for w in at.selectbox}
    for key in MODES.get(name, []):  # a selectbox, else tabs (the labels the page's module lists)
        out += [{key: str(o)} for o in (boxes[key].options if key in boxes else _tab_labels(name, key))]
    return out


def _tab_labels(name: str, key: str) -> list[str]:
    import importlib

    mod = importlib.import_module(f"views.{name}")
    labels = {"collectives": "PARTS", "training": "VIEWS", "planner": "CHECKS"}
    got = getattr(mod, labels[name], None)
    assert got, f"views.{name} lists no tabs for {key!r}"
    return list(got)


def _page_ids() -> list[str]:
    return [p.module.split(".")[-1] for p in page_list.PAGES]


@pytest.mark.parametrize("name", _page_ids())
def test_every_table_is_for_people(name):
    info = next(p for p in page_list.PAGES if p.module.endswith(f".{name}"))
    states = [{}, {"guess": "skip"}, *({**dict(parse_qsl(q)), "guess": "skip"} for q in info.paper_views if q)]
    first = _open(info.module, {"guess": "skip"})
    states += [{"guess": "skip", **v} for v in _views(first, name)]
    found = []
    for q in states:
        at = _open(info.module, q)
        assert not at.exception, (q, at.exception)
        tabs = shown_tables(at, f"{name} {q}")
        while box := next((c for c in at.checkbox if c.label == ALL_COLUMNS and not c.value), None):
            box.check().run()
            assert not at.exception, (q, at.exception)
        if any(c.label == ALL_COLUMNS for c in at.checkbox):
            tabs += shown_tables(at, f"{name} {q} + {ALL_COLUMNS}")
        found += [p for t in tabs for p in problems(t, every_column=t.where.endswith(ALL_COLUMNS))]
    assert not list(dict.fromkeys(found)), "\n".join(dict.fromkeys(found))
