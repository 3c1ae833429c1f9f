"""The private name of typer the CLI relies on, in one place: the base class of every usage error a typer command
raises (a bad option, a value of the wrong type or out of range, a failed check). typer >= 0.22 carries its own
copy of click under `typer._click` and raises that copy's exceptions; typer exports no public name for their base.
tests/test_typer_private.py pins it, so a typer that moves it fails there by name."""
from __future__ import annotations

try:
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - a typer that uses the installed click
    from click import ClickException

__all__ = ["ClickException"]
