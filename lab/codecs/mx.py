"""OCP Microscaling (MX) v1.0 formats as codecs: MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3),
MXFP4 (E2M1) and MXINT8; blocks of 32 elements share one E8M0 scale (spec §5, §6.3).

Wire: the element codes packed to their width (FP6 four values in three bytes, FP4 two to a byte)
plus one byte of scale per block: 8.25, 6.25 and 4.25 bits per value. A tail block shorter than
32 is coded like a full one whose missing values are 0.
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from . import cpu
from .base import Codec, Encoded, Field, Layout, check_input, nonfinite_error, packed_bytes, saturate_nonfinite
from .registry import CodecInfo, OptionSpec, WorkModel, nonfinite_option, register
from .block_scaled import (FORMATS, SCALE_RULES, ElementFormat, blocks, decode_blocks, e8m0_exponent, e8m0_table,
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


@functools.cache
def _encode_fp8_fn(name: str):
    """The fused (torch.compile) MXFP8 encode for the 'floor' rule: absmax, exponent-field scale,
    division by the power of two, clamp and cast in one pass."""
    fmt = FORMATS[name]

    def fn(x2d):
        xf = x2d.float()
        amax = xf.abs().amax(1, keepdim=True)
        field = (amax.view(torch.int32) >> 23) & 0xFF
        b = (field - 127 - fmt.emax).clamp(-127, 127) + 127
        bits = torch.where(b > 0, b << 23, torch.full_like(b, 1 << 22))  # b == 0: 2^-127, subnormal
        a = xf / bits.view(torch.float32)
        codes = a.clamp(-fmt.max_normal, fmt.max_normal).to(fmt.torch_dtype).view(torch.uint8)
        return codes, b.view(-1).to(torch.uint8), amax.view(-1)

    return torch.compile(fn, dynamic=True)


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
            return self._payload(x, {"codes": z, "scales": z}, 0, {"block_size": MX_BLOCK})
        if on_kernel_device(flat):  # kernels/block_scaled.cu, packed in the kernel
            packed, scales, bad = mx_encode_cuda(flat, self.fmt, self.scale_rule)
            if bad:
                if self.nonfinite == "raise":
                    raise nonfinite_error(flat)
                packed, scales, _ = mx_encode_cuda(saturate_nonfinite(flat), self.fmt, self.scale_rule)
            return self._payload(x, {"codes": packed, "scales": scales},
                                 packed_bytes(n, self.bits) + scales.numel(), {"block_size": MX_BLOCK})
        codes, scales, amax = self._encode_flat(flat)
        if not bool(torch.isfinite(amax).all()):
            if self.nonfinite == "raise":
                raise nonfinite_error(flat)
            codes, scales, _ = self._encode_flat(saturate_nonfinite(flat))
        packed = pack_codes(codes.reshape(-1)[:n], self.bits)
        return self._payload(x, {"codes": packed, "scales": scales},
                             packed_bytes(n, self.bits) + scales.numel(), {"block_size": MX_BLOCK})

    def layout(self, n: int) -> Layout:
        """codes packed little-endian to `bits` (ceil(n·bits/8) bytes) and one E8M0 scale byte per
        block of 32 (OCP MX v1.0 §5)."""
        return (Field("codes", torch.uint8, (packed_bytes(n, self.bits),)),
                Field("scales", torch.uint8, (-(-n // MX_BLOCK),)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"block_size": MX_BLOCK}

    def _encode_flat(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = flat.numel()
        if (self.fmt.torch_dtype is not None and self.scale_rule == "floor" and not flat.is_cuda
                and n % MX_BLOCK == 0 and n >= cpu.MIN_COMPILED):
            out = cpu._try_compiled(_encode_fp8_fn, self.fmt.name, flat.view(-1, MX_BLOCK))
            if out is not None:
                return out
        x2d, _ = blocks(flat, MX_BLOCK)
        codes, scales = encode_mx_reference(x2d, self.fmt, self.scale_rule)
        return codes, scales, x2d.abs().amax(1)

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
        """The CUDA decode (kernels/block_scaled.cu) straight into `flat`; False on the CPU path."""
        codes = enc.tensors["codes"]
        if enc.numel == 0 or not on_kernel_device(codes):
            return False
        dev = codes.device
        block_decode_cuda(codes, value_table(self.fmt, dev), enc.tensors["scales"], e8m0_table(dev), None,
                          n=enc.numel, block=MX_BLOCK, bits=self.bits, dtype=enc.dtype, out=flat)
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
