"""Ring all-gather: P-1 steps, each rank forwards the row it received last to its right neighbour
(Thakur, Rabenseifner & Gropp 2005 §4.1; NCCL's ring): (P-1)·L + (P-1)/P·m·G. `run` moves rows of
any dtype (raw values or a codec's bytes); `phase` is the same ring inside an allreduce, over a Channel
(the ring allreduce's second half, taking over from the ring reduce-scatter); the ring allreduce's gather
mode runs `run` (`lab.comm.algorithms.ring`)."""
from __future__ import annotations

from typing import Iterable, Iterator, Optional

import torch

from ..base import Comm
from ..channel import Channel
from .base import Collective
from .chunked import RingPass


def run(comm: Comm, rows: torch.Tensor) -> None:
    P, r = comm.size, comm.rank
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        comm.exchange([(rows[(r - s) % P], right)], [(rows[(r - s - 1) % P], left)]).wait()


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel, *,
          own: Optional[Iterable[torch.Tensor]] = None) -> None:
    """The owner encodes shards[comm.rank] once (keeping the decoded value, like its receivers) and every
    rank gets every shard around the ring (`RingPass`), the payloads forwarded unchanged; chunks pipelined.
    own (an allreduce's second half, `Collective.handoff`): the reduce-scatter's handed-over payloads of
    shards[comm.rank]'s chunks, already decoded into it; each is taken just before it is sent, and the
    iterator is exhausted (its last sends waited for) where this phase waits for its own step-before-last.
    Its receive buffers are the ring's banks by step (`RingPass`): after a handoff, step s is the allreduce's
    step P-1+s, so it reuses the ring reduce-scatter's banks as one ring of 2(P-1) steps would."""
    k, i = comm.size, comm.rank
    if k == 1:
        for _ in own or ():  # nothing to send: the handed-over work still runs
            pass
        return
    ring, base = RingPass(comm, ch), 0 if own is None else k - 1
    first = (iter(own) if own is not None
             else (ch.finalize(x, ("ring-ag-send", c)) for c, x in enumerate(ch.chunks(shards[i]))))
    for s in range(k - 1):  # step s sends shard i-s on and receives shard i-s-1
        if s == 1 and own is not None:
            _exhaust(first)
        mine, into = ch.chunks(shards[(i - s) % k]), ch.chunks(shards[(i - s - 1) % k])

        def payload(c: int, s: int = s, mine: list[torch.Tensor] = mine) -> torch.Tensor:
            if s == 0:
                return _next(first)
            got = ring.arrived(c)
            ch.decode_into(got, mine[c])
            return got  # forwarded unchanged
        ring.step([ch.final_buffer(x, slot=("ring", (base + s) % 3, c)) for c, x in enumerate(into)], len(mine),
                  payload)
    for c, chunk in enumerate(ch.chunks(shards[(i + 1) % k])):
        ch.decode_into(ring.arrived(c), chunk)
    if k == 2 and own is not None:
        _exhaust(first)
    ring.wait()


def _next(payloads: Iterator[torch.Tensor]) -> torch.Tensor:
    p = next(payloads, None)
    if p is None:
        raise ValueError("all_gather ring: the handed-over payloads ended before the owner's chunks")
    return p


def _exhaust(payloads: Iterator[torch.Tensor]) -> None:
    for _ in payloads:
        raise ValueError("all_gather ring: more handed-over payloads than the owner's chunks")


def coefficients(P: int, m: float) -> tuple[float, float]:
    """(P-1) messages of m/P each."""
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    """Every rank sends P-1 rows of m/P."""
    return (P - 1) * m


COLLECTIVE = Collective(
    op="all_gather", name="ring", summary="ring: P-1 steps to the right neighbour, one row each",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.1 (ring); NCCL ring all-gather",
    run=run, coefficients=coefficients, total_bytes=total_bytes, neighbours=True, phase=phase, handoff=True,
    order=10)
