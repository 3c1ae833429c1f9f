"""Binomial tree allreduce: reduce to rank 0, then broadcast (paper 001 "Tree":
2L·log2P + 2γmG·log2P; ceil(log2 P) levels for any P).

Rank r sends its partial sum to r - lowbit(r) after adding its children r + 2^k (2^k < lowbit(r),
in increasing k). The root encodes the sum once; the broadcast forwards that payload unchanged.
Every transfer is one batch of `Comm.exchange`; a parent's sends to its children are one batch.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Algorithm
from .common import levels


def _top(P: int) -> int:
    return 1 << ((P - 1).bit_length() - 1)


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    mask = 1
    while mask < P:
        if r & mask:
            ch.send(ch.encode(buf), r - mask)
            break
        if r + mask < P:
            ch.add_into(ch.recv(n, r + mask), buf)
        mask <<= 1
    if r == 0:
        payload, mask = ch.finalize(buf), _top(P)
    else:
        low = r & -r
        payload, mask = ch.recv_into(buf, r - low), low >> 1
    _fan_out(comm, ch, payload, mask)


def _children(comm: Comm, mask: int) -> list[int]:
    """The broadcast children of this rank, farthest first."""
    out = []
    while mask >= 1:
        if comm.rank + mask < comm.size:
            out.append(comm.rank + mask)
        mask >>= 1
    return out


def _fan_out(comm: Comm, ch: Channel, payload: torch.Tensor, mask: int) -> None:
    ch.post([(payload, k) for k in _children(comm, mask)]).wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Binomial gather of payload rows to rank 0, then binomial broadcast of all P rows."""
    P, r = comm.size, comm.rank
    mask = 1
    while mask < P:
        if r & mask:
            comm.exchange([(rows[r:min(r + mask, P)], r - mask)]).wait()
            break
        if r + mask < P:
            comm.exchange(recvs=[(rows[r + mask:min(r + 2 * mask, P)], r + mask)]).wait()
        mask <<= 1
    if r == 0:
        mask = _top(P)
    else:
        low = r & -r
        comm.exchange(recvs=[(rows, r - low)]).wait()
        mask = low >> 1
    comm.exchange([(rows, k) for k in _children(comm, mask)]).wait()


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """2L·d + 2mG·d, d = ceil(log2 P) levels (paper 001 "Tree")."""
    d = levels(P)
    return 2.0 * d, 2.0 * m * d


def _total_bytes(P: int, m: float) -> float:
    """P−1 sends up the tree and P−1 down: 2(P−1)m."""
    return 2.0 * (P - 1) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """d reduce levels, the root's finalize and keep, one decode per broadcast level."""
    d = levels(P)
    return (d + 1) * n, (2 * d + 1) * n


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """Binomial gather to rank 0, then binomial broadcast of all P rows: 2d·L + ((P−1) + dP)qG."""
    d = levels(P)
    return 2.0 * d, ((P - 1) + d * P) * q


ALGORITHM = Algorithm(
    name="tree", summary="binomial tree: reduce to rank 0, then broadcast",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "Tree": 2L·log2P + 2mG·log2P',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_gather_coefficients, order=10)
