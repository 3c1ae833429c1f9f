"""Where measured results live. `results_dir` is the folder a benchmark writes its default result to:
$PARALAB_RESULTS, else ./bench/results (never the installed package). `results_dirs` is where every
reader looks, in order: that folder first, then the reference results shipped with paralab
(`lab.packaged`), so a user's own measurement always wins over the shipped one. Here, below every floor
that writes or reads results (docs/design.md's layers)."""
from __future__ import annotations

import os
from pathlib import Path

from lab.packaged import shipped

RESULTS_ENV = "PARALAB_RESULTS"
"""Environment variable naming the folder benchmarks write to when not given --out."""


def results_dir() -> Path:
    """The folder a benchmark writes its default result to: $PARALAB_RESULTS when set, else
    bench/results under the current directory (relative, so messages name it as the user sees it).
    Never inside the package: an installed paralab has no business writing into site-packages."""
    env = os.environ.get(RESULTS_ENV, "").strip()
    return Path(env).expanduser() if env else Path("bench", "results")


def reference_dir() -> Path:
    """The reference results shipped with paralab: the repository's bench/results (lab/reference in a wheel)."""
    return shipped("reference")


def results_dirs() -> list[Path]:
    """The folders a reader of results searches, in order: `results_dir()` (the user's measurements), then
    `reference_dir()`; once when they are the same folder (run from the repository's root)."""
    user, ref = results_dir(), reference_dir()
    return [user] if user.resolve() == ref.resolve() else [user, ref]

