"""Hardware number formats as codecs: fp32 (identity), fp16, bf16, fp8 (e4m3fn, e5m2), int8.

fp8 follows Micikevicius et al. 2022 (arXiv:2209.05433): scale the tensor so its absmax maps to
the format's largest finite value, clamp (eager casts do not saturate in every torch version),
then cast. int8 is symmetric absmax quantization to -127..127 (round half to even).
"""
from __future__ import annotations

import torch

from .base import Codec, Encoded, prepare

FP8 = {
    "fp8_e4m3": (torch.float8_e4m3fn, 448.0),
    "fp8_e5m2": (torch.float8_e5m2, 57344.0),
}


class CastCodec(Codec):
    """A plain cast to a 16- or 32-bit float format; overflow saturates to the format's max."""

    summable = True
    requantize = True
    FORMATS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

    def __init__(self, fmt: str = "fp16", *, nonfinite: str = "raise") -> None:
        if fmt not in self.FORMATS:
            raise ValueError(f"format {fmt!r}; allowed: {', '.join(self.FORMATS)}")
        self.name, self.wire_dtype, self.nonfinite = fmt, self.FORMATS[fmt], nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite)
        big = torch.finfo(self.wire_dtype).max
        y = flat.float().clamp(-big, big).to(self.wire_dtype) if self.wire_dtype != flat.dtype else flat.clone()
        return Encoded(self.name, x.shape, x.dtype, {"values": y}, y.numel() * y.element_size())

    def decode(self, enc: Encoded) -> torch.Tensor:
        return enc.tensors["values"].to(enc.dtype).view(enc.shape)


class Fp8Codec(Codec):
    """Per-tensor scaled fp8: x / (absmax / fmt_max), clamped, cast; one float32 scale."""

    requantize = True

    def __init__(self, fmt: str = "fp8_e4m3", *, nonfinite: str = "raise") -> None:
        if fmt not in FP8:
            raise ValueError(f"format {fmt!r}; allowed: {', '.join(FP8)}")
        self.name, self.nonfinite = fmt, nonfinite
        self.wire_dtype, self.fmax = FP8[fmt]

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite).float()
        absmax = flat.abs().amax() if flat.numel() else flat.new_zeros(())
        scale = torch.where(absmax > 0, absmax / self.fmax, torch.ones_like(absmax)).reshape(1)
        y = (flat / scale).clamp(-self.fmax, self.fmax).to(self.wire_dtype)
        return Encoded(self.name, x.shape, x.dtype, {"values": y, "scales": scale}, y.numel() + 4)

    def decode(self, enc: Encoded) -> torch.Tensor:
        t = enc.tensors
        return (t["values"].float() * t["scales"]).to(enc.dtype).view(enc.shape)


class Int8Codec(Codec):
    """Symmetric absmax int8: round(x * 127 / absmax), one float32 scale per tensor."""

    name = "int8"
    requantize = True

    def __init__(self, *, nonfinite: str = "raise") -> None:
        self.nonfinite = nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite).float()
        absmax = (flat.abs().amax() if flat.numel() else flat.new_zeros(())).reshape(1)
        inv = torch.where(absmax > 0, 127.0 / absmax, torch.zeros_like(absmax))
        q = torch.round(flat * inv).clamp(-127, 127).to(torch.int8)
        return Encoded(self.name, x.shape, x.dtype, {"codes": q, "scales": absmax}, q.numel() + 4)

    def decode(self, enc: Encoded) -> torch.Tensor:
        t = enc.tensors
        return (t["codes"].float() * (t["scales"] / 127.0)).to(enc.dtype).view(enc.shape)
