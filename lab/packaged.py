"""The folders a paralab install ships beside its code, as package data of `lab` read with
`importlib.resources`: the CUDA kernel sources, the reference results and the dashboard.

In the repository they keep their top-level places (kernels/, bench/results/, app/: docs/design.md's
layout) and setup.py maps them into the wheel as lab/kernels, lab/reference and lab/app. A checkout
used in place (an editable install, or the source folder on PYTHONPATH) has no such folders inside
lab/, so there they are read from the top-level places.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

SHIPPED = {"kernels": "kernels", "reference": "bench/results", "app": "app"}
"""Folder inside the installed `lab` package -> the same folder in the repository."""


def shipped(name: str) -> Path:
    """The installed folder `name` of SHIPPED (lab/<name> in a wheel, the repository's folder in a
    checkout). ValueError for a name SHIPPED does not list; FileNotFoundError when neither exists (a
    broken install)."""
    if name not in SHIPPED:
        raise ValueError(f"unknown shipped folder {name!r}; known: {', '.join(SHIPPED)}")
    inside = resources.files("lab") / name
    if inside.is_dir():
        # An unpacked install (pip never installs a wheel zipped): the folder is a real path.
        return Path(str(inside))
    root = Path(__file__).resolve().parents[1]
    checkout = root / SHIPPED[name]
    if (root / "pyproject.toml").is_file() and checkout.is_dir():  # a checkout, not some site-packages/app
        return checkout
    raise FileNotFoundError(f"the installed paralab lacks its {name} folder (looked in {inside} and {checkout}): "
                            f"reinstall it (`pip install .` from the repository)")


__all__ = ["SHIPPED", "shipped"]
