"""Top-k, random-k and threshold sparsification (Aji & Heafield, EMNLP 2017, who keep a fixed fraction by
magnitude; Strom, Interspeech 2015, who sends values above a threshold; Renggli et al.,
"SparCML", 2018; paper 001, "Sparsification - top-k Stochastic Gradient Descent").

Keep k of the n values, k = max(1, ceil(ratio * n)) (or a fixed k, capped at n); decode is dense
with zeros elsewhere. Top-k keeps the k largest magnitudes and sends fp32 values + int32 indices
(8 bytes per kept value). Random-k draws k indices without replacement from a seed that travels
with the payload, so it sends fp32 values + an 8-byte seed (4 bytes per kept value + 8). The
omitted values are meant to be accumulated locally: wrap with
`lab.codecs.error_feedback.ErrorFeedback`. Threshold (Strom 2015) sends the entries with
|g| >= tau as +-tau: one sign bit and the index, packed in one 32-bit word each (see `Threshold`).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import torch

from lab.codecs.base import Codec, Encoded, Field, Layout, SeededGenerator, check_seed, prepare
from lab.codecs.registry import CodecInfo, OptionSpec, WorkModel, check_nonfinite, nonfinite_option, register, seed_option

DEFAULT_RATIO = 0.01  # Aji & Heafield drop 99% of the gradient


def _check_budget(ratio: float | None, k: int | None) -> tuple[float | None, int | None]:
    """Validate the (ratio, k) pair; neither given means ratio=DEFAULT_RATIO."""
    if ratio is not None and k is not None:
        raise ValueError(f"give ratio or k, not both (got ratio={ratio!r}, k={k!r})")
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k={k!r}; allowed: an int >= 1 (values kept per tensor, capped at its size)")
        return None, k
    if ratio is None:
        ratio = DEFAULT_RATIO
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ValueError(f"ratio={ratio!r}; allowed: a number in (0, 1] (fraction of values kept)")
    return float(ratio), None


def kept_count(n: int, ratio: float | None, k: int | None) -> int:
    """Values kept of n: max(1, ceil(ratio * n)) or min(k, n); 0 for an empty tensor."""
    if n == 0:
        return 0
    if k is not None:
        return min(k, n)
    assert ratio is not None
    # exact decimal arithmetic, so that ratio=0.1 of 30 values keeps 3, not ceil(3.0000000000000004)
    return min(n, max(1, math.ceil(Fraction(repr(ratio)) * n)))


def _budget_text(ratio: float | None, k: int | None) -> str:
    return f"k={k}" if k is not None else f"ratio={ratio:g}"


def _scatter(enc: Encoded, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(enc.numel, dtype=torch.float32, device=values.device)
    out[indices.long()] = values
    return out.to(enc.dtype).view(enc.shape)


class TopK(Codec):
    """Keep the k largest |g| per tensor: fp32 values + int32 indices (sorted), 8 bytes per kept value."""

    name: ClassVar[str] = "topk"
    summable: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False

    def __init__(self, *, ratio: float | None = None, k: int | None = None, nonfinite: str = "raise") -> None:
        check_nonfinite(nonfinite)
        self.ratio, self.k = _check_budget(ratio, k)
        self.nonfinite = nonfinite

    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor (fewer than 2**31 values)."""
        flat = prepare(x, self.nonfinite)
        n = flat.numel()
        if n >= 2**31:
            raise ValueError(f"topk sends int32 indices; a tensor of {n} values is too large (< 2**31 allowed)")
        k = kept_count(n, self.ratio, self.k)
        idx = torch.topk(flat.abs(), k, sorted=False).indices.sort().values
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"values": flat[idx].to(torch.float32), "indices": idx.to(torch.int32)},
            wire_bytes=8 * k,
            meta={"k": k},
        )

    def decode(self, enc: Encoded) -> torch.Tensor:
        """Dense tensor of enc.dtype and enc.shape, zeros where nothing was kept."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        return _scatter(enc, enc.tensors["values"], enc.tensors["indices"])

    def describe(self) -> str:
        return f"topk({_budget_text(self.ratio, self.k)})"

    def layout(self, n: int) -> Layout:
        """k float32 values and their k int32 indices."""
        k = kept_count(n, self.ratio, self.k)
        return (Field("values", torch.float32, (k,)), Field("indices", torch.int32, (k,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"k": kept_count(n, self.ratio, self.k)}


class RandomK(SeededGenerator, Codec):
    """Keep k uniformly random values per tensor: fp32 values + an int64 seed, 4 bytes per kept value + 8.

    Each encode draws a fresh index seed from the codec's generator (seeded with `seed`, created
    on the first input's device); decode regenerates the indices from it with `randperm` on the
    payload's device, so encoder and decoder must use the same device type. `unbiased=True`
    scales kept values by n / k so that E[decode] = g; a scaled value beyond the input dtype's
    largest finite value saturates to it (biased there only) and `meta['saturated']` counts them.
    Wire: 0 bytes for an empty tensor (no values, no seed).
    Summable: workers that build the codec with the same `seed` and encode the same sequence of
    tensor sizes pick the same indices, so their "values" can be summed (keep one "seed").
    """

    name: ClassVar[str] = "randomk"
    summable: ClassVar[bool] = True
    stochastic: ClassVar[bool] = True

    def __init__(
        self,
        *,
        ratio: float | None = None,
        k: int | None = None,
        unbiased: bool = False,
        seed: int = 0,
        nonfinite: str = "raise",
    ) -> None:
        check_nonfinite(nonfinite)
        if not isinstance(unbiased, bool):
            raise ValueError(f"unbiased={unbiased!r}; allowed: True or False")
        self.ratio, self.k = _check_budget(ratio, k)
        self.unbiased = unbiased
        self.seed = check_seed(seed)
        self.nonfinite = nonfinite
        self._gen: torch.Generator | None = None


    def layout(self, n: int) -> Layout:
        """k float32 values and the int64 seed their indices are drawn from."""
        return (Field("values", torch.float32, (kept_count(n, self.ratio, self.k),)), Field("seed", torch.int64, (1,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"k": kept_count(n, self.ratio, self.k)}

    @staticmethod
    def indices(n: int, k: int, seed: int, device: torch.device) -> torch.Tensor:
        """The k distinct indices (sorted) a payload seed stands for."""
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        return torch.randperm(n, generator=g, device=device)[:k].sort().values

    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor."""
        flat = prepare(x, self.nonfinite)
        n = flat.numel()
        k = kept_count(n, self.ratio, self.k)
        dev = flat.device
        seed = torch.randint(0, 2**62, (1,), generator=self.generator(dev), device=dev)
        values = flat[self.indices(n, k, int(seed), dev)].to(torch.float32)
        meta = {"k": k}
        if self.unbiased and k:
            scaled = values.double() * (n / k)
            big = torch.finfo(x.dtype).max
            meta["saturated"] = int((scaled.abs() > big).sum())
            values = scaled.clamp(-big, big).to(torch.float32)
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"values": values, "seed": seed},
            wire_bytes=4 * k + 8 if n else 0,
            meta=meta,
        )

    def decode(self, enc: Encoded) -> torch.Tensor:
        """Dense tensor of enc.dtype and enc.shape, zeros where nothing was kept."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        values = enc.tensors["values"]
        idx = self.indices(enc.numel, values.numel(), int(enc.tensors["seed"]), values.device)
        return _scatter(enc, values, idx)

    def describe(self) -> str:
        return f"randomk({_budget_text(self.ratio, self.k)}{', unbiased' if self.unbiased else ''})"


def make_topk(*, ratio: float | None = None, k: int | None = None, nonfinite: str = "raise") -> TopK:
    """Registry factory for `TopK` (ratio in (0, 1], default 0.01, or k >= 1)."""
    return TopK(ratio=ratio, k=k, nonfinite=nonfinite)


def make_randomk(*, ratio: float | None = None, k: int | None = None, unbiased: bool = False, seed: int = 0,
                 nonfinite: str = "raise") -> RandomK:
    """Registry factory for `RandomK` (ratio in (0, 1], default 0.01, or k >= 1)."""
    return RandomK(ratio=ratio, k=k, unbiased=unbiased, seed=seed, nonfinite=nonfinite)


def _budget() -> tuple[OptionSpec, ...]:
    return (OptionSpec("ratio", float, None, range=(0.0, 1.0),
                       help=f"fraction of values kept (default {DEFAULT_RATIO} when k is not given)"),
            OptionSpec("k", int, None, range=(1, None), help="values kept per tensor (instead of ratio)"))


register(CodecInfo("topk", "top-k sparsification: the k largest magnitudes as fp32 values + int32 indices (ratio or k)",
                   make_topk, (*_budget(), nonfinite_option()), gradient_only=True,
                   work=WorkModel(4.0, 3, 1)))
register(CodecInfo("randomk", "random-k sparsification: k random values as fp32 + an 8-byte seed (ratio or k, unbiased)",
                   make_randomk, (*_budget(), OptionSpec("unbiased", bool, False, help="scale kept values by n/k"),
                                  seed_option(), nonfinite_option()),
                   gradient_only=True, work=WorkModel(4.0, 2, 1)))


DEFAULT_TAU = 2.5  # in RMS units: about 1.2% of a Gaussian tensor's values reach it
DEFAULT_CAPACITY = 0.05


class Threshold(Codec):
    """Strom's threshold quantisation ("Scalable distributed DNN training using commodity GPU cloud
    computing", Interspeech 2015): send only the entries with |g| >= tau, each as +tau or -tau, i.e.
    one sign bit and its index; the rest (and g - tau for the sent ones) stays local and error
    feedback (`ef:threshold`) adds it to the next gradient.

    tau: `relative=True` (default) means tau times the tensor's RMS, sqrt(mean(g^2)), so one value
    suits layers of any scale; `relative=False` means tau in the gradient's own units, as in the
    paper. Either way tau > 0 and the absolute threshold travels as one float32.
    Wire: Strom's message has a variable length; the lab's collectives post a fixed buffer before
    the bytes arrive, so the payload has `capacity` * n slots (at least 1) of one int32 word each,
    sign * (index + 1), 0 marking an unused slot. If more entries reach tau than there are slots,
    the largest |g| are sent and the others stay in the residual. wire_bytes = 4 * slots + 4.
    `meta['sent']` counts the entries sent.
    """

    name: ClassVar[str] = "threshold"
    summable: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False

    def __init__(self, *, tau: float = DEFAULT_TAU, relative: bool = True, capacity: float = DEFAULT_CAPACITY,
                 nonfinite: str = "raise") -> None:
        check_nonfinite(nonfinite)
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau) or tau <= 0:
            raise ValueError(f"tau={tau!r}; allowed: a finite number > 0 (the threshold; "
                             "in RMS units when relative=True)")
        if not isinstance(relative, bool):
            raise ValueError(f"relative={relative!r}; allowed: True or False")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not 0 < capacity <= 1:
            raise ValueError(f"capacity={capacity!r}; allowed: a number in (0, 1] (fraction of values that fit "
                             "in the message)")
        self.tau, self.relative, self.capacity = float(tau), relative, float(capacity)
        self.nonfinite = nonfinite

    def slots(self, n: int) -> int:
        """Words in a payload of n values: max(1, ceil(capacity * n)); 0 for an empty tensor."""
        return kept_count(n, self.capacity, None)

    def threshold(self, flat: torch.Tensor) -> float:
        """The absolute threshold for this tensor (tau, or tau * RMS when relative)."""
        if not self.relative:
            return self.tau
        rms = float(flat.double().pow(2).mean().sqrt()) if flat.numel() else 0.0
        return self.tau * rms

    def encode(self, x: torch.Tensor) -> Encoded:
        """Encode any-shape fp32/fp16/bf16 tensor (fewer than 2**31 - 1 values)."""
        flat = prepare(x, self.nonfinite)
        n = flat.numel()
        if n >= 2**31 - 1:
            raise ValueError(f"threshold sends int32 words; a tensor of {n} values is too large (< 2**31 - 1 allowed)")
        m = self.slots(n)
        t = self.threshold(flat)
        a = flat.abs().to(torch.float32)
        over = (a >= t) & (a > 0) if t > 0 else torch.zeros_like(a, dtype=torch.bool)
        idx = over.nonzero().flatten()
        if idx.numel() > m:  # more than fit: the largest magnitudes
            idx = idx[torch.topk(a[idx], m, sorted=False).indices]
        idx = idx.sort().values
        words = torch.zeros(m, dtype=torch.int32, device=flat.device)
        sign = torch.where(flat[idx] < 0, -1, 1).to(torch.int64)
        words[: idx.numel()] = (sign * (idx + 1)).to(torch.int32)
        return Encoded(
            layout=self.layout(n),
            codec=self.name,
            shape=torch.Size(x.shape),
            dtype=x.dtype,
            tensors={"words": words, "tau": torch.tensor([t], dtype=torch.float32, device=flat.device)},
            wire_bytes=4 * m + 4 if n else 0,
            meta={"sent": int(idx.numel())},
        )

    def decode(self, enc: Encoded) -> torch.Tensor:
        """Dense tensor of enc.dtype and enc.shape: +-tau at the sent indices, zeros elsewhere."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        words = enc.tensors["words"].long()
        words = words[words != 0]
        tau = enc.tensors["tau"].to(torch.float32)
        values = torch.where(words < 0, -tau, tau)
        return _scatter(enc, values, words.abs() - 1)

    def describe(self) -> str:
        unit = " x RMS" if self.relative else ""
        return f"threshold(tau={self.tau:g}{unit}, capacity={self.capacity:g})"

    def layout(self, n: int) -> Layout:
        """The slots' int32 words (sign * (index + 1)) and the float32 threshold."""
        return (Field("words", torch.int32, (self.slots(n),)), Field("tau", torch.float32, (1,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {}


def make_threshold(*, tau: float = DEFAULT_TAU, relative: bool = True, capacity: float = DEFAULT_CAPACITY,
                   nonfinite: str = "raise") -> Threshold:
    """Registry factory for `Threshold` (tau > 0, relative to the RMS by default; capacity in (0, 1])."""
    return Threshold(tau=tau, relative=relative, capacity=capacity, nonfinite=nonfinite)


register(CodecInfo("threshold", "threshold sparsification (Strom): entries with |g| >= tau sent as +-tau, "
                   "sign and index in one int32 word (tau, relative, capacity)",
                   make_threshold,
                   (OptionSpec("tau", float, DEFAULT_TAU, range=(0.0, None),
                               help="the threshold (> 0): in RMS units when relative, else absolute"),
                    OptionSpec("relative", bool, True, help="tau is in units of the tensor's RMS"),
                    OptionSpec("capacity", float, DEFAULT_CAPACITY, range=(0.0, 1.0),
                               help="fraction of values the message has room for"),
                    nonfinite_option()),
                   gradient_only=True, work=WorkModel(4.0, 3, 1)))
