"""Where measured results live: `results_dir` is the folder a benchmark writes its default result to and
the first place measured results (converge penalties) are read from ($PARALAB_RESULTS, else
./bench/results). Here, below every floor that writes or reads results (DESIGN.md's layers)."""
from __future__ import annotations

import os
from pathlib import Path

RESULTS_ENV = "PARALAB_RESULTS"
"""Environment variable naming the folder benchmarks write to when not given --out."""


def results_dir() -> Path:
    """The folder a benchmark writes its default result to: $PARALAB_RESULTS when set, else
    bench/results under the current directory (relative, so messages name it as the user sees it).
    Never inside the package: an installed paralab has no business writing into site-packages."""
    env = os.environ.get(RESULTS_ENV, "").strip()
    return Path(env).expanduser() if env else Path("bench", "results")
