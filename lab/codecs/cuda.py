"""CUDA path of the table codecs: launches kernels/codec.cu on torch's current stream.

Same semantics as the CPU reference in `cpu.py` (docs/design.md rule 2), bit for bit:
  inv = 1/absmax (0 when absmax is 0),  a = float(x) * inv,  code = #{j : bounds[j] <= a};
  decode: values[code] * scale, rounded to the output dtype.
A non-finite a (1/absmax overflowing for blocks below 2**-128, or x/scale) codes as
torch.bucketize does: NaN and +inf after every bound, -inf before. The absmax propagates NaN as
torch.amax does. Exactness needs NVRTC's defaults (no -ftz, no fast math).
Dettmers 2016 §3.2 searches the table by bisection ('binary'); 'lut' indexes a 65,536-entry
table by the top 16 bits of a and finishes with K compares (`cpu.search_tables` builds it).

Launch plan: a team of threads owns one quantization block at a time, a power of two up to 32
threads inside a warp for small blocks or the whole CTA for large ones, each thread holding up
to ENCODE_ITEMS groups in registers. A group is 16 bytes of input when the data is aligned
for vector loads, else one element. Per-tensor scaling cuts the input into chunks of one CTA's
worth of groups. Pointers go to CuPy as integers: CuPy has no bfloat16 dtype to view with.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import backend

SEARCHES = ("lut", "binary")
MAX_K = 4
ENCODE_ITEMS = 4  # = ENCODE_ITEMS in kernels/codec.cu
DECODE_ITEMS = 4  # = DECODE_ITEMS
DECODE_GROUP = 8  # = DECODE_GROUP: codes per vector group
CTA = 256  # threads per CTA of small teams, and of the per-tensor kernels
MAX_CTA = 1024  # = MAX_THREADS
MAX_GRID = 2**31 - 1
MAX_BLOCK = 2**30  # in-block offsets are 32-bit in the kernels

_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_VEC = {torch.float32: 4, torch.float16: 8, torch.bfloat16: 8}  # elements in 16 bytes


@dataclass(frozen=True)
class Launch:
    """How one kernel call is cut up: `block` is the quantization block or the per-tensor chunk."""

    kernel: str
    grid: int
    threads: int
    team: int
    vec: bool
    block: int


def team_size(groups: int, items: int) -> tuple[int, int]:
    """(team size, CTA threads) for blocks of `groups` groups at `items` groups per thread."""
    need = max(1, -(-groups // items))
    if need <= 32:
        return 1 << (need - 1).bit_length(), CTA
    threads = min(MAX_CTA, -(-need // 32) * 32)
    return threads, threads


def _plan(kernel: str, n: int, block_size: int | None, group: int, vec: bool, items: int) -> Launch:
    g = group if vec else 1
    if block_size is None:
        team = threads = CTA
        block = CTA * items * g
    else:
        team, threads = team_size(-(-block_size // g), items)
        block = block_size
    nblocks = -(-n // block)
    grid = min(MAX_GRID, max(1, -(-nblocks // (threads // team))))
    return Launch(kernel, grid, threads, team, vec, block)


def encode_plan(n: int, dtype: torch.dtype, *, block_size: int | None, search: str,
                x_aligned: bool) -> Launch:
    """Launch of the encoder for n values of `dtype`; x_aligned: x's address is a multiple of 16."""
    v = _VEC[dtype]
    vec = x_aligned and (block_size is None or block_size % v == 0)
    mode = "scale" if block_size is None else "block"
    return _plan(f"encode_{mode}_{_NAME[dtype]}_{search}", n, block_size, v, vec, ENCODE_ITEMS)


def decode_plan(n: int, dtype: torch.dtype, *, block_size: int | None, codes_aligned: bool,
                out_aligned: bool) -> Launch:
    """Launch of the decoder into `dtype`. The vector path loads 8 codes at a time and stores
    16 bytes at a time, so it needs both: codes_aligned, the codes' address a multiple of 8, and
    out_aligned, the output's a multiple of 16 (a segment of an allreduce buffer often is not)."""
    vec = codes_aligned and out_aligned and (block_size is None or block_size % DECODE_GROUP == 0)
    mode = "scale" if block_size is None else "block"
    return _plan(f"decode_{mode}_{_NAME[dtype]}", n, block_size, DECODE_GROUP, vec, DECODE_ITEMS)


# ------------------------------------------------------------------ launching

def _launch(plan: Launch, device: torch.device, args: tuple, module: str = "codec") -> None:
    """Launch plan.kernel of kernels/<module>.cu (`backend.launch_kernel`: CuPy, or the tests' emulator)."""
    backend.launch_kernel(module, plan.kernel, plan.grid, plan.threads, args, device)


# ------------------------------------------------------------------ validation

