"""A report card for every kernel of kernels/*.cu, without a GPU: per architecture nvcc builds, ptxas's
registers, spills, shared and local memory (lab.codecs.ptxas), the theoretical occupancy of the CTA sizes the
launchers choose (lab.codecs.occupancy), the DRAM bytes each kernel moves per value (counted from its loads and
stores, below), and a roofline prediction of its time per value on H100, H200 and B200.

Every kernel here does a few dozen integer and fp32 operations per value against one to ten bytes of DRAM
traffic: at 67-80 fp32 TFLOP/s and 3.35-8 TB/s the compute roof is a few hundred operations per byte away, so
the prediction is the memory roof, bytes / bandwidth, and a GPU's speed-up is its bandwidth ratio."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from . import cuda as C
from . import cuda_block as CB
from . import cuda_hop as H
from . import ptxas
from .occupancy import LIMITS, occupancy


@dataclass(frozen=True)
class Gpu:
    """A GPU's DRAM bandwidth (GB/s) and SM architecture, with where the number comes from."""

    name: str
    arch: str
    hbm_GBps: float
    source: str


GPUS = (
    Gpu("H100", "sm_90", 3350.0, "NVIDIA H100 SXM5 data sheet: 80 GB HBM3, 3.35 TB/s"),
    Gpu("H200", "sm_90", 4800.0, "NVIDIA H200 SXM data sheet: 141 GB HBM3e, 4.8 TB/s"),
    Gpu("B200", "sm_100", 8000.0, "NVIDIA HGX B200 data sheet: 180 GB HBM3e per GPU, 8 TB/s"),
)

# The representative call the bytes are counted for (a kernel's traffic depends on its arguments)
BLOCK = 64  # quantization block of the blockwise codec and hop kernels: one float32 scale per 64 values
PAYLOADS = 8  # decode_sum's rows: an 8-GPU node's payloads summed into one float32 output
MX_BITS = 8  # mx_encode / block_decode: MXFP8 (E4M3), one E8M0 scale byte per 32 values
N = 2**24  # values of the launches whose plans are reported
_SIZE = {"f32": 4, "f16": 2, "bf16": 2}
_BLOCKS = (None, 32, 64, 256, 4096, 65536)


def bytes_per_value(kernel: str) -> tuple[float, str]:
    """DRAM bytes read + written per value by `kernel` in the representative call, and how they are counted
    (each input and output read or written once; shared-memory tables and per-launch scalars left out)."""
    s = next((v for k, v in _SIZE.items() if re.search(rf"_{k}(_|$)", kernel)), None)
    if m := re.fullmatch(r"encode_(block|scale)_(\w+)_(lut|binary)", kernel):
        scale = 4 / BLOCK if m.group(1) == "block" else 0.0
        return s + 1 + scale, f"read x ({s} B), write a code (1 B)" + (f", a float32 absmax per {BLOCK}" if scale else "")
    if m := re.fullmatch(r"decode_(block|scale)_(\w+)", kernel):
        scale = 4 / BLOCK if m.group(1) == "block" else 0.0
        return 1 + scale + s, f"read a code (1 B)" + (f" and a float32 scale per {BLOCK}" if scale else "") + f", write {s} B"
    if m := re.fullmatch(r"hop_(codes|mixed)_(block|scale|absmax)(?:_\w+)?", kernel):
        src, mode = m.groups()
        per_scale = 4 / BLOCK if mode == "block" else 0.0
        read = (2 + 2 * per_scale) if src == "codes" else (1 + per_scale + 4)
        write = 0.0 if mode == "absmax" else 1 + per_scale
        what = "two codes" if src == "codes" else "a code and a float32 x"
        return read + write, (f"read {what}" + (f" with their float32 scales per {BLOCK}" if per_scale else "")
                              + ("" if mode == "absmax" else ", write a code")
                              + (f" and a float32 scale per {BLOCK}" if per_scale else ""))
    if kernel == "decode_sum":
        return PAYLOADS * (1 + 4 / BLOCK) + 4, f"read {PAYLOADS} codes and their float32 scales per {BLOCK}, write a float32"
    if re.fullmatch(r"mx_encode_\w+", kernel):
        return s + MX_BITS / 8 + 1 / 32, f"read x ({s} B), write an 8-bit element and an E8M0 scale byte per 32"
    if re.fullmatch(r"nvfp4_encode_\w+", kernel):
        return s + 0.5 + 1 / 16, f"read x ({s} B), write a 4-bit element and an E4M3 scale byte per 16"
    if re.fullmatch(r"block_decode_\w+", kernel):
        return MX_BITS / 8 + 1 / 32 + s, f"read an 8-bit element and an E8M0 scale byte per 32, write {s} B"
    raise ValueError(f"no traffic model for kernel {kernel!r}")


