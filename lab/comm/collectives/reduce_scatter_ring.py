"""Ring reduce-scatter: P-1 steps, each rank adds the partial sum from its left neighbour to its own
block and passes it on; rank r ends with block r (Thakur, Rabenseifner & Gropp 2005 §4.3; NCCL ring):
(P-1)·L + (P-1)/P·m·G. With a codec, the partial sum is decoded, added and re-encoded at every hop."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective
from .wire import Wire


def run(comm: Comm, blocks: torch.Tensor, wire: Wire) -> None:
    P, r, k = comm.size, comm.rank, blocks.shape[1]
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        got = wire.buffer(k)
        comm.exchange([(wire.payload(blocks[(r - 1 - s) % P]), right)], [(got, left)]).wait()
        wire.add(got, blocks[(r - 2 - s) % P])


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="reduce_scatter", name="ring", summary="ring: P-1 steps, add the left neighbour's partial sum, pass it on",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.3 (ring); NCCL ring reduce-scatter",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
