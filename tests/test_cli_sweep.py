"""Every option of every `paralab` command, generated from typer's own command tree, given the
values users get wrong: negative, zero, huge, the wrong type, NaN/inf, a path that cannot be written
or read. Each case ends as one `error: ...` line on stderr (exit 2, no traceback) or as a valid run.

Validation must come before any heavy work, so each case is cheap: the run itself is cut off where it
would start (the CLI's `Session`, which every long command opens) and counts as valid there; the
few short commands that open no session run for real from small base arguments. A case slower than
`SLOW_S` fails: it did work before rejecting its input, or accepted a value it cannot serve."""
from __future__ import annotations

import os
import signal
import typing
from pathlib import Path

import pytest
import torch
import typer.testing
from typer.main import get_command
from typer.testing import CliRunner

from lab.cli import app

runner = CliRunner()
COMMAND = get_command(app)
SLOW_S = 20  # a generous bound against a loaded machine: cases take well under a second (--durations)

# small arguments for the commands that run without a session (their valid runs complete); the option
# under test replaces its own base value
BASE = {
    "pays": ["--codecs", "dynamic_tree"],
    "plan": ["--gpus", "1,8"],
    "race": ["--codecs", "dynamic_tree"],
    "dropout patterns": ["--iterations", "10", "--batch", "4", "--units", "8"],
    "dropout search": ["--max-steps", "2000"],
}


class Reached(BaseException):
    """The command got past its checks to the start of its run (a BaseException: no `except ValueError`
    in a command catches it)."""


def walk(cmd=None, path=()):
    cmd = cmd or COMMAND
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from walk(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def base_type(p) -> type:
    """int, float, str, Path, ... of an option (Optional[...] and List[...] unwrapped)."""
    t = p.type_descriptor.annotation
    while typing.get_origin(t) in (typing.Union, list, tuple) or str(typing.get_origin(t)) == "types.UnionType":
        t = next(a for a in typing.get_args(t) if a is not type(None))
    return t


def bad_values(p) -> list[str]:
    """The values to try for option `p`, by its type. '{file}' and '{dir}' are filled in per case."""
    t = base_type(p)
    if t is bool:
        return []
    if t is int:
        return ["-5", "0", str(10 ** 12), "abc", "1.5"]
    if t is float:
        return ["-5", "0", "1e30", "abc", "nan", "inf"]
    if t is Path:
        if p.name == "out":
            return ["/sys/paralab-r.json", "/proc/paralab-r.json", "{file}/r.json", "{dir}", "{ro}/r.json"]
        return ["/nonexistent/paralab", "{file}"]
    # strings carry names, specs, sizes and comma-separated numbers
    return ["-5", "0", str(10 ** 15), "abc", "", ",", "nan"]


CASES = [pytest.param(name, p.opts[-1], v, id=f"{name} {p.opts[-1]}={v!r}")
         for name, cmd in walk() for p in cmd.params if p.param_type_name == "option" and not p.is_flag
         for v in bad_values(p)]


@pytest.fixture(scope="module", autouse=True)
def command_built_once():
    """typer rebuilds the whole click tree on every `CliRunner.invoke` (~85 % of a case's time): this
    module's cases share one build of the fixed tree."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.testing, "_get_command", lambda a: COMMAND if a is app else get_command(a))
        yield


@pytest.fixture
def cut_at_run(monkeypatch):
    import lab.cli.base as base

    def reached(*a, **k):
        raise Reached()

    monkeypatch.setattr(base, "Session", reached)
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture
def paths(tmp_path, monkeypatch):
    """A file, a folder, a read-only folder (a probe that cannot create files there, as on a
    read-only mount: root ignores permission bits) and a clean cwd (default results land there)."""
    f = tmp_path / "a-file"
    f.write_text("x")
    ro = tmp_path / "read-only"
    ro.mkdir()
    real = os.open

    def read_only(path, flags, *a, **k):
        if str(path).startswith(str(ro)) and flags & os.O_CREAT:
            raise OSError(30, "Read-only file system", str(path))
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.chdir(tmp_path)
    return {"{file}": str(f), "{dir}": str(tmp_path), "{ro}": str(ro)}


def _alarm(signum, frame):
    raise TimeoutError(f"slower than {SLOW_S} s")


def invoke(args: list[str]):
    """(result or None when the run was reached, stderr)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SLOW_S)
    try:
        return runner.invoke(app, args)
    except Reached:
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check(args: list[str]) -> None:
    r = invoke(args)
    if r is None:  # valid input: the run started
        return
    shown = f"`paralab {' '.join(args)}`:\n{r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown}\n{r.exception!r}"
    assert "Traceback" not in r.output, shown
    if r.exit_code == 0:
        return
    # one error line; a deprecated alias may add its one-line note
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("note: ")]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), shown


@pytest.mark.parametrize("command, opt, value", CASES)
def test_every_option_rejects_bad_values_in_one_line(command, opt, value, cut_at_run, paths):
    for k, v in paths.items():
        value = value.replace(k, v)
    base = BASE.get(command, [])
    if opt in base:
        i = base.index(opt)
        base = base[:i] + base[i + 2:]
    check([*command.split(), *base, opt, value])


def test_the_sweep_covers_every_command_and_option():
    """Generated, not listed: every leaf command appears, and every non-flag option of it."""
    names = {name for name, _ in walk()}
    assert {"errors", "table1", "pays", "bench collectives", "dropout mlp", "train", "trace"} <= names
    covered = {(c.values[0], c.values[1]) for c in CASES}
    for name, cmd in walk():
        for p in cmd.params:
            if p.param_type_name == "option" and not p.is_flag:
                assert (name, p.opts[-1]) in covered, (name, p.opts)
    assert len(CASES) > 400


def test_every_number_option_declares_its_range():
    """Every int/float option says what it allows (typer's min and max, checked while the command line
    is parsed, before any work): NaN, inf, negative counts and sizes no run can serve never reach a
    run. A new numeric option without its range fails here."""
    missing = [(name, p.opts[-1]) for name, cmd in walk() for p in cmd.params
               if p.param_type_name == "option" and not p.is_flag and base_type(p) in (int, float)
               and (p.min is None or p.max is None)]
    assert not missing, f"declare min= and max= on these options: {missing}"
