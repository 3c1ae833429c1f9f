"""Lens distortion (Wu et al. 2015 §4.1, Table 1: 260 possible changes).

"The type of distortion and the degree of distortion are randomly changeable." Reading: the
two radial types, barrel and pincushion, each with 130 degrees 0.002..0.26: 2 × 130 = 260. An
output pixel at normalised position p (corners at r = 1, r^2 = |p|^2 / 2) samples the input at

    p · (1 + k·r^2) / (1 + k·r0^2)

with k = +degree (barrel) or −degree (pincushion); r0 = 1 (barrel keeps the corners) or
r0^2 = 1/2 (pincushion keeps the edge midpoints), so no sample falls outside the crop and the whole
distorted image feeds the net, as §4.1 wants. Bilinear sampling; degree 0 is the identity (exact).
The paper's "horizontal and vertical stretching" are not among the 260.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import (check_images, chunked, draw, from_work, make_generator, normalized_coords, per_image,
                     to_work, warp_changed)

KINDS: tuple[str, ...] = ("barrel", "pincushion")
DEGREES: tuple[float, ...] = tuple(round(0.002 * k, 3) for k in range(1, 131))
MAX_DEGREE = 1.0  # explicit degrees up to this are accepted


def count() -> int:
    """Distinct distortions: |KINDS| × |DEGREES|."""
    return len(KINDS) * len(set(DEGREES))


def sample(n: int, *, gen: torch.Generator) -> torch.Tensor:
    """(n,) signed k: +degree for barrel, −degree for pincushion, each kind with probability 1/2."""
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, 1.0, -1.0)
    return sign * draw(DEGREES, n, gen)


def signed(kind, degree, n: int) -> torch.Tensor:
    """k from kind(s) ('barrel' | 'pincushion', one or per image) and degree(s) in [0, MAX_DEGREE]."""
    kinds = [kind] * n if isinstance(kind, str) else list(kind)
    if len(kinds) != n:
        raise ValueError(f"lens distortion kind: give one or one per image ({n}), got {len(kinds)}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown lens distortion kind {bad[0]!r}; allowed: {', '.join(KINDS)}")
    d = per_image(degree, n, "lens distortion degree", 0.0, MAX_DEGREE, torch.device("cpu"))
    return d * torch.tensor([1.0 if k == "barrel" else -1.0 for k in kinds])


def grid(h: int, w: int, k: torch.Tensor) -> torch.Tensor:
    """(n, h, w, 2) sampling grid (x, y) for grid_sample, per-image signed k on k's device."""
    y, x = normalized_coords(h, w, k.device, k.dtype)
    r2 = (x * x + y * y) / 2.0
    kk = k[:, None, None]
    norm = 1.0 + kk * torch.where(kk >= 0, torch.ones_like(kk), torch.full_like(kk, 0.5))
    f = (1.0 + kk * r2) / norm
    return torch.stack((x * f, y * f), dim=-1)


def apply(images: torch.Tensor, k) -> torch.Tensor:
    """Radial distortion with signed k per image (|k| <= MAX_DEGREE; 0 = identity)."""
    check_images(images)
    n, _, h, w = images.shape
    kk = per_image(k, n, "lens distortion k", -MAX_DEGREE, MAX_DEGREE, images.device, to_work(images[:0]).dtype)

    def kernel(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        out = F.grid_sample(to_work(x), grid(h, w, k), mode="bilinear", padding_mode="border", align_corners=False)
        return from_work(out, x)

    return warp_changed(images, kk != 0, lambda x, idx: chunked(kernel, x, kk[idx], kind="warp"))


def lens_distortion(images: torch.Tensor, *, kind=None, degree=None, seed: int | None = None,
                    gen: torch.Generator | None = None) -> torch.Tensor:
    """Lens distortion of §4.1 on a batch: explicit kind and degree (identity: degree 0), else drawn."""
    check_images(images)
    n = images.shape[0]
    if (kind is None) != (degree is None):
        raise ValueError("lens distortion: give both kind and degree, or neither (to draw them)")
    k = sample(n, gen=make_generator(seed, gen)) if kind is None else signed(kind, degree, n)
    return apply(images, k)


__all__ = ["KINDS", "DEGREES", "MAX_DEGREE", "count", "sample", "signed", "grid", "apply", "lens_distortion"]
