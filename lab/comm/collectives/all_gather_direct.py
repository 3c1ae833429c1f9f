"""Direct all-gather: every rank sends its row straight to every other rank in one batch (the second
half of Deep Image's butterfly synchronisation, Wu et al. 2015 §3.1): (P-1)·L + (P-1)/P·m·G, as the
direct reduce-scatter. `phase` is the same inside an allreduce, over a Channel: the owner encodes its
shard once and keeps the decoded value, like its receivers."""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Collective
from .chunked import others


def run(comm: Comm, rows: torch.Tensor) -> None:
    peers = others(comm.size, comm.rank)
    comm.exchange([(rows[comm.rank], p) for p in peers], [(rows[p], p) for p in peers]).wait()


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel) -> None:
    """Every rank gets every shard, shards[comm.rank] encoded once by its owner; each arrival decoded as
    soon as it is received."""
    peers = others(comm.size, comm.rank)
    payload = ch.finalize(shards[comm.rank], ("direct-own",))
    back = [ch.final_buffer(shards[p]) for p in peers]
    batch = ch.post([(payload, p) for p in peers], list(zip(back, peers)))
    for j, p in enumerate(peers):
        batch.recvs[j].wait()
        ch.decode_into(back[j], shards[p])
    batch.wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    """P-1 messages of m/P, sent at once."""
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="all_gather", name="direct", summary="direct: every row straight to every rank, one batch",
    citation="Wu et al. 2015 (Deep Image) §3.1 butterfly synchronisation, its all-gather half",
    run=run, coefficients=coefficients, total_bytes=total_bytes, phase=phase, order=40)
