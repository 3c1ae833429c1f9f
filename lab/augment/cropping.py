"""Random cropping (Wu et al. 2015 §4.1; Table 1: 82944 possible changes for a 224x224 crop of a
512x512 image). The crop comes first; every other augmentation works on the crop.

82944 = 288^2 = (512 − 224)^2: the paper counts H − h offsets per axis, the way
`randint(0, H − h)` (exclusive upper end) draws them; the last position, offset H − h, is never
drawn. We draw offsets the same way, so the count follows from the grid. A crop as large as the
image has the one offset 0 (the identity). Explicit offsets may be anything in 0..H − h.
"""
from __future__ import annotations

from numbers import Integral

import torch

from .common import check_images, make_generator

PAPER_IMAGE, PAPER_CROP = 512, 224


def size_pair(size, what: str) -> tuple[int, int]:
    s = (size, size) if isinstance(size, Integral) and not isinstance(size, bool) else tuple(size)
    if len(s) != 2 or not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 for v in s):
        raise ValueError(f"{what} must be a positive int or (height, width), got {size!r}")
    return int(s[0]), int(s[1])


def offsets(size: int, crop: int) -> range:
    """The offsets drawn along one axis: range(size − crop), or range(1) for a full-size crop."""
    if crop > size:
        raise ValueError(f"crop size {crop} is larger than the image ({size})")
    return range(size - crop) if size > crop else range(1)


def count(image_size=PAPER_IMAGE, crop_size=PAPER_CROP) -> int:
    """Distinct crops drawn: |offsets(H, h)| × |offsets(W, w)|."""
    (H, W), (h, w) = size_pair(image_size, "image size"), size_pair(crop_size, "crop size")
    return len(offsets(H, h)) * len(offsets(W, w))


def sample(n: int, image_size, crop_size, *, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(top, left) offsets, each (n,) int64, uniform over `offsets`."""
    (H, W), (h, w) = size_pair(image_size, "image size"), size_pair(crop_size, "crop size")
    top = torch.randint(len(offsets(H, h)), (n,), generator=gen)
    left = torch.randint(len(offsets(W, w)), (n,), generator=gen)
    return top, left


def _check_offsets(v, n: int, hi: int, what: str) -> torch.Tensor:
    t = torch.as_tensor(v)
    if t.is_floating_point() or t.dtype == torch.bool:
        raise ValueError(f"crop {what} offsets must be integers in 0..{hi}")
    t = t.to(torch.int64).flatten()
    if t.numel() == 1:
        t = t.expand(n)
    if t.numel() != n:
        raise ValueError(f"crop {what}: give one offset or one per image ({n}), got {t.numel()}")
    if ((t < 0) | (t > hi)).any():
        raise ValueError(f"crop {what} offset must be an integer in 0..{hi}, got {int(t[(t < 0) | (t > hi)][0])}")
    return t


def apply(images: torch.Tensor, crop_size, top, left) -> torch.Tensor:
    """Crop image n at (top[n], left[n]) to crop_size: one batched gather on a GPU, row copies on the CPU."""
    check_images(images)
    n, c, H, W = images.shape
    h, w = size_pair(crop_size, "crop size")
    if h > H or w > W:
        raise ValueError(f"crop size {h}x{w} is larger than the images ({H}x{W})")
    dev = images.device
    t = _check_offsets(top, n, H - h, "top").to(dev)
    lft = _check_offsets(left, n, W - w, "left").to(dev)
    if dev.type == "cpu":  # row copies beat an element-wise gather on the CPU
        return torch.stack([images[i, :, a:a + h, b:b + w] for i, (a, b) in enumerate(zip(t.tolist(), lft.tolist()))])
    rows = (t[:, None] + torch.arange(h, device=dev))[:, None, :, None]   # (n, 1, h, 1)
    cols = (lft[:, None] + torch.arange(w, device=dev))[:, None, None, :]  # (n, 1, 1, w)
    idx = torch.arange(n, device=dev)[:, None, None, None]
    ch = torch.arange(c, device=dev)[None, :, None, None]
    return images[idx, ch, rows, cols]


def random_crop(images: torch.Tensor, crop_size=PAPER_CROP, *, top=None, left=None, seed: int | None = None,
                gen: torch.Generator | None = None) -> torch.Tensor:
    """Random crop on a batch: explicit top/left offsets (identity: full size at 0, 0), else drawn."""
    check_images(images)
    if (top is None) != (left is None):
        raise ValueError("crop: give both top and left, or neither (to draw them)")
    if top is None:
        top, left = sample(images.shape[0], tuple(images.shape[2:]), crop_size, gen=make_generator(seed, gen))
    return apply(images, crop_size, top, left)


__all__ = ["PAPER_IMAGE", "PAPER_CROP", "offsets", "count", "sample", "apply", "random_crop"]
