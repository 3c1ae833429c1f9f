"""Color casting (Wu et al. 2015 §4.1, Table 1: 68920 possible changes).

"For each image, we generate three Boolean values to determine if the R, G and B channels should
be altered, respectively. If one channel should be altered, we add a random integer ranging from
-20 to +20 to that channel." Reading: an unaltered channel is the same image as a shift of 0, so
each channel ends with one of the 41 offsets -20..20; the distinct casts of a 3-channel image are
41^3 = 68921, less the one that changes nothing: 68920, the paper's count. Offsets are in 8-bit
intensity steps (1/255 of the range for float images); results are clamped to the valid range.
"""
from __future__ import annotations

import torch

from .common import (check_images, check_probability, chunked, coin, draw, from_work, make_generator, to_work,
                     unit)

SHIFTS: tuple[int, ...] = tuple(range(-20, 21))  # the random integer of §4.1
ALTER_P = 0.5  # chance that a channel's Boolean says "alter" (the paper does not give it)


def count(channels: int = 3) -> int:
    """Distinct non-identity casts: (offsets an altered or unaltered channel can end with)^C − 1."""
    offsets = set(SHIFTS) | {0}
    return len(offsets) ** channels - 1


def sample(n: int, channels: int = 3, *, gen: torch.Generator, p: float = ALTER_P) -> torch.Tensor:
    """(n, channels) int16 offsets: per channel a Boolean (True with probability p), then a shift
    from SHIFTS where True, 0 where False."""
    alter = coin(n * channels, p, gen).view(n, channels)
    shift = draw(SHIFTS, n * channels, gen, torch.int16).view(n, channels)
    return torch.where(alter, shift, torch.zeros_like(shift))


def check_shifts(shifts, n: int, channels: int) -> torch.Tensor:
    """Explicit offsets: shape (channels,) or (n, channels), integers in SHIFTS' range."""
    t = torch.as_tensor(shifts)
    if t.is_floating_point() and not torch.equal(t, t.round()):
        raise ValueError(f"color cast shifts must be integers in {SHIFTS[0]}..{SHIFTS[-1]}")
    t = t.to(torch.int64)
    if t.dim() == 1:
        t = t.expand(n, -1)
    if t.shape != (n, channels):
        raise ValueError(f"color cast shifts: shape ({channels},) or ({n}, {channels}), got {tuple(t.shape)}")
    lo, hi = min(SHIFTS), max(SHIFTS)
    if ((t < lo) | (t > hi)).any():
        raise ValueError(f"color cast shift must be an integer in {lo}..{hi}, got "
                         f"{int(t[(t < lo) | (t > hi)][0])}")
    return t.to(torch.int16)


def apply(images: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """Add shifts[n, c] 8-bit steps to channel c of image n, clamped (batched, any device)."""
    check_images(images)
    n, c = images.shape[:2]
    s = check_shifts(shifts, n, c).to(images.device)

    def kernel(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.uint8:
            return (x.to(torch.int16) + s[:, :, None, None]).clamp_(0, 255).to(torch.uint8)
        work = to_work(x)
        return from_work(work + s[:, :, None, None].to(work.dtype) * unit(x), x)

    return chunked(kernel, images, s)


def color_cast(images: torch.Tensor, *, shifts=None, p: float = ALTER_P, seed: int | None = None,
               gen: torch.Generator | None = None) -> torch.Tensor:
    """Color casting of §4.1 on a batch: explicit `shifts` (identity: all 0), else drawn with `seed`."""
    check_images(images)
    check_probability(p)
    if shifts is None:
        shifts = sample(images.shape[0], images.shape[1], gen=make_generator(seed, gen), p=p)
    return apply(images, shifts)


__all__ = ["SHIFTS", "ALTER_P", "count", "sample", "check_shifts", "apply", "color_cast"]
