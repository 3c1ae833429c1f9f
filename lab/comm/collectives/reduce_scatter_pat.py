"""PAT reduce-scatter (Parallel Aggregated Trees, Jeaugey 2025; NCCL 2.23): the mirror of PAT's
all-gather, P binomial reduction trees in parallel, nearest step first, partial sums aggregated up
to a bounded buffer; schedule and choices in `lab.comm.collectives.pat`. With a codec each partial
sum is decoded, added and re-encoded at every hop."""
from __future__ import annotations

import torch

from ..base import Comm
from .base import Collective
from .pat import BUFFER_BYTES, chunks, coefficients, distances, per_transfer, reduce_offsets, total_bytes
from .wire import Wire


def run(comm: Comm, blocks: torch.Tensor, wire: Wire, buffer_bytes: int = BUFFER_BYTES) -> None:
    P, r, k = comm.size, comm.rank, blocks.shape[1]
    R = per_transfer(k * blocks.element_size(), buffer_bytes)
    for d in reversed(distances(P)):
        offs = reduce_offsets(P, d)
        out = [(r - j) % P for j in offs]
        inc = [(r + d - j) % P for j in offs]
        for o, i in zip(chunks(out, R), chunks(inc, R)):
            got = wire.buffer(len(i) * k)
            comm.exchange([(wire.payload(blocks[o]), (r - d) % P)], [(got, (r + d) % P)]).wait()
            wire.add_rows(got, blocks, i)


COLLECTIVE = Collective(
    op="reduce_scatter", name="pat",
    summary="PAT: P binomial reduction trees in parallel, nearest step first, aggregated up to a bounded buffer",
    citation="Jeaugey 2025, PAT (arXiv:2506.20252), NCCL 2.23",
    run=run, coefficients=coefficients, total_bytes=total_bytes, options={"buffer_bytes": BUFFER_BYTES}, order=30,
    module=__name__)
