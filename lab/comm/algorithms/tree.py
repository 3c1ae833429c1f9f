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
