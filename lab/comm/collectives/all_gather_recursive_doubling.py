"""Recursive-doubling all-gather: log2 P steps, the exchanged data doubling each step (Thakur,
Rabenseifner & Gropp 2005 §4.1). P not a power of two: the first 2(P-P') ranks pair up, the even
one hands its row to the odd one before the core and gets every row back after it (2 more steps).
`phase` is the core inside an allreduce, over a Channel (Rabenseifner's allgather)."""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from ..rank_trees import Fold
from .base import Collective
from .chunked import joined


def run(comm: Comm, rows: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    f = Fold(P, r)
    if f.vrank is None:  # even rank of a pair: hand in, wait for everything
        comm.exchange([(rows[r], f.partner)]).wait()
        comm.exchange(recvs=[(rows, f.partner)]).wait()
        return
    if f.partner is not None:
        comm.exchange(recvs=[(rows[f.partner], f.partner)]).wait()
    v, d = f.vrank, 1
    while d < f.core:
        pv = v ^ d
        mine, theirs = v & ~(d - 1), pv & ~(d - 1)
        peer = f.real(pv)
        comm.exchange([(rows[f.lo(mine):f.lo(mine + d)], peer)],
                      [(rows[f.lo(theirs):f.lo(theirs + d)], peer)]).wait()
        d <<= 1
    if f.partner is not None:
        comm.exchange([(rows, f.partner)]).wait()


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel) -> list[torch.Tensor]:
    """The owner encodes shards[comm.rank] once (keeping the decoded value, like its receivers) and every rank
    gets every shard (P a power of two: an allreduce folds the other ranks in first): log2 P steps, partners
    1, 2, 4, ... apart, each sending the payloads of the shards its group holds as one message. Returns every
    shard's final payload (raw: the shard; a codec's: views of buffers kept on the comm, valid until the next
    call), for an allreduce to hand to its folded ranks."""
    k, i = comm.size, comm.rank
    if k & (k - 1):
        raise ValueError(f"all_gather recursive_doubling: its channel form runs on a power of two of ranks, "
                         f"not {k} (an allreduce folds the others in first)")
    payloads = {i: ch.finalize(shards[i], slot="owned")}
    d = 1
    while d < k:
        group, other = i & ~(d - 1), (i ^ d) & ~(d - 1)
        ours, theirs = shards[group:group + d], shards[other:other + d]
        if ch.codec is None:  # raw: the shards' values themselves, straight into place where they lie side by side
            mine, into = joined(ours), joined(theirs)
            mine = mine if mine is not None else torch.cat(ours)
            got = into if into is not None else torch.empty(sum(x.numel() for x in theirs), device=comm.device)
        else:  # every message of the doubling has a kept buffer of its own: the payloads received stay in use
            parts = [p for p in (payloads[u] for u in range(group, group + d)) if p.numel()]
            mine = ch.byte_buffer(sum(p.numel() for p in parts), ("doubling out", d))
            mine = torch.cat(parts, out=mine) if parts else mine
            got = ch.byte_buffer(sum(ch.nbytes(x.numel()) for x in theirs), ("doubling in", d))
        ch.post([(mine, i ^ d)], [(got, i ^ d)]).wait()
        sizes = [x.numel() if ch.codec is None else ch.nbytes(x.numel()) for x in theirs]
        for u, x, p in zip(range(other, other + d), theirs, got.split(sizes)):
            if ch.codec is not None:
                ch.decode_into(p, x)
            elif p.data_ptr() != x.data_ptr():
                x.copy_(p)
            payloads[u] = x if ch.codec is None else p
        d <<= 1
    return [payloads[u] for u in range(k)]


def coefficients(P: int, m: float) -> tuple[float, float]:
    """log2 P' steps moving (P'-1)/P'·m; P not a power of two: 2 more steps, m/P in and m out."""
    core = 1 << (P.bit_length() - 1)
    k = core.bit_length() - 1
    if core == P:
        return float(k), (P - 1) / P * m
    return float(k + 2), (P - 1) / P * m + m / P + m


def total_bytes(P: int, m: float) -> float:
    core = 1 << (P.bit_length() - 1)
    extra = P - core
    return (P - 1) * m + extra * (m / P + m)


COLLECTIVE = Collective(
    op="all_gather", name="recursive_doubling",
    summary="recursive doubling: log2 P exchanges with partners 1, 2, 4, ... apart, data doubling",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.1 (recursive doubling; fold for P not a power of two)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, phase=phase, order=20)
