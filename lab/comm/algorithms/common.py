"""Helpers shared by the allreduce algorithms: the non-power-of-two fold and the tree depths their
cost models use. Segment splitting lives in `lab.comm.pieces` (re-exported here)."""
from __future__ import annotations

import torch

from typing import TYPE_CHECKING

from .. import rank_trees
from ..base import Comm
from ..pieces import bounds, pieces  # noqa: F401  (re-exported)
from ..rank_trees import log2_ceil as levels  # noqa: F401  (re-exported: a binomial tree's depth)

if TYPE_CHECKING:
    from ..channel import Channel


class Fold(rank_trees.Fold):
    """The non-power-of-two fold (`lab.comm.rank_trees.Fold`) on this rank of `comm`, where the even rank
    of a pair hands its data to the odd one before the core and gets the result back after it."""

    def __init__(self, comm: Comm) -> None:
        super().__init__(comm.size, comm.rank)

    def hand_in(self, ch: "Channel", buf: torch.Tensor) -> bool:
        """Before the core: an even rank of a pair sends its data (and returns False: it only
        waits for the result); the odd one adds it. True for ranks in the core."""
        if self.vrank is None:
            ch.send(ch.encode(buf, slot=("fold", "in")), self.partner)
            return False
        if self.partner is not None:
            ch.add_into(ch.recv(buf.numel(), self.partner, slot=("fold", "in")), buf)
        return True


def core(P: int) -> tuple[int, int, int]:
    """(P', log2 P', 1 if P is not a power of two else 0), P' = largest power of two <= P."""
    k = P.bit_length() - 1
    return 1 << k, k, int(P != 1 << k)


def sum_in_rank_order(mine: torch.Tensor, me: int, others: list[int], batch, got: list, ch: "Channel") -> None:
    """mine = the sum over every rank's part in rank order: its own part at `me`, each peer's received
    payload (got[j] from others[j]) decoded and added as soon as its receive is done. The same order on
    every owner, so all owners' sums are bit-identical (butterfly sync's and the hierarchical step's
    owner sum)."""
    own = mine.clone()
    mine.zero_()
    for p in range(len(others) + 1):
        if p == me:
            mine.add_(own)
        else:
            j = others.index(p)
            batch.recvs[j].wait()
            ch.add_into(got[j], mine)
