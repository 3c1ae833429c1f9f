"""Vignetting (Wu et al. 2015 §4.1, Table 1: 1960 possible changes).

"There are two randomly changeable variables for a vignette effect. The first is the area to add
the effect. The second is how much brightness is reduced." The paper gives neither grid. Reading:
with r the distance from the image centre over the half-diagonal (corners at r = 1), the darkened
area is the outer ring r > 1 − area, and brightness falls smoothly (quadratically) across it to
(1 − strength) at the corners:

    mask(r) = 1 − strength · clamp((r − (1 − area)) / area, 0, 1)^2

area takes 40 values 0.025..1.0 and strength 49 values 0.02..0.98: 40 × 49 = 1960, the paper's
count (every pair is a different, non-identity mask). strength = 0 is the identity.
"""
from __future__ import annotations

import torch

from .common import (check_images, chunked, draw, from_work, make_generator, normalized_coords, per_image,
                     to_work)

AREAS: tuple[float, ...] = tuple(round(0.025 * k, 3) for k in range(1, 41))
STRENGTHS: tuple[float, ...] = tuple(round(0.02 * k, 2) for k in range(1, 50))


def count() -> int:
    """Distinct vignettes: |AREAS| × |STRENGTHS|."""
    return len(set(AREAS)) * len(set(STRENGTHS))


def sample(n: int, *, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(area, strength), each (n,) float32 drawn from the grids."""
    return draw(AREAS, n, gen), draw(STRENGTHS, n, gen)


def mask(h: int, w: int, area: torch.Tensor, strength: torch.Tensor) -> torch.Tensor:
    """(n, 1, h, w) brightness factors for per-image area and strength (tensors on one device)."""
    y, x = normalized_coords(h, w, area.device, area.dtype)
    r = torch.sqrt((x * x + y * y) / 2.0)  # half-diagonal = sqrt(2) in [-1, 1] coordinates
    a = area[:, None, None, None]
    t = ((r - (1.0 - a)) / a.clamp_min(1e-12)).clamp(0.0, 1.0)
    t = torch.where(a > 0, t, torch.zeros_like(t))
    return 1.0 - strength[:, None, None, None] * t * t


def apply(images: torch.Tensor, area, strength) -> torch.Tensor:
    """Multiply every channel by the vignette mask (area in [0, 1], strength in [0, 1])."""
    check_images(images)
    n, _, h, w = images.shape
    dtype = to_work(images[:0]).dtype
    a = per_image(area, n, "vignette area", 0.0, 1.0, images.device, dtype)
    s = per_image(strength, n, "vignette strength", 0.0, 1.0, images.device, dtype)

    def kernel(x: torch.Tensor, a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return from_work(to_work(x) * mask(h, w, a, s), x)

    return chunked(kernel, images, a, s)


def vignette(images: torch.Tensor, *, area=None, strength=None, seed: int | None = None,
             gen: torch.Generator | None = None) -> torch.Tensor:
    """Vignetting of §4.1 on a batch: explicit area and strength (identity: strength 0), else drawn."""
    check_images(images)
    if (area is None) != (strength is None):
        raise ValueError("vignette: give both area and strength, or neither (to draw them)")
    if area is None:
        area, strength = sample(images.shape[0], gen=make_generator(seed, gen))
    return apply(images, area, strength)


__all__ = ["AREAS", "STRENGTHS", "count", "sample", "mask", "apply", "vignette"]
