"""CPU path of the table codecs: torch ops, fused by torch.compile (C++/OpenMP via Inductor).

Same semantics as kernels/codec.cu (DESIGN.md rule 2):
  inv = 1/absmax (0 when absmax is 0),  a = float(x) * inv,  code = #{j : bounds[j] <= a};
  except where inv overflows to +inf (absmax below about 2^-128, a subnormal block):
  there a = float(x) / absmax (IEEE division), so 0 stays 0 and |a| <= 1 (`scale_to_unit`);
  decode: values[code] * scale, rounded to the output dtype.
The search is exact: a 65,536-entry table indexed by the top 16 bits of a's float32 pattern
gives the count of thresholds below the bucket, then K compares finish it (`search_tables`).
`*_reference` functions are the plain-torch definition (torch.bucketize); the fast functions
must equal them bit for bit, and fall back to them when compilation is unavailable.
"""
from __future__ import annotations

import functools
import warnings

import torch

from ..backend import compile_enabled

MIN_COMPILED = 1 << 15  # below this many values the eager path is faster than a compiled call
_compile_failed = False


def _as_f32(bits: torch.Tensor) -> torch.Tensor:
    """float32 numbers with the given (int64-held, unsigned 32-bit) bit patterns."""
    return torch.where(bits >= 1 << 31, bits - (1 << 32), bits).to(torch.int32).view(torch.float32)


