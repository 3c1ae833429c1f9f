"""Approximation error of codecs on distributions or captured tensors (Dettmers 2016 Table 1)."""
from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

import pandas as pd
import torch

from ..codecs import Codec, get_codec
from .distributions import sample

Progress = Callable[[float, str], None]


def error_metrics(x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Errors of approximation y of x.

    mean_rel_error is mean(|y-x|/|x|) over the entries with x != 0 (exact zeros are left out
    and counted in `zeros`); snr_db is 10·log10(Σx² / Σ(y-x)²) (inf when exact).
    """
    x64, y64 = x.double().reshape(-1), y.double().reshape(-1)
    err = (y64 - x64).abs()
    nz = x64 != 0
    n = x64.numel()
    sig, noise = float((x64 * x64).sum()), float((err * err).sum())
    return {
        "mae": float(err.mean()) if n else 0.0,
        "mean_rel_error": float((err[nz] / x64[nz].abs()).mean()) if bool(nz.any()) else 0.0,
        "rmse": math.sqrt(noise / n) if n else 0.0,
        "max_error": float(err.max()) if n else 0.0,
        "snr_db": 10 * math.log10(sig / noise) if noise > 0 and sig > 0 else math.inf,
        "zeros": int(n - int(nz.sum())),
    }


def _as_codec(c: str | Codec) -> Codec:
    return get_codec(c) if isinstance(c, str) else c


def error_table(codecs: Iterable[str | Codec], distributions: Iterable[str] = ("uniform(0,1)", "normal(0,1)"),
                *, tensors: Mapping[str, torch.Tensor] | None = None, samples: int = 1_000_000,
                seed: int = 0, device: str | torch.device = "cpu",
                progress: Progress | None = None) -> pd.DataFrame:
    """One row per (data, codec): MAE, mean relative error, RMSE, max error, SNR dB,
    bits/value and compression ratio against float32. `tensors` adds named captured data."""
    codecs = [_as_codec(c) for c in codecs]
    data: list[tuple[str, Callable[[], torch.Tensor]]] = [
        (d, lambda d=d, i=i: sample(d, samples, seed + i)) for i, d in enumerate(distributions)]
    for name, t in (tensors or {}).items():
        data.append((name, lambda t=t: t))
    rows = []
    total = max(1, len(data) * len(codecs))
    for di, (dname, make) in enumerate(data):
        x = make().to(device)
        for ci, codec in enumerate(codecs):
            if progress:
                progress((di * len(codecs) + ci) / total, f"{codec.describe()} on {dname}")
            enc = codec.encode(x)
            y = codec.decode(enc)
            m = error_metrics(x, y)
            rows.append({"data": dname, "codec": codec.describe(), **m,
                         "bits_per_value": enc.bits_per_value,
                         "compression": (32.0 / enc.bits_per_value) if enc.bits_per_value else math.inf})
    if progress:
        progress(1.0, "done")
    return pd.DataFrame(rows)
