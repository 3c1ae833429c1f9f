"""Where data installed by the operating system (Debian packages) is looked for.

The optional data sets come from Debian packages: `fortunes` (/usr/share/games/fortunes),
`bible-kjv` (the `bible` command) and `dataset-fashion-mnist` (/usr/share/datasets/). Setting
the environment variable PARALAB_SYSTEM_DATA_ROOT to a directory makes every such lookup happen
under that directory instead of `/` (as if it were the root of the file system), so a test can
simulate a fresh machine (an empty directory: none installed) or a machine with a hand-made
install. Unset or empty, the real root is used. Data the user points to (a path argument,
$PARALAB_DATA, caches in the home directory) is not affected.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

ENV_ROOT = "PARALAB_SYSTEM_DATA_ROOT"
# where Debian installs commands (the `bible` command of bible-kjv lives in /usr/bin)
_BIN_DIRS = ("usr/local/bin", "usr/bin", "bin", "usr/games", "usr/local/games")


def system_root() -> Optional[Path]:
    """The directory standing in for `/` (from $PARALAB_SYSTEM_DATA_ROOT), or None for the real root."""
    root = os.environ.get(ENV_ROOT)
    return Path(root).expanduser() if root else None


def system_path(path: str | os.PathLike) -> Path:
    """An absolute system path (e.g. /usr/share/games/fortunes), moved under the system root if set."""
    p = Path(path)
    if not p.is_absolute():
        raise ValueError(f"system_path needs an absolute path, got {str(path)!r}")
    root = system_root()
    return p if root is None else root / p.relative_to(p.anchor)


def system_which(command: str) -> Optional[str]:
    """An installed command's path: `shutil.which` on $PATH, or, under a system root, the usual
    bin directories inside it only."""
    root = system_root()
    if root is None:
        return shutil.which(command)
    return shutil.which(command, path=os.pathsep.join(str(root / d) for d in _BIN_DIRS))


__all__ = ["ENV_ROOT", "system_root", "system_path", "system_which"]
