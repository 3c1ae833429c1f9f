"""Horizontal flipping (Wu et al. 2015 §4.1 after Krizhevsky et al. 2012; Table 1: 2 possible
changes). The paper counts both outcomes, flipped and not; each is drawn with probability 1/2."""
from __future__ import annotations

import torch

from .common import check_images, check_probability, chunked, coin, make_generator

FLIPS: tuple[bool, ...] = (False, True)


def count() -> int:
    """Outcomes counted by Table 1: |FLIPS| (the unflipped image included)."""
    return len(set(FLIPS))


def sample(n: int, *, gen: torch.Generator, p: float = 0.5) -> torch.Tensor:
    """(n,) Booleans: flip image n."""
    return coin(n, check_probability(p), gen)


def apply(images: torch.Tensor, flips) -> torch.Tensor:
    """Mirror left-right the images where flips is True (one Boolean or one per image)."""
    check_images(images)
    f = torch.as_tensor(flips)
    if f.dtype != torch.bool:
        raise ValueError(f"flips must be Booleans, got {f.dtype}")
    f = f.flatten()
    if f.numel() == 1:
        f = f.expand(images.shape[0])
    if f.numel() != images.shape[0]:
        raise ValueError(f"flips: give one or one per image ({images.shape[0]}), got {f.numel()}")
    f = f.to(images.device)

    def kernel(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        return torch.where(f[:, None, None, None], x.flip(-1), x)

    return chunked(kernel, images, f)


def flip(images: torch.Tensor, *, flips=None, p: float = 0.5, seed: int | None = None,
         gen: torch.Generator | None = None) -> torch.Tensor:
    """Horizontal flip on a batch: explicit flips (identity: False), else each with probability p."""
    check_images(images)
    if flips is None:
        flips = sample(images.shape[0], gen=make_generator(seed, gen), p=p)
    return apply(images, flips)


__all__ = ["FLIPS", "count", "sample", "apply", "flip"]
