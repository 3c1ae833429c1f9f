"""A report card for every kernel of kernels/*.cu, without a GPU: per architecture nvcc builds, ptxas's
registers, spills, shared and local memory (lab.codecs.ptxas), the theoretical occupancy of the CTA sizes the
launchers choose (lab.codecs.occupancy), the DRAM bytes each kernel moves per value (counted from its loads and
stores, below), the instructions per value (the SASS in the cubin, lab.codecs.instructions, over the values a
thread owns in one pass), and a roofline prediction of its time per value on H100, H200 and B200.

Two roofs (Williams, Waterman and Patterson 2009, "Roofline", with instructions in place of flops as in
Ding and Williams 2019, "An Instruction Roofline Model for GPUs"): the memory roof, bytes per value / HBM
bandwidth, and the issue roof, instructions per value / the GPU's instruction issue rate. An SM of Hopper and
Blackwell has four schedulers that each issue one warp instruction (32 threads) a clock, 128 thread instructions
a clock, the rate of its 128 fp32 lanes: the issue rate is SMs x 128 x boost clock = the data sheet's fp32
FLOP/s / 2 (one FMA, two flops, per lane a clock). The slower roof is the prediction and names the bound. The
instruction count is static: every path of the kernel once (the vector and scalar paths, the tail loops), each
loop body once (decode_sum's walk over its rows, a binary search's steps), so it is an estimate of the issued
instructions, not a count of them; a GPU run measures the time beside it (bench/gpu_all.py)."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from . import cuda as C
from . import cuda_block as CB
from . import cuda_hop as H
from . import instructions, ptxas
from .occupancy import LIMITS, occupancy


@dataclass(frozen=True)
class Gpu:
    """A GPU's DRAM bandwidth (GB/s), SM count, boost clock (MHz) and SM architecture, with where the numbers
    come from."""

    name: str
    arch: str
    hbm_GBps: float
    sms: int
    boost_MHz: float
    source: str

    @property
    def issue_per_ns(self) -> float:
        """Thread instructions the GPU issues per ns: SMs x 4 schedulers x 32 threads x clock."""
        return self.sms * ISSUE_PER_SM_CLOCK * self.boost_MHz / 1000


ISSUE_PER_SM_CLOCK = 128  # 4 warp schedulers x 32 threads (Hopper and Blackwell SMs)

GPUS = (
    Gpu("H100", "sm_90", 3350.0, 132, 1980.0, "NVIDIA H100 SXM5 data sheet: 80 GB HBM3, 3.35 TB/s, 67 fp32 "
        "TFLOP/s = 132 SMs (H100 architecture whitepaper) x 128 lanes x 2 x 1.98 GHz"),
    Gpu("H200", "sm_90", 4800.0, 132, 1980.0, "NVIDIA H200 SXM data sheet: 141 GB HBM3e, 4.8 TB/s, 67 fp32 "
        "TFLOP/s (the H100's 132 SMs at 1.98 GHz)"),
    Gpu("B200", "sm_100", 8000.0, 148, 1980.0, "NVIDIA HGX B200 data sheet: 180 GB HBM3e per GPU, 8 TB/s, 75 fp32 "
        "TFLOP/s = 148 SMs x 128 lanes x 2 x 1.98 GHz"),
)

# The representative call the bytes are counted for (a kernel's traffic depends on its arguments)
BLOCK = 64  # quantization block of the blockwise codec and hop kernels: one float32 scale per 64 values
PAYLOADS = 8  # decode_sum's rows: an 8-GPU node's payloads summed into one float32 output
MX_BITS = 8  # mx_encode / block_decode: MXFP8 (E4M3), one E8M0 scale byte per 32 values
N = 2**24  # values of the launches whose plans are reported
PASS_N = 2**23  # values of the representative call: no launcher caps its grid there, so a thread makes one pass
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


def representative_launches(n: int = PASS_N) -> dict[str, tuple[int, int]]:
    """{kernel: (grid, threads)} of the representative call of n values: aligned data, quantization blocks of
    BLOCK for the blockwise kernels, MXFP8 and NVFP4 for the block-scaled ones."""
    out: dict[str, tuple[int, int]] = {}

    def add(plan: Any) -> None:
        out[plan.kernel] = (plan.grid, plan.threads)

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for bs in (None, BLOCK):
            for search in C.SEARCHES:
                add(C.encode_plan(n, dtype, block_size=bs, search=search, x_aligned=True))
            add(C.decode_plan(n, dtype, block_size=bs, codes_aligned=True, out_aligned=True))
        for kind in ("mx", "nvfp4"):
            add(CB.encode_plan(kind, n, dtype))
        add(CB.decode_plan(n, dtype))
    for kind in H.KINDS:
        for search in C.SEARCHES:
            for bs in (None, BLOCK):
                for p in H.hop_plan(kind, n, block_size=bs, scale="absmax", search=search, aligned=True):
                    add(p)
    add(H.decode_sum_plan(n, block_size=BLOCK, aligned=True))
    return out


def values_per_thread(kernel: str) -> float:
    """Values one thread owns in the representative call (one pass of the kernel's body)."""
    grid, threads = representative_launches()[kernel]
    return PASS_N / (grid * threads)


MODULES = ("codec", "collective", "block_scaled")


def module_resources(name: str, arch: str) -> dict[str, dict[str, Any]]:
    """{kernel: ptxas's numbers, sass_instructions and the PTX instructions by class (ptx)} of
    kernels/<name>.cu built for `arch` now."""
    report, cubin, ptx = ptxas.build(name, arch)
    res: dict[str, dict[str, Any]] = ptxas.parse(report)
    sass, classes = instructions.sass_counts(cubin), instructions.ptx_classes(ptx)
    if set(sass) != set(res) or set(classes) != set(res):
        raise RuntimeError(f"{name}.cu on {arch}: ptxas reported {sorted(res)}, the cubin has {sorted(sass)}, "
                           f"the PTX {sorted(classes)}")
    for kernel, r in res.items():
        r.update(sass_instructions=sass[kernel], ptx=classes[kernel])
    return res


def resources(archs: tuple[str, ...] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{arch: {kernel: module_resources' numbers}} for every kernel, compiled now (two nvcc at a time)."""
    archs = ptxas.archs() if archs is None else archs
    jobs = [(a, m) for a in archs for m in MODULES]
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda job: module_resources(job[1], job[0]), jobs))
    out: dict[str, dict[str, dict[str, Any]]] = {a: {} for a in archs}
    for (a, _), res in zip(jobs, built):
        out[a].update(res)
    return out


def predict(gpu: Gpu, bytes_per_value: float, instructions_per_value: float) -> dict[str, Any]:
    """The roofline on `gpu`: memory and issue time per value (ns), the slower one as the prediction, its
    bound ('memory' or 'issue') and how far the issue roof is from the memory roof (issue / memory time)."""
    memory = bytes_per_value / gpu.hbm_GBps
    issue = instructions_per_value / gpu.issue_per_ns
    return {"memory_ns_per_value": memory, "issue_ns_per_value": issue, "ns_per_value": max(memory, issue),
            "bound": "memory" if memory >= issue else "issue", "issue_over_memory": issue / memory}


def report_card(res: dict[str, dict[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The card: {nvcc, archs, gpus, assumptions, rows}; one row per kernel and architecture with ptxas's
    numbers, the instruction counts, the occupancy of each CTA size the launchers choose, bytes and instructions
    per value and, for the GPUs of that architecture, the roofline's prediction (`predict`)."""
    res = resources() if res is None else res
    threads = launch_threads()
    rows = []
    for arch, kernels in res.items():
        for kernel in sorted(kernels):
            r = kernels[kernel]
            nbytes, how = bytes_per_value(kernel)
            per_thread = values_per_thread(kernel)
            ipv = r["sass_instructions"] / per_thread
            occ = {str(t): occupancy(arch, t, r["registers"], r["shared_bytes"]) for t in sorted(threads[kernel])}
            pred = {g.name: predict(g, nbytes, ipv) for g in GPUS if g.arch == arch}
            rows.append({"kernel": kernel, "arch": arch, **r, "threads": sorted(threads[kernel]), "occupancy": occ,
                         "bytes_per_value": nbytes, "bytes_counted": how, "values_per_thread": per_thread,
                         "instructions_per_value": ipv, "instructions_per_byte": ipv / nbytes, "predicted": pred})
    return {"nvcc": ptxas.nvcc_version(), "nvcc_options": list(ptxas.NVCC_OPTIONS), "archs": list(res),
            "limits": {a: vars(LIMITS[a]) for a in res},
            "gpus": [{**vars(g), "issue_per_ns": g.issue_per_ns, "balance_instructions_per_byte":
                      g.issue_per_ns / g.hbm_GBps} for g in GPUS],
            "assumptions": {"block": BLOCK, "payloads": PAYLOADS, "mx_bits": MX_BITS, "n": N, "pass_n": PASS_N,
                            "issue_per_sm_clock": ISSUE_PER_SM_CLOCK,
                            "roofline": "ns/value = max(DRAM bytes per value / HBM GB/s, SASS instructions per "
                                        "value / (SMs x 128 x boost GHz))",
                            "instructions": "static SASS count of the kernel (every path once, loop bodies once) "
                                            "over the values a thread owns in one pass"},
            "rows": rows}


__all__ = ["Gpu", "GPUS", "ISSUE_PER_SM_CLOCK", "MODULES", "PASS_N", "bytes_per_value", "launch_threads",
           "representative_launches", "values_per_thread", "module_resources", "resources", "predict", "report_card"]
