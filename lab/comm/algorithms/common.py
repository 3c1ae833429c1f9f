"""Helpers shared by the allreduce algorithms: the non-power-of-two fold, the tree depths their
cost models use, and gather mode through a registered all-gather (`registered_gather`). Segment
splitting lives in `lab.comm.pieces` (re-exported here)."""
from __future__ import annotations

import torch

from typing import TYPE_CHECKING

from .. import rank_trees
from ..base import Comm
from ..collectives import get_collective
from ..collectives.chunked import sum_in_rank_order  # noqa: F401  (re-exported)
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


class RegisteredGather:
    """Gather mode (an allgather of one fixed-size payload row per rank) run by the registered all-gather
    collective `name` (`lab.comm.collectives`), the algorithm's allgather half: looked up at each call,
    so a plugin registered under that name runs here too. `gather(comm, rows)` is its run; `coefficients(P,
    q)` its own cost model for rows of q bytes (the collective's m is the whole gathered buffer, P·q)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def gather(self, comm: Comm, rows: torch.Tensor) -> None:
        if comm.size > 1:
            get_collective("all_gather", self.name).run(comm, rows)

    def coefficients(self, P: int, q: float) -> tuple[float, float]:
        return get_collective("all_gather", self.name).coefficients(P, P * q)


def core(P: int) -> tuple[int, int, int]:
    """(P', log2 P', 1 if P is not a power of two else 0), P' = largest power of two <= P."""
    k = P.bit_length() - 1
    return 1 << k, k, int(P != 1 << k)