def search_tables(bounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(lut uint8[65536], bpad float32[257+K], K) for the exact prefix-table search."""
    b = bounds.to(torch.float32).contiguous()
    p = torch.arange(65536, dtype=torch.int64)
    first, last = _as_f32(p << 16), _as_f32((p << 16) | 0xFFFF)
    neg = p >= 32768  # negative floats: the magnitude grows with the low bits
    lo, hi = torch.where(neg, last, first), torch.where(neg, first, last)
    lo = torch.nan_to_num(lo, nan=0.0)
    hi = torch.nan_to_num(hi, nan=0.0)
    c_lo = torch.bucketize(lo, b, right=True)
    c_hi = torch.bucketize(hi, b, right=True)
    K = max(1, int((c_hi - c_lo).max()))
    bpad = torch.cat([b, torch.full((257 + K - b.numel(),), float("inf"))])
    return c_lo.to(torch.uint8), bpad, K


def inverse_scale(absmax: torch.Tensor) -> torch.Tensor:
    """1/absmax, and 0 where absmax is 0 (an all-zero block encodes to the code of 0)."""
    return torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))


def inverse_overflows(absmax: torch.Tensor) -> bool:
    """Some 1/absmax is +inf: a subnormal absmax below about 2^-128 (x·inv would turn 0 into NaN)."""
    return bool(torch.isinf(inverse_scale(absmax)).any())


def scale_to_unit(xf: torch.Tensor, absmax: torch.Tensor) -> torch.Tensor:
    """The scaled values a of float32 xf for `absmax` (broadcast): xf·(1/absmax), 0 where absmax
    is 0, and xf / absmax where 1/absmax overflows (there x·inf would give NaN for 0 and ±inf
    for the rest, coding every value to the ends of the table)."""
    inv = inverse_scale(absmax)
    a = xf * inv
    over = torch.isinf(inv)
    if bool(over.any()):
        a = torch.where(over, xf / torch.where(over, absmax, torch.ones_like(absmax)), a)
    return a


# ------------------------------------------------------------------ reference (plain torch)

def encode_reference(a: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    """Codes of already-scaled values a: #{j : bounds[j] <= a}."""
    return torch.bucketize(a, bounds, right=True).to(torch.uint8)


def encode_blocks_reference(x2d: torch.Tensor, bounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of a [blocks, block_size] view, each row scaled by its absmax; returns (codes, absmax)."""
    absmax = x2d.float().abs().amax(1)
    return encode_reference(scale_to_unit(x2d.float(), absmax[:, None]), bounds), absmax


def encode_scaled_reference(x: torch.Tensor, scale: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    """Codes of x scaled by one given `scale` (a 0-d float32 tensor: the absmax, or 1)."""
    return encode_reference(scale_to_unit(x.float(), scale), bounds)


def decode_reference(codes: torch.Tensor, values: torch.Tensor, scale: torch.Tensor,
                     dtype: torch.dtype) -> torch.Tensor:
    """values[codes] * scale (scale broadcast: a scalar, or [rows, 1] for 2-D blocks)."""
    return (values[codes.long()] * scale).to(dtype)


# ------------------------------------------------------------------ fused (torch.compile)

def _search(a: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor, K: int) -> torch.Tensor:
    c = lut[(a.view(torch.int32) >> 16) & 0xFFFF].int()
    for _ in range(K):
        c = c + (a >= bpad[c]).int()
    return c.to(torch.uint8)


@functools.cache
def _encode_blocks_fn(K: int):
    def fn(x2d, lut, bpad):
        xf = x2d.float()
        absmax = xf.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        return _search(xf * inv, lut, bpad, K), absmax.view(-1)
    return torch.compile(fn, dynamic=True)


@functools.cache
def _encode_scaled_fn(K: int):
    def fn(x, inv, lut, bpad):
        return _search(x.float() * inv, lut, bpad, K)
    return torch.compile(fn, dynamic=True)


@functools.cache
def _hop_blocks_fn(K: int):
    def fn(codes, scale, values, x, lut, bpad):
        acc = values[codes.int()] * scale + x
        absmax = acc.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        return _search(acc * inv, lut, bpad, K), absmax.view(-1)
    return torch.compile(fn, dynamic=True)


@functools.cache
def _decode_into_fn(dtype: torch.dtype):
    def fn(codes, values, scale, out):
        return out.copy_((values[codes.int()] * scale).to(dtype))
    return torch.compile(fn, dynamic=True)


def try_compiled(make, key, *args):
    """Run the compiled function make(key), or return None (and warn once) when compilation is
    unavailable or off; make() is not called then, so PARALAB_COMPILE=0 never imports torch._dynamo."""
    global _compile_failed
    if _compile_failed or not compile_enabled():
        return None
    try:
        return make(key)(*args)
    except Exception as e:  # a missing C++ compiler, an unsupported platform
        _compile_failed = True
        warnings.warn(f"torch.compile unavailable ({type(e).__name__}: {e}); "
                      "table codecs use the slower eager path", RuntimeWarning, stacklevel=3)
        return None


def encode_blocks(x2d: torch.Tensor, bounds: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor,
                  K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Blockwise absmax + codes for a [blocks, block_size] view; returns (codes 2-D, absmax).
    Blocks whose 1/absmax overflows take the reference (`scale_to_unit`): the compiled pass
    multiplies by the inverse only."""
    if x2d.numel() >= MIN_COMPILED:
        out = try_compiled(_encode_blocks_fn, K, x2d, lut, bpad)
        if out is not None and not inverse_overflows(out[1]):
            return out
    return encode_blocks_reference(x2d, bounds)


def encode_scaled(x: torch.Tensor, scale: torch.Tensor, bounds: torch.Tensor, lut: torch.Tensor,
                  bpad: torch.Tensor, K: int) -> torch.Tensor:
    """Codes of x scaled by `scale` (a 0-d float32 tensor: the absmax, or 1), as `scale_to_unit`."""
    if x.numel() >= MIN_COMPILED and not inverse_overflows(scale):
        out = try_compiled(_encode_scaled_fn, K, x, inverse_scale(scale), lut, bpad)
        if out is not None:
            return out
    return encode_scaled_reference(x, scale, bounds)


def decode_into(codes: torch.Tensor, values: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """out[...] = values[codes] * scale in out's dtype, in one pass (no temporary)."""
    if codes.numel() >= MIN_COMPILED and try_compiled(_decode_into_fn, out.dtype, codes, values, scale, out) is not None:
        return
    out.copy_(decode_reference(codes, values, scale, out.dtype))


def hop_blocks(codes: torch.Tensor, scale: torch.Tensor, values: torch.Tensor, x: torch.Tensor, lut: torch.Tensor,
               bpad: torch.Tensor, K: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One reduction hop in one pass per row of [rows, cols] views: codes and absmax of
    values[codes] * scale + x (float32), each row scaled by its own absmax. None when the compiled
    path is unavailable or the input is too small for it (the caller composes the reference)."""
    if codes.numel() < MIN_COMPILED:
        return None
    return try_compiled(_hop_blocks_fn, K, codes, scale, values, x, lut, bpad)
