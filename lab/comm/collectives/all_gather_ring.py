"""Ring all-gather: P-1 steps, each rank forwards the row it received last to its right neighbour
(Thakur, Rabenseifner & Gropp 2005 §4.1; NCCL's ring): (P-1)·L + (P-1)/P·m·G."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective


def run(comm: Comm, rows: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        comm.exchange([(rows[(r - s) % P], right)], [(rows[(r - s - 1) % P], left)]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    """(P-1) messages of m/P each."""
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    """Every rank sends P-1 rows of m/P."""
    return (P - 1) * m


COLLECTIVE = Collective(
    op="all_gather", name="ring", summary="ring: P-1 steps to the right neighbour, one row each",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.1 (ring); NCCL ring all-gather",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
