"""Every option of every `paralab` command, generated from typer's own command tree, given the
values users get wrong: negative, zero, huge, the wrong type, NaN/inf, an empty string, a path that
cannot be written or read, and each of these again in every other mode of the command (an option that
belongs to another mode is still checked, never silently taken). Each case ends as one `error: ...` line
on stderr (exit 2, no traceback) or as a valid run; a word no option takes ('abc'), an empty string and
NaN always end in the error.

Validation must come before any heavy work, so each case is cheap: the run itself is cut off where it
would start (the CLI's `Session`, which every long command opens) and counts as valid there. A value
that must be refused, and a path the run reads as it starts, are followed further, up to the run's first
sign of work (a progress report, a finished row, ranks starting): a check inside the run counts when it
comes before any work. The few short commands that open no session run for real from small base
arguments. A case slower than `SLOW_S` fails: it did work before rejecting its input, or accepted a value
it cannot serve. The modes are the switches MODES lists; options, values and ranges come from the tree."""
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

# the other modes of a command: the switches that change which of its options apply. Every option's bad
# values run again in each, so an option of another mode is checked there too (or refused as not applying)
def _parallelisms(command: str) -> list[list[str]]:
    """Each registered parallelism as a mode (read from the registry, never listed): with the model and the
    ranks it needs where the command's defaults (the MLP, 2 processes) do not fit it; converge: the tasks it
    trains (a CNN-only strategy on the cnn task)."""
    from lab.train.parallelism import strategy_infos
    from lab.train.tasks import task_infos

    out = []
    for s in strategy_infos():
        mode = ["--mode", s.name]
        if command == "train":
            mode += [] if "mlp" in s.models else ["--model", s.models[0]]
            mode += ["--procs", str(s.min_procs)] if s.min_procs > 2 else []
        else:
            task = next((t.name for t in task_infos() if t.train_model in s.models), None)
            if task is None:
                continue
            mode += ([] if task == "mlp" else ["--task", task]) + (["-k", str(s.min_procs)] if s.min_procs > 2 else [])
        out.append(mode)
    return out


MODES = {
    "train": [["--mode", "ddp"], ["--mode", "fsdp"], ["--reproduce", "mnist-dp", "--smoke"],
              ["--parallel", "model"], ["--consistency", "easgd"], *_parallelisms("train")],
    "converge": [["--mode", "ddp"], ["--smoke"], *_parallelisms("converge")],
    "plan": [["--cluster", "1x8"], ["--strategy", "fsdp"]],
    "pays": [["--strategy", "fsdp"]],
    "bench collectives": [["--op", "all_gather"]],
    "fusion": [["--smoke"]],
    "dropout mlp": [["--smoke"], ["--table1"]],
    "dropout lstm": [["--smoke"]],
}

# values no option takes: never a valid run (a word that names nothing, nothing at all, not a number)
ALWAYS_REFUSED = ("abc", "", "nan")
# where an empty value means something other than "the default" (and says so in --help)
EMPTY_MEANS = {("train", "--hidden"): "no hidden layer", ("converge", "--hidden"): "no hidden layer"}


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
        return ["-5", "0", str(10 ** 12), "abc", "1.5", "nan", ""]
    if t is float:
        return ["-5", "0", "1e30", "abc", "nan", "inf", ""]
    if t is Path:
        if p.name == "out":
            return ["/sys/paralab-r.json", "/proc/paralab-r.json", "{file}/r.json", "{dir}", "{ro}/r.json", ""]
        # inputs (a data folder, an earlier result) and output folders (traces)
        return ["{dir}/missing/paralab", "{file}", "{empty}", "{ro}/x", "/proc/paralab-x", ""]
    # strings carry names, specs, sizes and comma-separated numbers
    return ["-5", "0", str(10 ** 15), "abc", "", ",", "nan"]


def _cases():
    for name, cmd in walk():
        for mode in [[], *MODES.get(name, [])]:
            tag = f" [{' '.join(mode)}]" if mode else ""
            for p in cmd.params:
                if p.param_type_name != "option" or p.is_flag or p.opts[-1] in mode:
                    continue
                for v in bad_values(p):
                    yield pytest.param(name, mode, p.opts[-1], v, id=f"{name}{tag} {p.opts[-1]}={v!r}")


CASES = list(_cases())


