"""Pipelined ring allreduce (Baidu's ring; paper 001 "Pipeline": 2L(P-1) + 2γmG(P-1)/P).

The vector is cut into P segments. Reduce-scatter: in step s rank r sends segment r-s to its
right neighbour and adds segment r-s-1 from its left one; after P-1 steps it holds the sum of
segment r+1. Allgather: the P-1 sums travel once more around the ring, forwarded unchanged.
Segments longer than the channel's chunk travel as several messages, and each chunk moves on
as soon as it is reduced (or received), so one chunk's decode-add-encode overlaps the next
chunk's transfer, as NCCL's ring does with its slices.

Every transfer is in one batch of `Comm.exchange` per chunk of a step: the chunk sent right and
the chunk received from the left (with P = 2 the same peer: NCCL-safe). Where the comm allows
it (`receive_ahead`: Gloo, SimComm) a step's receives are instead posted together at its start,
before the rank waits for the previous step's chunks, so they are posted before their messages
arrive: Gloo moves an expected message at line rate, an unexpected one at about half of it
(measured on a shaped 1 Gbit/s link).
"""
from __future__ import annotations

import torch

from .. import cluster as cl
from ..base import Comm, Work
from ..channel import Channel, overlapping
from ..pieces import pieces
from .base import Algorithm
from .common import RegisteredGather


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    segs = [ch.chunks(seg) for seg in pieces(buf, P)]
    right, left = (r + 1) % P, (r - 1) % P
    width = sum(c.numel() for c in segs[0])  # the longest segment: one scratch bank
    steps = 2 * (P - 1)  # P - 1 reduce-scatter steps, then P - 1 allgather steps

    def chunks_in(k: int) -> list[torch.Tensor]:
        """The chunks received from the left in step k (the ones sent right in step k + 1)."""
        return segs[(r - k - 1) % P] if k < P - 1 else segs[(r - k + P - 1) % P]

    def buffer(k: int, c: int) -> torch.Tensor:
        """Where chunk c of step k lands: raw reduce-scatter payloads in scratch bank k % 2, final
        payloads (allgather) in the segment itself when raw; codec payloads in the comm's reused
        buffers, bank k % 3 (a payload received in step k is forwarded or reduced in step k + 1,
        whose sends are waited for before step k + 3 asks for its buffers)."""
        chunk = chunks_in(k)[c]
        if k >= P - 1:
            return ch.final_buffer(chunk, slot=("ring", k % 3, c))
        return ch.buffer(chunk.numel(), (k % 2) * width + sum(x.numel() for x in chunks_in(k)[:c]),
                         slot=("ring", k % 3, c))

    got: dict[tuple[int, int], tuple[torch.Tensor, Work]] = {}  # (step, chunk) -> (payload, work)
    sent: list[list[tuple[torch.Tensor, Work]]] = []  # per step; payloads stay alive until sent
    ahead, serial = comm.receive_ahead and overlapping(), not overlapping()
    for k in range(steps):
        if len(sent) >= 2:  # the sends of step k - 2 are long received: free their payloads
            _wait(sent.pop(0))
        incoming = [buffer(k, c) for c in range(len(chunks_in(k)))]
        if ahead:  # the whole step's receives first, before this rank waits for any chunk
            batch = ch.post(recvs=[(b, left) for b in incoming])
            got.update({(k, c): (b, w) for c, (b, w) in enumerate(zip(incoming, batch.recvs))})
        out, mine = [], segs[r] if k == 0 else chunks_in(k - 1)
        for c in range(max(len(mine), len(incoming))):
            sends = []
            if c < len(mine):
                slot = ("ring", k % 2, c)  # the sends of step k - 2 are waited for above: free again
                payload = (ch.encode(mine[c], slot) if k == 0
                           else _arrived(ch, got.pop((k - 1, c)), mine[c], k - 1, P, slot))
                sends = [(payload, right)]
            recvs = [] if ahead or c >= len(incoming) else [(incoming[c], left)]
            batch = ch.post(sends, recvs)  # chunk c of step k both ways: one batch
            if serial:  # the baseline: this transfer completes before any more codec work
                batch.wait()
            out += [(p, w) for (p, _), w in zip(sends, batch.sends)]
            if recvs:
                got[(k, c)] = (incoming[c], batch.recvs[0])
        sent.append(out)
    for c, chunk in enumerate(chunks_in(steps - 1)):
        _arrived(ch, got.pop((steps - 1, c)), chunk, steps - 1, P)
    for s in sent:
        _wait(s)


def _arrived(ch: Channel, received: tuple[torch.Tensor, Work], chunk: torch.Tensor, k: int, P: int,
             slot: object = None) -> torch.Tensor:
    """Complete chunk `chunk` received in step k; the payload to send on. Reduce-scatter adds it
    into the send buffer `slot` (the last step keeps the decoded sum, like its receivers);
    allgather decodes it in place and forwards the received buffer itself."""
    payload, w = received
    w.wait()
    if k < P - 2:
        return ch.reduce(payload, chunk, slot)
    if k == P - 2:
        out = ch.reduce(payload, chunk, slot)
        ch.decode_into(out, chunk)
        return out
    ch.decode_into(payload, chunk)
    return payload


def _wait(sent: list[tuple[torch.Tensor, Work]]) -> None:
    for _, w in sent:
        w.wait()
    sent.clear()


#: gather mode: the registered ring all-gather (`lab.comm.collectives.all_gather_ring`), its cost model too
_GATHER = RegisteredGather("ring")
gather = _GATHER.gather


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """2L(P−1) + 2mG(P−1)/P (paper 001 "Pipeline")."""
    return 2.0 * (P - 1), 2.0 * m * (P - 1) / P


def _total_bytes(P: int, m: float) -> float:
    """2(P−1) segments of m/P per rank: 2(P−1)m in all."""
    return 2.0 * (P - 1) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """P−1 hops of n/P, the owner's finalize and keep, P−1 arrivals."""
    return n, (2 * P - 1) / P * n


def _scratch(n: int, P: int) -> int:
    """Two banks of the longest segment (steps alternate)."""
    return 2 * -(-n // P)


def cluster_time(cluster: cl.Cluster, n_values: float, codec: cl.CodecCost = cl.BF16, *,
                 intra_codec: cl.CodecCost | None = None, raw: cl.CodecCost = cl.BF16,
                 chunk_values: float | None = None) -> cl.CollectiveTime:
    """One ring over all P consecutive ranks of a two-level machine (`lab.comm.cluster.flat_time`): each
    node boundary is crossed by one flow per direction, which has a whole NIC (`Cluster.ring_link`), so
    only the node's last rank's sends leave it, 2(P−1)/P·m per allreduce; chunks of chunk_values overlap
    their codec work with the next chunk's transfer, as `reduce` sends them. One codec on every hop."""
    return cl.flat_time(cluster, n_values, codec, "ring", chunk_values, link=cluster.ring_link, senders_across=1)


def _hops(P: int) -> int:
    """Reduce-scatter: a segment's partial sum is re-encoded at each of P−1 hops, then its owner's sum once."""
    return P


ALGORITHM = Algorithm(
    name="ring", summary="pipelined ring: reduce-scatter, then allgather around the ring",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "Pipeline": 2L(P−1) + 2mG(P−1)/P; Baidu ring allreduce',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_GATHER.coefficients, scratch=_scratch,
    cluster_time=cluster_time, hops=_hops, order=30)
