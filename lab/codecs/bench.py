"""Codec throughput benchmark: encode/decode ns per value and GB/s, as ratios against torch's
fp8 cast and bitsandbytes' blockwise 8-bit quantization measured in the same run, and on GPU
as a fraction of the measured device-copy bandwidth (Dettmers 2016 §3.2 measured 1 and 0.5 ns
per value on a GTX Titan)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd
import torch

from .. import backend
from . import get_codec
from lab.backend import Progress



@dataclass
class Contestant:
    name: str
    encode: Callable[[torch.Tensor], object]
    decode: Callable[[object], torch.Tensor]
    out_bytes: float  # encoded bytes per value (codes + side information)
    decode_into: Callable[[object, torch.Tensor], object] | None = None  # into an existing buffer


def _bnb() -> Contestant | None:
    try:
        import bitsandbytes.functional as F
    except Exception:
        return None
    def decode_into(e, out):
        try:
            return F.dequantize_blockwise(e[0], e[1], out=out)
        except NotImplementedError:  # its CPU op has no out= variant: decode, then copy (the same task)
            return out.copy_(F.dequantize_blockwise(e[0], e[1]))

    return Contestant("bitsandbytes blockwise4096",
                      lambda x: F.quantize_blockwise(x, blocksize=4096),
                      lambda e: F.dequantize_blockwise(e[0], e[1]), 1 + 4 / 4096, decode_into)


def contestants(device: torch.device) -> list[Contestant]:
    """ParaLab's codecs, then the baselines (torch fp8 cast, bitsandbytes if importable)."""
    out = []
    searches = ("lut", "binary") if device.type == "cuda" else ("lut",)
    for search in searches:
        suffix = f" ({search})" if device.type == "cuda" else ""
        for label, kw in (("dynamic_tree block4096", {"block_size": 4096}), ("dynamic_tree tensor", {})):
            c = get_codec("dynamic_tree", search=search, **kw)
            side = 4 / 4096 if kw else 0.0
            out.append(Contestant(label + suffix, c.encode, c.decode, 1 + side, c.decode_into))
    out.append(Contestant("torch fp8_e4m3 cast", lambda x: x.to(torch.float8_e4m3fn),
                          lambda y: y.to(torch.float32), 1.0, lambda y, out: out.copy_(y)))
    bnb = _bnb()
    if bnb is not None:
        out.append(bnb)
    return out


def copy_bandwidth(x: torch.Tensor, repeats: int = 7) -> float:
    """Measured device copy bandwidth in GB/s (read + write of x)."""
    y = torch.empty_like(x)
    t = backend.time_fn(lambda: y.copy_(x), x.device, repeats=repeats).median
    return 2 * x.numel() * x.element_size() / t / 1e9


def run(sizes: list[int] | None = None, device: str | torch.device | None = None, repeats: int = 5,
        seed: int = 0, progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Time every contestant at every size; returns (rows, run info)."""
    dev = torch.device(device) if device is not None else backend.default_device()
    if sizes is None:
        top = 28 if dev.type == "cuda" else 26
        sizes = [1 << k for k in range(16, top + 1, 2)]
    cs = contestants(dev)
    g = torch.Generator(device=dev).manual_seed(seed)
    rows = []
    copy_bw = None
    steps = len(sizes) * len(cs)
    for si, n in enumerate(sizes):
        x = torch.randn(n, generator=g, device=dev)
        if dev.type == "cuda":
            copy_bw = max(copy_bw or 0.0, copy_bandwidth(x))
        for ci, c in enumerate(cs):
            if progress:
                progress((si * len(cs) + ci) / steps, f"{c.name} at n={n}")
            enc = c.encode(x)
            te = backend.time_fn(lambda: c.encode(x), dev, repeats=repeats).median
            td = backend.time_fn(lambda: c.decode(enc), dev, repeats=repeats).median
            timed = [("encode", te, 4 + c.out_bytes), ("decode", td, c.out_bytes + 4)]
            tdi = _time_decode_into(c, enc, x, dev, repeats)
            if tdi is not None:
                timed.append(("decode_into", tdi, c.out_bytes + 4))
            for op, t, nbytes in timed:
                rows.append({"contestant": c.name, "op": op, "n": n, "seconds": t,
                             "ns_per_value": t / n * 1e9, "gb_per_s": nbytes * n / t / 1e9})
    if progress:
        progress(1.0, "done")
    df = pd.DataFrame(rows)
    for base, col in (("torch fp8_e4m3 cast", "speed_vs_fp8_cast"), ("bitsandbytes blockwise4096", "speed_vs_bnb")):
        ref = df[df.contestant == base].set_index(["op", "n"])["seconds"]
        used = [o if (o, n) in ref.index else "decode" for o, n in zip(df.op, df.n)]
        df[col] = [ref.get((u, n), math.nan) / s for u, n, s in zip(used, df.n, df.seconds)]
        df[col + "_op"] = used  # a baseline without an in-place decode is compared by its decode
    if copy_bw:
        df["frac_of_copy_bw"] = df.gb_per_s / copy_bw
    info = {"device": backend.device_name(dev), "device_type": dev.type, "versions": backend.versions(),
            "copy_bandwidth_gb_per_s": copy_bw, "repeats": repeats, "sizes": sizes,
            "bytes_model": "encode: 4 B in + codes + scales out; decode: codes + scales in + 4 B out",
            "ops": "encode; decode (a new output tensor); decode_into (into an existing tensor; bitsandbytes' CPU "
                   "op has no out= variant, so there it is its decode plus a copy)",
            "speed_ratio": "baseline seconds / contestant seconds (> 1: faster than the baseline)"}
    return df, info


def _time_decode_into(c: Contestant, enc: object, x: torch.Tensor, dev: torch.device, repeats: int) -> float | None:
    """Median seconds of decoding into one preallocated fp32 buffer, or None when the contestant
    has no such call or it fails on this device."""
    if c.decode_into is None:
        return None
    out = torch.empty_like(x)
    try:
        c.decode_into(enc, out)
    except (NotImplementedError, RuntimeError, TypeError):
        return None
    return backend.time_fn(lambda: c.decode_into(enc, out), dev, repeats=repeats).median
