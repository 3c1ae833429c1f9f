"""Deep Image's butterfly synchronisation (Wu et al. 2015 §3.1): the gradient is cut into P parts
and GPU k owns part k; every rank sends part k to rank k, which adds the P contributions (in rank
order) and sends the sum back to everyone. Direct sends: 2L(P-1) + 2γmG(P-1)/P. Each of the two
all-to-all rounds is one batch of `Comm.exchange` (every rank sends to and receives from every
other: the NCCL-safe all-to-all), receives first. The two rounds are the registered direct
reduce-scatter and direct all-gather (`lab.comm.collectives`, their channel forms); gather mode is that
all-gather too.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from ..collectives import get_collective
from ..pieces import pieces
from . import ring
from .base import Algorithm
from .common import RegisteredGather


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    parts = pieces(buf, P)
    get_collective("reduce_scatter", "direct").phase(comm, parts, ch)
    get_collective("all_gather", "direct").phase(comm, parts, ch)


#: gather mode: the registered direct all-gather (every rank's payload row straight to every other rank)
_GATHER = RegisteredGather("direct")
gather = _GATHER.gather


# The same traffic as the ring's reduce-scatter + allgather, sent directly instead of around the
# ring: 2L(P−1) + 2mG(P−1)/P, and the same codec work and allgather (P−1)(L + qG).
_coefficients, _total_bytes = ring.ALGORITHM.coefficients, ring.ALGORITHM.total_bytes
_codec_counts = ring.ALGORITHM.codec_counts


def _scratch(n: int, P: int) -> int:
    """One slot per peer for its contribution to this rank's part."""
    return (P - 1) * -(-n // P)


ALGORITHM = Algorithm(
    name="butterfly_sync", summary="Deep Image butterfly synchronisation: rank k owns part k, direct sends",
    citation="Wu et al. 2015 (Deep Image) §3.1: 2L(P−1) + 2mG(P−1)/P",
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_GATHER.coefficients, scratch=_scratch,
    two_stage=True, hops=lambda P: 2, order=50)
