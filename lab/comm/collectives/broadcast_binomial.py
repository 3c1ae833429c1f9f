"""Binomial-tree broadcast: ceil(log2 P) rounds, the ranks holding the data doubling each round
(Thakur, Rabenseifner & Gropp 2005 §4.2, short messages): ceil(log2 P)·(L + m·G). With a codec the
root encodes once and every rank forwards the payload unchanged; receivers decode it."""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import binomial, log2_ceil
from .base import Collective


def run(comm: Comm, buf: torch.Tensor, root: int = 0) -> None:
    P = comm.size
    parent, kids = binomial((comm.rank - root) % P, P)
    real = lambda u: (u + root) % P  # noqa: E731
    if parent is not None:
        comm.exchange(recvs=[(buf, real(parent))]).wait()
    comm.exchange([(buf, real(k)) for k in reversed(kids)]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    d = log2_ceil(P)
    return float(d), d * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="broadcast", name="binomial", summary="binomial tree: the holders double every round, ceil(log2 P) rounds",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.2 (binomial tree broadcast)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=10)