def launch_threads() -> dict[str, set[int]]:
    """{kernel: the CTA sizes the launchers choose for it} over block sizes, dtypes, searches and alignments."""
    out: dict[str, set[int]] = {}

    def add(plan: Any) -> None:
        out.setdefault(plan.kernel, set()).add(plan.threads)

    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    for bs in _BLOCKS:
        for aligned in (True, False):
            for dtype in dtypes:
                for search in C.SEARCHES:
                    add(C.encode_plan(N, dtype, block_size=bs, search=search, x_aligned=aligned))
                add(C.decode_plan(N, dtype, block_size=bs, codes_aligned=aligned, out_aligned=aligned))
            for kind in H.KINDS:
                for search in C.SEARCHES:
                    for scale in H.SCALES if bs is None else ("absmax",):
                        for p in H.hop_plan(kind, N, block_size=bs, scale=scale, search=search, aligned=aligned):
                            add(p)
            add(H.decode_sum_plan(N, block_size=bs, aligned=aligned))
    for dtype in dtypes:
        for kind in ("mx", "nvfp4"):
            add(CB.encode_plan(kind, N, dtype))
        add(CB.decode_plan(N, dtype))
    return out


MODULES = ("codec", "collective", "block_scaled")


def resources(archs: tuple[str, ...] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """{arch: {kernel: ptxas's numbers}} for every kernel, compiled now (two nvcc at a time)."""
    archs = ptxas.archs() if archs is None else archs
    jobs = [(a, m) for a in archs for m in MODULES]
    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(lambda job: ptxas.ptxas_text(job[1], job[0]), jobs))
    out: dict[str, dict[str, dict[str, int]]] = {a: {} for a in archs}
    for (a, _), text in zip(jobs, texts):
        out[a].update(ptxas.parse(text))
    return out


def report_card(res: dict[str, dict[str, dict[str, int]]] | None = None) -> dict[str, Any]:
    """The card: {nvcc, archs, gpus, assumptions, rows}; one row per kernel and architecture with ptxas's
    numbers, the occupancy of each CTA size the launchers choose, bytes per value and, for the GPUs of that
    architecture, the predicted ns per value (bytes / HBM bandwidth) and the ratio to H100's."""
    res = resources() if res is None else res
    threads = launch_threads()
    h100 = next(g for g in GPUS if g.name == "H100")
    rows = []
    for arch, kernels in res.items():
        for kernel in sorted(kernels):
            r = kernels[kernel]
            nbytes, how = bytes_per_value(kernel)
            occ = {str(t): occupancy(arch, t, r["registers"], r["shared_bytes"]) for t in sorted(threads[kernel])}
            pred = {g.name: {"ns_per_value": nbytes / g.hbm_GBps, "vs_h100": h100.hbm_GBps / g.hbm_GBps}
                    for g in GPUS if g.arch == arch}
            rows.append({"kernel": kernel, "arch": arch, **r, "threads": sorted(threads[kernel]), "occupancy": occ,
                         "bytes_per_value": nbytes, "bytes_counted": how, "predicted": pred})
    return {"nvcc": ptxas.nvcc_version(), "nvcc_options": list(ptxas.NVCC_OPTIONS), "archs": list(res),
            "limits": {a: vars(LIMITS[a]) for a in res},
            "gpus": [vars(g) for g in GPUS],
            "assumptions": {"block": BLOCK, "payloads": PAYLOADS, "mx_bits": MX_BITS, "n": N,
                            "roofline": "memory roof: ns/value = DRAM bytes per value / HBM GB/s"},
            "rows": rows}


__all__ = ["Gpu", "GPUS", "MODULES", "bytes_per_value", "launch_threads", "resources", "report_card"]
