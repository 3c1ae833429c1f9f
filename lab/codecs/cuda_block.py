"""CUDA path of the block-scaled codecs (OCP MX v1.0, NVFP4): launches kernels/block_scaled.cu on
torch's current stream through `lab.backend.launch_kernel`.

Same result as the CPU path (lab/codecs/block_scaled.py, mx.py, nvfp4.py), bit for bit: the codes
packed in the same byte order (FP6 four values in three bytes, FP4 two to a byte, the first in the
low nibble), the same scale bytes, and NVFP4's stochastic rounding from the same counter-based
noise (`block_scaled.uniform_noise`). A team of MX_BLOCK / GROUP (8) or NV_BLOCK / GROUP (4)
threads owns one block; each thread codes GROUP values, so its packed codes are whole bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import backend
from .block_scaled import ElementFormat
from .cuda import check_cuda

GROUP = 4  # = GROUP in kernels/block_scaled.cu: values per thread
MX_BLOCK = 32  # = MX_BLOCK
NV_BLOCK = 16  # = NV_BLOCK
CTA = 256
MAX_GRID = 2**31 - 1
MODULE = "block_scaled"

_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


@dataclass(frozen=True)
class Launch:
    """One kernel call: name, CTAs, threads per CTA."""

    kernel: str
    grid: int
    threads: int


def encode_plan(kind: str, n: int, dtype: torch.dtype) -> Launch:
    """Launch of `kind` ('mx' or 'nvfp4') encode for n values of `dtype`: one team per block."""
    block = {"mx": MX_BLOCK, "nvfp4": NV_BLOCK}[kind]
    teams_per_cta = CTA // (block // GROUP)
    grid = min(MAX_GRID, max(1, -(-(-(-n // block)) // teams_per_cta)))
    return Launch(f"{kind}_encode_{_NAME[dtype]}", grid, CTA)


def decode_plan(n: int, dtype: torch.dtype) -> Launch:
    """Launch of the decoder into `dtype`: one thread per GROUP values."""
    grid = min(MAX_GRID, max(1, -(-(-(-n // GROUP)) // CTA)))
    return Launch(f"block_decode_{_NAME[dtype]}", grid, CTA)


def _launch(plan: Launch, device: torch.device, args: tuple) -> None:
    backend.launch_kernel(MODULE, plan.kernel, plan.grid, plan.threads, args, device)


def _check_x(x: torch.Tensor) -> None:
    check_cuda("x", x, tuple(_NAME))
    if x.dim() != 1:
        raise ValueError(f"x must be flat (1-D), got shape {tuple(x.shape)}")


def mx_encode_cuda(x: torch.Tensor, fmt: ElementFormat, rule: str) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(packed codes uint8[ceil(n·bits/8)], biased E8M0 scales uint8[ceil(n/32)], nonfinite) of the
    flat x (float32/16/bfloat16 on the kernel device). nonfinite: a block held NaN or Inf (the codes
    are then meaningless; the caller raises or saturates and encodes again). One sync, for the flag."""
    _check_x(x)
    if rule not in ("floor", "rceil"):
        raise ValueError(f"scale rule {rule!r}; allowed: floor, rceil")
    n, dev = x.numel(), x.device
    codes = torch.empty((n * fmt.bits + 7) // 8, dtype=torch.uint8, device=dev)
    scales = torch.empty(-(-n // MX_BLOCK), dtype=torch.uint8, device=dev)
    if n == 0:
        return codes, scales, False
    flag = torch.zeros(1, dtype=torch.int32, device=dev)
    plan = encode_plan("mx", n, x.dtype)
    _launch(plan, dev, (x, codes, scales, flag, np.int64(n), np.int32(fmt.bits), np.int32(fmt.mbits),
                        np.int32(fmt.bias), np.int32(fmt.emax), np.int32(fmt.is_int), np.float32(fmt.max_normal),
                        np.int32(rule == "rceil")))
    return codes, scales, bool(flag.item())


def nvfp4_encode_cuda(x: torch.Tensor, tscale: torch.Tensor, key: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(E2M1 codes two to a byte uint8[ceil(n/2)], E4M3 block scales as uint8[ceil(n/16)]) of the
    flat, finite x with the fp32 tensor scale `tscale` (1 value on x's device, as nvfp4.tensor_scale
    computes it). key: None for round-to-nearest-even, else the 64-bit key of the stochastic noise."""
    _check_x(x)
    check_cuda("tscale", tscale, torch.float32, x.device)
    if tscale.numel() != 1:
        raise ValueError(f"tscale must hold one value, got {tscale.numel()}")
    if key is not None and not 0 <= key < 2**64:
        raise ValueError(f"key={key!r}; allowed: None or an integer in 0..2**64-1")
    n, dev = x.numel(), x.device
    codes = torch.empty((n + 1) // 2, dtype=torch.uint8, device=dev)
    scales = torch.empty(-(-n // NV_BLOCK), dtype=torch.uint8, device=dev)
    if n == 0:
        return codes, scales
    k = key or 0
    plan = encode_plan("nvfp4", n, x.dtype)
    _launch(plan, dev, (x, codes, scales, tscale, np.int64(n), np.int32(key is not None),
                        np.uint32(k & 0xFFFFFFFF), np.uint32(k >> 32)))
    return codes, scales


def block_decode_cuda(codes: torch.Tensor, values256: torch.Tensor, scales: torch.Tensor,
                      scale_values256: torch.Tensor, tscale: torch.Tensor | None, *, n: int, block: int,
                      bits: int, dtype: torch.dtype, out: torch.Tensor | None = None) -> torch.Tensor:
    """values256[code] · scale_values256[scale byte of its block] (· tscale) of n packed codes, clamped
    to `dtype`'s range and rounded to it; into `out` (a contiguous `dtype` tensor of n values) or a
    new tensor. MX: the E8M0 table and no tscale; NVFP4: the E4M3 table and the tensor scale."""
    if dtype not in _NAME:
        raise ValueError(f"dtype {dtype}; allowed: {', '.join(map(str, _NAME))}")
    if bits not in (4, 6, 8):
        raise ValueError(f"bits={bits!r}; allowed: 4, 6, 8")
    if block not in (MX_BLOCK, NV_BLOCK):
        raise ValueError(f"block={block!r}; allowed: {MX_BLOCK}, {NV_BLOCK}")
    check_cuda("codes", codes, torch.uint8)
    dev = codes.device
    for name, t in (("values256", values256), ("scale_values256", scale_values256)):
        check_cuda(name, t, torch.float32, dev)
        if t.numel() != 256:
            raise ValueError(f"{name} must have 256 entries, got {t.numel()}")
    check_cuda("scales", scales, torch.uint8, dev)
    if codes.numel() != (n * bits + 7) // 8 or scales.numel() != -(-n // block):
        raise ValueError(f"{n} values need {(n * bits + 7) // 8} code bytes and {-(-n // block)} scales, got "
                         f"{codes.numel()} and {scales.numel()}")
    if tscale is not None:
        check_cuda("tscale", tscale, torch.float32, dev)
    if out is None:
        out = torch.empty(n, dtype=dtype, device=dev)
    elif out.dtype != dtype or out.device != dev or out.numel() != n or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} tensor of {n} values on {dev}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    if n == 0:
        return out
    plan = decode_plan(n, dtype)
    _launch(plan, dev, (codes, values256, scales, scale_values256, tscale, out, np.int64(n), np.int32(block),
                        np.int32(bits), np.float32(torch.finfo(dtype).max)))
    return out


def on_kernel_device(t: torch.Tensor) -> bool:
    """t lives where kernels/*.cu run (a CUDA tensor with CuPy, or the tests' emulator)."""
    return t.device.type == backend.KERNEL_DEVICE_TYPE and backend.kernels_available()
