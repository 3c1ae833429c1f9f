"""Pairwise (direct) all-to-all: P-1 steps, at step s rank r sends block r+s to rank r+s and receives
from rank r-s (Thakur, Rabenseifner & Gropp 2005 §4.5, for any P): (P-1)·L + (P-1)/P·m·G."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective


def run(comm: Comm, inp: torch.Tensor, out: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    for s in range(1, P):
        dst, src = (r + s) % P, (r - s) % P
        comm.exchange([(inp[dst], dst)], [(out[src], src)]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="alltoall", name="pairwise", summary="pairwise: P-1 steps, block r+s to rank r+s, from rank r-s",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.5 (pairwise exchange)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
