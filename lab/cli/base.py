"""The CLI's shared pieces: the typer apps, rich output, progress bars, clear errors, result files."""
from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ParaLab: codecs, collectives and approximate dropout for parallel training.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks; each writes bench/results/<name>-<device>.json.")
app.add_typer(bench_app, name="bench")
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator:
    """A rich progress bar on stderr whose update function fits the experiments' callback."""
    if not enabled:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err_console, transient=True) as p:
        task = p.add_task("starting", total=1.0)
        yield lambda frac, msg: p.update(task, completed=frac, description=msg)


def print_frame(df: pd.DataFrame, title: str, floatfmt: str = "{:.4g}") -> None:
    t = Table(title=title)
    for c in df.columns:
        t.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left",
                     overflow="fold")
    for row in df.itertuples(index=False):
        t.add_row(*[floatfmt.format(v) if isinstance(v, float) and math.isfinite(v) else str(v) for v in row])
    console.print(t)


def fail(msg: str) -> None:
    err_console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)




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


def save_or_print(payload: dict, out: Path | None, as_json: bool) -> bool:
    """Write `payload` to `out` (all or nothing) when given, and print it as JSON when asked; True
    when printed (the command then skips its tables)."""
    if out:
        write_result(out, payload)
    if as_json:
        console.print_json(json.dumps(payload, default=str))
    return as_json


def write_result(path: Path, payload: dict) -> None:
    """All or nothing: a run stopped half-way leaves no file (written to a temp file, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    try:
        tmp.write_text(json.dumps(payload, indent=1, default=str))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)



def write_bench(name: str, info: dict, rows: list[dict], out: Optional[Path]) -> Path:
    from lab.codecs.bench import write_json

    path = out or REPO / "bench" / "results" / f"{name}.json"
    return write_json(pd.DataFrame(rows), info, path)

