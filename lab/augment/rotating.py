"""Rotation (Wu et al. 2015 §4.1, Table 1: 20 possible changes).

The paper gives only the count. Reading: whole-degree angles ±1..±10 (20 values), about the crop's
centre, bilinear, with reflected borders so the whole rotated crop is image (§4.1: "the whole
augmented image feeds into the training net"). Angle 0 is the identity (exact). Positive angles
turn the picture counter-clockwise.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .common import (check_images, chunked, draw, from_work, make_generator, normalized_coords, per_image,
                     to_work, warp_changed)

ANGLES: tuple[int, ...] = tuple(a for a in range(-10, 11) if a != 0)  # degrees
MAX_ANGLE = 180.0


def count() -> int:
    """Distinct rotations: |ANGLES|."""
    return len(set(ANGLES))


def sample(n: int, *, gen: torch.Generator) -> torch.Tensor:
    """(n,) angles in degrees drawn from ANGLES."""
    return draw(ANGLES, n, gen)


def grid(h: int, w: int, degrees: torch.Tensor) -> torch.Tensor:
    """(n, h, w, 2) grid_sample grid rotating each image by its angle, in pixel units (any aspect)."""
    y, x = normalized_coords(h, w, degrees.device, degrees.dtype)
    X, Y = x * (w / 2.0), y * (h / 2.0)
    t = degrees[:, None, None] * (math.pi / 180.0)
    c, s = torch.cos(t), torch.sin(t)
    xs = c * X - s * Y  # y points down: this samples a counter-clockwise turn
    ys = s * X + c * Y
    return torch.stack((xs / (w / 2.0), ys / (h / 2.0)), dim=-1)


def apply(images: torch.Tensor, degrees) -> torch.Tensor:
    """Rotate image n by degrees[n] (|angle| <= 180; 0 = identity)."""
    check_images(images)
    n, _, h, w = images.shape
    d = per_image(degrees, n, "rotation angle (degrees)", -MAX_ANGLE, MAX_ANGLE, images.device,
                  to_work(images[:0]).dtype)

    def kernel(x: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
        out = F.grid_sample(to_work(x), grid(h, w, deg), mode="bilinear", padding_mode="reflection",
                            align_corners=False)
        return from_work(out, x)

    return warp_changed(images, d != 0, lambda x, idx: chunked(kernel, x, d[idx], kind="warp"))


def rotate(images: torch.Tensor, *, degrees=None, seed: int | None = None,
             gen: torch.Generator | None = None) -> torch.Tensor:
    """Rotation on a batch: explicit degrees (identity: 0), else drawn from ANGLES."""
    check_images(images)
    if degrees is None:
        degrees = sample(images.shape[0], gen=make_generator(seed, gen))
    return apply(images, degrees)


__all__ = ["ANGLES", "MAX_ANGLE", "count", "sample", "grid", "apply", "rotate"]
