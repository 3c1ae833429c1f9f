"""NVFP4 as a codec: 16-value blocks of FP4 E2M1 with an FP8 E4M3 block scale and one fp32
tensor scale (NVIDIA Blackwell NVFP4; two-level recipe as torchao's nvfp4_quantize).

tensor scale s = amax / (448 · 6); block scale = RNE_E4M3(clamp(block_amax / 6 / s, 2^-6, 448));
elements = RNE_E2M1(clamp(x · ((1 / s) / block_scale), ±6)), or stochastic rounding (seeded) as
training recipes use for gradients. Wire: 4 bits per value + 1 byte per block + 4 bytes:
4.5 bits per value. An all-zero tensor has s = 0 and decodes to zeros; a tensor whose s would
fall below 2^-120 (amax under about 2^-108.6) uses s = 2^-120, so (1/s) / block scale stays finite
(torchao's formula gives Inf there, and NaN for zeros).
"""
from __future__ import annotations

from typing import Any

import torch

from .base import (Codec, Encoded, Field, Layout, SeededGenerator, check_input, check_seed, nonfinite_error, packed_bytes,
                   saturate_nonfinite)
from .registry import CodecInfo, OptionSpec, WorkModel, nonfinite_option, register, seed_option
from .block_scaled import FORMATS, blocks, decode_blocks, pack_codes, round_elements, unpack_codes

NV_BLOCK = 16
E2M1 = FORMATS["e2m1"]
E4M3_MAX = 448.0
E4M3_TINY = 2.0 ** -6  # torch.finfo(float8_e4m3fn).tiny: the smallest block scale (torchao's E4M3_EPS)
MIN_TENSOR_SCALE = 2.0 ** -120  # (1 / s) / 2^-6 stays below float32's 2^128


class NVFP4Codec(SeededGenerator, Codec):
    """NVFP4: rounding 'nearest' (RNE, the default) or 'stochastic' (seeded by `seed`)."""

    name = "nvfp4"
    summable = False
    requantize = True

    def __init__(self, *, rounding: str = "nearest", seed: int = 0, nonfinite: str = "raise") -> None:
        if rounding not in ("nearest", "stochastic"):
            raise ValueError(f"rounding={rounding!r}; allowed: 'nearest', 'stochastic'")
        if nonfinite not in ("raise", "saturate"):
            raise ValueError(f"nonfinite={nonfinite!r}; allowed: 'raise', 'saturate'")
        self.rounding, self.seed, self.nonfinite = rounding, check_seed(seed), nonfinite
        self.block_size = NV_BLOCK
        self.stochastic = rounding == "stochastic"

    def describe(self) -> str:
        return "nvfp4" if self.rounding == "nearest" else f"nvfp4[stochastic,seed={self.seed}]"

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = check_input(x, nonfinite=self.nonfinite)
        n = flat.numel()
        meta = {"block_size": NV_BLOCK}
        if n == 0:
            z = flat.new_zeros(0, dtype=torch.uint8)
            return self._payload(x, {"codes": z, "scales": z.view(torch.float8_e4m3fn),
                                     "tensor_scale": flat.new_zeros(1, dtype=torch.float32)}, 0, meta)
        x2d, _ = blocks(flat, NV_BLOCK)
        bamax = x2d.abs().amax(1)
        if not bool(torch.isfinite(bamax).all()):
            if self.nonfinite == "raise":
                raise nonfinite_error(flat)
            x2d, _ = blocks(saturate_nonfinite(flat), NV_BLOCK)
            bamax = x2d.abs().amax(1)
        codes, bscale, tscale = self._encode_blocks(x2d, bamax)
        return self._payload(x, {"codes": pack_codes(codes.view(-1)[:n], 4), "scales": bscale,
                                 "tensor_scale": tscale}, packed_bytes(n, 4) + bscale.numel() + 4, meta)

    def layout(self, n: int) -> Layout:
        """E2M1 codes two to a byte, one E4M3 scale per block of 16 and one float32 tensor scale."""
        return (Field("codes", torch.uint8, (packed_bytes(n, 4),)),
                Field("scales", torch.float8_e4m3fn, (-(-n // NV_BLOCK),)),
                Field("tensor_scale", torch.float32, (1,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"block_size": NV_BLOCK}

    def _encode_blocks(self, x2d: torch.Tensor, bamax: torch.Tensor):
        amax = bamax.amax().reshape(1)
        tscale = amax / (E4M3_MAX * E2M1.max_normal)
        tscale = torch.where(amax > 0, tscale.clamp(min=MIN_TENSOR_SCALE), tscale)
        safe = torch.where(tscale > 0, tscale, torch.ones_like(tscale))
        bscale = ((bamax / E2M1.max_normal) / safe).clamp(E4M3_TINY, E4M3_MAX).to(torch.float8_e4m3fn)
        recip = (1.0 / safe) / bscale.float()
        a = (x2d * recip[:, None]).clamp(-E2M1.max_normal, E2M1.max_normal)
        noise = None
        if self.stochastic:
            noise = torch.rand(a.shape, generator=self._generator(a.device), device=a.device)
        return round_elements(a, E2M1, noise), bscale, tscale

    def decode(self, enc: Encoded) -> torch.Tensor:
        n = enc.numel
        if n == 0:
            return torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
        t = enc.tensors
        codes = unpack_codes(t["codes"], 4, n)
        scale = t["scales"].float() * t["tensor_scale"]
        return decode_blocks(codes, E2M1, scale, NV_BLOCK, enc.dtype).view(enc.shape)


register(CodecInfo("nvfp4", "NVFP4: 16-value blocks of FP4 E2M1 with an E4M3 block scale and an fp32 tensor "
                             "scale, 4.5 bits/value", lambda **kw: NVFP4Codec(**kw),
                   (OptionSpec("rounding", str, "nearest", ("nearest", "stochastic"),
                               help="rounding of the elements: to nearest even, or stochastic (unbiased; "
                                    "training recipes use it for gradients)"),
                    seed_option(), nonfinite_option()), work=WorkModel(extra_encode_bytes=4.0)))
