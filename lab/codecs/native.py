"""Hardware number formats as codecs: fp32 (identity), fp16, bf16, fp8 (e4m3fn, e5m2), int8.

fp8 follows Micikevicius et al. 2022 (arXiv:2209.05433): scale the tensor so its absmax maps to
the format's largest finite value, clamp (eager casts do not saturate in every torch version),
then cast. int8 is symmetric absmax quantization to -127..127 (round half to even).
Both scale by dividing by the absmax (x / absmax, |.| <= 1), so a subnormal absmax, whose
inverse overflows float32, still codes 0 as 0 and every value within the format's step.

Out-of-range values (the rule of every unscaled codec, see `base.saturating_cast`): a finite
value beyond the wire format's largest finite value saturates to it, and `meta['saturated']`
counts those values; decode saturates to the output dtype's range in the same way (a bf16 wire
value of 65536 decodes to fp16 65504, not inf). Scaled formats (fp8, int8) never saturate.
"""
from __future__ import annotations

import torch

from .base import Codec, Encoded, Field, Layout, prepare, saturating_cast, check_input, finite_or_saturated
from .registry import CodecInfo, OptionSpec, WorkModel, check_nonfinite, nonfinite_option, register, seed_option

FP8 = {
    "fp8_e4m3": (torch.float8_e4m3fn, 448.0),
    "fp8_e5m2": (torch.float8_e5m2, 57344.0),
}


def _absmax(flat: torch.Tensor) -> torch.Tensor:
    """max |flat| as a 1-element float32 tensor (0 for an empty tensor)."""
    return (flat.abs().amax() if flat.numel() else flat.new_zeros((), dtype=torch.float32)).float().reshape(1)


def _unit(flat: torch.Tensor, absmax: torch.Tensor) -> torch.Tensor:
    """flat / absmax in float32 (|.| <= 1), 0 where absmax is 0."""
    return flat.float() / torch.where(absmax > 0, absmax, torch.ones_like(absmax))


class CastCodec(Codec):
    """A plain cast to a 16- or 32-bit float format; out-of-range values saturate to the format's
    largest finite value and are counted in `meta['saturated']`."""

    summable = True
    requantize = True
    FORMATS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

    def __init__(self, fmt: str = "fp16", *, nonfinite: str = "raise") -> None:
        if fmt not in self.FORMATS:
            raise ValueError(f"format {fmt!r}; allowed: {', '.join(self.FORMATS)}")
        check_nonfinite(nonfinite)
        self.name, self.wire_dtype, self.nonfinite = fmt, self.FORMATS[fmt], nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        flat, absmax = finite_or_saturated(check_input(x, nonfinite=self.nonfinite), self.nonfinite)
        y, saturated = saturating_cast(flat, self.wire_dtype, absmax)
        return self.payload(x, {"values": y}, y.numel() * y.element_size(), {"saturated": saturated})

    def layout(self, n: int) -> Layout:
        """n values of the cast's format."""
        return (Field("values", self.wire_dtype, (n,)),)

    def decode(self, enc: Encoded) -> torch.Tensor:
        v = enc.tensors["values"]
        if torch.finfo(v.dtype).max > torch.finfo(enc.dtype).max:  # bf16/fp32 wire, fp16 out: saturate
            big = torch.finfo(enc.dtype).max
            v = v.float().clamp(-big, big)
        return v.to(enc.dtype).view(enc.shape)


class Fp8Codec(Codec):
    """Per-tensor scaled fp8: x / absmax · fmt_max, clamped, cast; one float32 scale (the absmax).
    Wire: one byte per value + 4 bytes (0 bytes for an empty tensor)."""

    requantize = True

    def __init__(self, fmt: str = "fp8_e4m3", *, nonfinite: str = "raise") -> None:
        if fmt not in FP8:
            raise ValueError(f"format {fmt!r}; allowed: {', '.join(FP8)}")
        check_nonfinite(nonfinite)
        self.name, self.nonfinite = fmt, nonfinite
        self.wire_dtype, self.fmax = FP8[fmt]

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite)
        absmax = _absmax(flat)
        y = (_unit(flat, absmax) * self.fmax).clamp(-self.fmax, self.fmax).to(self.wire_dtype)
        n = y.numel()
        return self.payload(x, {"values": y, "scales": absmax}, n + 4 if n else 0)

    def layout(self, n: int) -> Layout:
        """n fp8 values and one float32 scale (the absmax)."""
        return (Field("values", self.wire_dtype, (n,)), Field("scales", torch.float32, (1,)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        t = enc.tensors
        return ((t["values"].float() / self.fmax) * t["scales"]).to(enc.dtype).view(enc.shape)


class Int8Codec(Codec):
    """Symmetric absmax int8: round(x / absmax · 127), one float32 scale (the absmax) per tensor.
    Wire: one byte per value + 4 bytes (0 bytes for an empty tensor)."""

    name = "int8"
    requantize = True

    def __init__(self, *, nonfinite: str = "raise") -> None:
        check_nonfinite(nonfinite)
        self.nonfinite = nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite)
        absmax = _absmax(flat)
        q = torch.round(_unit(flat, absmax) * 127.0).clamp(-127, 127).to(torch.int8)
        n = q.numel()
        return self.payload(x, {"codes": q, "scales": absmax}, n + 4 if n else 0)

    def layout(self, n: int) -> Layout:
        """n int8 codes and one float32 scale (the absmax)."""
        return (Field("codes", torch.int8, (n,)), Field("scales", torch.float32, (1,)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        t = enc.tensors
        return ((t["codes"].float() / 127.0) * t["scales"]).to(enc.dtype).view(enc.shape)


_NATIVE = (nonfinite_option(),)
# casts: one kernel each way; fp32 is uncompressed (the planner treats it as no codec)
for _fmt in CastCodec.FORMATS:
    register(CodecInfo(_fmt, f"{_fmt} cast (summable); beyond the format's range saturates (counted)",
                       lambda _f=_fmt, **kw: CastCodec(_f, **kw), _NATIVE,
                       work=WorkModel(0.0, 1, 1, raw=_fmt == "fp32")))
for _fmt in FP8:
    register(CodecInfo(_fmt, f"{_fmt} with a per-tensor scale to the format's maximum",
                       lambda _f=_fmt, **kw: Fp8Codec(_f, **kw), _NATIVE))
register(CodecInfo("int8", "symmetric absmax int8 (-127..127)", lambda **kw: Int8Codec(**kw), _NATIVE))
