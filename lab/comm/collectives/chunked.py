"""Helpers of the channel forms (`Collective.phase`): a reduce-scatter or an all-gather run as one phase of
an allreduce, over a `lab.comm.channel.Channel` (raw fp32, or codec payloads decoded, added and
re-encoded at every hop; segments cut in chunks whose codec work overlaps the next chunk's transfer;
payload buffers kept on the comm). Used by the ring and direct plugins' `phase`; `RingPass` is the ring's
steps, shared by its reduce-scatter and all-gather (and so by the ring allreduce, which chains them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from ..base import Comm, Work
from ..channel import overlapping

if TYPE_CHECKING:
    from ..channel import Channel


def landing(ch: "Channel", into: list[torch.Tensor], slot: tuple, offset: int = 0) -> list[torch.Tensor]:
    """Receive buffers for the chunks `into`: raw ones side by side in the scratch buffer from `offset`,
    codec ones from the comm's reused buffers (*slot, j)."""
    offs = [offset]
    for c in into:
        offs.append(offs[-1] + c.numel())
    return [ch.buffer(c.numel(), offs[j], slot=(*slot, j)) for j, c in enumerate(into)]


class RingPass:
    """Steps around a ring in pipelined chunks, as NCCL's ring moves its slices: in each step a rank sends
    chunks to its right neighbour and receives chunks from its left one, chunk c of both ways in one batch
    of `Comm.exchange` (with two ranks the same peer: NCCL-safe). A chunk received in one step is completed
    (`arrived`) just before it goes on in the next, so its codec work overlaps the next chunk's transfer.
    Where the comm allows it (`receive_ahead`: Gloo, SimComm) a step's receives are instead posted together
    at its start, before the rank waits for any chunk of the step before: posted before their messages
    arrive (Gloo moves an expected message at line rate, an unexpected one at about half of it). The sends
    of step s are waited for at the start of step s+2, so a payload buffer sent in step s is free again in
    step s+2 (send banks ("ring", s % 2, c)) and one received in step s, perhaps sent on unchanged in step
    s+1, in step s+3 (receive banks ("ring", s % 3, c)); a reduce-scatter's raw chunks land in two scratch
    banks. Unpipelined (`channel.overlap(False)`): every batch is waited for at once, no receive ahead."""

    def __init__(self, comm: Comm, ch: "Channel") -> None:
        self.ch, self.right, self.left = ch, (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        self.serial = not overlapping()
        self.ahead = comm.receive_ahead and not self.serial
        self.now = 0  # the step in progress; after the last one, the number of steps
        self._got: dict[tuple[int, int], tuple[torch.Tensor, Work]] = {}
        self._sent: list[list[tuple[torch.Tensor, Work]]] = []  # per step: payloads stay alive until sent

    def step(self, incoming: list[torch.Tensor], sends: int, payload: Callable[[int], torch.Tensor]) -> None:
        """One step: receive chunk c from the left into incoming[c] and send payload(c), c < `sends`, to the
        right; payload(c) runs just before chunk c is posted (it may complete the chunk `arrived(c)`)."""
        self.wait(keep=1)  # the sends of step now - 2
        if self.ahead:
            batch = self.ch.post(recvs=[(b, self.left) for b in incoming])
            self._got.update({(self.now, c): (b, w) for c, (b, w) in enumerate(zip(incoming, batch.recvs))})
        out = []
        for c in range(max(sends, len(incoming))):
            out_c = [(payload(c), self.right)] if c < sends else []
            recvs = [] if self.ahead or c >= len(incoming) else [(incoming[c], self.left)]
            batch = self.ch.post(out_c, recvs)
            if self.serial:  # the baseline: this transfer completes before any more codec work
                batch.wait()
            out += [(p, w) for (p, _), w in zip(out_c, batch.sends)]
            if recvs:
                self._got[(self.now, c)] = (incoming[c], batch.recvs[0])
        self._sent.append(out)
        self.now += 1

    def arrived(self, c: int) -> torch.Tensor:
        """The buffer chunk c of the step before `now` landed in, once it has arrived."""
        buf, w = self._got.pop((self.now - 1, c))
        w.wait()
        return buf

    def wait(self, keep: int = 0) -> None:
        """Wait for the sends of every step but the last `keep` ones."""
        while len(self._sent) > keep:
            for _, w in self._sent.pop(0):
                w.wait()


def joined(shards: list[torch.Tensor]) -> torch.Tensor | None:
    """The consecutive `shards` as one tensor without a copy: a view, when each starts where the one before
    ends in the same flat buffer (an allreduce's pieces of its vector); None otherwise."""
    if len(shards) == 1:
        return shards[0]
    first = shards[0]
    for a, b in zip(shards, shards[1:]):
        if (a.dim() != 1 or b.dim() != 1 or not a.is_contiguous() or not b.is_contiguous() or a.dtype != b.dtype
                or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
                or b.storage_offset() != a.storage_offset() + a.numel()):
            return None
    return first.as_strided((sum(x.numel() for x in shards),), (1,), first.storage_offset())


def sum_in_rank_order(mine: torch.Tensor, me: int, others: list[int], batch, got: list, ch: "Channel") -> None:
    """mine = the sum over every rank's part in rank order: its own part at `me`, each peer's received
    payload (got[j] from others[j]) decoded and added as soon as its receive is done. The same order on
    every owner, so all owners' sums are bit-identical (the direct reduce-scatter's owner sum)."""
    own = mine.clone()
    mine.zero_()
    for p in range(len(others) + 1):
        if p == me:
            mine.add_(own)
        else:
            j = others.index(p)
            batch.recvs[j].wait()
            ch.add_into(got[j], mine)


def others(P: int, r: int) -> list[int]:
    """Peers in the order r+1, r+2, ... so that not every rank hits rank 0 first."""
    return [(r + k) % P for k in range(1, P)]
