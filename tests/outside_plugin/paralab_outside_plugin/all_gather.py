"""naive all-gather: every rank sends its row to every other rank: (P−1) messages of m/P bytes leave each
rank's link, (P−1)·L + (P−1)/P·m·G, (P−1)·m bytes from all ranks together (m = the gathered size)."""
from __future__ import annotations

import torch

from lab.comm.collectives import Collective


def run(comm, rows: torch.Tensor) -> None:
    """rows (P, k), row r filled: every row filled in place."""
    P, r = comm.size, comm.rank
    others = [q for q in range(P) if q != r]
    comm.exchange([(rows[r], q) for q in others], [(rows[q], q) for q in others]).wait()


COLLECTIVE = Collective(
    op="all_gather", name="naive", summary="naive: every rank sends its row to every other rank (an outside plugin)",
    citation="the textbook all-to-all all-gather", run=run, coefficients=lambda P, m: (P - 1.0, (P - 1) / P * m),
    total_bytes=lambda P, m: (P - 1) * m)
