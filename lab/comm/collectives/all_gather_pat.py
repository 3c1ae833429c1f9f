"""PAT all-gather (Parallel Aggregated Trees, Jeaugey 2025; NCCL 2.23): reversed-dimension Bruck with
bounded buffers; the schedule and the choices made are in `lab.comm.collectives.pat`."""
from __future__ import annotations

from .base import Collective
from .pat import BUFFER_BYTES, coefficients, gather, total_bytes

COLLECTIVE = Collective(
    op="all_gather", name="pat",
    summary="PAT: P binomial trees in parallel, farthest step first, aggregated up to a bounded buffer",
    citation="Jeaugey 2025, PAT (arXiv:2506.20252), NCCL 2.23",
    run=gather, coefficients=coefficients, total_bytes=total_bytes,
    options={"buffer_bytes": BUFFER_BYTES}, order=40, module=__name__)
