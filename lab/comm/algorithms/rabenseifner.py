"""Reduce-scatter + allgather (Rabenseifner; paper 001 "RedScat+Gat": 2L·log2P + 2γmG(P-1)/P).

Ranks beyond a power of two are folded in first (`Fold`) and get every payload back at the end. The
P' core ranks then run the registered recursive-halving reduce-scatter and recursive-doubling
all-gather (`lab.comm.collectives`, their channel forms) over P' pieces of the vector, cut by the
same bisection as the halving (not near-equal pieces: a piece is what remains of halving the range
log2 P' times): at distance P'/2, P'/4, ..., 1 a rank keeps one half of its current range (the lower
half when its bit is clear) and sends the other half to its partner as one payload, adding what the
partner sends for the kept half. Core rank v ends owning piece v, encodes it once, and the doubling
forwards the owners' payloads unchanged. Each exchange is one batch of `Comm.exchange` (a send and a
receive with the same peer: NCCL-safe).
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from ..collectives import get_collective
from .base import Algorithm
from .common import Fold, RegisteredGather, core


def _range(v: int, mask: int, core: int, n: int) -> tuple[int, int]:
    """The range core rank v holds after the halving steps down to distance `mask` (exclusive)."""
    lo, hi, m = 0, n, core >> 1
    while m >= mask and m >= 1:
        mid = lo + (hi - lo) // 2
        lo, hi = (lo, mid) if not v & m else (mid, hi)
        m >>= 1
    return lo, hi


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    """The fold, then the registered recursive-halving reduce-scatter and recursive-doubling all-gather
    (`Collective.phase`) on the power-of-two core, over its P' pieces; then the fold's hand-back."""
    n, fold = buf.numel(), Fold(comm)
    if comm.size == 1:
        return
    if not fold.hand_in(ch, buf):
        _receive_all(ch, buf, fold.partner, fold.core)
        return
    core = fold.core
    shards = [buf[lo:hi] for lo, hi in (_range(v, 1, core, n) for v in range(core))]
    group = comm.group([fold.real(v) for v in range(core)])  # core rank v is rank v of the group
    gch = ch if group is comm else Channel(group, ch.codec, scratch=_scratch(n, core))
    get_collective("reduce_scatter", "recursive_halving").phase(group, shards, gch)
    payloads = get_collective("all_gather", "recursive_doubling").phase(group, shards, gch)
    if fold.partner is not None:
        if payloads is None:
            raise ValueError("all_gather recursive_doubling: its phase returned no payloads, which rabenseifner "
                             "hands to the folded ranks")
        ch.send(_cat(ch, list(payloads), buf, ("fold", "out")), fold.partner)


def _piece_bytes(ch: Channel, v: int, core: int, n: int) -> int:
    lo, hi = _range(v, 1, core, n)
    return ch.nbytes(hi - lo)


def _cat(ch: Channel, payloads: list[torch.Tensor], raw: torch.Tensor, slot: object) -> torch.Tensor:
    """The payloads of consecutive pieces as one message, in the kept buffer `slot` (raw: the
    contiguous fp32 range)."""
    if ch.codec is None:
        return raw
    parts = [p for p in payloads if p.numel()]
    out = ch.byte_buffer(sum(p.numel() for p in parts), slot)
    return torch.cat(parts, out=out) if parts else out


def _recv_buffer(ch: Channel, nbytes: int, raw: torch.Tensor, slot: object) -> torch.Tensor:
    """Where a message of consecutive pieces lands, the kept buffer `slot` (raw: straight into their
    fp32 range)."""
    return raw if ch.codec is None else ch.byte_buffer(nbytes, slot)


def _split(ch: Channel, got: torch.Tensor, first: int, count: int, core: int, n: int,
           buf: torch.Tensor) -> dict[int, torch.Tensor]:
    """Cut a received message into the pieces of core ranks first..first+count-1 and decode them."""
    out, off = {}, 0
    for u in range(first, first + count):
        lo, hi = _range(u, 1, core, n)
        if ch.codec is None:
            out[u] = buf[lo:hi]
            continue
        nb = ch.nbytes(hi - lo)
        out[u] = got[off:off + nb]
        off += nb
        ch.decode_into(out[u], buf[lo:hi])
    return out


def _receive_all(ch: Channel, buf: torch.Tensor, src: int, core: int) -> None:
    n = buf.numel()
    total = sum(_piece_bytes(ch, u, core, n) for u in range(core))
    got = _recv_buffer(ch, total, buf, ("fold", "out"))
    ch.post(recvs=[(got, src)]).wait()
    _split(ch, got, 0, core, core, n, buf)


#: gather mode: its allgather half, the registered recursive-doubling all-gather, and its cost model
_GATHER = RegisteredGather("recursive_doubling")
gather = _GATHER.gather


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """2L·log2P' + 2mG(P'−1)/P' (paper 001 "RedScat+Gat"), plus 2(L + mG) when P is not a power of two."""
    c, k, fold = core(P)
    return float(2 * k + 2 * fold), 2.0 * m * (c - 1) / c + 2.0 * m * fold


def _total_bytes(P: int, m: float) -> float:
    """2(P'−1)m in the core, plus 2(P−P')m folded."""
    c, _, _ = core(P)
    return 2.0 * (c - 1) * m + 2.0 * (P - c) * m


def _codec_counts(P: int, n: float) -> tuple[float, float]:
    """Halving n(1−1/P'), the owner's finalize and keep, doubling; the fold sends n in, gets payloads back."""
    c, _, fold = core(P)
    return (1 + fold) * n, (2 * c - 1) / c * n + 2 * fold * n


def _scratch(n: int, P: int) -> int:
    """Half the vector: the first halving step's received half."""
    return -(-n // 2)


def _hops(P: int) -> int:
    """The fold into the power-of-two core, one encode per halving step, the allgather's encode of the sum."""
    return (P.bit_length() - 1) + 2


ALGORITHM = Algorithm(
    name="rabenseifner", summary="reduce-scatter by recursive halving, then recursive-doubling allgather",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "RedScat+Gat": 2L·log2P + 2mG(P−1)/P; Rabenseifner 2004',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_GATHER.coefficients, scratch=_scratch, hops=_hops, order=40)
