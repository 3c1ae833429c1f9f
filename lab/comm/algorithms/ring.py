"""Pipelined ring allreduce (Baidu's ring; paper 001 "Pipeline": 2L(P-1) + 2γmG(P-1)/P).

The vector is cut into P segments. Reduce-scatter: in step s rank r sends segment r-s to its
right neighbour and adds segment r-s-1 from its left one; after P-1 steps it holds the sum of
segment r+1. Allgather: the P-1 sums travel once more around the ring, forwarded unchanged.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .common import pieces


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    segs = pieces(buf, P)
    right, left = (r + 1) % P, (r - 1) % P
    out = ch.encode(segs[r])
    for s in range(P - 1):
        i = (r - s - 1) % P
        got = ch.exchange_to(out, right, left, segs[i].numel())
        out = ch.reduce(got, segs[i])
    ch.decode_into(out, segs[(r + 1) % P])
    for s in range(P - 1):
        i = (r - s) % P
        w = ch.isend(out, right)
        out = ch.recv_into(segs[i], left)
        w.wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Ring allgather of one fixed-size payload row per rank (row r is this rank's)."""
    P, r = comm.size, comm.rank
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        w = comm.isend(rows[(r - s) % P], right)
        comm.recv(rows[(r - s - 1) % P], left)
        w.wait()
