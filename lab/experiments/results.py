"""The one result writer: plain-JSON values (`jsonable`) and an all-or-nothing file write
(`write_result`), used by the CLI's --out, the benchmarks' bench/results/*.json and bench scripts."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


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


def write_result(path: str | Path, payload: dict) -> Path:
    """Write `payload` as JSON to `path` (folders created), all or nothing: a temp file in the same
    folder, then os.replace'd over `path`; a failed write leaves neither file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    tmp = Path(name)
    try:
        tmp.write_text(json.dumps(jsonable(payload), indent=1, allow_nan=False))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
