"""Approximation error of codecs on distributions or captured tensors (Dettmers 2016 Table 1)."""
from __future__ import annotations

import math
import statistics
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
                repeats: int = 5, budget_s: float = 1.0, max_repeats: int = 41, seed: int = 0,
                threads: int | str | None = "free", progress: Progress | None = None) -> pd.DataFrame:
    """Encode and decode time of each codec on n normal values on this device, with torch's fp8 cast measured
    in the same run as the baseline. Each codec is warmed up first (its first call compiles its passes; the
    warm-up calls are not timed), then the codecs are timed round-robin, one encode and one decode each per
    round, so a burst of other work on the machine falls on all of them alike: at least `repeats` rounds, more
    while the timed calls have used less than `budget_s` seconds (at most `max_repeats`). Columns: codec, op, n,
    repeats, seconds (the median), ns_per_value, ns_min, ns_max, ns_lo and ns_hi (the median's distribution-free
    95 % interval, `spread.median_interval`), gb_per_s (float32 side), speed_vs_fp8_cast (> 1: faster, medians)
    with vs_cast_lo / vs_cast_hi from the two intervals. `threads`: torch's CPU threads while timing (None: as set;
    'free', the default: `free_threads()`, so a busy machine's cores are not oversubscribed: there a threaded pass
    waits at every step for a thread another process holds, hundreds of ns per value for a pass of a few, while
    torch's one-pass cast hardly notices); restored afterwards.
    attrs: device, threads (used), threads_before, cores, load_before / load_after (1-minute load average; NaN
    where the OS has none), interval_coverage."""
    import os

    from .. import backend

    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n={n!r}: need an integer >= 1")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= max_repeats:
        raise ValueError(f"repeats={repeats!r}: need an integer in 1..max_repeats ({max_repeats})")
    dev = torch.device(device) if device is not None else backend.default_device()
    load = (lambda: os.getloadavg()[0]) if hasattr(os, "getloadavg") else (lambda: math.nan)
    load_before, threads_before = load(), torch.get_num_threads()
    if threads == "free":
        threads = free_threads()
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads={threads!r}: allowed an integer >= 1, 'free' or None")
    used = threads if threads is not None and dev.type == "cpu" else threads_before
    torch.set_num_threads(used)
    try:
        df = _time_codecs(codecs, n, dev, repeats, budget_s, max_repeats, seed, progress)
    finally:
        torch.set_num_threads(threads_before)
    df.attrs.update(device=backend.device_name(dev), threads=used, threads_before=threads_before,
                    cores=os.cpu_count() or 1, load_before=load_before, load_after=load())
    return df


def free_threads() -> int:
    """CPU threads to time with: torch's thread count, lowered to the cores the 1-minute load average leaves free
    (at least 1); all of them where the OS has no load average."""
    import os

    if not hasattr(os, "getloadavg"):
        return torch.get_num_threads()
    cores = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), math.floor(cores - os.getloadavg()[0] + 0.5)))


