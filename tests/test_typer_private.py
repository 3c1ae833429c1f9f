"""lab/cli/typer_private.py: every usage error a typer command raises is a ClickException (the CLI turns each
into one line on stderr)."""
from __future__ import annotations

import pytest
import typer

from lab.cli.typer_private import ClickException

app = typer.Typer()


@app.command()
def _count(n: int = typer.Option(1, min=1, max=3), name: str = typer.Option("a")) -> None:
    if name == "bad":
        raise typer.BadParameter("no bad names")


@pytest.mark.parametrize("args", [["--n", "9"], ["--n", "x"], ["--nope"], ["--name", "bad"]])
def test_typer_s_usage_errors_are_click_exceptions(args):
    with pytest.raises(Exception) as got:
        typer.main.get_command(app).main(args, standalone_mode=False)
    assert isinstance(got.value, ClickException), \
        f"typer {typer.__version__} raised {type(got.value).__module__}.{type(got.value).__name__} for {args}, " \
        "not a ClickException of lab/cli/typer_private.py"
    assert got.value.format_message()
