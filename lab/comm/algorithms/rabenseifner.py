"""Reduce-scatter + allgather (Rabenseifner; paper 001 "RedScat+Gat": 2L·log2P + 2γmG(P-1)/P).

Recursive halving: at distance P'/2, P'/4, ..., 1 a rank keeps one half of its current range
(the lower half when its bit is clear) and sends the other half to its partner, adding what the
partner sends for the kept half. Core rank v ends owning piece v of P' near-equal pieces, encodes
it once and the recursive-doubling allgather forwards the owners' payloads unchanged. Ranks
beyond a power of two are folded in first (`Fold`) and get every payload back at the end.
"""
from __future__ import annotations

import torch

from ..base import Comm
from ..channel import Channel
from .common import Fold
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
        got = ch.exchange(ch.encode(buf[slo:shi]), peer, khi - klo)
        ch.add_into(got, buf[klo:khi])
        lo, hi = klo, khi
        m >>= 1
    payloads = {v: ch.finalize(buf[lo:hi])}
    m = 1
    while m < core:
        peer = fold.real(v ^ m)
        group = v & ~(m - 1)
        other = (v ^ m) & ~(m - 1)
        glo, ghi = _range(group, m, core, n)[0], _range(group + m - 1, m, core, n)[1]
        olo, ohi = _range(other, m, core, n)[0], _range(other + m - 1, m, core, n)[1]
        mine = _cat(ch, [payloads[u] for u in range(group, group + m)], buf[glo:ghi])
        n_other = sum(_piece_bytes(ch, other + i, core, n) for i in range(m))
        w = ch.comm.isend(mine, peer) if mine.numel() else None
        got = _recv_bytes(ch, n_other, peer, buf[olo:ohi])
        if w is not None:
            w.wait()
        payloads.update(_split(ch, got, other, m, core, n, buf))
        m <<= 1
    if fold.partner is not None:
        full = _cat(ch, [payloads[u] for u in range(core)], buf)
        if full.numel():
            ch.comm.send(full, fold.partner)


def _piece_bytes(ch: Channel, v: int, core: int, n: int) -> int:
    lo, hi = _range(v, 1, core, n)
    return ch.nbytes(hi - lo)


def _cat(ch: Channel, payloads: list[torch.Tensor], raw: torch.Tensor) -> torch.Tensor:
    """The payloads of consecutive pieces as one message (raw: the contiguous fp32 range)."""
    if ch.codec is None:
        return raw
    parts = [p for p in payloads if p.numel()]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.uint8, device=raw.device)


def _recv_bytes(ch: Channel, nbytes: int, src: int, raw: torch.Tensor) -> torch.Tensor:
    if ch.codec is None:
        if raw.numel():
            ch.comm.recv(raw, src)
        return raw
    buf = torch.empty(nbytes, dtype=torch.uint8, device=raw.device)
    if nbytes:
        ch.comm.recv(buf, src)
    return buf


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
    got = _recv_bytes(ch, total, src, buf)
    _split(ch, got, 0, core, core, n, buf)


def gather(comm: Comm, rows: torch.Tensor) -> None:
    """The allgather half of Rabenseifner's algorithm is recursive doubling."""
    _doubling_gather(comm, rows)