@pytest.fixture(scope="module", autouse=True)
def command_built_once():
    """typer rebuilds the whole click tree on every `CliRunner.invoke` (~85 % of a case's time): this
    module's cases share one build of the fixed tree."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.testing, "_get_command", lambda a: COMMAND if a is app else get_command(a))
        yield


@pytest.fixture
def cut_at_run(monkeypatch):
    """Cuts a case off where its run starts: at the CLI's Session; after `cut(deep=True)` (values that
    must be refused) at the run's first sign of work instead, a progress report, a finished row or ranks
    starting, so a check inside the run counts when it comes before any work."""
    import lab.cli.base as base
    import lab.comm.launch as launch

    class FirstWork(base.Session):
        def progress(self, frac, msg):
            raise Reached()

        def add(self, rows, label):
            raise Reached()

    def reached(*a, **k):
        raise Reached()

    def cut(deep: bool) -> None:
        monkeypatch.setattr(base, "Session", FirstWork if deep else reached)
        monkeypatch.setattr(launch, "run", reached)

    cut(deep=False)
    n = torch.get_num_threads()
    yield cut
    torch.set_num_threads(n)


@pytest.fixture
def paths(tmp_path, monkeypatch):
    """A file, a folder, a read-only folder (a probe that cannot create files there, as on a
    read-only mount: root ignores permission bits) and a clean cwd (default results land there)."""
    f = tmp_path / "a-file"
    f.write_text("x")
    (tmp_path / "empty").mkdir()
    ro = tmp_path / "read-only"
    ro.mkdir()
    real = os.open

    def read_only(path, flags, *a, **k):
        if str(path).startswith(str(ro)) and flags & os.O_CREAT:
            raise OSError(30, "Read-only file system", str(path))
        return real(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.chdir(tmp_path)
    return {"{file}": str(f), "{dir}": str(tmp_path), "{ro}": str(ro), "{empty}": str(tmp_path / "empty")}


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


def check(args: list[str], refuse: bool = False) -> None:
    """`paralab ARGS` ends in one error line or a valid run (`refuse`: only the error line)."""
    r = invoke(args)
    shown = f"`paralab {' '.join(args)}`:\n" + ("the run started" if r is None else r.output)
    assert not (refuse and (r is None or r.exit_code == 0)), f"{shown}\nthe value was taken"
    if r is None:  # valid input: the run started
        return
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown}\n{r.exception!r}"
    assert "Traceback" not in r.output, shown
    if r.exit_code == 0:
        return
    # one error line; a deprecated alias may add its one-line note
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("note: ")]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), shown


@pytest.mark.parametrize("command, mode, opt, value", CASES)
def test_every_option_rejects_bad_values_in_one_line(command, mode, opt, value, cut_at_run, paths):
    refuse = value in ALWAYS_REFUSED and not (value == "" and (command, opt) in EMPTY_MEANS)
    # a path read at the run's start (a data folder, an earlier result) is followed up to the first work too
    cut_at_run(deep=refuse or ("{" in value or value.startswith("/")) and opt != "--out")
    for k, v in paths.items():
        value = value.replace(k, v)
    base = BASE.get(command, [])
    if opt in base:
        i = base.index(opt)
        base = base[:i] + base[i + 2:]
    check([*command.split(), *base, *mode, opt, value], refuse)


def test_the_sweep_covers_every_command_and_option():
    """Generated, not listed: every leaf command appears, and every non-flag option of it."""
    names = {name for name, _ in walk()}
    assert {"errors", "table1", "pays", "bench collectives", "dropout mlp", "train", "trace"} <= names
    covered = {(c.values[0], c.values[2]) for c in CASES if not c.values[1]}
    for name, cmd in walk():
        for p in cmd.params:
            if p.param_type_name == "option" and not p.is_flag:
                assert (name, p.opts[-1]) in covered, (name, p.opts)
    assert len(CASES) > 400
    # every option again in each other mode of its command
    for name, modes in MODES.items():
        assert name in names, name
        for mode in modes:
            assert any(c.values[0] == name and c.values[1] == mode for c in CASES), (name, mode)


def test_every_number_option_declares_its_range():
    """Every int/float option says what it allows (typer's min and max, checked while the command line
    is parsed, before any work): NaN, inf, negative counts and sizes no run can serve never reach a
    run. A new numeric option without its range fails here."""
    missing = [(name, p.opts[-1]) for name, cmd in walk() for p in cmd.params
               if p.param_type_name == "option" and not p.is_flag and base_type(p) in (int, float)
               and (p.min is None or p.max is None)]
    assert not missing, f"declare min= and max= on these options: {missing}"


# where 0 needs a sibling's value to be consistent (a largest size of 0 needs a smallest of 0)
ZERO_WITH = {("bench codecs", "--max-exp"): ["--min-exp", "0"]}
ZERO_CASES = [pytest.param(name, p.opts[-1], id=f"{name} {p.opts[-1]}=0")
              for name, cmd in walk() for p in cmd.params
              if p.param_type_name == "option" and not p.is_flag and base_type(p) in (int, float) and p.min == 0]


@pytest.mark.parametrize("command, opt", ZERO_CASES)
def test_an_option_whose_range_starts_at_zero_takes_zero(command, opt, cut_at_run, paths):
    """The range an option declares (and `--help` shows, and an out-of-range error names) is what the
    command's own checks take: 0 where it starts at 0 (a rate, a learning rate or a threshold that must
    be > 0 declares ABOVE_ZERO instead), checked up to the run's first work."""
    cut_at_run(deep=True)
    base = BASE.get(command, []) + ZERO_WITH.get((command, opt), [])
    r = invoke([*command.split(), *base, opt, "0"])
    assert r is None or r.exit_code == 0, f"`paralab {command} {opt} 0`: {r.output}"
