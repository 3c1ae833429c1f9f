"""Pieces shared by the allreduce algorithms: segment bounds and the non-power-of-two fold."""
from __future__ import annotations

import torch

from typing import TYPE_CHECKING

from ..base import Comm

if TYPE_CHECKING:
    from ..channel import Channel


def bounds(n: int, parts: int) -> list[int]:
    """Offsets of `parts` near-equal pieces of n values (the first n % parts are one longer)."""
    q, r = divmod(n, parts)
    out = [0]
    for i in range(parts):
        out.append(out[-1] + q + (1 if i < r else 0))
    return out


def pieces(buf: torch.Tensor, parts: int) -> list[torch.Tensor]:
    b = bounds(buf.numel(), parts)
    return [buf[b[i]:b[i + 1]] for i in range(parts)]


class Fold:
    """Recursive doubling/halving on P ranks: P' = the largest power of two <= P works in the core.

    The first 2(P - P') ranks pair up (even, odd); the even rank hands its data to the odd one
    before the core and gets the result back after it (Thakur, Rabenseifner & Gropp 2005).
    `vrank` is the rank's index in the core, None for an even rank of a pair.
    """

    def __init__(self, comm: Comm) -> None:
        P, r = comm.size, comm.rank
        self.core = 1 << (P.bit_length() - 1)
        self.extra = P - self.core
        if r < 2 * self.extra:
            self.vrank = None if r % 2 == 0 else r // 2
            self.partner = r + 1 if r % 2 == 0 else r - 1
        else:
            self.vrank, self.partner = r - self.extra, None

    def hand_in(self, ch: "Channel", buf: torch.Tensor) -> bool:
        """Before the core: an even rank of a pair sends its data (and returns False: it only
        waits for the result); the odd one adds it. True for ranks in the core."""
        if self.vrank is None:
            ch.send(ch.encode(buf), self.partner)
            return False
        if self.partner is not None:
            ch.add_into(ch.recv(buf.numel(), self.partner), buf)
        return True

    def real(self, v: int) -> int:
        """The real rank of core index v."""
        return 2 * v + 1 if v < self.extra else v + self.extra
