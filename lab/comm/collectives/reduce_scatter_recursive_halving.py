"""Recursive-halving reduce-scatter: log2 P steps with partners P/2, P/4, ..., 1 apart, each keeping
the half of its blocks that holds its own and sending the other half (Thakur, Rabenseifner & Gropp
2005 §4.3). P not a power of two: the even rank of each of the first 2(P-P') pairs hands its whole
buffer to the odd one before the core and gets its block back after it (2 more steps). `phase` is
the core inside an allreduce, over a Channel (Rabenseifner's halving)."""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from ..rank_trees import Fold
from .base import Collective
from .chunked import joined
from .wire import Wire


def run(comm: Comm, blocks: torch.Tensor, wire: Wire) -> None:
    P, r, k = comm.size, comm.rank, blocks.shape[1]
    f = Fold(P, r)
    if f.vrank is None:
        comm.exchange([(wire.payload(blocks), f.partner)]).wait()
        got = wire.buffer(k)
        comm.exchange(recvs=[(got, f.partner)]).wait()
        blocks[r].copy_(wire.values(got, k))
        return
    if f.partner is not None:
        got = wire.buffer(P * k)
        comm.exchange(recvs=[(got, f.partner)]).wait()
        wire.add(got, blocks)
    v, d = f.vrank, f.core // 2
    while d >= 1:
        pv, base = v ^ d, v & ~(2 * d - 1)
        keep, give = (base + d, base) if v & d else (base, base + d)
        a, b = f.lo(give), f.lo(give + d)
        c, e = f.lo(keep), f.lo(keep + d)
        got = wire.buffer((e - c) * k)
        comm.exchange([(wire.payload(blocks[a:b]), f.real(pv))], [(got, f.real(pv))]).wait()
        wire.add(got, blocks[c:e])
        d //= 2
    if f.partner is not None:  # the even partner's block is inside this rank's range
        comm.exchange([(wire.payload(blocks[f.partner]), f.partner)]).wait()


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel) -> None:
    """shards[comm.rank] becomes the fp32 sum over the ranks of their shards[comm.rank] (shards of any lengths,
    the same on every rank; P a power of two: an allreduce folds the other ranks in first): log2 P steps,
    partners P/2, ..., 1 apart, each sending the encoded half of its shards that holds the partner's as one
    payload and decoding and adding the partner's into the half that holds its own (Rabenseifner's halving)."""
    k, i = comm.size, comm.rank
    if k & (k - 1):
        raise ValueError(f"reduce_scatter recursive_halving: its channel form runs on a power of two of ranks, "
                         f"not {k} (an allreduce folds the others in first)")
    lo, d = 0, k // 2
    while d >= 1:
        keep, give = (lo + d, lo) if i & d else (lo, lo + d)
        send, into = _joined(shards[give:give + d]), _joined(shards[keep:keep + d])
        got = ch.exchange(ch.encode(send, slot=("halving", d)), i ^ d, into.numel(), slot=("halving", d))
        ch.add_into(got, into)
        if into.numel() and into.data_ptr() != shards[keep].data_ptr():  # a copy: the sums go back
            for x, y in zip(shards[keep:keep + d], into.split([x.numel() for x in shards[keep:keep + d]])):
                x.copy_(y)
        lo, d = keep, d // 2


def _joined(shards: list[torch.Tensor]) -> torch.Tensor:
    """The shards as one tensor: a view where they lie side by side, else a copy."""
    view = joined(shards)
    return view if view is not None else torch.cat(shards)


def coefficients(P: int, m: float) -> tuple[float, float]:
    """log2 P' steps moving (P'-1)/P'·m; P not a power of two: 2 more steps, m in and m/P out."""
    core = 1 << (P.bit_length() - 1)
    k = core.bit_length() - 1
    if core == P:
        return float(k), (P - 1) / P * m
    return float(k + 2), (P - 1) / P * m + m + m / P


def total_bytes(P: int, m: float) -> float:
    core = 1 << (P.bit_length() - 1)
    return (P - 1) * m + (P - core) * (m + m / P)


COLLECTIVE = Collective(
    op="reduce_scatter", name="recursive_halving",
    summary="recursive halving: log2 P exchanges with partners P/2, ..., 1 apart, data halving",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.3 (recursive halving; fold for P not a power of two)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, phase=phase, order=20)
