"""Parameter server (paper 001 "parameter consistency"; Dean et al. 2012): rank 0 serves and also
works. Workers push their whole gradient to the server, which adds them in rank order, encodes
the sum once and sends it to every worker: the server's link carries 2(P-1) messages of m bytes.
Every transfer is one batch of `Comm.exchange`; the server's sends to the workers are one batch.
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
        ch.send(ch.encode(buf), SERVER)
        ch.recv_into(buf, SERVER)
        return
    for i in range(1, P):  # one at a time, in rank order: one receive buffer
        ch.add_into(ch.recv(n, i), buf)
    payload = ch.finalize(buf)
    ch.post([(payload, k) for k in range(1, P)]).wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Workers push their payload row; the server relays all P rows to every worker."""
    P, r = comm.size, comm.rank
    if r != SERVER:
        comm.exchange([(rows[r], SERVER)]).wait()
        comm.exchange(recvs=[(rows, SERVER)]).wait()
        return
    comm.exchange(recvs=[(rows[i], i) for i in range(1, P)]).wait()
    comm.exchange([(rows, k) for k in range(1, P)]).wait()
