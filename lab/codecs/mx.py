"""OCP Microscaling (MX) v1.0 formats as codecs: MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3),
MXFP4 (E2M1) and MXINT8; blocks of 32 elements share one E8M0 scale (spec §5, §6.3).

Wire: the element codes packed to their width (FP6 four values in three bytes, FP4 two to a byte)
plus one byte of scale per block: 8.25, 6.25 and 4.25 bits per value. A tail block shorter than
32 is coded like a full one whose missing values are 0.
"""
from __future__ import annotations

import functools
import types
from typing import Any

import torch

from . import cpu
from .base import Codec, Encoded, Field, Layout, check_input, nonfinite_error, packed_bytes, saturate_nonfinite
from .registry import CodecInfo, OptionSpec, WorkModel, nonfinite_option, register
from .block_scaled import (E8M0_BIAS, FORMATS, SCALE_RULES, ElementFormat, blocks, decode_blocks, e8m0_exponent, e8m0_table,
                           e8m0_value, pack_codes, round_elements, unpack_codes, value_table)
from .cuda_block import block_decode_cuda, mx_encode_cuda, on_kernel_device

MX_BLOCK = 32
MX_NAMES = {"mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2", "mxfp6_e3m2": "e3m2", "mxfp6_e2m3": "e2m3",
            "mxfp4_e2m1": "e2m1", "mxint8": "int8"}


