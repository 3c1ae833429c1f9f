"""Approximation error of codecs on distributions or captured tensors (Dettmers 2016 Table 1)."""
from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

import pandas as pd
import torch

from ..codecs import Codec, get_codec
from .distributions import sample
from lab.backend import Progress



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


# --- dashboard: error histograms and codec speed (Dettmers 2016 §3.2, Table 1) ---

def error_histogram(codecs: Iterable[str | Codec], distribution: str = "normal(0,1)", *,
                    tensor: torch.Tensor | None = None, samples: int = 100_000, seed: int = 0,
                    bins: int = 60, lo: float = -8.0, hi: float = 1.0) -> pd.DataFrame:
    """Histogram of log10 relative error |y-x|/|x| (x != 0; exact results fall in the lowest bin)
    per codec, on `tensor` if given, else on `distribution`: codec, bin_left, bin_right, count, fraction."""
    if bins < 1 or not lo < hi:
        raise ValueError(f"bins={bins}, lo={lo}, hi={hi}: need bins >= 1 and lo < hi")
    x = (tensor if tensor is not None else sample(distribution, samples, seed)).float().reshape(-1)
    x = x[x != 0]
    edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
    rows = []
    for c in [_as_codec(c) for c in codecs]:
        y = c.decode(c.encode(x)).reshape(-1)
        rel = ((y.double() - x.double()).abs() / x.double().abs()).clamp_min(10.0 ** lo)
        counts = torch.histc(rel.log10().clamp(lo, hi), bins=bins, min=lo, max=hi)
        total = max(1, x.numel())
        for i in range(bins):
            rows.append({"codec": c.describe(), "bin_left": float(edges[i]), "bin_right": float(edges[i + 1]),
                         "count": int(counts[i]), "fraction": float(counts[i]) / total})
    return pd.DataFrame(rows, columns=["codec", "bin_left", "bin_right", "count", "fraction"])


def codec_speed(codecs: Iterable[str | Codec], n: int = 1 << 20, *, device: str | torch.device | None = None,
                repeats: int = 5, seed: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """Encode and decode time of each codec on n normal values on this device (median of `repeats`
    after warm-up), with torch's fp8 cast measured in the same run as the baseline: codec, op, n,
    seconds, ns_per_value, gb_per_s (float32 side), speed_vs_fp8_cast (> 1: faster)."""
    from .. import backend

    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: need an integer >= 1")
    dev = torch.device(device) if device is not None else backend.default_device()
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dev)
    named = [(c.describe(), c.encode, c.decode) for c in (_as_codec(c) for c in codecs)]
    named.append(("torch fp8_e4m3 cast", lambda t: t.to(torch.float8_e4m3fn), lambda e: e.to(torch.float32)))
    rows = []
    for i, (name, enc, dec) in enumerate(named):
        if progress:
            progress(i / len(named), f"timing {name}")
        e = enc(x)
        for op, fn in (("encode", lambda: enc(x)), ("decode", lambda: dec(e))):
            t = backend.time_fn(fn, dev, repeats=repeats).median
            rows.append({"codec": name, "op": op, "n": n, "seconds": t, "ns_per_value": t / n * 1e9,
                         "gb_per_s": 4 * n / t / 1e9})
    if progress:
        progress(1.0, "done")
    df = pd.DataFrame(rows)
    base = df[df.codec == "torch fp8_e4m3 cast"].set_index("op")["seconds"]
    df["speed_vs_fp8_cast"] = [base[o] / s for o, s in zip(df.op, df.seconds)]
    df.attrs["device"] = backend.device_name(dev)
    return df


CAPTURE_KINDS = ("gradients", "activations", "weights")


def capture_tensors(kind: str = "gradients", *, dataset: str = "digits", hidden: tuple[int, ...] = (256, 256),
                    batch: int = 128, seed: int = 0) -> dict[str, torch.Tensor]:
    """Real tensors to compress (Dettmers 2016 §3.1 compresses gradients and activations): the
    per-layer gradients, hidden activations or weights of the paper's MLP (relu, dropout off)
    after one RMSProp step on one batch of `dataset`. Returns {name: tensor} for `error_table(tensors=)`."""
    from lab.data.images import load_dataset
    from lab.train.models import build_model

    if kind not in CAPTURE_KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(CAPTURE_KINDS)}")
    torch.manual_seed(seed)
    ds = load_dataset(dataset, seed=seed)
    model = build_model("mlp", ds.features, ds.classes, hidden=hidden, dropout=(0.0,) * (len(hidden) + 1))
    model.eval()
    x, y = ds.train_x[:batch], ds.train_y[:batch]
    acts: dict[str, torch.Tensor] = {}
    hooks = [m.register_forward_hook(lambda m, i, o, k=f"{name} output": acts.__setitem__(k, o.detach().clone()))
             for name, m in model.named_modules() if isinstance(m, torch.nn.ReLU)]
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    for h in hooks:
        h.remove()
    if kind == "activations":
        return acts
    if kind == "gradients":
        return {f"grad {n}": p.grad.detach().clone() for n, p in model.named_parameters() if p.dim() > 1}
    return {f"weight {n}": p.detach().clone() for n, p in model.named_parameters() if p.dim() > 1}


def load_tensor(data: bytes, filename: str) -> torch.Tensor:
    """A tensor from an uploaded .pt (a tensor, or a dict whose first tensor is used) or .npy file,
    as float32. Anything else (not a tensor file, no tensor inside, no values, complex or
    non-numeric values, NaN/inf) is a ValueError naming the file and what is allowed."""
    import io

    import numpy as np

    allowed = "allowed: a real-valued, finite, non-empty tensor saved with torch.save (.pt/.pth) or numpy.save (.npy)"
    if filename.endswith(".npy"):
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
            obj = torch.from_numpy(np.ascontiguousarray(arr))
        except Exception as e:  # untrusted bytes
            raise ValueError(f"{filename}: not a numeric .npy array ({e}); {allowed}") from None
    elif filename.endswith(".pt") or filename.endswith(".pth"):
        try:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as e:  # untrusted bytes: the unpickler fails in many ways (IndexError too)
            raise ValueError(f"{filename}: not a torch.save file ({str(e).splitlines()[0][:200]}); "
                             f"{allowed}") from None
        if isinstance(obj, dict):
            obj = next((v for v in obj.values() if isinstance(v, torch.Tensor)), None)
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{filename}: no tensor found (give a tensor or a dict of tensors); {allowed}")
    else:
        raise ValueError(f"{filename}: allowed files are .pt/.pth (torch.save) or .npy")
    if obj.is_complex() or not (obj.is_floating_point() or obj.dtype in (torch.int8, torch.int16, torch.int32,
                                                                           torch.int64, torch.uint8)):
        raise ValueError(f"{filename}: values of type {obj.dtype}; {allowed}")
    if obj.numel() == 0:
        raise ValueError(f"{filename}: the tensor is empty (shape {tuple(obj.shape)}); {allowed}")
    out = obj.float()
    if not torch.isfinite(out).all():
        raise ValueError(f"{filename}: the tensor holds NaN or inf values; {allowed}")
    return out
