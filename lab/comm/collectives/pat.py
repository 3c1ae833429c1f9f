"""The schedule of PAT, Parallel Aggregated Trees (Jeaugey 2025, arXiv:2506.20252; NCCL 2.23+),
shared by its all-gather and reduce-scatter modules.

PAT is Bruck's algorithm with its dimensions reversed: each rank's row is broadcast along its own
binomial tree, and the P trees run in parallel, their transfers of one step aggregated into one
message. The far dimension goes first, so the long-distance steps carry one row and the step to the
nearest neighbour carries the most; intermediate buffers are bounded (B_max), so when the rows a
step aggregates do not fit they go as several transfers (logarithmic steps at small sizes, more
transfers as sizes grow). Choices where the paper leaves them to the implementation, made here:
  * distances d = 2^(K-1), ..., 2, 1 (K = ceil(log2 P)); at distance d, a rank at offset j of row
    s's tree (j = (rank - s) mod P, a multiple of 2d with j + d < P) sends row s to rank + d.
    Reduce-scatter runs the mirror: d = 1, 2, ..., offsets j with lowest set bit d send their partial
    sum of block s to rank - d, and block r's tree ends at rank r.
  * B_max is the option `buffer_bytes` (default 4 MiB, one NCCL channel buffer's order): a step's
    rows are cut into transfers of at most max(1, B_max // row bytes) rows each.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..rank_trees import log2_ceil

BUFFER_BYTES = 4 << 20


def distances(P: int) -> list[int]:
    """The gather's step distances, farthest first."""
    return [1 << i for i in reversed(range(log2_ceil(P)))]


def gather_offsets(P: int, d: int) -> list[int]:
    """Tree offsets that send at distance d in the all-gather: multiples of 2d with j + d < P."""
    return list(range(0, P - d, 2 * d))


def reduce_offsets(P: int, d: int) -> list[int]:
    """Tree offsets that send at distance d in the reduce-scatter: lowest set bit d, j < P."""
    return list(range(d, P, 2 * d))


def per_transfer(row_bytes: float, buffer_bytes: int = BUFFER_BYTES) -> int:
    """Rows aggregated into one transfer: max(1, B_max // row bytes)."""
    return max(1, int(buffer_bytes // max(row_bytes, 1)))


def transfers(P: int, row_bytes: float, buffer_bytes: int = BUFFER_BYTES) -> int:
    """Messages one rank sends in one PAT all-gather (or reduce-scatter)."""
    R = per_transfer(row_bytes, buffer_bytes)
    # len(gather_offsets(P, d)) counted, not listed: a planner's P may be far beyond any list's size
    return sum(-(-max(0, -(-(P - d) // (2 * d))) // R) for d in distances(P))


def chunks(idx: list[int], R: int) -> list[list[int]]:
    return [idx[i:i + R] for i in range(0, len(idx), R)]


def gather(comm: Comm, rows: torch.Tensor, buffer_bytes: int = BUFFER_BYTES) -> None:
    """PAT all-gather of rows (P, k), row r filled, in place."""
    P, r = comm.size, comm.rank
    R = per_transfer(rows[0].numel() * rows.element_size(), buffer_bytes)
    for d in distances(P):
        offs = gather_offsets(P, d)
        out = [(r - j) % P for j in offs]
        inc = [(r - d - j) % P for j in offs]
        for o, i in zip(chunks(out, R), chunks(inc, R)):
            got = torch.empty((len(i),) + tuple(rows.shape[1:]), dtype=rows.dtype, device=rows.device)
            comm.exchange([(rows[o].contiguous(), (r + d) % P)], [(got, (r - d) % P)]).wait()
            rows[i] = got


def coefficients(P: int, m: float, buffer_bytes: int = BUFFER_BYTES) -> tuple[float, float]:
    """One L per transfer (ceil(log2 P) while a step's rows fit B_max) + (P-1)/P·m·G."""
    return float(transfers(P, m / P, buffer_bytes)), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m
