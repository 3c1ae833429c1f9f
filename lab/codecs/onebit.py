"""1-bit quantization with two reconstruction values (Seide et al., "1-Bit Stochastic Gradient
Descent ...", Interspeech 2014; paper 001, "Communication optimizations": 1-bit SGD [3]).

Per tensor: one sign bit per value plus the mean of the non-negative entries and the mean of the
negative entries, the values a bit decodes to. The paper quantizes per matrix column and relies
on error feedback (wrap with `lab.codecs.error_feedback.ErrorFeedback`); this codec is per tensor
and stateless.
"""
from __future__ import annotations

from typing import ClassVar

import torch

from lab.codecs.base import Codec, Encoded, Field, Layout, pack_bits, packed_bytes, prepare, unpack_bits
from lab.codecs.registry import CodecInfo, WorkModel, check_nonfinite, nonfinite_option, register



class OneBit(Codec):
    """Sign bit per value (1 = non-negative) + fp32 [mean of negatives, mean of non-negatives].

    Decode gives the non-negative mean where the bit is 1 and the negative mean where it is 0,
    so the sum of the positive part and the sum of the negative part are preserved.
    Wire: ceil(n/8) bytes of signs + 8 bytes of means (0 bytes for an empty tensor). The sums
    behind the means are taken in float64, so values near the float32 maximum do not overflow.
    """

    name: ClassVar[str] = "onebit"
    summable: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False

    def __init__(self, *, nonfinite: str = "raise") -> None:
        check_nonfinite(nonfinite)
        self.nonfinite = nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor; NaN/Inf follow the `nonfinite` policy."""
        flat = prepare(x, self.nonfinite).float()
        n = flat.numel()
        nonneg = flat >= 0
        n_pos = int(torch.count_nonzero(nonneg))
        n_neg = n - n_pos
        sum_pos = flat.clamp(min=0).sum(dtype=torch.float64)  # the same values as a masked sum
        sum_neg = flat.clamp(max=0).sum(dtype=torch.float64)
        pos_mean = sum_pos / n_pos if n_pos else sum_pos.new_zeros(())
        neg_mean = sum_neg / n_neg if n_neg else sum_neg.new_zeros(())
        means = torch.stack([neg_mean, pos_mean]).to(torch.float32)
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"signs": pack_bits(nonneg, 1), "means": means},
            wire_bytes=packed_bytes(n, 1) + 8 if n else 0,
        )

    def layout(self, n: int) -> Layout:
        """One sign bit per value (ceil(n/8) bytes) and the float32 (negative, non-negative) means."""
        return (Field("signs", torch.uint8, ((n + 7) // 8,)), Field("means", torch.float32, (2,)))

    def _decode_flat(self, enc: Encoded, flat: torch.Tensor) -> bool:
        """The non-negative mean where the bit is 1, the negative mean where it is 0, into `flat`
        (decode gives a tensor of enc.dtype and enc.shape on the payload's device)."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        bits = unpack_bits(enc.tensors["signs"], 1, enc.numel).view(torch.bool)
        neg_mean, pos_mean = enc.tensors["means"].to(enc.dtype)
        torch.where(bits, pos_mean, neg_mean, out=flat)
        return True

    def describe(self) -> str:
        return "onebit"


def make_onebit(*, nonfinite: str = "raise") -> OneBit:
    """Registry factory for `OneBit`."""
    return OneBit(nonfinite=nonfinite)


# Seide et al.'s error feedback makes encode read and write the 4-byte residual too, in 4 kernels
# (add residual, two means, pack, update residual); the planner runs it as a two-stage allreduce.
register(CodecInfo("onebit", "1-bit SGD: sign bit per value + means of the non-negative and negative parts",
                   make_onebit, (nonfinite_option(),), gradient_only=True, two_stage=True,
                   work=WorkModel(8.0, 4, 1)))
