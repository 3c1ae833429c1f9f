"""CUDA path of the compressed-collective hops: launches kernels/collective.cu on torch's current stream.

Dettmers 2016 §3.2 kernel, fused for one reduction hop of a ring/tree allreduce (fp32 data):
  hop_codes:  encode(decode(a) + decode(b));  hop_mixed: encode(decode(a) + x);
  decode_sum: sum over p = 0..P-1 in order of decode(payload p), starting from 0.
decode(a) = values[code] * scale in fp32; the sum is added in that order and encoded as
kernels/codec.cu does, so results equal `lab.codecs.hop`'s CPU reference bit for bit (docs/design.md
rule 2). The sum never goes to global memory as fp32: it is recomputed from the codes instead.

Launch plan (`hop_plan`, `decode_sum_plan`: pure functions of the sizes):
* Blockwise absmax: one kernel. A team of threads owns one quantization block at a time (as in
  lab/codecs/cuda.py: a power of two up to 32 threads inside a warp for small blocks, else the
  whole CTA of up to 1024), each thread holding HOP_ITEMS groups of the sum in registers; the
  team reduces the block absmax, writes it, and encodes from registers.
* Per-tensor absmax: two kernels over chunks of CTA * HOP_ITEMS groups, team = CTA, at most
  REDUCE_GRID CTAs in grid-stride loops: `hop_*_absmax` recomputes the sum and atomicMax'es
  |sum| into the output scale (one atomic per CTA), then `hop_*_scale_*` recomputes the sum and
  encodes it with that scale.
* scale='none': one `hop_*_scale_*` pass with scale 1 that also reduces |sum| into a word.
* decode_sum: one grid-stride kernel, a thread per group, walking the P rows in order.
A group is GROUP = 4 elements (one u32 of codes, one float4 of x) when every input is aligned
for it and the block size is a multiple of 4; otherwise one element. The launchers also return
the absmax of the sum, so the caller can tell a non-finite sum (the codec's error) apart.
"""
from __future__ import annotations

import numpy as np
import torch

from .. import backend
from .cuda import (CTA, MAX_GRID, SEARCHES, Launch, check_block_size, check_cuda, team_size,
                           check_search_tables)

HOP_ITEMS = 4  # = HOP_ITEMS in kernels/collective.cu
GROUP = 4  # = GROUP: elements per vector group
REDUCE_GRID = 2048  # most CTAs of a per-tensor kernel (bounds the atomics of the absmax pass)
KINDS = ("codes", "mixed")
SCALES = ("absmax", "none")


# ------------------------------------------------------------------ launch plans

