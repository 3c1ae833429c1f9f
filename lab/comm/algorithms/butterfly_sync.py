"""Deep Image's butterfly synchronisation (Wu et al. 2015 §3.1): the gradient is cut into P parts
and GPU k owns part k; every rank sends part k to rank k, which adds the P contributions (in rank
order) and sends the sum back to everyone. Direct sends: 2L(P-1) + 2γmG(P-1)/P. Each of the two
all-to-all rounds is one batch of `Comm.exchange` (every rank sends to and receives from every
other: the NCCL-safe all-to-all), receives first.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from ..pieces import pieces
from . import ring
from .common import sum_in_rank_order
from .base import Algorithm


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    parts, others = pieces(buf, P), _others(P, r)
    mine = parts[r]
    # raw contributions land in one scratch slot per peer; the payloads stay alive until the batch completes
    got = [ch.buffer(mine.numel(), slot * mine.numel()) for slot in range(P - 1)]
    sends = [(ch.encode(parts[k]), k) for k in others]
    batch = ch.post(sends, list(zip(got, others)))
    sum_in_rank_order(mine, r, others, batch, got, ch)
    batch.wait()  # raw parts are views of buf, which the receives below overwrite
    payload = ch.finalize(mine)
    back = [ch.final_buffer(parts[i]) for i in others]
    batch = ch.post([(payload, k) for k in others], list(zip(back, others)))
    for j, i in enumerate(others):
        batch.recvs[j].wait()
        ch.decode_into(back[j], parts[i])
    batch.wait()


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """Direct allgather: every rank sends its payload row to every other rank."""
    P, r = comm.size, comm.rank
    comm.exchange([(rows[r], k) for k in _others(P, r)], [(rows[i], i) for i in _others(P, r)]).wait()


def _others(P: int, r: int) -> list[int]:
    """Peers in the order r+1, r+2, ... so that not every rank hits rank 0 first."""
    return [(r + k) % P for k in range(1, P)]


# The same traffic as the ring's reduce-scatter + allgather, sent directly instead of around the
# ring: 2L(P−1) + 2mG(P−1)/P, and the same codec work and allgather (P−1)(L + qG).
_coefficients, _total_bytes = ring.ALGORITHM.coefficients, ring.ALGORITHM.total_bytes
_codec_counts, _gather_coefficients = ring.ALGORITHM.codec_counts, ring.ALGORITHM.gather_coefficients


def _scratch(n: int, P: int) -> int:
    """One slot per peer for its contribution to this rank's part."""
    return (P - 1) * -(-n // P)


ALGORITHM = Algorithm(
    name="butterfly_sync", summary="Deep Image butterfly synchronisation: rank k owns part k, direct sends",
    citation="Wu et al. 2015 (Deep Image) §3.1: 2L(P−1) + 2mG(P−1)/P",
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_gather_coefficients, scratch=_scratch,
    two_stage=True, order=50)
