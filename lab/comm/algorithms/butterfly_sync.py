"""Deep Image's butterfly synchronisation (Wu et al. 2015 §3.1): the gradient is cut into P parts
and GPU k owns part k; every rank sends part k to rank k, which adds the P contributions (in rank
order) and sends the sum back to everyone. Direct sends: 2L(P-1) + 2γmG(P-1)/P.
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
    parts = pieces(buf, P)
    mine = parts[r]
    sends = [ch.isend(ch.encode(parts[k]), k) for k in _others(P, r)]
    own = mine.clone()
    mine.zero_()
    for i in range(P):
        if i == r:
            mine.add_(own)
        else:
            ch.add_into(ch.recv(mine.numel(), i), mine)
    for w in sends:
        w.wait()
    payload = ch.finalize(mine)
    sends = [ch.isend(payload, k) for k in _others(P, r)]
    for i in _others(P, r):
        ch.recv_into(parts[i], i)
    for w in sends:
        w.wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Direct allgather: every rank sends its payload row to every other rank."""
    P, r = comm.size, comm.rank
    sends = [comm.isend(rows[r], k) for k in _others(P, r)]
    for i in _others(P, r):
        comm.recv(rows[i], i)
    for w in sends:
        w.wait()


def _others(P: int, r: int) -> list[int]:
    """Peers in the order r+1, r+2, ... so that not every rank hits rank 0 first."""
    return [(r + k) % P for k in range(1, P)]
