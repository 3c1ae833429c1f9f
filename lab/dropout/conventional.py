"""Conventional (Bernoulli) dropout, the baseline the paper replaces (Song et al. §II-C, Fig. 1a).

Every unit of every sample is dropped independently with probability p; kept units are scaled by
1/(1-p) ("inverted dropout", as torch does), so the expectation of the layer's output is unchanged.
"""
from __future__ import annotations

import math
import numbers

import torch


def check_rate(p: float) -> float:
    """Return p as a float if 0 <= p < 1, else raise ValueError (p = 1 would drop everything)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {p!r}")
    p = float(p)
    if not (math.isfinite(p) and 0.0 <= p < 1.0):
        raise ValueError(f"dropout rate must be in [0, 1), got {p}")
    return p


def bernoulli_mask(shape: tuple[int, ...], p: float, *, generator: torch.Generator | None = None,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Keep-mask (True = kept) with every entry kept independently with probability 1 - p."""
    p = check_rate(p)
    u = torch.rand(shape, generator=generator, device=device)
    return u >= p


def conventional_dropout(x: torch.Tensor, p: float, *, mask: torch.Tensor | None = None,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """x * mask / (1 - p); a fresh Bernoulli mask unless one is given (the dense reference)."""
    p = check_rate(p)
    if p == 0.0:
        return x
    if mask is None:
        mask = bernoulli_mask(tuple(x.shape), p, generator=generator, device=x.device)
    return x * mask.to(x.dtype) * (1.0 / (1.0 - p))
