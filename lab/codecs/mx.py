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


def unpack_rows(packed: torch.Tensor, bits: int, nb: int) -> torch.Tensor:
    """`block_scaled.unpack_codes` of whole 32-value blocks as [nb, 32] codes, as reshapes
    torch.compile fuses into the pass that reads them."""
    if bits == 8:
        return packed.view(nb, MX_BLOCK)
    if bits == 4:
        p = packed.view(nb, MX_BLOCK // 2, 1)
        return torch.cat([p & 0xF, p >> 4], 2).view(nb, MX_BLOCK)
    p = packed.view(nb, MX_BLOCK // 4, 3).to(torch.int32)
    w = p[:, :, 0] | (p[:, :, 1] << 8) | (p[:, :, 2] << 16)
    return torch.stack([(w >> s) & 0x3F for s in (0, 6, 12, 18)], 2).to(torch.uint8).view(nb, MX_BLOCK)


def pack_lanes(code_of, x2d: torch.Tensor, bits: int) -> torch.Tensor:
    """pack_rows(codes of x2d, bits) computed lane by lane: code_of(x2d[:, i::per], i) gives the codes
    of the values packed together (per = 2 for 4 bits, 4 for 6), so a pass that writes only the
    packed bytes needs no materialised [blocks, width] codes (`code_of` is elementwise, with per-row
    broadcasts only)."""
    nb = x2d.shape[0]
    if bits == 8:
        return code_of(x2d, 0).reshape(-1)
    per = 2 if bits == 4 else 4
    g = x2d.view(nb, -1, per)
    c = [code_of(g[:, :, i], i).to(torch.int32) for i in range(per)]
    if bits == 4:
        return (c[0] | (c[1] << 4)).to(torch.uint8).reshape(-1)
    w = c[0] | (c[1] << 6) | (c[2] << 12) | (c[3] << 18)
    return torch.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], 2).to(torch.uint8).reshape(-1)


def own_code(fn: types.FunctionType, name: str) -> types.FunctionType:
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
    return torch.compile(own_code(fn, f"mx_encode_{key[0]}_{rule}_{dtype}"), dynamic=True)


@functools.cache
def _encode_mx_into_fn(key: tuple[str, str, torch.dtype]):
    """`_encode_mx_fn` writing the packed codes into `codes_out` (a wire buffer's field): returns
    the E8M0 scales (one byte per block; a compiled function may not write two of its inputs that
    share memory) and whether some block absmax is not finite."""
    fmt, rule = FORMATS[key[0]], key[1]

    def fn(x2d, codes_out):
        xf = x2d.float()
        amax = xf.abs().amax(1, keepdim=True)
        b = e8m0_bits(amax, fmt, rule)
        scale = torch.where(b > 0, b << 23, torch.full_like(b, 1 << 22)).view(torch.float32)
        if fmt.bits == 8:
            codes_out.copy_(round_elements_bits(xf / scale, fmt).reshape(-1))
        else:
            codes_out.copy_(pack_lanes(lambda v, _: round_elements_bits(v / scale, fmt), xf, fmt.bits))
        return b.view(-1).to(torch.uint8), (~torch.isfinite(amax)).any()

    dtype = str(key[2]).removeprefix("torch.")
    return torch.compile(own_code(fn, f"mx_encode_into_{key[0]}_{rule}_{dtype}"), dynamic=True)


@functools.cache
def _decode_mx_into_fn(name: str):
    """The fused (torch.compile) MX decode of whole blocks into a float32 `out2d` [blocks, 32]:
    unpacking, value lookup and the E8M0 scale in one pass. value · 2^k is one float32 rounding
    of the exact product (as `block_scaled.decode_blocks`), an overflow clamped to float32's
    largest; one graph per element format, dynamic shapes."""
    bits = FORMATS[name].bits

    def fn(packed, scales, values, e8m0, out2d):
        decode_mx_into(packed, scales, values, e8m0, out2d, bits)

    return torch.compile(own_code(fn, f"mx_decode_into_{name}"), dynamic=True)


_F32_MAX = torch.finfo(torch.float32).max


