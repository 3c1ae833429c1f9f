"""Ring reduce-scatter: P-1 steps, each rank adds the partial sum from its left neighbour to its own
block and passes it on; rank r ends with block r (Thakur, Rabenseifner & Gropp 2005 §4.3; NCCL ring):
(P-1)·L + (P-1)/P·m·G. With a codec, the partial sum is decoded, added and re-encoded at every hop.
`phase` is the same ring inside an allreduce, over a Channel: the ring allreduce's first half (handing its
last chunks over to the ring all-gather) and the hierarchical allreduce's node level."""
from __future__ import annotations

from typing import Iterator, Optional

import torch

from ..base import Comm
from ..channel import Channel
from .base import Collective
from .chunked import RingPass, landing
from .wire import Wire


def run(comm: Comm, blocks: torch.Tensor, wire: Wire) -> None:
    P, r, k = comm.size, comm.rank, blocks.shape[1]
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        got = wire.buffer(k)
        comm.exchange([(wire.payload(blocks[(r - 1 - s) % P]), right)], [(got, left)]).wait()
        wire.add(got, blocks[(r - 2 - s) % P])


def phase(comm: Comm, shards: list[torch.Tensor], ch: Channel, *,
          handoff: bool = False) -> Optional[Iterator[torch.Tensor]]:
    """shards[comm.rank] becomes the fp32 sum over the ranks of their shards[comm.rank] (shards of any
    lengths, the same on every rank): P-1 steps (`RingPass`), the partial sum re-encoded at each hop, the
    last one decoded and added in fp32. Chunks pipelined: chunk c is reduced while chunk c+1 is on the wire.
    handoff=True (an allreduce's first half, `Collective.handoff`): returns at the last step, as soon as its
    transfers are posted, an iterator that completes the chunks of shards[comm.rank] one by one, each by
    one fused hop whose payload is the owner's encoded sum (its decoded value kept in the shard), and yields
    that payload; the all-gather sends each on as it comes, so the last chunks are reduced while the first
    ones already travel on. Exhausted, it waits for the phase's last sends. Its codec buffers are the ring's
    banks by step (`RingPass`), which the ring all-gather continues after a handoff, as one ring of 2(P-1) steps."""
    k, i = comm.size, comm.rank
    if k == 1:
        return iter(()) if handoff else None
    width = max(x.numel() for x in shards)  # the raw landing banks: the longest shard each
    ring = RingPass(comm, ch)
    for s in range(k - 1):  # step s sends shard i-s-1's partial sum and adds the left one's to shard i-s-2
        mine, into = ch.chunks(shards[(i - s - 1) % k]), ch.chunks(shards[(i - s - 2) % k])

        def payload(c: int, s: int = s, mine: list[torch.Tensor] = mine) -> torch.Tensor:
            slot = ("ring", s % 2, c)  # step s - 2's sends are waited for: free again
            return ch.encode(mine[c], slot) if s == 0 else ch.reduce(ring.arrived(c), mine[c], slot)
        ring.step(landing(ch, into, ("ring", s % 3), offset=(s % 2) * width), len(mine), payload)
    own = ch.chunks(shards[i])
    if handoff:
        ring.wait(keep=1)  # the send bank of step k - 1 is the handed-over payloads'
        return _handover(ch, ring, own, ("ring", (k - 1) % 2))
    for c, chunk in enumerate(own):
        ch.add_into(ring.arrived(c), chunk)
    ring.wait()
    return None


def _handover(ch: Channel, ring: RingPass, own: list[torch.Tensor], slot: tuple) -> Iterator[torch.Tensor]:
    """The last step's arrivals, one chunk at a time: hop, keep the decoded sum, hand the payload over."""
    for c, chunk in enumerate(own):
        out = ch.reduce(ring.arrived(c), chunk, (*slot, c))
        ch.decode_into(out, chunk)
        yield out
    ring.wait()


def coefficients(P: int, m: float) -> tuple[float, float]:
    return float(P - 1), (P - 1) / P * m


def total_bytes(P: int, m: float) -> float:
    return (P - 1) * m


COLLECTIVE = Collective(
    op="reduce_scatter", name="ring", summary="ring: P-1 steps, add the left neighbour's partial sum, pass it on",
    citation="Thakur, Rabenseifner & Gropp 2005 §4.3 (ring); NCCL ring reduce-scatter",
    run=run, coefficients=coefficients, total_bytes=total_bytes, neighbours=True, phase=phase, handoff=True,
    order=10)
