"""Binomial tree allreduce: reduce to rank 0, then broadcast (paper 001 "Tree":
2L·log2P + 2γmG·log2P; ceil(log2 P) levels for any P).

Rank r sends its partial sum to r - lowbit(r) after adding its children r + 2^k (2^k < lowbit(r),
in increasing k). The root encodes the sum once; the broadcast forwards that payload unchanged.
Every transfer is one batch of `Comm.exchange`; a parent's sends to its children are one batch.
Codec payloads go in buffers kept on the comm (`Channel` slots): no allocation per level.
"""
from __future__ import annotations

import math

import torch

from ..base import Comm
from ..channel import Channel
from ..rank_trees import binomial
from .base import Algorithm
from .common import levels


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    parent, kids = binomial(r, P)
    for k in kids:  # each payload is added before the next arrives: one kept buffer for all
        ch.add_into(ch.recv(n, k, slot=("tree", "in")), buf)
    if parent is None:
        payload = ch.finalize(buf, slot=("tree", "down"))
    else:
        ch.send(ch.encode(buf, slot=("tree", "up")), parent)
        payload = ch.recv_into(buf, parent, slot=("tree", "down"))
    ch.post([(payload, k) for k in reversed(kids)]).wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Binomial gather of payload rows to rank 0, then binomial broadcast of all P rows."""
    P, r = comm.size, comm.rank
    parent, kids = binomial(r, P)
    for k in kids:  # child k holds rows k .. k + (k - r) - 1, its subtree
        comm.exchange(recvs=[(rows[k:min(2 * k - r, P)], k)]).wait()
    if parent is not None:
        comm.exchange([(rows[r:min(2 * r - parent, P)], parent)]).wait()
        comm.exchange(recvs=[(rows, parent)]).wait()
    comm.exchange([(rows, k) for k in reversed(kids)]).wait()


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """2L·d + 2mG·d, d = ceil(log2 P) levels (paper 001 "Tree")."""
    d = levels(P)
    return 2.0 * d, 2.0 * m * d


def _total_bytes(P: int, m: float) -> float:
    """P−1 sends up the tree and P−1 down: 2(P−1)m."""
    return 2.0 * (P - 1) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """d reduce levels, the root's finalize and keep, one decode per broadcast level."""
    d = levels(P)
    return (d + 1) * n, (2 * d + 1) * n


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """Binomial gather to rank 0, then binomial broadcast of all P rows: 2d·L + ((P−1) + dP)qG."""
    d = levels(P)
    return 2.0 * d, ((P - 1) + d * P) * q


def _hops(P: int) -> int:
    """One encode per level of the binomial tree up to rank 0, then the sum's once for the broadcast."""
    return math.ceil(math.log2(P)) + 1


ALGORITHM = Algorithm(
    name="tree", summary="binomial tree: reduce to rank 0, then broadcast",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "Tree": 2L·log2P + 2mG·log2P',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_gather_coefficients, hops=_hops, order=10)
