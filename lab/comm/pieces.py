"""Segment splitting shared by the channel and the allreduce algorithms: near-equal pieces."""
from __future__ import annotations

import torch


def bounds(n: int, parts: int) -> list[int]:
    """Offsets of `parts` near-equal pieces of n values (the first n % parts are one longer)."""
    q, r = divmod(n, parts)
    out = [0]
    for i in range(parts):
        out.append(out[-1] + q + (1 if i < r else 0))
    return out


def pieces(buf: torch.Tensor, parts: int) -> list[torch.Tensor]:
    """`buf` cut into `parts` near-equal views (see `bounds`)."""
    b = bounds(buf.numel(), parts)
    return [buf[b[i]:b[i + 1]] for i in range(parts)]


__all__ = ["bounds", "pieces"]