def decode_mx_into(packed: torch.Tensor, scales: torch.Tensor, values: torch.Tensor, e8m0: torch.Tensor,
                   out2d: torch.Tensor, bits: int) -> None:
    """out2d[b, i] = values[code b, i] * e8m0[scales[b]], saturated to float32's range: the body
    `_decode_mx_into_fn` compiles (codes packed `bits` to a code, whole 32-value blocks)."""
    nb = out2d.shape[0]
    codes = unpack_rows(packed, bits, nb)
    v = values[codes.to(torch.int32)] * e8m0[scales.to(torch.int32)].view(nb, 1)
    out2d.copy_(v.clamp(-_F32_MAX, _F32_MAX))


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

    def encode_into(self, x: torch.Tensor, out: dict[str, torch.Tensor]) -> Encoded | None:
        """`encode(x)` written into the payload fields `out` (codes and scales: views into a reused
        wire buffer, `WireFormat.encode_into`), bit for bit `encode`, allocating only the scale
        bytes (1/32 of a byte per value). None where this path does not apply (not float32 on the
        CPU, too few values for the compiled pass, a non-finite value): the caller then encodes."""
        if (not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.device.type != "cpu"
                or on_kernel_device(x) or not x.is_contiguous()):
            return None
        flat, codes, scales = x.view(-1), out["codes"], out["scales"]
        n = flat.numel()
        main = n - n % MX_BLOCK
        if main < cpu.MIN_COMPILED:
            return None
        if codes.numel() != packed_bytes(n, self.bits) or scales.numel() != -(-n // MX_BLOCK):
            raise ValueError(f"encode_into: {n} values need codes[{packed_bytes(n, self.bits)}] and "
                             f"scales[{-(-n // MX_BLOCK)}]; got codes[{codes.numel()}], scales[{scales.numel()}]")
        cb = main * self.bits // 8
        got = cpu.try_compiled(_encode_mx_into_fn, (self.fmt.name, self.scale_rule, flat.dtype),
                               flat[:main].view(-1, MX_BLOCK), codes[:cb])
        if got is None or bool(got[1]):
            return None
        scales[: main // MX_BLOCK].copy_(got[0])
        if main < n:
            tc, ts, tamax = self._encode_reference(flat[main:])
            if not bool(torch.isfinite(tamax).all()):
                return None
            codes[cb:].copy_(tc)
            scales[main // MX_BLOCK:].copy_(ts)
        return self.payload(x, {"codes": codes, "scales": scales},
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
        """Decode straight into `flat`: the CUDA kernel (kernels/block_scaled.cu), or on the CPU,
        for float32, the fused pass (`_decode_mx_into_fn`) over the whole blocks; False elsewhere
        (then decode_into decodes and copies)."""
        codes = enc.tensors["codes"]
        if enc.numel == 0:
            return False
        if not on_kernel_device(codes):
            return self._decode_flat_cpu(enc, flat)
        dev = codes.device
        block_decode_cuda(codes, value_table(self.fmt, dev), enc.tensors["scales"], e8m0_table(dev), None,
                          n=enc.numel, block=MX_BLOCK, bits=self.bits, dtype=enc.dtype, out=flat)
        return True


    def _decode_flat_cpu(self, enc: Encoded, flat: torch.Tensor) -> bool:
        n, codes, scales = enc.numel, enc.tensors["codes"], enc.tensors["scales"]
        main = n - n % MX_BLOCK
        if codes.device.type != "cpu" or flat.dtype != torch.float32 or main < cpu.MIN_COMPILED:
            return False
        nb, cb = main // MX_BLOCK, main * self.bits // 8
        if not cpu.try_compiled(_decode_mx_into_fn, self.fmt.name, codes[:cb], scales[:nb], value_table(self.fmt),
                                e8m0_table(), flat[:main].view(nb, MX_BLOCK), returns=True):
            return False
        if main < n:
            tail = unpack_codes(codes[cb:], self.bits, n - main)
            flat[main:].copy_(decode_blocks(tail, self.fmt, e8m0_value(scales[nb:]), MX_BLOCK, torch.float32))
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
