"""Binomial tree allreduce: reduce to rank 0, then broadcast (paper 001 "Tree":
2L·log2P + 2γmG·log2P; ceil(log2 P) levels for any P).

Rank r sends its partial sum to r - lowbit(r) after adding its children r + 2^k (2^k < lowbit(r),
in increasing k). The root encodes the sum once; the broadcast forwards that payload unchanged.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel


def _top(P: int) -> int:
    return 1 << ((P - 1).bit_length() - 1)


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    mask = 1
    while mask < P:
        if r & mask:
            ch.isend(ch.encode(buf), r - mask).wait()
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


def _fan_out(comm: Comm, ch: Channel, payload: torch.Tensor, mask: int) -> None:
    works = []
    while mask >= 1:
        if comm.rank + mask < comm.size:
            works.append(ch.isend(payload, comm.rank + mask))
        mask >>= 1
    for w in works:
        w.wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Binomial gather of payload rows to rank 0, then binomial broadcast of all P rows."""
    P, r = comm.size, comm.rank
    mask = 1
    while mask < P:
        if r & mask:
            comm.send(rows[r:min(r + mask, P)], r - mask)
            break
        if r + mask < P:
            comm.recv(rows[r + mask:min(r + 2 * mask, P)], r + mask)
        mask <<= 1
    if r == 0:
        mask = _top(P)
    else:
        low = r & -r
        comm.recv(rows, r - low)
        mask = low >> 1
    works = []
    while mask >= 1:
        if r + mask < P:
            works.append(comm.isend(rows, r + mask))
        mask >>= 1
    for w in works:
        w.wait()
