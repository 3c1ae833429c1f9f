"""Error feedback: keep what a lossy codec dropped and add it to the next input (Seide et al.,
Interspeech 2014, 1-bit SGD with error feedback; Strom 2015 / SparCML residual accumulation;
paper 001, "Use lossy compression when sending, accumulate error locally!"; GRACE's
`ResidualMemory` with beta = gamma = 1).

Per key (a parameter or bucket name): corrected = residual + x, enc = codec.encode(corrected),
residual = corrected - codec.decode(enc). So sum_t x_t - sum_t decode_t equals the current
residual: nothing is lost, only delayed. The corrected input is handed to the codec in x's
dtype, saturated to that dtype's finite range (what does not fit stays in the fp32 residual);
a corrected value beyond float32's range is a ValueError.

The memory follows GRACE (Xu et al. 2021, `Memory.compensate` / `Memory.update`) around any codec,
and the wrapper is a `Codec` like any other: `encode(x)` (the stream "default") or
`encode_as(x, key)` (every codec has it; stateless ones ignore the key); its payloads, wire
format, hops and decode are the inner codec's (`payload_codec`), so no caller unwraps it.
"""
from __future__ import annotations

from typing import Any, ClassVar

import torch

from lab.codecs.base import Codec, Encoded, Layout, all_finite as _finite, prepare


class ErrorFeedback(Codec):
    """Residual memory keyed by stream name around a stateless codec.

    `encode_as(x, key)` compresses x plus the key's residual and stores the new residual (fp32,
    x's shape, x's device; it starts at zero); `encode(x)` is the stream "default". The payload is
    the inner codec's, encoded at x's dtype, so decoding, wire sizes and hops are the inner codec's.
    `name` is "ef(<inner>)"; `summable` and `stochastic` are the inner codec's.
    """

    name: ClassVar[str] = "ef"
    summable: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False
    stateful: ClassVar[bool] = True

    def __init__(self, codec: Codec) -> None:
        if not isinstance(codec, Codec):
            raise ValueError(f"ErrorFeedback wraps a Codec, got {type(codec).__name__}")
        if codec.phases:  # PowerSGD: its residual is against the sum over ranks, which no wrapper can see
            raise ValueError(f"ef({codec.describe()}): {codec.name} keeps its own error feedback (its option "
                             "error_feedback, on by default: the residual against the sum over ranks); use "
                             f"{codec.name!r} without ef: or --error-feedback")
        self.codec = codec
        self.nonfinite: str = getattr(codec, "nonfinite", "raise")
        # per-instance values of the ClassVars: they follow the wrapped codec
        self.name = f"ef({codec.name})"  # type: ignore[misc]
        self.summable = codec.summable  # type: ignore[misc]
        self.stochastic = codec.stochastic  # type: ignore[misc]
        self._residual: dict[str, torch.Tensor] = {}

    # -- GRACE's memory
    def compensate(self, x: torch.Tensor, key: str) -> torch.Tensor:
        """x + residual[key] in fp32, flat (x validated first: a NaN must not poison the memory)."""
        flat = prepare(x, self.nonfinite).float()
        res = self._residual.get(key)
        if res is None:
            return flat + 0.0  # a fresh tensor; -0.0 becomes 0.0, as 0 + x
        if res.shape != x.shape:
            raise ValueError(
                f"error-feedback key {key!r} holds a residual of shape {tuple(res.shape)}, "
                f"got an input of shape {tuple(x.shape)}; use another key or reset({key!r})"
            )
        if res.device != x.device:
            res = res.to(x.device)
        corrected = res.view(-1) + flat
        if corrected.numel() and not _finite(corrected):
            bad = int((~torch.isfinite(corrected)).nonzero()[0, 0])
            raise ValueError(f"error feedback: input + residual of key {key!r} overflows float32 at flat index "
                             f"{bad} (input {flat[bad].item()}, residual {res.view(-1)[bad].item()}); "
                             f"reset({key!r}) or scale the input down")
        return corrected

    def update(self, corrected: torch.Tensor, key: str, enc: Encoded, shape: torch.Size) -> None:
        """residual[key] = corrected - decode(enc): what the receivers will not see."""
        decoded = self.codec.decode(enc).reshape(-1).float()
        self._residual[key] = (corrected - decoded).view(shape)

    # -- the Codec interface
    def encode_as(self, x: torch.Tensor, key: str) -> Encoded:
        """Encode x + residual[key]; update residual[key] to what the decoder will not see."""
        corrected = self.compensate(x, key)
        big = torch.finfo(x.dtype).max
        enc = self.codec.encode(corrected.clamp(-big, big).to(x.dtype).view(x.shape))
        self.update(corrected, key, enc, x.shape)
        return enc

    def encode(self, x: torch.Tensor, key: str = "default") -> Encoded:
        """encode_as(x, key): the stream "default" unless named."""
        return self.encode_as(x, key)

    @property
    def payload_codec(self) -> Codec:
        return self.codec.payload_codec

    def decode(self, enc: Encoded) -> torch.Tensor:
        """The inner codec's decode."""
        return self.codec.decode(enc)

    def decode_into(self, enc: Encoded, out: torch.Tensor) -> torch.Tensor:
        return self.codec.decode_into(enc, out)

    def layout(self, n: int) -> Layout:
        """The inner codec's payload layout (error feedback sends the inner codec's payloads)."""
        return self.codec.layout(n)

    def wire_meta(self, n: int) -> dict[str, Any]:
        return self.codec.wire_meta(n)

    def residual(self, key: str = "default") -> torch.Tensor | None:
        """The stored fp32 residual for `key` (input-shaped), or None before its first encode."""
        return self._residual.get(key)

    def keys(self) -> list[str]:
        """Keys with a stored residual."""
        return list(self._residual)

    def reset(self, key: str | None = None) -> None:
        """Forget the residual of `key` (a missing key is fine), or of every key when None."""
        if key is None:
            self._residual.clear()
        else:
            self._residual.pop(key, None)

    def describe(self) -> str:
        return f"ef({self.codec.describe()})"
