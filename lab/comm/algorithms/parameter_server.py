"""Parameter server (paper 001 "parameter consistency"; Dean et al. 2012): rank 0 serves and also
works. Workers push their whole gradient to the server, which adds them in rank order, encodes
the sum once and sends it to every worker: the server's link carries 2(P-1) messages of m bytes.
Every transfer is one batch of `Comm.exchange`; the server's sends to the workers are one batch.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Algorithm

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


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """2(P−1)(L + mG): rank 0's link carries P−1 pushes and P−1 pulls of the whole message."""
    return 2.0 * (P - 1), 2.0 * m * (P - 1)


def _total_bytes(P: int, m: float) -> float:
    return 2.0 * (P - 1) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """Push, the server decodes P−1 and keeps its encoded sum, the worker decodes."""
    return 2 * n, (P + 1) * n


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """Rank 0 gathers P−1 rows and sends each worker all P: 2(P−1)L + P(P−1)qG."""
    return 2.0 * (P - 1), P * (P - 1) * q


ALGORITHM = Algorithm(
    name="parameter_server", summary="rank 0 serves and works: workers push, the server sends the sum back",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "parameter consistency"; Dean et al. 2012: 2(P−1)(L + mG)',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_gather_coefficients, two_stage=True, hops=lambda P: 2, order=60)
