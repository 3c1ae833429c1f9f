"""Reduce-scatter + allgather (Rabenseifner; paper 001 "RedScat+Gat": 2L·log2P + 2γmG(P-1)/P).

Recursive halving: at distance P'/2, P'/4, ..., 1 a rank keeps one half of its current range
(the lower half when its bit is clear) and sends the other half to its partner, adding what the
partner sends for the kept half. Core rank v ends owning piece v of P' near-equal pieces, encodes
it once and the recursive-doubling allgather forwards the owners' payloads unchanged. Ranks
beyond a power of two are folded in first (`Fold`) and get every payload back at the end.
Each exchange is one batch of `Comm.exchange` (a send and a receive with the same peer: NCCL-safe).
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .base import Algorithm
from .common import Fold, core, levels
from .recursive_doubling import gather as _doubling_gather


def _range(v: int, mask: int, core: int, n: int) -> tuple[int, int]:
    """The range core rank v holds after the halving steps down to distance `mask` (exclusive)."""
    lo, hi, m = 0, n, core >> 1
    while m >= mask and m >= 1:
        mid = lo + (hi - lo) // 2
        lo, hi = (lo, mid) if not v & m else (mid, hi)
        m >>= 1
    return lo, hi


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    n, fold = buf.numel(), Fold(comm)
    if comm.size == 1:
        return
    if not fold.hand_in(ch, buf):
        _receive_all(ch, buf, fold.partner, fold.core)
        return
    v, core = fold.vrank, fold.core
    lo, hi = 0, n
    m = core >> 1
    while m >= 1:
        peer = fold.real(v ^ m)
        mid = lo + (hi - lo) // 2
        (klo, khi), (slo, shi) = ((lo, mid), (mid, hi)) if not v & m else ((mid, hi), (lo, mid))
        got = ch.exchange(ch.encode(buf[slo:shi], slot=("halving", m)), peer, khi - klo, slot=("halving", m))
        ch.add_into(got, buf[klo:khi])
        lo, hi = klo, khi
        m >>= 1
    payloads = {v: ch.finalize(buf[lo:hi], slot="owned")}
    m = 1
    while m < core:
        peer = fold.real(v ^ m)
        group = v & ~(m - 1)
        other = (v ^ m) & ~(m - 1)
        glo, ghi = _range(group, m, core, n)[0], _range(group + m - 1, m, core, n)[1]
        olo, ohi = _range(other, m, core, n)[0], _range(other + m - 1, m, core, n)[1]
        # every message of the doubling has a kept buffer of its own: the pieces received stay in use
        mine = _cat(ch, [payloads[u] for u in range(group, group + m)], buf[glo:ghi], ("doubling out", m))
        n_other = sum(_piece_bytes(ch, other + i, core, n) for i in range(m))
        got = _recv_buffer(ch, n_other, buf[olo:ohi], ("doubling in", m))
        ch.post([(mine, peer)], [(got, peer)]).wait()
        payloads.update(_split(ch, got, other, m, core, n, buf))
        m <<= 1
    if fold.partner is not None:
        ch.send(_cat(ch, [payloads[u] for u in range(core)], buf, ("fold", "out")), fold.partner)


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


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """The allgather half of Rabenseifner's algorithm is recursive doubling."""
    _doubling_gather(comm, rows)


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


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """Its allgather half is recursive doubling: ceil(log2 P)·L + (P−1)qG."""
    return float(levels(P)), (P - 1) * q


def _scratch(n: int, P: int) -> int:
    """Half the vector: the first halving step's received half."""
    return -(-n // 2)


ALGORITHM = Algorithm(
    name="rabenseifner", summary="reduce-scatter by recursive halving, then recursive-doubling allgather",
    citation='Ben-Nun & Hoefler 2018 (paper 001) "RedScat+Gat": 2L·log2P + 2mG(P−1)/P; Rabenseifner 2004',
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    codec_counts=_codec_counts, gather_coefficients=_gather_coefficients, scratch=_scratch, order=40)
