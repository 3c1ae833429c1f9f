"""Parameter server (paper 001 "parameter consistency"; Dean et al. 2012): rank 0 serves and also
works. Workers push their whole gradient to the server, which adds them in rank order, encodes
the sum once and sends it to every worker: the server's link carries 2(P-1) messages of m bytes.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel

SERVER = 0


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    if r != SERVER:
        ch.isend(ch.encode(buf), SERVER).wait()
        ch.recv_into(buf, SERVER)
        return
    for i in range(1, P):
        ch.add_into(ch.recv(n, i), buf)
    payload = ch.finalize(buf)
    for w in [ch.isend(payload, k) for k in range(1, P)]:
        w.wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Workers push their payload row; the server relays all P rows to every worker."""
    P, r = comm.size, comm.rank
    if r != SERVER:
        comm.send(rows[r], SERVER)
        comm.recv(rows, SERVER)
        return
    for i in range(1, P):
        comm.recv(rows[i], i)
    for w in [comm.isend(rows, k) for k in range(1, P)]:
        w.wait()
