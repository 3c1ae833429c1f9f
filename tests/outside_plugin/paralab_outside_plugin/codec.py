"""signscale: one bit per value (its sign) and one fp32 scale, the mean |x| of the tensor; decodes to
sign(x)·mean|x| (zero counts as positive). Like 1-bit SGD without error feedback (Seide et al. 2014), but
one scale for both signs. Not summable and not re-encoded per hop: collectives gather it."""
from __future__ import annotations

from typing import ClassVar

import torch

from lab.codecs import Codec, CodecInfo, Encoded
from lab.codecs.base import Field, Layout, pack_bits, packed_bytes, prepare, unpack_bits
from lab.codecs.registry import check_nonfinite, nonfinite_option


class SignScale(Codec):
    """Wire: ceil(n/8) bytes of signs + 4 bytes of scale (0 bytes for an empty tensor). NaN/Inf follow the
    `nonfinite` policy every codec takes ('raise' or 'saturate')."""

    name: ClassVar[str] = "signscale"

    def __init__(self, *, nonfinite: str = "raise") -> None:
        self.nonfinite = check_nonfinite(nonfinite)

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = prepare(x, self.nonfinite)
        n = flat.numel()
        scale = flat.double().abs().mean().float() if n else flat.new_zeros((), dtype=torch.float32)
        return Encoded(codec=self.name, shape=torch.Size(x.shape), dtype=x.dtype, layout=self.layout(n),
                       tensors={"signs": pack_bits((flat >= 0).to(torch.uint8), 1),
                                "scale": scale.reshape(1).to(torch.float32)},
                       wire_bytes=packed_bytes(n, 1) + 4 if n else 0)

    def layout(self, n: int) -> Layout:
        """Signs as one bit plane of ceil(n/8) bytes, one float32 scale."""
        return (Field("signs", torch.uint8, ((n + 7) // 8,)), Field("scale", torch.float32, (1,)))

    def decode(self, enc: Encoded) -> torch.Tensor:
        signs = unpack_bits(enc.tensors["signs"], 1, enc.numel).to(torch.float32) * 2 - 1
        return (signs * enc.tensors["scale"]).to(enc.dtype).view(enc.shape)

    def describe(self) -> str:
        return self.name


INFO = CodecInfo("signscale", "sign + one scale (mean |x|): 1 bit per value (an outside plugin)", SignScale,
                 (nonfinite_option(),), gradient_only=True)
