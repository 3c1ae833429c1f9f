"""The one result writer: plain-JSON values (`jsonable`), where results go (`results_dir`: the current
directory's bench/results or $PARALAB_RESULTS, never the installed package), a check that a path can
be written before a long run starts (`check_writable`) and an all-or-nothing file write
(`write_result`), used by the CLI's --out, the benchmarks' default files and bench scripts."""
from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path
from typing import Any

import pandas as pd

from lab.data.results import RESULTS_ENV, results_dir  # noqa: F401  (where results go; re-exported)


def jsonable(obj: Any) -> Any:
    """Plain JSON values: NaN/inf -> null, numpy scalars -> Python, tuples -> lists, paths -> str."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, pd.DataFrame):
        return jsonable(obj.to_dict(orient="records"))
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", None) == 0:
        obj = obj.item()  # numpy / torch scalars
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def _create_exclusive(folder: Path, stem: str) -> Path:
    """A new empty file in `folder` named .<stem>.<random>.part, created with mode 0o666 so the
    user's umask decides its permissions (tempfile.mkstemp's 0o600 would stick to the result)."""
    for _ in range(100):
        tmp = folder / f".{stem}.{secrets.token_hex(4)}.part"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name in {folder}")


def check_writable(path: str | Path, what: str = "--out") -> str | None:
    """Why the result file `path` cannot be written, as one line naming `what`, or None when it can:
    checked before a run starts, so a bad path fails at once rather than after the work. Probes the
    nearest existing folder by creating (and removing) a file there, which catches read-only mounts
    and pseudo file systems (/sys, /proc) that os.access reports as writable to root."""
    path = Path(path)
    if path.name in ("", ".", ".."):
        return f"{what} {str(path)!r} names a folder; give a file, e.g. {Path(path, 'result.json')}"
    if path.is_dir():
        return f"{what} {str(path)!r} is a folder; give a file, e.g. {path / 'result.json'}"
    folder = path.parent
    while not folder.exists():
        if folder.is_symlink():
            return f"{what} {str(path)!r}: {folder} is a broken link"
        folder = folder.parent
    if not folder.is_dir():
        return f"{what} {str(path)!r}: {folder} is a file, not a folder"
    try:
        _create_exclusive(folder, "paralab-probe").unlink()
    except OSError as e:
        return f"{what} {str(path)!r}: cannot write in {folder} ({e.strerror or e})"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{what} {str(path)!r}: the file exists and is read-only"
    return None


def write_result(path: str | Path, payload: dict) -> Path:
    """Write `payload` as JSON to `path` (folders created), all or nothing: a temp file in the same
    folder, then os.replace'd over `path`; a failed write leaves neither file. The file's mode
    follows the umask (0o644 under the usual 022)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_exclusive(path.parent, path.name)
    try:
        tmp.write_text(json.dumps(jsonable(payload), indent=1, allow_nan=False))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
