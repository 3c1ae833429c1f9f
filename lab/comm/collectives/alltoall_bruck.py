"""Bruck all-to-all: ceil(log2 P) steps for any P; after a local rotation, step k sends every block
whose index has bit k set to rank r+2^k, then a final rotation puts block i from rank i in place
(Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005 §4.5): fewer messages than pairwise, about
log2(P)/2 times the bytes. Blocks travel through other ranks unchanged (a codec's payload too)."""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import log2_ceil
from .base import Collective


def run(comm: Comm, inp: torch.Tensor, out: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    tmp = torch.roll(inp, -r, 0)  # tmp[i]: the block for rank r + i
    d = 1
    while d < P:
        idx = [i for i in range(P) if i & d]
        got = torch.empty_like(tmp[idx])
        comm.exchange([(tmp[idx].contiguous(), (r + d) % P)], [(got, (r - d) % P)]).wait()
        tmp[idx] = got
        d <<= 1
    idx = (r - torch.arange(P, device=out.device)) % P  # tmp[i] came from rank r - i
    out.index_copy_(0, idx, tmp)


def _moved(P: int) -> int:
    """Blocks one rank sends over all steps: the indices 1..P-1 counted once per set bit."""
    return sum(bin(i).count("1") for i in range(1, P))


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(log2_ceil(P)), _moved(P) / P * m


def total_bytes(P: int, m: float) -> float:
    return float(_moved(P)) * m


COLLECTIVE = Collective(
    op="alltoall", name="bruck", summary="Bruck: ceil(log2 P) steps, blocks relayed by bit, ~log2(P)/2 x the bytes",
    citation="Bruck, Ho, Kipnis, Upfal & Weathersby 1997; Thakur, Rabenseifner & Gropp 2005 §4.5",
    run=run, coefficients=coefficients, total_bytes=total_bytes, order=20)
