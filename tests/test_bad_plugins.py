"""A plugin codec that is broken (its encode raises) never takes a command down: where the lab takes every
registered codec (`pays`, `plan --advice`), it is named in one warning line on stderr and left out;
named on purpose, it is one `error: ...` line."""
from __future__ import annotations

import itertools
import json

import pytest
from typer.testing import CliRunner

from lab.cli import app
from lab.codecs import CastCodec, CodecInfo, register, unregister

runner = CliRunner()
NAMES = itertools.count()


class Broken(CastCodec):
    """An fp16 cast whose encode raises, as a plugin with a bug does."""

    def encode(self, x, *a, **k):
        raise RuntimeError("broken on purpose")


@pytest.fixture
def broken():
    # a new name per test: a broken codec is named once per process, not at every look at the registry
    name = f"broken_probe{next(NAMES)}"
    register(CodecInfo(name, "fp16 cast whose encode raises (test plugin)", lambda **kw: Broken("fp16", **kw)))
    yield name
    unregister(name)


def _one_warning(stderr: str, name: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"warning: codec {name!r} left out") \
        and "RuntimeError: broken on purpose" in lines[0], stderr


@pytest.mark.parametrize("args", [["pays", "--json"], ["plan", "--gpus", "1,8", "--advice", "--json"]],
                         ids=["pays", "plan --advice"])
def test_a_broken_plugin_codec_is_named_and_left_out(broken, args):
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and r.exception is None, r.output
    _one_warning(r.stderr, broken)
    out = json.loads(r.stdout)
    assert broken not in json.dumps(out)
    priced = {row["codec"] for row in out["rows"]} if args[0] == "pays" else \
        {row["codec"] for row in out["advice_time_to_accuracy"]["rows"]}
    assert {"dynamic_tree", "onebit"} <= priced  # the working codecs are all still there


def test_a_broken_plugin_codec_named_on_purpose_is_one_error_line(broken):
    r = runner.invoke(app, ["pays", "--codecs", broken])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip() == f"error: codec {broken!r}: its encode failed (RuntimeError: broken on purpose)"
