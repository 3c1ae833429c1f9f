"""nccl-tests' sendrecv: every rank sends its buffer to rank r+1 and receives rank r-1's, in one
batch: L + m·G per rank (busbw factor 1)."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective


def run(comm: Comm, send: torch.Tensor, recv: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        recv.copy_(send)
        return
    comm.exchange([(send, (r + 1) % P)], [(recv, (r - 1) % P)]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    return 1.0, float(m)


def total_bytes(P: int, m: float) -> float:
    return P * m


COLLECTIVE = Collective(
    op="sendrecv", name="ring", summary="one batch: send to r+1, receive from r-1",
    citation="nccl-tests sendrecv_perf (doc/PERFORMANCE.md: busbw = algbw)",
    run=run, coefficients=coefficients, total_bytes=total_bytes, neighbours=True, order=10)
