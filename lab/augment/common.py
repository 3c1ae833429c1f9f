"""Shared pieces of the Deep Image augmentations (Wu et al. 2015 §4.1): input checks, seeded
parameter draws, dtype round trips.

Images are batched tensors (N, C, H, W) on any device: uint8 in 0..255, or float (16/32/64) in
[0, 1]. Every op returns the input's dtype and device. Random parameters are drawn on the CPU
from a `torch.Generator` (seed -> identical parameters on CPU and GPU), then moved to the images'
device; the pixel work runs where the images are.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Sequence

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_images(images: torch.Tensor) -> torch.Tensor:
    """A (N, C, H, W) uint8 or float tensor, else ValueError."""
    if not isinstance(images, torch.Tensor):
        raise ValueError(f"images must be a torch.Tensor (N, C, H, W), got {type(images).__name__}")
    if images.dim() != 4:
        raise ValueError(f"images must have shape (N, C, H, W), got {tuple(images.shape)}")
    if images.dtype != torch.uint8 and images.dtype not in FLOAT_DTYPES:
        raise ValueError(f"images must be uint8 (0..255) or float in [0, 1], got {images.dtype}")
    return images


def unit(images: torch.Tensor) -> float:
    """Intensity of one 8-bit step in the images' scale: 1 for uint8, 1/255 for float."""
    return 1.0 if images.dtype == torch.uint8 else 1.0 / 255.0


def to_work(images: torch.Tensor) -> torch.Tensor:
    """Float working copy (float32 for uint8 and half types, float64 stays)."""
    return images.to(torch.float64 if images.dtype == torch.float64 else torch.float32)


def from_work(work: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Back to `like`'s dtype: uint8 rounded and clamped to 0..255, floats clamped to [0, 1]."""
    if like.dtype == torch.uint8:
        return work.round().clamp_(0, 255).to(torch.uint8)
    return work.clamp(0.0, 1.0).to(like.dtype)


def make_generator(seed: int | None = None, gen: torch.Generator | None = None) -> torch.Generator:
    """The CPU generator parameters are drawn from: `gen` if given, else one seeded with `seed`
    (None draws a fresh seed from torch's global generator)."""
    if gen is not None:
        if seed is not None:
            raise ValueError("give seed or generator, not both")
        return gen
    if seed is None:
        seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an int in 0..2**63-1, got {seed!r}")
    return torch.Generator().manual_seed(int(seed))


def draw(grid: Sequence, n: int, gen: torch.Generator, dtype=torch.float32) -> torch.Tensor:
    """n values drawn uniformly (with replacement) from `grid`, on the CPU."""
    values = torch.tensor(list(grid), dtype=dtype)
    return values[torch.randint(len(values), (n,), generator=gen)]


def coin(n: int, p: float, gen: torch.Generator) -> torch.Tensor:
    """n Booleans, each True with probability p."""
    check_probability(p)
    return torch.rand(n, generator=gen) < p


def check_probability(p: float, what: str = "p") -> float:
    if isinstance(p, bool) or not isinstance(p, Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{what} must be a probability in [0, 1], got {p!r}")
    return float(p)


def per_image(values, n: int, what: str, lo: float, hi: float, device: torch.device,
              dtype=torch.float32) -> torch.Tensor:
    """Explicit parameters: a scalar or one value per image, each in [lo, hi], as an (n,) tensor."""
    t = torch.as_tensor(values, dtype=torch.float64).flatten()
    if t.numel() == 1:
        t = t.expand(n)
    if t.numel() != n:
        raise ValueError(f"{what}: give one value or one per image ({n}), got {t.numel()}")
    if not torch.isfinite(t).all() or (t < lo).any() or (t > hi).any():
        bad = t[~(torch.isfinite(t) & (t >= lo) & (t <= hi))][0].item()
        raise ValueError(f"{what} must lie in [{lo:g}, {hi:g}], got {bad:g}")
    return t.to(device=device, dtype=dtype)


def grid_label(grid: Sequence[float]) -> str:
    """'min..max step s (k values)' for a regular grid, else the values."""
    g = list(grid)
    pos = [v for v in g if v > 0]
    if len(pos) > 2 and sorted(g) == sorted([-v for v in pos] + pos):  # a symmetric grid without 0
        step = pos[1] - pos[0]
        if all(abs((b - a) - step) < 1e-9 for a, b in zip(pos, pos[1:])):
            return f"±{pos[0]:g}..±{pos[-1]:g} step {step:g} ({len(g)} values)"
    if len(g) > 2:
        step = g[1] - g[0]
        if all(abs((b - a) - step) < 1e-9 for a, b in zip(g, g[1:])):
            return f"{g[0]:g}..{g[-1]:g} step {step:g} ({len(g)} values)"
    return ", ".join(f"{v:g}" for v in g) + f" ({len(g)} values)"


# Work per chunk on the CPU (values of one image x images): batched ops over a whole batch of 224²
# crops spill the caches; chunks that fit run 2-3x faster on one core. On a GPU the whole batch goes
# in one call (one launch per kernel).
CPU_CHUNK_VALUES = {"pointwise": 600_000, "warp": 150_528}


def chunked(kernel, images: torch.Tensor, *params: torch.Tensor, kind: str = "pointwise") -> torch.Tensor:
    """kernel(images, *params) over the batch, in cache-sized chunks of images on the CPU."""
    n = images.shape[0]
    per = max(1, CPU_CHUNK_VALUES[kind] // max(1, images[0].numel())) if images.device.type == "cpu" else n
    if per >= n:
        return kernel(images, *params)
    return torch.cat([kernel(images[i:i + per], *(p[i:i + per] for p in params)) for i in range(0, n, per)])


def warp_changed(images: torch.Tensor, changed: torch.Tensor, warp) -> torch.Tensor:
    """warp(images[changed]) written into a copy of images; identity images are left untouched."""
    if not bool(changed.any()):
        return images
    if bool(changed.all()):
        return warp(images, torch.arange(images.shape[0], device=images.device))
    idx = changed.nonzero().flatten()
    out = images.clone()
    out[idx] = warp(images[idx], idx)
    return out


def normalized_coords(h: int, w: int, device: torch.device, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel-centre coordinates in [-1, 1] (grid_sample's align_corners=False convention), (h, w) each."""
    ys = (torch.arange(h, device=device, dtype=dtype) * 2 + 1) / h - 1
    xs = (torch.arange(w, device=device, dtype=dtype) * 2 + 1) / w - 1
    return torch.meshgrid(ys, xs, indexing="ij")


__all__ = ["FLOAT_DTYPES", "check_images", "unit", "to_work", "from_work", "make_generator", "draw", "coin",
           "check_probability", "per_image", "grid_label", "normalized_coords", "chunked", "warp_changed",
           "CPU_CHUNK_VALUES"]
