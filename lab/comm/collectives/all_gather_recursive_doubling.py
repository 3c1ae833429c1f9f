"""Recursive-doubling all-gather: log2 P steps, the exchanged data doubling each step (Thakur,
Rabenseifner & Gropp 2005 §4.1). P not a power of two: the first 2(P-P') ranks pair up, the even
one hands its row to the odd one before the core and gets every row back after it (2 more steps)."""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import Fold
from .base import Collective


def run(comm: Comm, rows: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    f = Fold(P, r)
    if f.vrank is None:  # even rank of a pair: hand in, wait for everything
        comm.exchange([(rows[r], f.partner)]).wait()
        comm.exchange(recvs=[(rows, f.partner)]).wait()
        return
    if f.partner is not None:
        comm.exchange(recvs=[(rows[f.partner], f.partner)]).wait()
    v, d = f.vrank, 1
    while d < f.core:
        pv = v ^ d
        mine, theirs = v & ~(d - 1), pv & ~(d - 1)
        peer = f.real(pv)
        comm.exchange([(rows[f.lo(mine):f.lo(mine + d)], peer)],
                      [(rows[f.lo(theirs):f.lo(theirs + d)], peer)]).wait()
        d <<= 1
    if f.partner is not None:
        comm.exchange([(rows, f.partner)]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    """log2 P' steps moving (P'-1)/P'·m; P not a power of two: 2 more steps, m/P in and m out."""
    core = 1 << (P.bit_length() - 1)
    k = core.bit_length() - 1
    if core == P:
        return float(k), (P - 1) / P * m
    return float(k + 2), (P - 1) / P * m + m / P + m


def total_bytes(P: int, m: float) -> float:
    core = 1 << (P.bit_length() - 1)
    extra = P - core
    return (P - 1) * m + extra * (m / P + m)


COLLECTIVE = Collective(
    op="all_gather", name="recursive_doubling",
    summary="recursive doubling: log2 P exchanges with partners 1, 2, 4, ... apart, data doubling",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.1 (recursive doubling; fold for P not a power of two)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=20)
