"""Bruck all-gather: ceil(log2 P) steps for any P; at step k a rank sends the 2^k rows it holds to
rank r-2^k, then one local rotation (Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005 §4.1):
ceil(log2 P)·L + (P-1)/P·m·G."""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import log2_ceil
from .base import Collective


def run(comm: Comm, rows: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    tmp = torch.empty_like(rows)  # tmp[i] = row (r + i) % P
    tmp[0] = rows[r]
    d = 1
    while d < P:
        cnt = min(d, P - d)
        comm.exchange([(tmp[:cnt], (r - d) % P)], [(tmp[d:d + cnt], (r + d) % P)]).wait()
        d <<= 1
    rows.copy_(torch.roll(tmp, r, 0))


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(log2_ceil(P)), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="all_gather", name="bruck", summary="Bruck: ceil(log2 P) steps for any P, then a local rotation",
    citation="Bruck, Ho, Kipnis, Upfal & Weathersby 1997; Thakur, Rabenseifner & Gropp 2005 §4.1",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=30)
