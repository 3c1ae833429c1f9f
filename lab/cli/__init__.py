"""Headless entry point: reproduce the lab's tables and run its benchmarks (`paralab --help`).
One module per capability registers its commands on the shared typer apps of `base`."""
from __future__ import annotations

from .base import app, bench_app

# each module registers its commands on import, in the order `paralab --help` lists them
from . import codecs, comm, train, dropout, deep_image  # noqa: E402,I001

CAPABILITIES = (codecs, comm, train, dropout, deep_image)

__all__ = ["app", "bench_app", "main", "CAPABILITIES"]


def main() -> None:
    app()
