"""CPU path of the table codecs: torch ops, fused by torch.compile (C++/OpenMP via Inductor).

Same semantics as kernels/codec.cu (docs/design.md rule 2):
  inv = 1/absmax (0 when absmax is 0),  a = float(x) * inv,  code = #{j : bounds[j] <= a};
  except where inv overflows to +inf (absmax below about 2^-128, a subnormal block):
  there a = float(x) / absmax (IEEE division), so 0 stays 0 and |a| <= 1 (`scale_to_unit`);
  decode: values[code] * scale, rounded to the output dtype.
The search is exact: a 65,536-entry table indexed by the top 16 bits of a's float32 pattern
gives the count of thresholds below the bucket, then K compares finish it (`search_tables`).
Where one compare suffices (K = 1: every table the library ships) the compiled passes read one
packed int32 entry per value instead (`packed_table`): the count and, as an integer, where in the
bucket the one threshold falls, so a value costs one table load and integer compares.
`*_reference` functions are the plain-torch definition (torch.bucketize); the fast functions
must equal them bit for bit, and fall back to them when compilation is unavailable.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import torch

from ..backend import compile_enabled
from .torch_compile_private import (compiled_vector_width, key_compiled_code_by_vector_isa, mark_rows_dynamic,
                                    raise_recompile_limit)

MIN_COMPILED = 1 << 15  # below this many values the eager path is faster than a compiled call
_compile_failed = False
_compile_error = ""
#: told (make, key, args, rows, returns) after each compiled pass this process runs (lab.codecs.warm_passes records
#: them for a warm launch server); None: nobody listens
on_compiled_call: Callable[..., None] | None = None


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


def packed_table(lut: torch.Tensor, bpad: torch.Tensor, K: int) -> torch.Tensor | None:
    """int32[65536] for K = 1 (None otherwise): entry p = c | t << 8 | neg << 31, where c = lut[p],
    neg says the bucket holds negative floats, and t in [0, 65536] is the least q for which the float
    with pattern p << 16 | (q ^ (0xFFFF if neg else 0)) is >= bpad[c] (65536: none is). Values in a
    bucket grow with q, so for a in bucket p: a >= bpad[c]  <=>  q(a) >= t, and the code is
    c + (q(a) >= t): exactly `_search` with one compare (found by a 17-step bisection per bucket)."""
    if K != 1:
        return None
    p = torch.arange(65536, dtype=torch.int64)
    neg = p >= 32768
    b = bpad.to("cpu")[lut.to("cpu").long()]  # the one threshold that may fall in the bucket
    flip = torch.where(neg, 0xFFFF, 0)
    lo, hi = torch.zeros_like(p), torch.full_like(p, 65536)  # t in [lo, hi]
    for _ in range(17):
        mid = (lo + hi) // 2
        ok = (mid < 65536) & (_as_f32((p << 16) | (mid.clamp(max=0xFFFF) ^ flip)) >= b)
        hi, lo = torch.where(ok, mid, hi), torch.where(ok, lo, mid + 1)
    e = lut.to("cpu").long() | (hi << 8) | (neg.long() << 31)
    return torch.where(e >= 1 << 31, e - (1 << 32), e).to(torch.int32).to(lut.device)


def absmax(x: torch.Tensor) -> torch.Tensor:
    """max |x| as a 0-d float32 tensor (NaN if x holds one), from one min/max pass without a
    temporary (torch's inf-norm is ~20x slower on CPU); +0.0 for an all-zero x."""
    lo, hi = torch.aminmax(x)
    return torch.maximum(lo.abs(), hi.abs()).float()


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

def _lookup(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table[index] for a 1-D table and indices known to be in range, as a gather: Inductor wraps a negative
    index of `table[index]` (int64 compares and blends per value), not a gather's (0.60 -> 0.48 ns per value
    for the compiled encode pass at 2^22-2^24 values, 2 threads; decode into a buffer, with Inductor's per-load
    bounds check off too: 1.31 -> 0.26 ns per value on AVX2, 2^24 values, 2 threads)."""
    return torch.gather(table, 0, index.reshape(-1).long()).view(index.shape)


def _as_codes(c: torch.Tensor) -> torch.Tensor:
    """int32 codes (0..255) as uint8. For 256-bit vectors (AVX2) ATen has no vector int32 -> uint8 conversion and
    Inductor's C++ converts element by element (0.28 ns per value of a 0.51 ns encode pass without the table lookup,
    2^24 values, 2 threads); int32 -> float32 -> uint8 are two vector conversions there, exact for integers below
    256 (the encode pass: 0.63 -> 0.60 ns per value on AVX2; on AVX-512 the direct one is the faster)."""
    if _codes_through_float:
        return c.float().to(torch.uint8)
    return c.to(torch.uint8)


def _search(a: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor, K: int) -> torch.Tensor:
    """Codes of scaled float32 a; K = 0 means `lut` is `packed_table`'s (bpad unused)."""
    bits = a.view(torch.int32)
    if K == 0:
        e = _lookup(lut, (bits >> 16) & 0xFFFF)
        q = (bits ^ (e >> 31)) & 0xFFFF  # e >> 31 is -1 in a negative bucket: q counts down there
        return _as_codes((e & 0xFF) + (q >= ((e >> 8) & 0x1FFFF)).int())
    c = _lookup(lut, (bits >> 16) & 0xFFFF).int()
    for _ in range(K):
        c = c + (a >= bpad[c]).int()
    return _as_codes(c)


