"""Binomial-tree reduce: ceil(log2 P) rounds, half the remaining ranks hand their partial sums to a
partner each round, the root ends with the sum (Thakur, Rabenseifner & Gropp 2005 §4.4, short
messages): ceil(log2 P)·(L + m·G). With a codec each partial sum is decoded, added and re-encoded."""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import binomial
from .base import Collective
from .broadcast_binomial import coefficients, total_bytes  # the same tree, walked leaves to root
from .wire import Wire


def run(comm: Comm, buf: torch.Tensor, wire: Wire, root: int = 0) -> None:
    P = comm.size
    parent, kids = binomial((comm.rank - root) % P, P)
    real = lambda u: (u + root) % P  # noqa: E731
    for k in kids:
        got = wire.buffer(buf.numel())
        comm.exchange(recvs=[(got, real(k))]).wait()
        wire.add(got, buf)
    if parent is not None:
        comm.exchange([(wire.payload(buf), real(parent))]).wait()


COLLECTIVE = Collective(
    op="reduce", name="binomial", summary="binomial tree: partial sums halve the senders every round",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.4 (binomial tree reduce)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
