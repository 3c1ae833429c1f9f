"""Direct reduce-scatter: every rank sends block j straight to rank j in one batch and each owner sums
the P blocks in rank order (an all-to-all, then a local sum). With a codec every block is encoded once
at its source and decoded once at its owner, the one-shot scheme of ZeRO++'s qgZ (Wang et al. 2023
§3.3, whose all-to-all also runs hierarchically): (P-1)·L + (P-1)/P·m·G. `phase` is the same inside an
allreduce, over a Channel (Deep Image's butterfly synchronisation, the hierarchical allreduce's node level)."""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Collective
from .chunked import others, sum_in_rank_order
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


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel) -> None:
    """shards[comm.rank] becomes the fp32 sum over the ranks of their shards[comm.rank]: every shard sent
    once to its owner in one batch, the owner adding them in rank order (its own in fp32) as they arrive.
    Raw payloads land in the channel's scratch, one slot per peer."""
    P, r = comm.size, comm.rank
    peers, mine = others(P, r), shards[r]
    got = [ch.buffer(mine.numel(), j * mine.numel()) for j in range(P - 1)]
    batch = ch.post([(ch.encode(shards[p], ("direct-rs", p)), p) for p in peers], list(zip(got, peers)))
    sum_in_rank_order(mine, r, peers, batch, got, ch)
    batch.wait()  # raw payloads are views of the shards, which an all-gather after this overwrites


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="reduce_scatter", name="direct",
    summary="direct: block j straight to rank j, summed by its owner (qgZ's one-shot with a codec)",
    citation="ZeRO++ (Wang et al. 2023) §3.3 qgZ: all-to-all based reduce-scatter",
    run=run, coefficients=coefficients, total_bytes=total_bytes, phase=phase, order=40)