#: the compiled passes convert their codes to uint8 through float32 (`_as_codes`): set where the generated C++ has
#: 256-bit vectors (`_allow_recompiles`, before the first compile)
_codes_through_float = False

#: the table index is masked to 16 bits and every table has 65,536 entries: no per-load bounds check
_OPTIONS = {"assert_indirect_indexing": False}


def _compile(fn):
    """torch.compile for these passes: the row count dynamic (one compiled kernel for any number of
    blocks), the block width and the tables static (static widths vectorise without remainder code)."""
    return torch.compile(fn, dynamic=None, options=_OPTIONS)


#: torch._dynamo's recompile limit per code object for these passes. Dynamo specialises a tensor's storage
#: offset 0 and 1, and the passes write into views of reused wire buffers at any offset, of three dtypes,
#: with per-tensor or per-block scales: a long-lived process (the dashboard, the test suite) passes the
#: default 8 variants, after which dynamo would run the pass eagerly, silently (tests/test_mx_compile.py).
RECOMPILE_LIMIT = 64


@functools.cache
def _allow_recompiles() -> None:
    """Raise the limit to RECOMPILE_LIMIT once per process (a limit set lower later, as a test does, stands), and
    key the compiled-code caches by the vector ISA (`key_compiled_code_by_vector_isa`)."""
    global _codes_through_float
    raise_recompile_limit(RECOMPILE_LIMIT)
    key_compiled_code_by_vector_isa()
    _codes_through_float = compiled_vector_width() == 256


def _rows_dynamic(*ts: torch.Tensor) -> None:
    for t in ts:
        if t.dim() >= 1:
            mark_rows_dynamic(t)


@functools.cache
def _encode_blocks_fn(K: int):
    def fn(x2d, lut, bpad):
        xf = x2d.float()
        absmax = xf.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        return _search(xf * inv, lut, bpad, K), absmax.view(-1)
    return _compile(fn)


@functools.cache
def _encode_scaled_fn(K: int):
    def fn(x, inv, lut, bpad):
        return _search(x.float() * inv, lut, bpad, K)
    return _compile(fn)


@functools.cache
def _hop_blocks_fn(K: int):
    def fn(codes, scale, values, x, lut, bpad):
        acc = _lookup(values, codes) * scale + x
        absmax = acc.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        return _search(acc * inv, lut, bpad, K), absmax.view(-1)
    return _compile(fn)


@functools.cache
def _encode_blocks_into_fn(K: int):
    def fn(x2d, lut, bpad, codes):
        xf = x2d.float()
        absmax = xf.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        codes.copy_(_search(xf * inv, lut, bpad, K))
        return absmax.view(-1)
    return _compile(fn)


