"""QSGD: stochastic uniform quantization against the L2 norm (Alistarh et al., "QSGD:
Communication-Efficient SGD via Gradient Quantization and Encoding", NeurIPS 2017, Sec. 3.1;
paper 001, "Communication optimizations": quantization with stochastic rounding).

With s levels and norm = ||g||_2 (per tensor, no bucketing): l = floor(|g| / norm * s + u),
u ~ U(0, 1), so E[l] = |g| / norm * s and decode = norm * sign(g) * l / s is unbiased, with
E||Q(g) - g||^2 <= min(n / s^2, sqrt(n) / s) * ||g||^2 (the paper's Lemma 3.1).
The norm is summed in float64 and capped at the input dtype's largest finite value: any scale
>= max|g| keeps the quantizer unbiased and a smaller one only lowers the variance, and the cap
keeps every decoded value (at most the scale) finite in that dtype, near its maximum too.
Codes are sent at a fixed width, 1 sign bit + ceil(log2(s + 1)) level bits per value; the
paper's Elias integer coding is not implemented.
"""
from __future__ import annotations

from typing import Any, ClassVar

import torch

from lab.codecs.base import Codec, Encoded, Field, Layout, SeededGenerator, check_seed, pack_bits, packed_bytes, prepare, unpack_bits
from lab.codecs.registry import CodecInfo, OptionSpec, check_nonfinite, nonfinite_option, register, seed_option

MAX_LEVELS = 127  # sign + level code fit one byte (GRACE's int8 QSGD uses 127 levels too)


def level_bits(levels: int) -> int:
    """Bits for a level code 0..levels, i.e. ceil(log2(levels + 1))."""
    return int(levels).bit_length()


def l2_norm(flat: torch.Tensor) -> torch.Tensor:
    """||flat||_2 as a 0-d float64 tensor: squares summed in float64 cannot overflow or underflow
    for float32 (or narrower) values."""
    return torch.linalg.vector_norm(flat, dtype=torch.float64)


def qsgd_scale(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The QSGD scale of a flat input of `dtype`: min(||flat||_2, largest finite `dtype` value) as a
    0-d float32 tensor; >= max|flat| (so |g| / scale <= 1) and finite."""
    return l2_norm(flat).clamp(max=torch.finfo(dtype).max).to(torch.float32)


class QSGD(SeededGenerator, Codec):
    """Per-tensor QSGD with `levels` = s in 1..127 (default 16).

    Payload: codes (sign << b | level, b = ceil(log2(s + 1)), packed at 1 + b bits) + one fp32
    norm (capped at the input dtype's maximum, see the module docstring). Stochastic and
    unbiased; the codec owns a torch.Generator seeded with `seed` (created on the first input's
    device). Wire: ceil(n * (1 + b) / 8) + 4 bytes (0 bytes for an empty tensor).
    """

    name: ClassVar[str] = "qsgd"
    summable: ClassVar[bool] = False
    requantize: ClassVar[bool] = True
    stochastic: ClassVar[bool] = True

    def __init__(self, *, levels: int = 16, seed: int = 0, nonfinite: str = "raise") -> None:
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"levels={levels!r}; allowed: an int in 1..{MAX_LEVELS}")
        check_nonfinite(nonfinite)
        self.levels = levels
        self.seed = check_seed(seed)
        self.nonfinite = nonfinite
        self._gen: torch.Generator | None = None

    @property
    def bits(self) -> int:
        """Wire bits per value: 1 sign bit + the level bits."""
        return 1 + level_bits(self.levels)


    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor; NaN/Inf follow the `nonfinite` policy."""
        flat = prepare(x, self.nonfinite).float()
        n = flat.numel()
        s = self.levels
        b = level_bits(s)
        norm = qsgd_scale(flat, x.dtype)
        if n and float(norm) > 0:
            u = torch.rand(n, generator=self.generator(flat.device), device=flat.device)
            level = torch.floor(flat.abs() / norm * s + u).clamp_(0, s).to(torch.uint8)
        else:
            level = torch.zeros(n, dtype=torch.uint8, device=flat.device)
        codes = ((flat < 0).to(torch.uint8) << b) | level
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"codes": pack_bits(codes, 1 + b), "norm": norm.reshape(1).to(torch.float32)},
            wire_bytes=packed_bytes(n, 1 + b) + 4 if n else 0,
            meta={"levels": s},
        )

    def layout(self, n: int) -> Layout:
        """sign + level codes as `bits` bit planes of ceil(n/8) bytes, one float32 norm."""
        return (Field("codes", torch.uint8, (self.bits * ((n + 7) // 8),)), Field("norm", torch.float32, (1,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"levels": self.levels}

    def decode(self, enc: Encoded) -> torch.Tensor:
        """Tensor of enc.dtype and enc.shape on the payload's device: norm * sign * l / s."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        s = int(enc.meta["levels"])
        b = level_bits(s)
        codes = unpack_bits(enc.tensors["codes"], 1 + b, enc.numel)
        level = (codes & ((1 << b) - 1)).to(torch.float32)
        sign = 1.0 - 2.0 * (codes >> b).to(torch.float32)
        out = enc.tensors["norm"] * (sign * (level / s))  # |l / s| <= 1 first: no overflow
        return out.to(enc.dtype).view(enc.shape)

    def describe(self) -> str:
        return f"qsgd(s={self.levels})"


def make_qsgd(*, levels: int = 16, seed: int = 0, nonfinite: str = "raise") -> QSGD:
    """Registry factory for `QSGD` (levels = s in 1..127)."""
    return QSGD(levels=levels, seed=seed, nonfinite=nonfinite)


register(CodecInfo("qsgd", "QSGD: stochastic rounding to s levels of the L2 norm, unbiased (1 + ceil(log2(s+1)) bits)",
                   make_qsgd, (OptionSpec("levels", int, 16, range=(1, 127), help="levels s of the L2 norm"),
                               seed_option(), nonfinite_option()), gradient_only=True))