def _time_codecs(codecs, n: int, dev: torch.device, repeats: int, budget_s: float, max_repeats: int, seed: int,
                 progress: Progress | None) -> pd.DataFrame:
    """`codec_speed`'s rounds: warm-up, then interleaved timed calls; the table without its attrs."""
    from .. import backend
    from .spread import median_interval

    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dev)
    named = [(c.describe(), c.encode, c.decode) for c in (_as_codec(c) for c in codecs)]
    named.append(("torch fp8_e4m3 cast", lambda t: t.to(torch.float8_e4m3fn), lambda e: e.to(torch.float32)))
    calls = []  # (name, op, fn)
    for i, (name, enc, dec) in enumerate(named):
        if progress:
            progress(0.3 * i / len(named), f"warming up {name} (its first call compiles)")
        e = enc(x)
        for _ in range(2):
            enc(x), dec(e)
        calls += [(name, "encode", lambda enc=enc: enc(x)), (name, "decode", lambda dec=dec, e=e: dec(e))]
    times: dict[tuple[str, str], list[float]] = {(name, op): [] for name, op, _ in calls}
    spent, rounds = 0.0, 0
    while rounds < repeats or (spent < budget_s and rounds < max_repeats):
        for name, op, fn in calls:
            t = backend.time_fn(fn, dev, warmup=0, repeats=1).median
            times[name, op].append(t)
            spent += t
        rounds += 1
        if progress:
            progress(0.3 + 0.7 * min(1.0, max(rounds / repeats, spent / budget_s if budget_s > 0 else 0)),
                     f"timed {rounds} round(s)")
    rows, cover = [], 1.0
    for (name, op), ts in times.items():
        lo, hi, cover = median_interval(ts)
        med = statistics.median(ts)
        rows.append({"codec": name, "op": op, "n": n, "repeats": len(ts), "seconds": med,
                     "ns_per_value": med / n * 1e9, "ns_min": min(ts) / n * 1e9, "ns_max": max(ts) / n * 1e9,
                     "ns_lo": lo / n * 1e9, "ns_hi": hi / n * 1e9, "gb_per_s": 4 * n / med / 1e9})
    if progress:
        progress(1.0, "done")
    df = pd.DataFrame(rows)
    base = df[df.codec == "torch fp8_e4m3 cast"].set_index("op")
    df["speed_vs_fp8_cast"] = [base.seconds[o] / s for o, s in zip(df.op, df.seconds)]
    df["vs_cast_lo"] = [base.ns_lo[o] / h for o, h in zip(df.op, df.ns_hi)]
    df["vs_cast_hi"] = [base.ns_hi[o] / lo for o, lo in zip(df.op, df.ns_lo)]
    df.attrs["interval_coverage"] = cover
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


ACCEPTED_FILES = ("allowed: a .pt/.pth file written by torch.save holding a tensor (or a dict whose first tensor is "
                  "used), or a .npy file written by numpy.save holding a numeric array; real, finite, non-empty "
                  "values. Files holding other Python objects are refused unread (loading them could run code)")


def load_tensor(data: bytes, filename: str) -> torch.Tensor:
    """A tensor from an uploaded .pt (a tensor, or a dict whose first tensor is used) or .npy file,
    as float32. Anything else (not a tensor file, pickled Python objects, no tensor inside, no values,
    complex or non-numeric values, NaN/inf) is a ValueError naming the file and what is accepted
    (`ACCEPTED_FILES`); pickled objects are never unpickled (torch's weights_only loader, numpy
    without allow_pickle), and the message does not suggest turning that off."""
    import io
    import pickle

    import numpy as np

    allowed = ACCEPTED_FILES
    name = filename.lower()
    if name.endswith(".npy"):
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as e:
            what = ("holds Python objects (an object array), not numbers" if "pickle" in str(e).lower()
                    else "is not a readable .npy array")
            raise ValueError(f"{filename}: {what}; {allowed}") from None
        except Exception:  # untrusted bytes: numpy fails in many ways
            raise ValueError(f"{filename}: is not a readable .npy array; {allowed}") from None
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iuf":
            kind = getattr(getattr(arr, "dtype", None), "name", type(arr).__name__)
            raise ValueError(f"{filename}: values of type {kind}, not real numbers; {allowed}")
        obj = torch.from_numpy(np.ascontiguousarray(arr))
    elif name.endswith(".pt") or name.endswith(".pth"):
        try:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:  # weights_only refused an object: never suggest weights_only=False
            raise ValueError(f"{filename}: holds Python objects other than tensors (refused unread); "
                             f"{allowed}") from None
        except Exception:  # untrusted bytes: the loader fails in many ways (struct.error, IndexError, ...)
            raise ValueError(f"{filename}: is not a file written by torch.save; {allowed}") from None
        if isinstance(obj, dict):
            obj = next((v for v in obj.values() if isinstance(v, torch.Tensor)), None)
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{filename}: no tensor found in it; {allowed}")
    else:
        raise ValueError(f"{filename}: not a .pt, .pth or .npy file; {allowed}")
    if obj.is_complex() or not (obj.is_floating_point() or obj.dtype in (torch.int8, torch.int16, torch.int32,
                                                                           torch.int64, torch.uint8)):
        raise ValueError(f"{filename}: values of type {obj.dtype}; {allowed}")
    if obj.numel() == 0:
        raise ValueError(f"{filename}: the tensor is empty (shape {tuple(obj.shape)}); {allowed}")
    out = obj.float()
    if not torch.isfinite(out).all():
        raise ValueError(f"{filename}: the tensor holds NaN or inf values; {allowed}")
    return out


