"""Butterfly (recursive doubling) allreduce: log2 P exchanges of the whole vector (paper 001
"Butterfly": L·log2P + γmG·log2P). Other P fold the extra ranks in first (`Fold`).

With a codec both partners end a step with decode(mine) + decode(theirs), the same numbers on
both sides; for deterministic codecs every rank ends identical. When P is not a power of two
the core ranks encode the result once more to hand it to their folded partners. Each exchange
is one batch of `Comm.exchange` (a send and a receive with the same peer: NCCL-safe).
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Algorithm
from .common import Fold, RegisteredGather, core


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    n, fold = buf.numel(), Fold(comm)
    if comm.size == 1:
        return
    if not fold.hand_in(ch, buf):
        ch.recv_into(buf, fold.partner, slot=("fold", "out"))
        return
    mask = 1
    while mask < fold.core:  # both payloads are used up within the step: two kept buffers for all steps
        peer = fold.real(fold.vrank ^ mask)
        mine = ch.encode(buf, slot=("doubling", "mine"))
        theirs = ch.exchange(mine, peer, n, slot=("doubling", "theirs"))
        if ch.codec is None:
            buf.add_(theirs)
        else:
            ch.decode_into(mine, buf)
            ch.add_into(theirs, buf)
        mask <<= 1
    if fold.extra:
        payload = ch.finalize(buf, slot=("fold", "out"))
        if fold.partner is not None:
            ch.send(payload, fold.partner)


#: gather mode: the registered recursive-doubling all-gather (folded for P not a power of two), its cost
#: model too (`lab.comm.collectives.all_gather_recursive_doubling`)
_GATHER = RegisteredGather("recursive_doubling")
gather = _GATHER.gather


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """L·log2P' + mG·log2P' (paper 001 "Butterfly"), plus 2(L + mG) when P is not a power of two (fold)."""
    _, k, fold = core(P)
    return float(k + 2 * fold), m * k + 2.0 * m * fold


def _total_bytes(P: int, m: float) -> float:
    """P'·log2P'·m in the core, plus 2(P−P')m folded."""
    c, k, _ = core(P)
    return c * k * m + 2.0 * (P - c) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """Each step encodes its own vector and decodes the partner's; the fold adds n in and n back."""
    _, k, fold = core(P)
    return (k + 2 * fold) * n, (k + 2 * fold) * n


def _hops(P: int) -> int:
    """The fold into the power-of-two core, one encode per exchange in it, the unfold back."""
    return (P.bit_length() - 1) + 2


ALGORITHM = Algorithm(
    name="recursive_doubling", summary="butterfly: log2 P exchanges of the whole vector",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "Butterfly": L·log2P + mG·log2P; '
             "fold for other P: Thakur, Rabenseifner & Gropp 2005",
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_GATHER.coefficients, hops=_hops, order=20)
