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
    # receives are posted before the sends (Gloo moves an expected message at line rate, see ring.py);
    # raw contributions land in one scratch slot per peer
    got = {i: ch.irecv(mine.numel(), i, slot * mine.numel()) for slot, i in enumerate(_others(P, r))}
    sends = []
    for k in _others(P, r):
        payload = ch.encode(parts[k])
        sends.append((payload, ch.isend(payload, k)))  # the payload stays alive until its send completes
    own = mine.clone()
    mine.zero_()
    for i in range(P):  # in rank order, on every owner
        if i == r:
            mine.add_(own)
        else:
            payload, w = got[i]
            w.wait()
            ch.add_into(payload, mine)
    for _, w in sends:
        w.wait()  # raw parts are views of buf, which the receives below overwrite
    payload = ch.finalize(mine)
    back = {i: ch.irecv_final(parts[i], i) for i in _others(P, r)}
    sends = [ch.isend(payload, k) for k in _others(P, r)]
    for i, (part, w) in back.items():
        w.wait()
        ch.decode_into(part, parts[i])
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
