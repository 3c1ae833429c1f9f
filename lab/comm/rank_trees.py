"""Which rank talks to which, index arithmetic only (no messages): the binomial tree and the
non-power-of-two fold of recursive doubling/halving (Thakur, Rabenseifner & Gropp 2005 §4). Shared by
the allreduce algorithms (`lab.comm.algorithms`) and the other collectives (`lab.comm.collectives`)."""
from __future__ import annotations

from typing import Optional


def log2_ceil(P: int) -> int:
    """ceil(log2 P): the steps of a binomial tree or of Bruck's algorithm on P ranks."""
    return (P - 1).bit_length()


def binomial(v: int, P: int) -> tuple[Optional[int], list[int]]:
    """Index v's place in the binomial tree on P ranks rooted at 0 (Thakur et al. 2005 §4.2, §4.4):
    (its parent v - lowbit(v), None at the root; its children v + 2^k for 2^k < lowbit(v), all 2^k < P at
    the root, that are < P, nearest first: the order a reduce hears them, a broadcast sends farthest first)."""
    low = v & -v if v else 1 << log2_ceil(P)
    kids, mask = [], 1
    while mask < low and v + mask < P:
        kids.append(v + mask)
        mask <<= 1
    return (v - low if v else None), kids


class Fold:
    """Recursive doubling/halving on any P: the core is P' = the largest power of two <= P; the first
    2(P - P') ranks pair up (even, odd) and the odd one stands for both in the core (Thakur,
    Rabenseifner & Gropp 2005). `vrank`: rank r's index in the core, None for an even rank of a pair;
    `partner`: the other rank of r's pair, None outside the pairs. Core index v owns the real rows
    lo(v)..lo(v+1)-1, contiguous."""

    def __init__(self, P: int, r: int) -> None:
        self.P = P
        self.core = 1 << (P.bit_length() - 1)
        self.extra = P - self.core
        self.vrank: Optional[int]
        self.partner: Optional[int]
        if r < 2 * self.extra:
            self.vrank = None if r % 2 == 0 else r // 2
            self.partner = r + 1 if r % 2 == 0 else r - 1
        else:
            self.vrank, self.partner = r - self.extra, None

    def lo(self, v: int) -> int:
        """First real row of core index v (lo(core) = P)."""
        return 2 * v if v < self.extra else v + self.extra

    def real(self, v: int) -> int:
        """The real rank that stands for core index v."""
        return 2 * v + 1 if v < self.extra else v + self.extra
