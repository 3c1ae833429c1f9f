"""Deep Image's augmentation pipeline (Wu et al. 2015 §4.1): crop first, then color casting,
vignetting, lens distortion, rotation and flipping on the crop ("all the augmentations are
performed on the cropped image (except cropping)").

The paper does not say how often each is used. Reading: every crop is cast (each channel's
Boolean is True with probability 1/2) and flipped with probability 1/2; vignetting, lens
distortion and rotation are each applied with probability `p` (default 1/2), else left out.
Parameters for a whole batch are drawn first (`sample_params`, CPU generator, seeded), then
applied in one batched call per op (`apply_params`), on the images' device.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from . import color_casting, cropping, distortion, flipping, rotating, vignetting
from .common import check_images, check_probability, coin, make_generator

OPS: tuple[str, ...] = ("crop", "color_cast", "vignette", "lens_distortion", "rotation", "flip")


@dataclass
class Params:
    """Per-image parameters of every op (first dimension n), on the CPU."""

    top: torch.Tensor       # crop offsets
    left: torch.Tensor
    shifts: torch.Tensor    # (n, C) color-cast offsets in 8-bit steps
    area: torch.Tensor      # vignette
    strength: torch.Tensor
    k: torch.Tensor         # signed lens distortion (+ barrel, − pincushion)
    degrees: torch.Tensor   # rotation
    flips: torch.Tensor     # Booleans

    def __getitem__(self, i) -> "Params":
        """The parameters of image(s) i (an int keeps a batch of one)."""
        sl = slice(i, i + 1) if isinstance(i, int) else i
        return Params(**{f.name: getattr(self, f.name)[sl] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.top)


def sample_params(n: int, channels: int, image_size, crop_size, *, gen: torch.Generator, p: float = 0.5) -> Params:
    """Draw every op's parameters for n images (identity where an op is left out)."""
    check_probability(p)
    top, left = cropping.sample(n, image_size, crop_size, gen=gen)
    shifts = color_casting.sample(n, channels, gen=gen)
    area, strength = vignetting.sample(n, gen=gen)
    strength = torch.where(coin(n, p, gen), strength, torch.zeros_like(strength))
    k = distortion.sample(n, gen=gen)
    k = torch.where(coin(n, p, gen), k, torch.zeros_like(k))
    degrees = rotating.sample(n, gen=gen)
    degrees = torch.where(coin(n, p, gen), degrees, torch.zeros_like(degrees))
    flips = flipping.sample(n, gen=gen)
    return Params(top, left, shifts, area, strength, k, degrees, flips)


def check_ops(ops) -> tuple[str, ...]:
    ops = tuple(ops)
    bad = [o for o in ops if o not in OPS]
    if bad:
        raise ValueError(f"unknown augmentation {bad[0]!r}; allowed: {', '.join(OPS)}")
    return ops


def apply_op(op: str, images: torch.Tensor, params: Params, crop_size) -> torch.Tensor:
    """One op with its parameters from `params` (batched)."""
    if op == "crop":
        return cropping.apply(images, crop_size, params.top, params.left)
    if op == "color_cast":
        return color_casting.apply(images, params.shifts)
    if op == "vignette":
        return vignetting.apply(images, params.area, params.strength)
    if op == "lens_distortion":
        return distortion.apply(images, params.k)
    if op == "rotation":
        return rotating.apply(images, params.degrees)
    if op == "flip":
        return flipping.apply(images, params.flips)
    check_ops([op])
    raise AssertionError(op)


def apply_params(images: torch.Tensor, params: Params, crop_size, ops=OPS) -> torch.Tensor:
    """Apply `ops` in the paper's order (crop first) with the given parameters."""
    check_images(images)
    chosen = check_ops(ops)
    if len(params) != images.shape[0]:
        raise ValueError(f"{len(params)} parameter sets for {images.shape[0]} images")
    out = images
    for op in OPS:
        if op in chosen:
            out = apply_op(op, out, params, crop_size)
    return out


def deep_image_augment(images: torch.Tensor, crop_size=cropping.PAPER_CROP, *, ops=OPS, p: float = 0.5,
                       seed: int | None = None, gen: torch.Generator | None = None) -> torch.Tensor:
    """The §4.1 pipeline on a batch: random crop, then the other ops on the crop; seeded."""
    check_images(images)
    check_ops(ops)
    n, c = images.shape[:2]
    if "crop" not in ops:
        crop_size = tuple(images.shape[2:])
    params = sample_params(n, c, tuple(images.shape[2:]), crop_size, gen=make_generator(seed, gen), p=p)
    return apply_params(images, params, crop_size, ops)


__all__ = ["OPS", "Params", "sample_params", "check_ops", "apply_op", "apply_params", "deep_image_augment"]
