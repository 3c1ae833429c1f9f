"""Direct reduce-scatter: every rank sends block j straight to rank j in one batch and each owner sums
the P blocks in rank order (an all-to-all, then a local sum). With a codec every block is encoded once
at its source and decoded once at its owner, the one-shot scheme of ZeRO++'s qgZ (Wang et al. 2023
§3.3, whose all-to-all also runs hierarchically): (P-1)·L + (P-1)/P·m·G."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective
from .wire import Wire


def run(comm: Comm, blocks: torch.Tensor, wire: Wire) -> None:
    P, r, k = comm.size, comm.rank, blocks.shape[1]
    peers = [(r + s) % P for s in range(1, P)]
    got = {p: wire.buffer(k) for p in peers}
    comm.exchange([(wire.payload(blocks[p]), p) for p in peers], [(got[p], p) for p in peers]).wait()
    total = torch.zeros(k, dtype=blocks.dtype, device=blocks.device)
    for p in range(P):  # rank order on every owner
        if p == r:
            total.add_(blocks[r])
        else:
            total.add_(wire.values(got[p], k))
    blocks[r].copy_(total)


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="reduce_scatter", name="direct",
    summary="direct: block j straight to rank j, summed by its owner (qgZ's one-shot with a codec)",
    citation="ZeRO++ (Wang et al. 2023) §3.3 qgZ: all-to-all based reduce-scatter",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=40)
