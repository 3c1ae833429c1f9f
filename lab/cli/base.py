"""The CLI's shared pieces: the typer apps, rich output, progress (a bar on a terminal, plain lines
elsewhere), clear errors, Ctrl-C that keeps what finished, and one JSON shape for every result."""
from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from lab.experiments.results import RESULTS_ENV, check_writable, jsonable, results_dir, write_result

from .typer_private import ClickException


def version() -> str:
    """The installed distribution's version (pyproject.toml's when run from a checkout)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("paralab")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        import re

        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
        m = re.search(r'^version = "([^"]+)"', text, re.M)
        return m.group(1) if m else "unknown"


def _show_version(value: bool) -> None:
    if value:
        print(f"paralab {version()}")
        raise typer.Exit()


class OneLineErrors(typer.core.TyperGroup):
    """The root command: bad input (an unknown option, a value of the wrong type or out of its declared
    range, a failed check) ends as one line on stderr, `error: <what was wrong and what is allowed>`,
    exit 2, instead of click's usage block and boxed message."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        _refuse_empty(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # the help is the message, and typer printed it
                sys.exit(e.exit_code)
            ctx = getattr(e, "ctx", None)
            hint = f" (`{ctx.command_path} --help` lists what is allowed)" if ctx is not None else ""
            say_error(_with_range(e).format_message().rstrip(".") + hint)
            sys.exit(e.exit_code)
        except typer.Abort:
            say_error("aborted")
            sys.exit(1)
        # not standalone, typer returns the command's value, or the code of an Exit it raised
        sys.exit(rv if type(rv) is int else 0)


EMPTY_MEANS = {"hidden": "no hidden layer"}
"""Options whose empty value means something (and their help says what): every other option refuses an
empty value on the command line, which would otherwise read as its default or as the current folder."""


def _refuse_empty(cmd: Any) -> None:
    """Give every option of `cmd` and its subcommands the empty-value check (once per command tree)."""
    for sub in getattr(cmd, "commands", {}).values():
        _refuse_empty(sub)
    for p in cmd.params:
        if getattr(p, "is_flag", True) or p.name in EMPTY_MEANS or "process_value" in vars(p):
            continue
        p.process_value = _non_empty(p.process_value, p)


def _non_empty(process: Callable, param: Any) -> Callable:
    def process_value(ctx: Any, value: Any) -> Any:
        given = ctx.get_parameter_source(param.name)
        if given is not None and given.name == "COMMANDLINE" and not ctx.resilient_parsing:
            for v in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(v, str) and not v.strip():
                    raise typer.BadParameter(f"an empty value ({v!r}); give a value, or leave the option out "
                                             "for its default", ctx=ctx, param=param)
        return process(ctx, value)
    return process_value


def _with_range(e: ClickException) -> ClickException:
    """A value outside an option's declared range (or not a number) names the whole range allowed."""
    p = getattr(e, "param", None)
    lo, hi = getattr(p, "min", None), getattr(p, "max", None)
    if lo is not None and hi is not None and str(getattr(e, "message", "")).startswith("Input should be"):
        if lo == ABOVE_ZERO:
            e.message = f"Input should be greater than 0; allowed: a number above 0, up to {hi:g}"
            return e
        whole = isinstance(lo, int) and isinstance(hi, int)
        e.message = f"{e.message}; allowed: {'an integer' if whole else 'a number'} from {lo:{'d' if whole else 'g'}} " \
                    f"to {hi:{'d' if whole else 'g'}}"
    return e


app = typer.Typer(cls=OneLineErrors, add_completion=True, no_args_is_help=True,
                  help="ParaLab: codecs, collectives and approximate dropout for parallel training.")


@app.callback()
def _root(show_version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True,
                                            help="print the version and exit")) -> None:
    """ParaLab: codecs, collectives and approximate dropout for parallel training."""


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks; each writes bench/results/<name>-<device>.json "
                                                   f"under the current directory (or in ${RESULTS_ENV}) unless "
                                                   "given --out FILE or --json.")
app.add_typer(bench_app, name="bench")
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


class _OneLineWarnings(logging.Handler):
    """The lab's own warnings (e.g. a broken plugin left out) as one `warning: ...` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(Text.assemble(("warning: ", "yellow"), record.getMessage().replace("\n", " ")),
                          highlight=False, soft_wrap=True)


_lab_log = logging.getLogger("lab")
_lab_log.addHandler(_OneLineWarnings(logging.WARNING))
_lab_log.propagate = False  # printed once, in the CLI's own words, whatever a library did to the root logger

# commands that run on torchrun's ranks (`torchrun --nproc-per-node 2 -m lab <command> ...`): their --help says
# so, and tests/test_cli.py runs each of them under torchrun
TORCHRUN_COMMANDS: list[str] = []
TORCHRUN_HELP = "Runs under torchrun too (one process per rank; rank 0 prints and writes the result): "


ABOVE_ZERO = 1e-12
"""The declared lower bound of a number that must be > 0 (a rate, a threshold): typer's ranges are closed."""