# --- block-scaled formats (OCP MX v1.0, NVFP4): one block drawn, and the lesson at equal bits ---

BLOCK_PICKS = ("largest value", "most flushed to zero", "most saturated", "by number")
#: the Codecs page's first contestants (and its tour step's): the paper's best 8-bit type against the plain
#: linear quantiser, fp8 (E4M3) and int8
FIRST_CODECS = ("dynamic_tree", "linear", "fp8_e4m3", "int8")


def _block_format(codec: Codec):
    """(element format, per-block scale tensor getter) of a block-scaled codec, or a ValueError."""
    from ..codecs.block_scaled import e8m0_value
    from ..codecs.mx import MXCodec
    from ..codecs.nvfp4 import E2M1, NVFP4Codec

    if isinstance(codec, MXCodec):
        return codec.fmt, lambda enc: e8m0_value(enc.tensors["scales"]).double()
    if isinstance(codec, NVFP4Codec):
        return E2M1, lambda enc: enc.tensors["scales"].double() * enc.tensors["tensor_scale"].double()
    raise ValueError(f"{codec.describe()} is not a block-scaled format; allowed: the OCP MX codecs "
                     "(mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4_e2m1, mxint8) and nvfp4")


def _is_block_scaled(codec: Codec) -> bool:
    try:
        _block_format(codec)
    except ValueError:
        return False
    return True