def check_cuda(name: str, t: torch.Tensor, dtype: torch.dtype | tuple[torch.dtype, ...],
                device: torch.device | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != backend.KERNEL_DEVICE_TYPE:
        raise ValueError(f"{name} must be on a CUDA device, got {t.device}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device}, the input on {device}")
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
    if t.dtype not in dtypes:
        raise ValueError(f"{name} dtype {t.dtype}; allowed: {', '.join(map(str, dtypes))}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")


def check_search_tables(bpad: torch.Tensor, lut: torch.Tensor | None, K: int, search: str,
                        device: torch.device) -> None:
    """Validate the search tables of a CUDA encode (bounds padded to a power of two, the LUT, K)."""
    check_cuda("bpad", bpad, torch.float32, device)
    if bpad.dim() != 1 or bpad.numel() < 1:
        raise ValueError(f"bpad must be 1-D and non-empty, got shape {tuple(bpad.shape)}")
    if search not in SEARCHES:
        raise ValueError(f"search={search!r}; allowed: {', '.join(SEARCHES)}")
    if search == "lut":
        if lut is None:
            raise ValueError("search='lut' needs lut")
        check_cuda("lut", lut, torch.uint8, device)
        if lut.numel() != 65536:
            raise ValueError(f"lut must have 65536 entries, got {lut.numel()}")
        if not isinstance(K, int) or isinstance(K, bool) or not 1 <= K <= MAX_K:
            raise ValueError(f"K={K!r}; allowed: an integer in 1..{MAX_K} (the search needs a finer table)")


def check_block_size(block_size: int | None) -> None:
    if block_size is not None and (not isinstance(block_size, int) or isinstance(block_size, bool)
                                   or not 1 <= block_size <= MAX_BLOCK):
        raise ValueError(f"block_size={block_size!r}; allowed: None or an integer in 1..{MAX_BLOCK}")


# ------------------------------------------------------------------ public

def encode_cuda(x: torch.Tensor, bpad: torch.Tensor, lut: torch.Tensor | None, K: int, *,
                block_size: int | None, scale: torch.Tensor | None,
                search: str = "lut") -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of x (flat, contiguous, float32/16/bfloat16 on CUDA) and the scales used.

    bpad: the float32 bounds then +inf padding (entries past 260 are ignored: padding);
    lut, K: the prefix table and compare count of `cpu.search_tables` (ignored by 'binary').
    Exactly one of block_size (one absmax per block, returned float32 [ceil(n / block_size)])
    and scale (a 1-element float32 tensor, returned as given) is set.
    """
    if (block_size is None) == (scale is None):
        raise ValueError("give exactly one of block_size (blockwise absmax) and scale (one given scale)")
    check_block_size(block_size)
    if search not in SEARCHES:
        raise ValueError(f"search={search!r}; allowed: {', '.join(SEARCHES)}")
    check_cuda("x", x, tuple(_NAME))
    device = x.device
    if scale is not None:
        check_cuda("scale", scale, torch.float32, device)
        if scale.numel() != 1:
            raise ValueError(f"scale must hold one value, got {scale.numel()}")
    check_search_tables(bpad, lut, K, search, device)
    if search != "lut":
        lut, K = bpad, 0  # unused by the binary kernels

    n = x.numel()
    codes = torch.empty(n, dtype=torch.uint8, device=device)
    if block_size is None:
        side = scale
    else:
        side = torch.empty(-(-n // block_size), dtype=torch.float32, device=device)
    if n == 0:
        return codes, side
    plan = encode_plan(n, x.dtype, block_size=block_size, search=search, x_aligned=x.data_ptr() % 16 == 0)
    _launch(plan, device, (
        x, codes, side, np.int64(n), np.int32(plan.block), np.int32(plan.team),
        np.int32(plan.vec), bpad, np.int32(bpad.numel()), lut, np.int32(K)))
    return codes, side


def decode_cuda(codes: torch.Tensor, values256: torch.Tensor, scales: torch.Tensor, *,
                block_size: int | None, dtype: torch.dtype, out: torch.Tensor | None = None) -> torch.Tensor:
    """values256[codes] * scale of each code's block (or the one scale), as `dtype`, shape [n].

    values256: float32 [256] (the table padded to 256 entries); scales: float32
    [ceil(n / block_size)] with block_size, else one value. out: a contiguous `dtype` tensor of
    n values on the codes' device to write into (else a new one).
    """
    if dtype not in _NAME:
        raise ValueError(f"dtype {dtype}; allowed: {', '.join(map(str, _NAME))}")
    check_block_size(block_size)
    check_cuda("codes", codes, torch.uint8)
    device = codes.device
    check_cuda("values256", values256, torch.float32, device)
    if values256.numel() != 256:
        raise ValueError(f"values256 must have 256 entries, got {values256.numel()}")
    check_cuda("scales", scales, torch.float32, device)
    n = codes.numel()
    if block_size is None:
        if scales.numel() != 1:
            raise ValueError(f"without block_size, scales must hold one value, got {scales.numel()}")
    else:
        if scales.numel() != -(-n // block_size):
            raise ValueError(f"scales has {scales.numel()} values; {n} codes in blocks of {block_size} "
                             f"need {-(-n // block_size)}")
    if out is None:
        out = torch.empty(n, dtype=dtype, device=device)
    elif (out.dtype != dtype or out.device != device or out.numel() != n or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous {dtype} tensor of {n} values on {device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if n == 0:
        return out
    plan = decode_plan(n, dtype, block_size=block_size, codes_aligned=codes.data_ptr() % 8 == 0,
                       out_aligned=out.data_ptr() % 16 == 0)
    _launch(plan, device, (
        codes, values256, scales, out, np.int64(n), np.int32(plan.block),
        np.int32(plan.team), np.int32(plan.vec)))
    return out
