"""Binomial-tree reduce: ceil(log2 P) rounds, half the remaining ranks hand their partial sums to a
partner each round, the root ends with the sum (Thakur, Rabenseifner & Gropp 2005 §4.4, short
messages): ceil(log2 P)·(L + m·G). With a codec each partial sum is decoded, added and re-encoded."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective
from .wire import Wire, log2_ceil


def run(comm: Comm, buf: torch.Tensor, wire: Wire, root: int = 0) -> None:
    P = comm.size
    v = (comm.rank - root) % P
    real = lambda u: (u + root) % P  # noqa: E731
    mask = 1
    while mask < P:
        if v & mask:
            comm.exchange([(wire.payload(buf), real(v - mask))]).wait()
            return
        if v + mask < P:
            got = wire.buffer(buf.numel())
            comm.exchange(recvs=[(got, real(v + mask))]).wait()
            wire.add(got, buf)
        mask <<= 1


def coefficients(P: int, m: float) -> tuple[float, float]:
    d = log2_ceil(P)
    return float(d), d * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="reduce", name="binomial", summary="binomial tree: partial sums halve the senders every round",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.4 (binomial tree reduce)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
