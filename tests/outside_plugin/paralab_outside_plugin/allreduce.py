"""naive allreduce: every rank sends its whole vector to every other rank and adds the P vectors in rank
order, so every rank holds the same sum: (P−1) messages of m bytes from each rank, (P−1)·(L + m·G). With a
codec each value is encoded once (its rank's payload) and every rank decodes and adds the same P payloads."""
from __future__ import annotations

import torch

from lab.comm.algorithms import Algorithm


def reduce(comm, buf: torch.Tensor, ch) -> None:
    """In place: buf = the sum of every rank's buf, payloads through the channel `ch`."""
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    mine = ch.encode(buf)
    if mine is buf:  # raw: the payload is buf itself, which the sum below overwrites
        mine = buf.clone()
    got = {q: ch.buffer(n, offset=i * n) for i, q in enumerate(q for q in range(P) if q != r)}
    ch.post([(mine, q) for q in got], [(t, q) for q, t in got.items()]).wait()
    ch.decode_sum([mine if q == r else got[q] for q in range(P)], buf)


def gather(comm, rows: torch.Tensor) -> None:
    """All-gather of one payload row per rank: every rank sends its row to every other rank."""
    P, r = comm.size, comm.rank
    others = [q for q in range(P) if q != r]
    comm.exchange([(rows[r], q) for q in others], [(rows[q], q) for q in others]).wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    """P−1 messages of m bytes leave each rank's link, one after another: (P−1)·L + (P−1)·m·G."""
    return float(P - 1), (P - 1) * m


def codec_counts(P: int, n: float) -> tuple[float, float]:
    """Each rank encodes its n values once and decodes the P payloads of n."""
    return float(n), float(P * n)


ALGORITHM = Algorithm(
    name="naive", summary="naive: every rank sends its vector to every other rank (an outside plugin)",
    citation="the textbook direct allreduce", reduce=reduce, coefficients=coefficients,
    total_bytes=lambda P, m: P * (P - 1) * m, gather=gather, gather_coefficients=lambda P, q: (P - 1.0, (P - 1) * q),
    codec_counts=codec_counts, hops=lambda P: 1)