@functools.cache
def _encode_scaled_into_fn(K: int):
    def fn(x, inv, lut, bpad, codes):
        codes.copy_(_search(x.float() * inv, lut, bpad, K))
    return _compile(fn)


@functools.cache
def _hop_blocks_into_fn(K: int):
    def fn(codes, scale, values, x, lut, bpad, codes_out):
        acc = _lookup(values, codes) * scale + x
        absmax = acc.abs().amax(1, keepdim=True)
        inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))
        codes_out.copy_(_search(acc * inv, lut, bpad, K))
        return absmax.view(-1)
    return _compile(fn)


@functools.cache
def _decode_into_fn(dtype: torch.dtype):
    def fn(codes, values, scale, out):
        return out.copy_((_lookup(values, codes) * scale).to(dtype))
    return torch.compile(fn, dynamic=True, options=_OPTIONS)


def call_compiled(make: Callable[[Any], Callable], key: Any, *args: Any, rows: tuple[int, ...] = ()) -> Any:
    """make(key)(*args), recompiles allowed (RECOMPILE_LIMIT) and the arguments at the indices `rows` with a dynamic
    leading dimension; raises what compilation raises."""
    _allow_recompiles()
    fn = make(key)
    _rows_dynamic(*(args[i] for i in rows))
    return fn(*args)


def try_compiled(make, key, *args, rows: tuple[int, ...] = (), returns: bool = False):
    """Run the compiled function make(key), or return None (and warn once) when compilation is
    unavailable or off; make() is not called then, so PARALAB_COMPILE=0 never imports torch._dynamo.
    The arguments at the indices `rows` have a dynamic leading dimension (`_compile`). returns=True
    (functions that write into their arguments): True once it ran, False where it did not."""
    global _compile_failed
    if _compile_failed or not compile_enabled():
        return False if returns else None
    try:
        out = call_compiled(make, key, *args, rows=rows)
    except Exception as e:  # a missing C++ compiler, an unsupported platform
        global _compile_error
        _compile_failed, _compile_error = True, f"{type(e).__name__}: {e}"
        warnings.warn(f"torch.compile unavailable ({type(e).__name__}: {e}); "
                      "table codecs use the slower eager path", RuntimeWarning, stacklevel=3)
        return False if returns else None
    if on_compiled_call is not None:
        on_compiled_call(make, key, args, rows, returns)
    return True if returns else out