def json_option() -> Any:
    """The --json flag every result command has."""
    return typer.Option(False, "--json", help="print the result as JSON on stdout (nothing else goes there)")


def _writable_out(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """--out is checked while the command line is parsed, before any work: a file that cannot be
    written (a read-only mount, /sys, a parent that is a file, a folder) is a usage error."""
    if value is not None and not ctx.resilient_parsing:
        why = check_writable(value, what="")
        if why is not None:
            raise typer.BadParameter(why.strip())
    return value


def out_option(default: str = "") -> Any:
    """The --out FILE option every result command has (`default`: where a benchmark writes without it),
    checked for writability before the command runs."""
    return typer.Option(None, "--out", callback=_writable_out,
                        help="write the result as JSON to this file (atomically)" + default)


def _device_name(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    if value is not None and not ctx.resilient_parsing and not re.fullmatch(r"cpu|cuda(:\d+)?", value.strip()):
        raise typer.BadParameter(f"{value!r}; allowed: cpu, cuda or cuda:N")
    return value.strip() if value is not None else None


def device_option() -> Any:
    """The --device option of the benchmarks: cpu, cuda or cuda:N (default: a GPU when there is one),
    checked while parsing (whether the GPU exists is the command's check)."""
    return typer.Option(None, callback=_device_name, help="cpu or cuda (default: cuda when there is a GPU)")


def runs_under_torchrun(path: str) -> Callable:
    """Mark the command `path` ('bench collectives') as one that runs on torchrun's ranks."""
    def mark(fn: Callable) -> Callable:
        TORCHRUN_COMMANDS.append(path)
        return fn
    return mark


class _PlainProgress:
    """Progress as plain lines on stderr (CI logs, pipes): a line when the message changes, at most
    one a second, and always the last one."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s, self.last_t, self.last_msg = every_s, -math.inf, None

    def __call__(self, frac: float, msg: str) -> None:
        now = time.monotonic()
        if msg != self.last_msg and (now - self.last_t >= self.every_s or frac >= 1.0):
            err_console.print(f"[{frac:4.0%}] {msg}", highlight=False, markup=False, soft_wrap=True)
            self.last_t, self.last_msg = now, msg


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator:
    """A progress callback (fraction, message) for the experiments: a rich bar on stderr when it is
    a terminal, plain lines otherwise, nothing when not `enabled`."""
    if not enabled:
        yield None
        return
    if not err_console.is_terminal:
        yield _PlainProgress()
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err_console, transient=True) as p:
        task = p.add_task("starting", total=1.0)
        yield lambda frac, msg: p.update(task, completed=frac, description=msg)


def print_frame(df: pd.DataFrame, title: str, floatfmt: str = "{:.4g}") -> None:
    """A table as rich prints it; cells are plain text (a codec name like 'linear[nearest,tensor]' is not
    markup)."""
    t = Table(title=escape(title))
    for c in df.columns:
        t.add_column(escape(str(c)), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left",
                     overflow="fold")
    for row in df.itertuples(index=False):
        t.add_row(*[Text(floatfmt.format(v) if isinstance(v, float) and math.isfinite(v) else str(v)) for v in row])
    console.print(t)


def say_error(msg: str) -> None:
    """`error: msg` on stderr as one line (never wrapped, never read as markup)."""
    err_console.print(Text.assemble(("error: ", "red"), str(msg).replace("\n", " ")), highlight=False,
                      soft_wrap=True)


def fail(msg: str) -> NoReturn:
    """Bad input: `error: msg` (what was wrong and what is allowed) on one line, exit 2."""
    say_error(msg)
    raise typer.Exit(2)


TORCHRUN_CLASH = "nccl-tests' names; the old --max is ambiguous under torchrun, which takes it for --max-restarts"


def deprecated(old: str, new: str, why: str = TORCHRUN_CLASH) -> None:
    """A one-line note on stderr for an option kept as a hidden alias for one release."""
    err_console.print(f"note: {old} is deprecated and will be removed in the next release; use {new} ({why})",
                      highlight=False, soft_wrap=True)


def numbers(text: str, what: str, cast: type = float, allow_empty: bool = False) -> list:
    """'1, 2,4' -> [1, 2, 4] as `cast`; a bad or (unless allowed) empty list is a one-line error."""
    kind = "integers" if cast is int else "numbers"
    try:
        vals = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        vals = None
    if vals is None or not (vals or allow_empty):
        fail(f"{what} must be comma-separated {kind}, got {text!r}")
    return vals


def result(command: str, config: dict, *, device: str | None = None, rows: Any = None, summary: Any = None,
           **extra: Any) -> dict:
    """Every command's result has one shape: {"command", "version", "device", "config", "rows" | "summary",
    ...}; rows is a list of records (a DataFrame is converted), summary a dict. docs/schemas/ has each
    command's JSON schema."""
    if (rows is None) == (summary is None):
        raise ValueError("a result has rows or a summary (exactly one)")
    if device is None:
        from lab import backend

        device = backend.device_name("cpu")
    body = {"rows": rows} if rows is not None else {"summary": summary}
    return jsonable({"command": command, "version": version(), "device": device, "config": config, **body, **extra})


def emit(payload: dict, out: Path | None, as_json: bool) -> bool:
    """Write `payload` to `out` when given (atomically; 'wrote' goes to stderr) and print it as JSON
    on stdout when asked (nothing else is printed there then). True when printed: the command skips
    its tables."""
    if out:
        write_result(out, payload)
        err_console.print(f"wrote {out}", highlight=False, soft_wrap=True)
    if as_json:
        sys.stdout.write(json.dumps(jsonable(payload), indent=1, allow_nan=False) + "\n")
        sys.stdout.flush()
    return as_json


def check_results_dir(out: Path | None, as_json: bool) -> None:
    """Before a benchmark runs: when it will write its default file (no --out, no --json), the
    results folder (bench/results under the current directory, or $PARALAB_RESULTS) must be writable."""
    if out is None and not as_json:
        why = check_writable(results_dir() / "result.json", what="the results folder:")
        if why is not None:
            fail(f"{why}; give --out FILE, --json, or set ${RESULTS_ENV} to a writable folder")


def bench_out(out: Path | None, as_json: bool, name: str) -> Path | None:
    """Where a benchmark writes: --out, else <results>/<name>.json (results_dir: bench/results under the
    current directory, or $PARALAB_RESULTS; never the package) unless only --json was asked."""
    if out is not None:
        return out
    return None if as_json else results_dir() / f"{name}.json"


def partial_out(as_json: bool, name: str) -> Path | None:
    """Where a stopped benchmark without --out keeps its finished rows: beside its default result,
    as <results>/<name>.partial.json, so a stop never overwrites a complete result (None with
    --json: the partial result goes to stdout)."""
    return None if as_json else results_dir() / f"{name}.partial.json"


@dataclass
class Session:
    """A long command's state for Ctrl-C: the rows finished so far and where it is. `extra` holds the
    result's other keys as far as they got (e.g. the curve points so far); `shape`, when set, turns the
    finished rows into the result's body for a command whose result is not plain rows (default
    {"rows": rows})."""

    command: str
    config: dict
    out: Path | None
    as_json: bool
    device: str | None = None
    rows: list = field(default_factory=list)
    where: str = "starting"
    total: int | None = None
    callback: Callable[[float, str], None] | None = None
    extra: dict = field(default_factory=dict)
    shape: Callable[[list], dict] | None = None
    what: str = "rows"

    def progress(self, frac: float, msg: str) -> None:
        self.where = f"{msg} ({frac:.0%})"
        if self.callback is not None:
            self.callback(frac, msg)

    def part(self, i: int, n: int) -> Callable[[float, str], None]:
        """The progress callback of chunk i of n (its fraction mapped into the whole run's)."""
        return lambda frac, msg: self.progress((i + frac) / n, msg)

    def add(self, rows: list[dict], label: str) -> None:
        """Keep finished rows (written if the run is stopped) and say so in plain-progress mode."""
        self.rows.extend(rows)
        self.where = f"after {label}"
        if isinstance(self.callback, _PlainProgress):
            err_console.print(f"done: {label} ({len(self.rows)} {self.what})", highlight=False, soft_wrap=True,
                              markup=False)

    def partial(self) -> dict | None:
        """The result of a stopped run: the finished rows marked "partial" (None when none finished)."""
        if not self.rows:
            return None
        body = self.shape(self.rows) if self.shape is not None else {"rows": self.rows}
        return result(self.command, self.config, device=self.device, partial=True, stopped=self.where,
                      **body, **self.extra)


STOPPED = 130
"""Exit code of a run stopped by Ctrl-C (the shell's 128 + SIGINT)."""


@contextmanager
def session(command: str, config: dict, out: Path | None, as_json: bool, device: str | None = None,
            progress: bool = True) -> Iterator[Session]:
    """Run a long command: a progress bar (or plain lines), and on Ctrl-C a clean stop that writes the
    finished rows (marked "partial") to --out / stdout, says where it stopped, and exits 130."""
    s = Session(command, config, out, as_json, device)
    stopped = False
    with progress_bar(progress) as cb:
        s.callback = cb
        try:
            yield s
        except KeyboardInterrupt:
            stopped = True
    if not stopped:
        return
    msg = f"interrupted {s.where}"
    payload = s.partial()
    if payload is not None:
        if out:
            write_result(out, payload)
            msg += f"; {len(s.rows)} finished {s.what} written to {out} (marked partial)"
        if as_json:
            sys.stdout.write(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    else:
        msg += "; nothing had finished, no result written"
    err_console.print(msg, highlight=False, soft_wrap=True, markup=False)
    # 130 is the shell's code for Ctrl-C; `main` leaves at once with it (see there).
    raise SystemExit(STOPPED)
