"""Headless entry point: reproduce the lab's tables and run its benchmarks (`paralab --help`).
One module per capability registers its commands on the shared typer apps of `base`."""
from __future__ import annotations

from . import quiet  # noqa: F401  first: filters known third-party import-time messages

from .base import TORCHRUN_COMMANDS, app, bench_app  # noqa: E402

# each module registers its commands on import, in the order `paralab --help` lists them
from . import codecs, comm, train, dropout, deep_image  # noqa: E402,I001

CAPABILITIES = (codecs, comm, train, dropout, deep_image)

__all__ = ["app", "bench_app", "main", "CAPABILITIES", "TORCHRUN_COMMANDS"]


def main() -> None:
    app(prog_name="paralab")
