"""Pipelined ring allreduce (Baidu's ring; paper 001 "Pipeline": 2L(P-1) + 2γmG(P-1)/P).

The vector is cut into P segments. Reduce-scatter: in step s rank r sends segment r-s to its
right neighbour and adds segment r-s-1 from its left one; after P-1 steps it holds the sum of
segment r+1. Allgather: the P-1 sums travel once more around the ring, forwarded unchanged.
Segments longer than the channel's chunk travel as several messages, and each chunk moves on
as soon as it is reduced (or received), so one chunk's decode-add-encode overlaps the next
chunk's transfer, as NCCL's ring does with its slices.
"""
from __future__ import annotations

import torch

from ..base import Comm, Work
from ..channel import Channel
from .common import pieces


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    segs = [ch.chunks(seg) for seg in pieces(buf, P)]
    right, left = (r + 1) % P, (r - 1) % P
    sent: list[tuple[torch.Tensor, Work]] = []  # payloads stay alive until their send completes
    width = sum(c.numel() for c in segs[0])  # the longest segment: one scratch bank

    def send(payload: torch.Tensor) -> None:
        sent.append((payload, ch.isend(payload, right)))

    # Receives are posted one step ahead: Gloo moves a message posted before it arrives at line
    # rate, an unexpected one at about half of it (measured on a shaped 1 Gbit/s link).
    def post_reduce(s: int) -> list[tuple[torch.Tensor, Work]]:
        """Receives of reduce-scatter step s, raw payloads into scratch bank s % 2."""
        off, out = (s % 2) * width, []
        for c in segs[(r - s - 1) % P]:
            out.append(ch.irecv(c.numel(), left, off))
            off += c.numel()
        return out

    def post_gather(s: int) -> list[tuple[torch.Tensor, Work]]:
        return [ch.irecv_final(c, left) for c in segs[(r - s) % P]]

    ahead = post_reduce(0)
    for c in segs[r]:
        send(ch.encode(c))
    finals = []
    for s in range(P - 1):
        recvs, ahead = ahead, (post_reduce(s + 1) if s < P - 2 else post_gather(0))
        for c, (got, w) in zip(segs[(r - s - 1) % P], recvs):
            w.wait()
            out = ch.reduce(got, c)
            if s < P - 2:
                send(out)
            else:  # the fully reduced segment r+1: keep the decoded value, forward the payload
                ch.decode_into(out, c)
                finals.append(out)
    _wait(sent)
    for p in finals:
        send(p)
    for s in range(P - 1):
        recvs, ahead = ahead, (post_gather(s + 1) if s < P - 2 else [])
        for c, (payload, w) in zip(segs[(r - s) % P], recvs):
            w.wait()
            ch.decode_into(payload, c)
            if s < P - 2:
                send(payload)
    _wait(sent)


def _wait(sent: list[tuple[torch.Tensor, Work]]) -> None:
    for _, w in sent:
        w.wait()
    sent.clear()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Ring allgather of one fixed-size payload row per rank (row r is this rank's)."""
    P, r = comm.size, comm.rank
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        w = comm.isend(rows[(r - s) % P], right)
        comm.recv(rows[(r - s - 1) % P], left)
        w.wait()
