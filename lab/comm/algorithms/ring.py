"""Pipelined ring allreduce (Baidu's ring; paper 001 "Pipeline": 2L(P-1) + 2γmG(P-1)/P).

The vector is cut into P segments. Reduce-scatter: in step s rank r sends segment r-s to its
right neighbour and adds segment r-s-1 from its left one; after P-1 steps it holds the sum of
segment r+1. Allgather: the P-1 sums travel once more around the ring, forwarded unchanged.
The two halves are the registered ring reduce-scatter and all-gather (`lab.comm.collectives`, their
channel forms), chained at the boundary: each chunk of the rank's sum goes on as soon as it is
reduced, while its later chunks are still being reduced. Segments longer than the channel's chunk
travel as several messages, and each chunk moves on as soon as it is reduced (or received), so one
chunk's decode-add-encode overlaps the next chunk's transfer, as NCCL's ring does with its slices;
where the comm allows it a step's receives are posted at its start (`collectives.chunked.RingPass`).
"""
from __future__ import annotations

import torch

from .. import cluster as cl
from ..base import Comm
from ..channel import Channel
from ..collectives import allreduce_phases
from ..pieces import pieces
from .base import Algorithm
from .common import RegisteredGather


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    """The registered ring reduce-scatter, handing over to the registered ring all-gather at the boundary
    (`allreduce_phases`), over segment r+1 as rank r's shard: in step 0 every rank sends its own segment."""
    P = comm.size
    if P == 1:
        return
    segs = pieces(buf, P)
    allreduce_phases(comm, segs[1:] + segs[:1], ch, "ring", "ring")


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
