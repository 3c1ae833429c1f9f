"""Dropout pattern generation (Song et al. §III-D): per iteration draw dp ~ d, then b ~ U{0..dp-1}.

Scaling. Kept units are multiplied by the drawn pattern's dp (its inverse keep fraction), not by
1/(1-p) of the global rate. Both are unbiased per unit: P(unit kept | dp) = 1/dp because b is
uniform, so E[mask * dp] = sum_i d_i (1/i) i = 1, the same expectation as conventional dropout's
mask/(1-p). Scaling by dp is also unbiased *given the pattern*: every iteration's next-layer input
has the full layer's expected magnitude, whereas 1/(1-p) would inflate it 1/(1-p)-fold in the
iterations that draw dp = 1 (keep everything; d puts 20-40% of its mass there) and shrink it in
those that draw large dp - a per-iteration scale swing conventional dropout never has.
"""
from __future__ import annotations

import functools
from typing import Optional

import torch

from .pattern import KINDS, Pattern
from .search import SearchResult, default_max_dp, expected_rate, search
from .tile_pattern import DEFAULT_TILE


class PatternSampler:
    """Draws one `Pattern` per training iteration from the searched distribution d over dp = 1..N."""

    def __init__(self, d: torch.Tensor | SearchResult, kind: str = "row",
                 tile: tuple[int, int] = DEFAULT_TILE, seed: int = 0) -> None:
        if kind not in KINDS:
            raise ValueError(f"pattern kind must be one of {KINDS}, got {kind!r}")
        d = d.d if isinstance(d, SearchResult) else d
        d = torch.as_tensor(d, dtype=torch.float64).flatten().cpu()
        if d.numel() < 1 or (d < 0).any() or not torch.isfinite(d).all() or abs(float(d.sum()) - 1) > 1e-6:
            raise ValueError("d must be a probability vector over dp = 1..N")
        self.d, self.kind, self.tile = d, kind, tuple(tile)
        # patterns are host-side integers: they shape the GEMMs, so sampling never syncs a GPU
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def rate(self) -> float:
        """Expected global dropout rate d . p_u (= every unit's drop probability, Eq. 2)."""
        return expected_rate(self.d)

    def sample_params(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`count` draws of (dp, bias) as two int64 tensors."""
        dp = torch.multinomial(self.d, count, replacement=True, generator=self.generator) + 1
        bias = (torch.rand(count, generator=self.generator, dtype=torch.float64) * dp).long()
        return dp, torch.minimum(bias, dp - 1)

    def sample(self) -> Pattern:
        """The pattern for the next iteration."""
        dp, bias = self.sample_params(1)
        return Pattern(self.kind, int(dp), int(bias), self.tile)


@functools.lru_cache(maxsize=64)
def _cached_search(p: float, n: int, lambda1: float, seed: int) -> SearchResult:
    return search(p, n, lambda1=lambda1, seed=seed, trace_every=1_000_000)


def sampler_for_rate(p: float, kind: str = "row", *, max_dp: Optional[int] = None,
                     tile: tuple[int, int] = DEFAULT_TILE, lambda1: float = 0.9999, seed: int = 0) -> PatternSampler:
    """Run Algorithm 1 for rate p over dp = 1..max_dp (default `default_max_dp(p)`; cached) and
    sample patterns of `kind` from it."""
    n = default_max_dp(p) if max_dp is None else max_dp
    return PatternSampler(_cached_search(float(p), int(n), float(lambda1), 0), kind, tile, seed)