def _fast(lut: torch.Tensor, K: int, packed: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    """(table, K) for the compiled passes: the packed table (K = 0 tells `_search`) when given."""
    return (packed, 0) if packed is not None else (lut, K)


def kernel_status() -> str:
    """'compiled', 'eager (PARALAB_COMPILE=0)' or 'eager (compile failed: <error>)': what the
    table codecs' CPU passes run as in this process now (benchmark rows say it)."""
    if not compile_enabled():
        return "eager (PARALAB_COMPILE=0)"
    return f"eager (compile failed: {_compile_error})" if _compile_failed else "compiled"


def encode_blocks(x2d: torch.Tensor, bounds: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor,
                  K: int, packed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Blockwise absmax + codes for a [blocks, block_size] view; returns (codes 2-D, absmax).
    Blocks whose 1/absmax overflows take the reference (`scale_to_unit`): the compiled pass
    multiplies by the inverse only. `packed`: `packed_table(lut, bpad, K)` where there is one."""
    if x2d.numel() >= MIN_COMPILED:
        tab, k = _fast(lut, K, packed)
        out = try_compiled(_encode_blocks_fn, k, x2d, tab, bpad, rows=(0,))
        if out is not None and not inverse_overflows(out[1]):
            return out
    return encode_blocks_reference(x2d, bounds)


def encode_blocks_into(x2d: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor, K: int,
                       packed: torch.Tensor | None, codes: torch.Tensor, absmax: torch.Tensor) -> bool:
    """`encode_blocks` written into codes [blocks, block_size] uint8 and absmax [blocks] float32
    (a payload buffer's fields: nothing of the codes' size is allocated; the pass returns the
    block scales, 1/block_size of that, and they are copied in: a compiled function may not write
    two of its inputs that share memory). False, with the outputs unspecified, where the compiled
    pass is unavailable or does not apply (too small, an overflowing inverse): then the caller
    encodes by the reference."""
    if x2d.numel() < MIN_COMPILED:
        return False
    tab, k = _fast(lut, K, packed)
    out = try_compiled(_encode_blocks_into_fn, k, x2d, tab, bpad, codes, rows=(0, 3))
    if out is None:
        return False
    absmax.copy_(out)
    return not inverse_overflows(absmax)


def encode_scaled_into(x: torch.Tensor, scale: torch.Tensor, lut: torch.Tensor, bpad: torch.Tensor, K: int,
                       packed: torch.Tensor | None, codes: torch.Tensor) -> bool:
    """`encode_scaled` written into `codes` (uint8, x's length); False where the compiled pass does
    not apply (the caller takes the reference)."""
    if x.numel() < MIN_COMPILED or inverse_overflows(scale):
        return False
    tab, k = _fast(lut, K, packed)
    return try_compiled(_encode_scaled_into_fn, k, x, inverse_scale(scale), tab, bpad, codes,
                        rows=(0, 4), returns=True)


def hop_blocks_into(codes: torch.Tensor, scale: torch.Tensor, values: torch.Tensor, x: torch.Tensor,
                    lut: torch.Tensor, bpad: torch.Tensor, K: int, packed: torch.Tensor | None,
                    codes_out: torch.Tensor, absmax_out: torch.Tensor) -> bool:
    """`hop_blocks` written into codes_out [rows, cols] and absmax_out [rows] (as `encode_blocks_into`);
    False where the compiled pass is unavailable or the input too small (the caller composes the
    reference). As `decode_into`, the pass reads `values` unchecked: uint8 codes into 256 entries only."""
    if codes.numel() < MIN_COMPILED or codes.dtype != torch.uint8 or values.numel() != 256:
        return False
    tab, k = _fast(lut, K, packed)
    out = try_compiled(_hop_blocks_into_fn, k, codes, scale, values, x, tab, bpad, codes_out, rows=(0, 1, 3, 6))
    if out is None:
        return False
    absmax_out.copy_(out)
    return True


def encode_scaled(x: torch.Tensor, scale: torch.Tensor, bounds: torch.Tensor, lut: torch.Tensor,
                  bpad: torch.Tensor, K: int, packed: torch.Tensor | None = None) -> torch.Tensor:
    """Codes of x scaled by `scale` (a 0-d float32 tensor: the absmax, or 1), as `scale_to_unit`."""
    if x.numel() >= MIN_COMPILED and not inverse_overflows(scale):
        tab, k = _fast(lut, K, packed)
        out = try_compiled(_encode_scaled_fn, k, x, inverse_scale(scale), tab, bpad, rows=(0,))
        if out is not None:
            return out
    return encode_scaled_reference(x, scale, bounds)


def decode_into(codes: torch.Tensor, values: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """out[...] = values[codes] * scale in out's dtype, in one pass (no temporary). The compiled pass reads the
    table unchecked, so it takes uint8 codes into a 256-entry table (`values256`) only."""
    if (codes.numel() >= MIN_COMPILED and codes.dtype == torch.uint8 and values.numel() == 256
            and try_compiled(_decode_into_fn, out.dtype, codes, values, scale, out) is not None):
        return
    out.copy_(decode_reference(codes, values, scale, out.dtype))


def hop_blocks(codes: torch.Tensor, scale: torch.Tensor, values: torch.Tensor, x: torch.Tensor, lut: torch.Tensor,
               bpad: torch.Tensor, K: int, packed: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One reduction hop in one pass per row of [rows, cols] views: codes and absmax of
    values[codes] * scale + x (float32), each row scaled by its own absmax. None when the compiled
    path is unavailable or the input is too small for it (the caller composes the reference)."""
    if codes.numel() < MIN_COMPILED or codes.dtype != torch.uint8 or values.numel() != 256:
        return None
    tab, k = _fast(lut, K, packed)
    return try_compiled(_hop_blocks_fn, k, codes, scale, values, x, tab, bpad, rows=(0, 1, 3))