def block_view(codec: str | Codec, x: torch.Tensor, block: str | int = "largest value") -> pd.DataFrame:
    """One block of a block-scaled codec (OCP MX v1.0 §6.3, NVFP4) on the user's data `x`, encoded as a
    whole tensor (NVFP4's tensor scale is the whole tensor's): a row per value with its position,
    the value, the value divided by the block's shared scale (what the element format rounds), the
    decoded value, and its fate: 'exact', 'rounded', 'saturated' (|x| beyond the block's largest
    representable value, clipped to it), 'flushed to zero' (x != 0 decoded as 0) or 'zero'.
    `block`: a block number, or one of BLOCK_PICKS. `.attrs`: codec, block, blocks, block_size,
    scale, largest (the block's largest representable magnitude), smallest (its smallest positive
    one), amax (the block's largest |x|), counts (values per fate), bits_per_value."""
    c = _as_codec(codec)
    fmt, scales_of = _block_format(c)
    flat = x.detach().float().reshape(-1)
    if flat.numel() == 0:
        raise ValueError("the data is empty: a block needs at least one value")
    enc = c.encode(flat)
    y = c.decode(enc).reshape(-1).double()
    xd = flat.double()
    B = int(c.block_size)
    nb = -(-xd.numel() // B)
    scales = scales_of(enc).reshape(-1)[:nb]
    top = float(fmt.max_normal)
    tiny = 1.0 / 64 if fmt.is_int else 2.0 ** (1 - fmt.bias - fmt.mbits)
    pad = nb * B - xd.numel()
    xb = torch.cat([xd, xd.new_zeros(pad)]).view(nb, B)
    yb = torch.cat([y, y.new_zeros(pad)]).view(nb, B)
    lim = (top * scales)[:, None]
    sat = (xb.abs() > lim * (1 + 1e-12)) & (yb.abs() >= lim * (1 - 1e-12))
    flushed = (xb != 0) & (yb == 0)
    if isinstance(block, bool) or not isinstance(block, (int, str)):
        raise ValueError(f"block={block!r}; allowed: a block number 0..{nb - 1} or one of {', '.join(BLOCK_PICKS)}")
    if isinstance(block, int):
        if not 0 <= block < nb:
            raise ValueError(f"block {block} is out of range; allowed: 0..{nb - 1} ({xd.numel():,} values in "
                             f"blocks of {B})")
        k = block
    elif block == "largest value":
        k = int(xd.abs().argmax()) // B
    elif block == "most flushed to zero":
        k = int(flushed.sum(1).argmax())
    elif block == "most saturated":
        k = int(sat.sum(1).argmax())
    else:
        raise ValueError(f"block={block!r}; allowed: a block number or one of {', '.join(BLOCK_PICKS[:3])}")
    s = float(scales[k])
    end = min((k + 1) * B, xd.numel())
    xs, ys = xd[k * B:end], yb[k, :end - k * B]
    fate = []
    for xi, yi, si, fi in zip(xs.tolist(), ys.tolist(), sat[k].tolist(), flushed[k].tolist()):
        fate.append("zero" if xi == 0 else "flushed to zero" if fi else "saturated" if si else
                    "exact" if xi == yi else "rounded")
    df = pd.DataFrame({"index": range(k * B, end), "position": range(end - k * B), "value": xs.numpy(),
                       "scaled": (xs / s).numpy() if s > 0 else xs.numpy() * 0, "decoded": ys.numpy(),
                       "fate": fate})
    df.attrs.update(codec=c.describe(), block=k, blocks=nb, block_size=B, scale=s, largest=top * s,
                    smallest=tiny * s, amax=float(xs.abs().max()), bits_per_value=enc.bits_per_value,
                    counts={f: fate.count(f) for f in ("exact", "rounded", "saturated", "flushed to zero", "zero")})
    return df


# the paper's per-tensor types against the block-scaled formats at (about) the same bits per value
BLOCK_LESSON_CODECS = {8: ("dynamic_tree", "linear", "mxfp8_e4m3", "mxfp8_e5m2", "mxint8"),
                       4: ("layout:total_bits=4", "mxfp4_e2m1", "nvfp4")}
BLOCK_LESSON_DATA = ("N(0,1)", "Student-t(3): heavy tails", "N(0,1) with 0.1 % outliers x1000",
                     "gradients of the paper's MLP (digits)")


def lesson_data(samples: int = 16_384, seed: int = 0) -> dict[str, torch.Tensor]:
    """The data of the block-scaling lesson, seeded: N(0,1); Student-t(3); N(0,1) with one value in a
    thousand (random places) multiplied by 1000; and the weight gradients of the paper's MLP after one
    step on digits (`capture_tensors`, layers concatenated in order, the first `samples` values, so
    blocks keep their real neighbours)."""
    if not isinstance(samples, int) or samples < 64:
        raise ValueError(f"samples={samples!r}: need an integer >= 64")
    g = torch.Generator().manual_seed(seed + 7)
    out = sample("normal(0,1)", samples, seed)
    idx = torch.randperm(samples, generator=g)[: max(1, samples // 1000)]
    out[idx] *= 1000.0
    grads = torch.cat([t.reshape(-1) for t in capture_tensors("gradients", seed=seed).values()])[:samples]
    return dict(zip(BLOCK_LESSON_DATA, (sample("normal(0,1)", samples, seed), sample("student_t(3)", samples, seed),
                                        out, grads)))


def block_scaling_lesson(bits: int = 8, *, samples: int = 16_384, seed: int = 0,
                         progress: Progress | None = None) -> pd.DataFrame:
    """Where block scaling (OCP MX v1.0, NVFP4: one scale per 32 or 16 values) beats the paper's
    per-tensor absmax types (Dettmers 2016 §3.1: one scale per tensor) at about the same bits per
    value, and where not: each codec of BLOCK_LESSON_CODECS[bits] on each data set of `lesson_data`.
    Columns: data, codec, per_block (True: block-scaled), mean_rel_error, snr_db, flushed (share of
    non-zero values decoded as 0), bits_per_value."""
    if bits not in BLOCK_LESSON_CODECS:
        raise ValueError(f"bits={bits!r}; allowed: {', '.join(map(str, BLOCK_LESSON_CODECS))}")
    data = lesson_data(samples, seed)
    codecs = [get_codec(c) for c in BLOCK_LESSON_CODECS[bits]]
    rows = []
    for i, (name, x) in enumerate(data.items()):
        if progress:
            progress(i / len(data), name)
        nz = x != 0
        for c in codecs:
            enc = c.encode(x)
            y = c.decode(enc)
            m = error_metrics(x, y)
            rows.append({"data": name, "codec": c.describe(), "per_block": _is_block_scaled(c),
                         "mean_rel_error": m["mean_rel_error"], "snr_db": m["snr_db"],
                         "flushed": float(((y == 0) & nz).sum()) / max(1, int(nz.sum())),
                         "bits_per_value": enc.bits_per_value})
    if progress:
        progress(1.0, "done")
    return pd.DataFrame(rows)
