"""Codec throughput benchmark: encode/decode ns per value and GB/s of every registered codec (or a
selection; plugins included; the dynamic tree per tensor and per 4096-block), as ratios against torch's
fp8 cast, bitsandbytes' blockwise 8-bit quantization and torchao's `to_mx` (MXFP8 E4M3) measured in the
same run, and on GPU as a fraction of the measured device-copy bandwidth (Dettmers 2016 §3.2 measured
1 and 0.5 ns per value on a GTX Titan). A codec whose encode fails is named in the run's notes and left out."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from .. import backend
from .registry import codec_names, get_codec, parse_spec
from lab.backend import Progress

if TYPE_CHECKING:  # pandas is imported when a benchmark runs: the registry's package scan imports this module
    import pandas as pd



@dataclass
class Contestant:
    name: str
    encode: Callable[[torch.Tensor], object]
    decode: Callable[[object], torch.Tensor]
    out_bytes: float  # encoded bytes per value (codes + side information)
    decode_into: Callable[[object, torch.Tensor], object] | None = None  # into an existing buffer
    multiple_of: int = 1  # sizes it takes (torchao's to_mx: whole blocks of 32); other sizes are skipped

# the baselines every row is compared with: contestant name -> ratio column
FP8_CAST = "torch fp8_e4m3 cast"
BNB = "bitsandbytes blockwise4096"
TORCHAO_MX = "torchao to_mx mxfp8_e4m3"
BASELINES = ((FP8_CAST, "speed_vs_fp8_cast"), (BNB, "speed_vs_bnb"), (TORCHAO_MX, "speed_vs_torchao_mx"))
MX_BLOCK = 32
#: the codec timed in two forms (per tensor and per 4096-value block; on a GPU with each search kernel)
DYNAMIC_TREE = "dynamic_tree"


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

    return Contestant(BNB,
                      lambda x: F.quantize_blockwise(x, blocksize=4096),
                      lambda e: F.dequantize_blockwise(e[0], e[1]), 1 + 4 / 4096, decode_into)


def _torchao_mx() -> tuple[Contestant | None, str | None]:
    """torchao's MXFP8 E4M3 quantization (`torchao.prototype.mx_formats`: `to_mx` with the spec's floor
    scale, `to_dtype` back to fp32), or (None, why) when torchao does not import."""
    try:
        from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
    except Exception as e:  # noqa: BLE001 - any import failure only drops this baseline
        return None, f"{TORCHAO_MX} skipped: torchao.prototype.mx_formats does not import ({type(e).__name__}: {e})"
    dt = torch.float8_e4m3fn

    def encode(x: torch.Tensor) -> tuple:
        return to_mx(x.view(-1, MX_BLOCK), dt, MX_BLOCK)

    def decode(e: tuple) -> torch.Tensor:
        return to_dtype(e[1], e[0], dt, MX_BLOCK, torch.float32)

    return Contestant(TORCHAO_MX, encode, decode, 1 + 1 / MX_BLOCK, multiple_of=MX_BLOCK), None


def _codec_contestant(spec: str, device: torch.device) -> Contestant:
    """A registered codec by spec (name and options); its bytes per value measured from one encoding
    (scales included)."""
    c = parse_spec(spec)
    probe = c.encode(torch.randn(4096, generator=torch.Generator().manual_seed(0)).to(device))
    return Contestant(spec, c.encode, c.decode, probe.wire_bytes / max(probe.numel, 1), c.decode_into)


def _dynamic_tree(device: torch.device) -> list[Contestant]:
    out = []
    searches = ("lut", "binary") if device.type == "cuda" else ("lut",)
    for search in searches:
        suffix = f" ({search})" if device.type == "cuda" else ""
        for label, kw in ((f"{DYNAMIC_TREE} block4096", {"block_size": 4096}), (f"{DYNAMIC_TREE} tensor", {})):
            c = get_codec(DYNAMIC_TREE, search=search, **kw)
            side = 4 / 4096 if kw else 0.0
            out.append(Contestant(label + suffix, c.encode, c.decode, 1 + side, c.decode_into))
    return out


def contestants(device: torch.device, notes: list[str] | None = None,
                codecs: list[str] | None = None) -> list[Contestant]:
    """The codecs `codecs` names (specs; None: every registered codec, plugins included), then the
    baselines (torch fp8 cast, bitsandbytes and torchao's to_mx when they import). A codec whose encode
    fails, and a baseline that does not import, are left out and said in `notes`."""
    out = []
    for spec in codec_names() if codecs is None else codecs:
        if spec.strip() == DYNAMIC_TREE:
            out.extend(_dynamic_tree(device))
            continue
        try:
            out.append(_codec_contestant(spec, device))
        except Exception as e:  # noqa: BLE001 - a broken codec (a plugin's) is named and left out, never fatal
            if notes is not None:
                notes.append(f"codec {spec!r} skipped: its encode failed ({type(e).__name__}: {e})")
    out.append(Contestant(FP8_CAST, lambda x: x.to(torch.float8_e4m3fn),
                          lambda y: y.to(torch.float32), 1.0, lambda y, out: out.copy_(y)))
    bnb = _bnb()
    if bnb is not None:
        out.append(bnb)
    elif notes is not None:
        notes.append(f"{BNB} skipped: bitsandbytes does not import")
    mx, why = _torchao_mx()
    if mx is not None:
        out.append(mx)
    elif notes is not None:
        notes.append(why)
    return out


def copy_bandwidth(x: torch.Tensor, repeats: int = 7) -> float:
    """Measured device copy bandwidth in GB/s (read + write of x)."""
    y = torch.empty_like(x)
    t = backend.time_fn(lambda: y.copy_(x), x.device, repeats=repeats).median
    return 2 * x.numel() * x.element_size() / t / 1e9


def run(sizes: list[int] | None = None, device: str | torch.device | None = None, repeats: int = 5,
        seed: int = 0, progress: Progress | None = None, codecs: list[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """Time every contestant (`contestants`: the codecs named, None for every registered one, and the
    baselines) at every size; returns (rows, run info)."""
    dev = torch.device(device) if device is not None else backend.default_device()
    if sizes is None:
        top = 28 if dev.type == "cuda" else 26
        sizes = [1 << k for k in range(16, top + 1, 2)]
    notes: list[str] = []
    cs = contestants(dev, notes, codecs)
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
            if n % c.multiple_of:
                note = f"{c.name} skipped at n={n}: it takes multiples of {c.multiple_of} values"
                if note not in notes:
                    notes.append(note)
                continue
            try:
                enc = c.encode(x)
            except Exception as e:  # noqa: BLE001 - a codec that fails at this size is named, the run goes on
                notes.append(f"{c.name} skipped at n={n}: its encode failed ({type(e).__name__}: {e})")
                continue
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
    import pandas as pd

    df = pd.DataFrame(rows)
    for base, col in BASELINES:
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
            "speed_ratio": "baseline seconds / contestant seconds (> 1: faster than the baseline); "
                           "speed_vs_torchao_mx: against torchao's to_mx (MXFP8 E4M3, floor scale) + to_dtype",
            "notes": notes}
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
