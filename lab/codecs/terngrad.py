"""TernGrad: stochastic ternary gradients (Wen et al., "TernGrad: Ternary Gradients to Reduce
Communication in Distributed Deep Learning", NeurIPS 2017; paper 001, "Communication
optimizations": TernGrad).

s = max|g| per tensor; each value becomes s * sign(g) * b with b ~ Bernoulli(|g| / s), so
E[decode] = g. The paper's optional gradient clipping (at 2.5 sigma) is not applied: it would
make the codec biased.
"""
from __future__ import annotations

from typing import ClassVar

import torch

from lab.codecs.base import Codec, Encoded, Field, Layout, SeededGenerator, check_seed, pack_bits, packed_bytes, prepare, unpack_bits
from lab.codecs.registry import CodecInfo, check_nonfinite, nonfinite_option, register, seed_option



class TernGrad(SeededGenerator, Codec):
    """2-bit codes {0, 1, 2} for {-1, 0, +1} (bit planes) + one fp32 scale s = max|g|.

    Stochastic and unbiased; the codec owns a torch.Generator seeded with `seed` (created on
    the first input's device), so a sequence of encodes is reproducible.
    Wire: ceil(2n/8) bytes of codes + 4 bytes of scale (0 bytes for an empty tensor).
    """

    name: ClassVar[str] = "terngrad"
    summable: ClassVar[bool] = False
    requantize: ClassVar[bool] = True
    stochastic: ClassVar[bool] = True

    def __init__(self, *, seed: int = 0, nonfinite: str = "raise") -> None:
        check_nonfinite(nonfinite)
        self.seed = check_seed(seed)
        self.nonfinite = nonfinite
        self._gen: torch.Generator | None = None


    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor; NaN/Inf follow the `nonfinite` policy."""
        flat = prepare(x, self.nonfinite).float()
        n = flat.numel()
        mag = flat.abs()
        scale = mag.max() if n else flat.new_zeros(())
        if n and float(scale) > 0:
            u = torch.rand(n, generator=self.generator(flat.device), device=flat.device)
            keep = u < mag / scale
            codes = torch.where(keep, torch.where(flat > 0, 2, 0), 1).to(torch.uint8)
        else:
            codes = torch.ones(n, dtype=torch.uint8, device=flat.device)
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"codes": pack_bits(codes, 2), "scale": scale.reshape(1).to(torch.float32)},
            wire_bytes=packed_bytes(n, 2) + 4 if n else 0,
        )

    def layout(self, n: int) -> Layout:
        """Ternary codes as 2 bit planes of ceil(n/8) bytes and one float32 scale (max |g|)."""
        return (Field("codes", torch.uint8, (2 * ((n + 7) // 8),)), Field("scale", torch.float32, (1,)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        """Tensor of enc.dtype and enc.shape on the payload's device: values in {-s, 0, s}."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        codes = unpack_bits(enc.tensors["codes"], 2, enc.numel)
        out = (codes.to(torch.float32) - 1.0) * enc.tensors["scale"]
        return out.to(enc.dtype).view(enc.shape)

    def describe(self) -> str:
        return "terngrad"


def make_terngrad(*, seed: int = 0, nonfinite: str = "raise") -> TernGrad:
    """Registry factory for `TernGrad`."""
    return TernGrad(seed=seed, nonfinite=nonfinite)


register(CodecInfo("terngrad", "TernGrad: stochastic ternary {-s, 0, s}, s = max|g|, unbiased (2 bits/value)",
                   make_terngrad, (seed_option(), nonfinite_option()), gradient_only=True))