def hop_plan(kind: str, n: int, *, block_size: int | None, scale: str, search: str,
             aligned: bool) -> tuple[Launch, ...]:
    """The kernel launches of one hop of n values, in order.

    kind: 'codes' (decode(a) + decode(b)) or 'mixed' (decode(a) + x); aligned: the codes are at
    addresses that are multiples of 4 (and x of 16). `Launch.block` is the quantization block,
    or for per-tensor kernels the chunk a CTA takes at a time.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(KINDS)}")
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}; allowed: {', '.join(SCALES)}")
    if search not in SEARCHES:
        raise ValueError(f"search={search!r}; allowed: {', '.join(SEARCHES)}")
    check_block_size(block_size)
    if block_size is not None and scale == "none":
        raise ValueError("block_size needs scale='absmax'")
    vec = aligned and (block_size is None or block_size % GROUP == 0)
    g = GROUP if vec else 1
    if block_size is not None:
        team, threads = team_size(-(-block_size // g), HOP_ITEMS)
        nblocks = -(-n // block_size)
        grid = min(MAX_GRID, max(1, -(-nblocks // (threads // team))))
        return (Launch(f"hop_{kind}_block_{search}", grid, threads, team, vec, block_size),)
    chunk = CTA * HOP_ITEMS * g
    grid = min(REDUCE_GRID, max(1, -(-n // chunk)))
    encode = Launch(f"hop_{kind}_scale_{search}", grid, CTA, CTA, vec, chunk)
    if scale == "none":
        return (encode,)
    return (Launch(f"hop_{kind}_absmax", grid, CTA, CTA, vec, chunk), encode)


def decode_sum_plan(n: int, *, block_size: int | None, aligned: bool) -> Launch:
    """Launch of decode_sum over n values; aligned: every row of codes starts at a multiple of 4.

    `Launch.block` is the quantization block (0: one scale per payload); team is unused (= CTA).
    """
    check_block_size(block_size)
    vec = aligned and (block_size is None or block_size % GROUP == 0)
    groups = n // GROUP if vec else n
    grid = min(MAX_GRID, max(1, -(-groups // CTA)))
    return Launch("decode_sum", grid, CTA, CTA, vec, block_size or 0)


# ------------------------------------------------------------------ launching

def _launch(plan: Launch, device: torch.device, args: tuple) -> None:
    """Launch plan.kernel of kernels/collective.cu. Never cached: a later hop may reuse the same
    pointers (torch's caching allocator hands the same blocks back every step) and must run."""
    backend.launch_kernel("collective", plan.kernel, plan.grid, plan.threads, args, device)


# ------------------------------------------------------------------ validation

def _nscales(n: int, block_size: int | None) -> int:
    return 1 if block_size is None else -(-n // block_size)


def _check_payload(name: str, codes: torch.Tensor, scales: torch.Tensor, n: int, block_size: int | None,
                   device: torch.device) -> None:
    check_cuda(f"{name} codes", codes, torch.uint8, device)
    check_cuda(f"{name} scales", scales, torch.float32, device)
    if codes.numel() != n:
        raise ValueError(f"{name} has {codes.numel()} codes, the hop {n} values")
    if scales.numel() != _nscales(n, block_size):
        raise ValueError(f"{name} has {scales.numel()} scales; {n} values "
                         f"{'in one tensor' if block_size is None else f'in blocks of {block_size}'} "
                         f"need {_nscales(n, block_size)}")


def _check_tables(values256: torch.Tensor, bpad: torch.Tensor, lut: torch.Tensor | None, K: int, search: str,
                  device: torch.device) -> None:
    check_cuda("values256", values256, torch.float32, device)
    if values256.numel() != 256:
        raise ValueError(f"values256 must have 256 entries, got {values256.numel()}")
    check_search_tables(bpad, lut, K, search, device)


# ------------------------------------------------------------------ public

def _hop(kind: str, src: tuple, aligned: bool, n: int, device: torch.device, values256: torch.Tensor,
         bpad: torch.Tensor, lut: torch.Tensor | None, K: int, block_size: int | None, scale: str,
         search: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if search == "binary":
        lut, K = None, 0  # unused by the binary kernels
    codes = torch.empty(n, dtype=torch.uint8, device=device)
    if block_size is not None:
        scales = torch.empty(_nscales(n, block_size), dtype=torch.float32, device=device)
        absmax = scales
    elif scale == "absmax":
        scales = absmax = torch.zeros(1, dtype=torch.float32, device=device)  # atomicMax'ed bits
    else:
        scales = torch.ones(1, dtype=torch.float32, device=device)
        absmax = torch.zeros(1, dtype=torch.float32, device=device)
    if n == 0:
        return codes, scales.new_zeros(0), absmax.new_zeros(0)
    tables = (values256, bpad, np.int32(bpad.numel()), lut if lut is not None else bpad, np.int32(K))
    for plan in hop_plan(kind, n, block_size=block_size, scale=scale, search=search, aligned=aligned):
        shape = (np.int64(n), np.int32(plan.block), np.int32(plan.team), np.int32(plan.vec))
        if "_block_" in plan.kernel:
            args = src + (codes, scales) + shape + tables
        elif plan.kernel.endswith("_absmax"):
            args = src + (absmax,) + shape + (values256,)
        else:
            word = None if scale == "absmax" else absmax
            args = src + (codes, scales, word) + shape + tables
        _launch(plan, device, args)
    return codes, scales, absmax


def hop_codes_cuda(a_codes: torch.Tensor, a_scales: torch.Tensor, b_codes: torch.Tensor, b_scales: torch.Tensor,
                   values256: torch.Tensor, bpad: torch.Tensor, lut: torch.Tensor | None, K: int, *,
                   block_size: int | None, scale: str = "absmax",
                   search: str = "lut") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scales, absmax) of encode(decode(a) + decode(b)) on CUDA; codes uint8 [n].

    a_/b_codes: uint8 [n]; a_/b_scales: float32 [ceil(n / block_size)] with block_size, else [1]
    (for scale='none' the ones the codec writes). values256: the (normalised) table padded to
    256 entries; bpad, lut, K: the search tables of `lab.codecs.cpu.search_tables`.
    scales: the block absmaxes, the tensor absmax, or [1.0] for scale='none'; absmax: the
    absmax of the sum (the scales, or for 'none' a separate value): non-finite when the sum is.
    """
    check_block_size(block_size)
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}; allowed: {', '.join(SCALES)}")
    check_cuda("a codes", a_codes, torch.uint8)
    device, n = a_codes.device, a_codes.numel()
    nb = None if scale == "none" else block_size
    _check_payload("a", a_codes, a_scales, n, nb, device)
    _check_payload("b", b_codes, b_scales, n, nb, device)
    _check_tables(values256, bpad, lut, K, search, device)
    aligned = a_codes.data_ptr() % 4 == 0 and b_codes.data_ptr() % 4 == 0
    src = (a_codes, a_scales, b_codes, b_scales)
    return _hop("codes", src, aligned, n, device, values256, bpad, lut, K, block_size, scale, search)


def hop_mixed_cuda(a_codes: torch.Tensor, a_scales: torch.Tensor, x: torch.Tensor, values256: torch.Tensor,
                   bpad: torch.Tensor, lut: torch.Tensor | None, K: int, *, block_size: int | None,
                   scale: str = "absmax", search: str = "lut") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scales, absmax) of encode(decode(a) + x) on CUDA; x float32 [n], the rest as
    `hop_codes_cuda`."""
    check_block_size(block_size)
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}; allowed: {', '.join(SCALES)}")
    check_cuda("a codes", a_codes, torch.uint8)
    device, n = a_codes.device, a_codes.numel()
    _check_payload("a", a_codes, a_scales, n, None if scale == "none" else block_size, device)
    check_cuda("x", x, torch.float32, device)
    if x.numel() != n:
        raise ValueError(f"x has {x.numel()} values, the payload {n}")
    _check_tables(values256, bpad, lut, K, search, device)
    aligned = a_codes.data_ptr() % 4 == 0 and x.data_ptr() % 16 == 0
    src = (a_codes, a_scales, x)
    return _hop("mixed", src, aligned, n, device, values256, bpad, lut, K, block_size, scale, search)


def decode_sum_cuda(codes: torch.Tensor, scales: torch.Tensor, values256: torch.Tensor, *,
                    block_size: int | None) -> torch.Tensor:
    """float32 [n]: sum over rows p = 0..P-1, in order from 0, of values256[codes[p]] * scale.

    codes: uint8 [P, n], scales: float32 [P, ceil(n / block_size)] (or [P, 1] without blocks);
    each with unit stride along a row (any row stride, e.g. views into one gather buffer).
    """
    check_block_size(block_size)
    for name, t, dtype in (("codes", codes, torch.uint8), ("scales", scales, torch.float32)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor [P, ...], got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if t.device.type != backend.KERNEL_DEVICE_TYPE:
            raise ValueError(f"{name} must be on a CUDA device, got {t.device}")
        if t.dtype != dtype:
            raise ValueError(f"{name} dtype {t.dtype}; allowed: {dtype}")
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise ValueError(f"{name} rows must be contiguous (stride 1 along a row)")
    device = codes.device
    if scales.device != device:
        raise ValueError(f"scales are on {scales.device}, the codes on {device}")
    P, n = codes.shape
    if scales.shape[0] != P:
        raise ValueError(f"codes hold {P} payloads, scales {scales.shape[0]}")
    if P < 1:
        raise ValueError("decode_sum needs at least one payload")
    if n and scales.shape[1] != _nscales(n, block_size):
        raise ValueError(f"scales rows have {scales.shape[1]} values; {n} codes "
                         f"{'in one tensor' if block_size is None else f'in blocks of {block_size}'} "
                         f"need {_nscales(n, block_size)}")
    check_cuda("values256", values256, torch.float32, device)
    if values256.numel() != 256:
        raise ValueError(f"values256 must have 256 entries, got {values256.numel()}")
    out = torch.empty(n, dtype=torch.float32, device=device)
    if n == 0:
        return out
    aligned = codes.data_ptr() % 4 == 0 and (P == 1 or codes.stride(0) % 4 == 0)
    plan = decode_sum_plan(n, block_size=block_size, aligned=aligned)
    _launch(plan, device, (
        codes, np.int64(codes.stride(0)), scales, np.int64(scales.stride(0)), np.int32(P), out,
        np.int64(n), np.int64(plan.block), np.int32(plan.vec), values256))
    return out