def encode_mx_reference(x2d: torch.Tensor, fmt: ElementFormat, rule: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(element codes [blocks, 32] uint8, biased E8M0 scales uint8) of a float32 [blocks, 32] view:
    elements = RNE(v / X), saturated (plain torch ops)."""
    amax = x2d.abs().amax(1)
    scale = e8m0_exponent(amax, fmt, rule)
    return round_elements(x2d / e8m0_value(scale)[:, None], fmt), scale


def e8m0_bits(amax: torch.Tensor, fmt: ElementFormat, rule: str) -> torch.Tensor:
    """`block_scaled.e8m0_exponent` (int32, biased) from bit operations only, for the fused path:
    floor reads amax's exponent field; rceil takes ceil(log2(amax / max_normal)) from the quotient's
    exponent field and whether its fraction is zero (a subnormal quotient normalised by 2^64)."""
    if rule == "floor":
        unbiased = ((amax.view(torch.int32) >> 23) & 0xFF) - E8M0_BIAS - fmt.emax
    else:
        d = amax / fmt.max_normal
        bits = d.view(torch.int32)
        frac = bits & 0x7FFFFF
        sub = (bits >> 23) == 0
        norm = torch.where(sub, (d * 2.0 ** 64).view(torch.int32), bits)
        floor_log2 = (norm >> 23) - 127 - sub.to(torch.int32) * 64
        pow2 = torch.where(sub, (frac & (frac - 1)) == 0, frac == 0)
        unbiased = torch.where(d > 0, floor_log2 + (~pow2).to(torch.int32), -E8M0_BIAS)
    return unbiased.clamp(-E8M0_BIAS, E8M0_BIAS) + E8M0_BIAS


def round_elements_bits(a: torch.Tensor, fmt: ElementFormat, noise: torch.Tensor | None = None) -> torch.Tensor:
    """`block_scaled.round_elements` (round to nearest even, saturating) from float and bit
    operations that torch.compile fuses: e = max(exponent field - 127, 1 - bias) (a subnormal or
    zero |a| clamps to 1 - bias either way), q = |a| · 2^(mbits - e) (exact), code =
    ((e + bias - 1) << mbits) + round(q) with the sign in the top bit (with `noise`: floor(q + noise),
    stochastic rounding). MXINT8: round(a · 64)."""
    if fmt.is_int and noise is None:
        return (torch.round(a * 64.0).clamp(-127, 127).to(torch.int32) & 0xFF).to(torch.uint8)
    if fmt.is_int:
        raise ValueError("stochastic rounding of MXINT8 is not offered")
    if fmt.torch_dtype is not None and noise is None:
        return a.clamp(-fmt.max_normal, fmt.max_normal).to(fmt.torch_dtype).view(torch.uint8)
    mag = a.abs().clamp(max=fmt.max_normal)
    e = ((mag.view(torch.int32) >> 23) - 127).clamp(min=1 - fmt.bias)
    q = mag * ((fmt.mbits - e + 127) << 23).view(torch.float32)
    r = torch.round(q) if noise is None else torch.floor(q + noise)
    code = ((e + (fmt.bias - 1)) << fmt.mbits) + r.to(torch.int32)
    code = code | (((a.view(torch.int32) >> 31) & 1) << (fmt.bits - 1))
    return code.to(torch.uint8)


def pack_rows(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """`block_scaled.pack_codes` of whole [blocks, 32] rows, as reshapes torch.compile fuses."""
    if bits == 8:
        return codes.reshape(-1)
    if bits == 4:
        c = codes.reshape(-1, 2)
        return (c[:, 0] | (c[:, 1] << 4)).reshape(-1)
    c = codes.reshape(-1, 4).to(torch.int32)
    w = c[:, 0] | (c[:, 1] << 6) | (c[:, 2] << 12) | (c[:, 3] << 18)
    return torch.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], 1).to(torch.uint8).reshape(-1)


def _own_code(fn: types.FunctionType, name: str) -> types.FunctionType:
    """`fn` with a code object of its own. torch.compile keeps its graphs, and counts recompiles
    against torch._dynamo.config.recompile_limit (8), per code object, and every closure made by one
    `def` shares one: the 6 formats x 2 scale rules x 3 input dtypes of `_encode_mx_fn` would
    recompile one code object past the limit, after which dynamo silently runs it eagerly."""
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)


@functools.cache
def _encode_mx_fn(key: tuple[str, str, torch.dtype]):
    """The fused (torch.compile) MX encode of whole blocks of one (element format, scale rule, input
    dtype): absmax, E8M0 scale, division by the power of two, rounding and packing in one pass over
    the input. One graph each, with dynamic shapes: any number of blocks runs without recompiling."""
    fmt, rule = FORMATS[key[0]], key[1]

    def fn(x2d):
        xf = x2d.float()
        amax = xf.abs().amax(1, keepdim=True)
        b = e8m0_bits(amax, fmt, rule)
        scale = torch.where(b > 0, b << 23, torch.full_like(b, 1 << 22)).view(torch.float32)  # b = 0: 2^-127
        codes = round_elements_bits(xf / scale, fmt)
        # the unpacked codes are returned too: an output is materialised, so the packing reads
        # bytes instead of recomputing every code through strided gathers (10x faster on CPU)
        out = (pack_rows(codes, fmt.bits), b.view(-1).to(torch.uint8), amax.view(-1))
        return out + (codes,) if fmt.bits < 8 else out

    dtype = str(key[2]).removeprefix("torch.")
    return torch.compile(_own_code(fn, f"mx_encode_{key[0]}_{rule}_{dtype}"), dynamic=True)


@functools.cache
def _decode_mx_fn(key: str):
    """The fused (torch.compile) CPU decode of whole blocks of 8-bit codes into float32: one pass,
    values[code] * 2^(scale - 127) saturated to float32's range, written into `out`. Equal to
    `decode_blocks` bit for bit: the product of an element value (at most 4 significant bits) and a
    power of two is rounded once by the float32 multiply, as by the float64 product's one rounding;
    a product past float32's range saturates as there; a NaN scale makes its block NaN."""
    return torch.compile(_own_code(decode_mx_blocks, f"mx_decode_{key}_float32"), dynamic=True)


_F32_MAX = torch.finfo(torch.float32).max


def decode_mx_blocks(codes2d: torch.Tensor, scales: torch.Tensor, values: torch.Tensor, e8m0: torch.Tensor,
                     out2d: torch.Tensor) -> torch.Tensor:
    """out2d[b, i] = values[codes2d[b, i]] * e8m0[scales[b]], saturated to float32's range: the body
    `_decode_mx_fn` compiles (8-bit codes [blocks, 32], biased E8M0 scales [blocks], float32 tables)."""
    v = values[codes2d.int()] * e8m0[scales.int()][:, None]
    return out2d.copy_(v.clamp(-_F32_MAX, _F32_MAX))


@functools.cache
def _cpu_tables(element: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(value_table, e8m0_table) of one element format on the CPU, built once."""
    return value_table(FORMATS[element]), e8m0_table(torch.device("cpu"))


class MXCodec(Codec):
    """One OCP MX format: element type `element` (a key of block_scaled.FORMATS), 32-value blocks.

    scale_rule: 'floor' (the OCP spec's: X = 2^(floor(log2 amax) - emax), the block's largest
    values may saturate) or 'rceil' (X = 2^ceil(log2(amax / max_normal)), nothing saturates).
    nonfinite: 'raise' (ValueError naming the count and first index) or 'saturate'.
    """

    summable = False
    requantize = True

    def __init__(self, element: str, *, scale_rule: str = "floor", nonfinite: str = "raise",
                 name: str | None = None) -> None:
        if element not in FORMATS:
            raise ValueError(f"element={element!r}; allowed: {', '.join(FORMATS)}")
        if scale_rule not in SCALE_RULES:
            raise ValueError(f"scale_rule={scale_rule!r}; allowed: 'floor' (OCP MX v1.0 §6.3, the default), "
                             "'rceil' (scale rounded up, nothing saturates)")
        if nonfinite not in ("raise", "saturate"):
            raise ValueError(f"nonfinite={nonfinite!r}; allowed: 'raise', 'saturate'")
        self.fmt, self.scale_rule, self.nonfinite = FORMATS[element], scale_rule, nonfinite
        self.name = name or next((k for k, v in MX_NAMES.items() if v == element), f"mx_{element}")
        self.block_size = MX_BLOCK

    @property
    def bits(self) -> int:
        return self.fmt.bits

    def describe(self) -> str:
        return self.name if self.scale_rule == "floor" else f"{self.name}[{self.scale_rule}]"

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = check_input(x, nonfinite=self.nonfinite)
        n = flat.numel()
        if n == 0:
            z = flat.new_zeros(0, dtype=torch.uint8)
            return self.payload(x, {"codes": z, "scales": z}, 0, {"block_size": MX_BLOCK})
        if on_kernel_device(flat):  # kernels/block_scaled.cu, packed in the kernel
            packed, scales, bad = mx_encode_cuda(flat, self.fmt, self.scale_rule)
            if bad:
                if self.nonfinite == "raise":
                    raise nonfinite_error(flat)
                packed, scales, _ = mx_encode_cuda(saturate_nonfinite(flat), self.fmt, self.scale_rule)
            return self.payload(x, {"codes": packed, "scales": scales},
                                 packed_bytes(n, self.bits) + scales.numel(), {"block_size": MX_BLOCK})
        packed, scales, amax = self._encode_packed(flat)
        if not bool(torch.isfinite(amax).all()):
            if self.nonfinite == "raise":
                raise nonfinite_error(flat)
            packed, scales, _ = self._encode_packed(saturate_nonfinite(flat))
        return self.payload(x, {"codes": packed, "scales": scales},
                             packed_bytes(n, self.bits) + scales.numel(), {"block_size": MX_BLOCK})

    def layout(self, n: int) -> Layout:
        """codes packed little-endian to `bits` (ceil(n·bits/8) bytes) and one E8M0 scale byte per
        block of 32 (OCP MX v1.0 §5)."""
        return (Field("codes", torch.uint8, (packed_bytes(n, self.bits),)),
                Field("scales", torch.uint8, (-(-n // MX_BLOCK),)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"block_size": MX_BLOCK}

    def _encode_packed(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(packed codes, E8M0 scales, block absmax) on the CPU path: the whole blocks through the
        fused torch.compile pass when there are enough of them, the tail block (and small inputs)
        through the plain-torch reference. Packing is sequential, so the two packed parts concatenate."""
        n = flat.numel()
        main = n - n % MX_BLOCK
        if not flat.is_cuda and main >= cpu.MIN_COMPILED:
            out = cpu.try_compiled(_encode_mx_fn, (self.fmt.name, self.scale_rule, flat.dtype),
                                   flat[:main].view(-1, MX_BLOCK))
            if out is not None:
                out = out[:3]
                if main == n:
                    return out
                tail = self._encode_reference(flat[main:])
                return tuple(torch.cat([a, b]) for a, b in zip(out, tail))  # type: ignore[return-value]
        return self._encode_reference(flat)

    def _encode_reference(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x2d, n = blocks(flat, MX_BLOCK)
        codes, scales = encode_mx_reference(x2d, self.fmt, self.scale_rule)
        return pack_codes(codes.reshape(-1)[:n], self.bits), scales, x2d.abs().amax(1)

    def decode(self, enc: Encoded) -> torch.Tensor:
        n = enc.numel
        if n == 0:
            return torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
        if on_kernel_device(enc.tensors["codes"]):
            out = torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
            self._decode_flat(enc, out.view(-1))
            return out
        codes = unpack_codes(enc.tensors["codes"], self.bits, n)
        y = decode_blocks(codes, self.fmt, e8m0_value(enc.tensors["scales"]), MX_BLOCK, enc.dtype)
        return y.view(enc.shape)


    def _decode_flat(self, enc: Encoded, flat: torch.Tensor) -> bool:
        """The CUDA decode (kernels/block_scaled.cu) straight into `flat`; on the CPU, 8-bit elements
        into float32 through the fused compiled pass (whole blocks; the tail block by the reference);
        False otherwise (decode_into then copies `decode`'s result)."""
        codes = enc.tensors["codes"]
        if enc.numel == 0:
            return False
        if not on_kernel_device(codes):
            return self._decode_cpu(enc, flat)
        dev = codes.device
        block_decode_cuda(codes, value_table(self.fmt, dev), enc.tensors["scales"], e8m0_table(dev), None,
                          n=enc.numel, block=MX_BLOCK, bits=self.bits, dtype=enc.dtype, out=flat)
        return True


    def _decode_cpu(self, enc: Encoded, flat: torch.Tensor) -> bool:
        n = enc.numel
        main = n - n % MX_BLOCK
        if self.bits != 8 or enc.dtype != torch.float32 or flat.is_cuda or main < cpu.MIN_COMPILED:
            return False
        codes, scales = enc.tensors["codes"], enc.tensors["scales"]
        values, e8m0 = _cpu_tables(self.fmt.name)
        nb = main // MX_BLOCK
        if cpu.try_compiled(_decode_mx_fn, self.fmt.name, codes[:main].view(nb, MX_BLOCK), scales[:nb], values,
                            e8m0, flat[:main].view(nb, MX_BLOCK), rows=(0, 1, 4)) is None:
            return False
        if main < n:
            tail = decode_blocks(codes[main:n], self.fmt, e8m0_value(scales[nb:]), MX_BLOCK, torch.float32)
            flat[main:].copy_(tail)
        return True


def _factory(element: str):
    def make(**kw: Any) -> Codec:
        return MXCodec(element, **kw)
    return make


_SCALE_RULE = OptionSpec("scale_rule", str, "floor", SCALE_RULES,
                         help="'floor': the OCP MX v1.0 spec's X = 2^(floor(log2 amax) - emax), the block's "
                              "largest values may saturate; 'rceil': the scale rounded up, nothing saturates")

for _name, _el in MX_NAMES.items():
    _f = FORMATS[_el]
    register(CodecInfo(_name, f"OCP MX v1.0 {_name}: 32-value blocks of {_el} with an E8M0 scale, "
                              f"{_f.bits + 8 / MX_BLOCK:g} bits/value", _factory(_el),
                       (_SCALE_RULE, nonfinite_option()), work=WorkModel(extra_encode_bytes=4.0)))
