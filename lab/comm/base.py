"""The `Comm` interface every collective is written against (docs/design.md "Core interfaces").

A Comm is one rank's view of a group of `size` ranks: blocking and async send/recv of whole
tensors between pairs, in FIFO order per pair, a barrier, and a small all-gather of Python
objects for control (length checks). Implementations: `TorchComm` (torch.distributed: Gloo on
CPU, NCCL on GPU, real processes) and `SimComm` (P virtual ranks in one process).

Paired exchanges go through `exchange(sends, recvs)`, one *batch* of operations posted together.
Why: torch's NCCL backend runs a lone isend/irecv on one CUDA stream per peer pair, in the order
posted, and an NCCL transfer moves only while both of its ends run. Two ranks that each post a
receive before their send to the other (or a send before their receive, for a message beyond
NCCL's buffer) wait for each other forever. `torch.distributed.batch_isend_irecv` wraps a batch
in ncclGroupStart/End, so every operation of it progresses at once and the order inside it does
not matter. The batches of a rank still run one after the other (on NCCL, on the stream of the
whole group), so the algorithms keep one rule: an operation in a rank's k-th batch matches one
in its peer's batch of the same step. `receive_ahead` says where a receive may break that rule
and be posted a batch early (Gloo: an expected message moves at line rate, an unexpected one at
about half of it, docs/shaped_link.md); on NCCL it would block its batch until the peer's next
batch, which waits for this one. `SimComm(strict=True)` enforces these NCCL rules. The lone
isend/irecv/send/recv suit one-way traffic (a ping-pong, a benchmark), not exchanges.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, Sequence

import torch

from .spans import span


class CommError(RuntimeError):
    """A collective failed: a peer died or hung, ranks disagree, or bad input."""


class Work:
    """A pending send or receive; `wait()` blocks until it completes (again: returns at once)."""

    def wait(self) -> None:
        raise NotImplementedError


class Done(Work):
    """An operation that completed when it was posted."""

    def wait(self) -> None:
        return None


DONE = Done()


class Batch(Work):
    """The operations of one `exchange`: `sends[i]` / `recvs[i]` is the Work of the i-th send /
    receive (on NCCL all of them are the batch's one Work); `wait()` waits for every one."""

    __slots__ = ("sends", "recvs")

    def __init__(self, sends: list[Work], recvs: list[Work]) -> None:
        self.sends, self.recvs = sends, recvs

    def wait(self) -> None:
        for w in self.recvs:
            w.wait()
        for w in self.sends:
            w.wait()


class Comm(ABC):
    """One rank of a group. Counters `bytes_sent` and `messages_sent` cover this rank's sends."""

    rank: int
    size: int
    backend: str
    device: torch.device
    #: may a receive be posted in a batch before the one that carries its matching send (see above)
    receive_ahead: bool = True
    #: may two threads of this rank run transfers with disjoint sets of peers at once (Gloo: yes)
    concurrent: bool = False
    #: fp32 scratch a raw Channel reuses across calls (lab/comm/channel.py); None until first needed
    channel_scratch: "torch.Tensor | None" = None

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.messages_sent = 0

    # -- point to point
    @abstractmethod
    def isend_unchecked(self, t: torch.Tensor, dst: int) -> Work: ...

    @abstractmethod
    def irecv_unchecked(self, t: torch.Tensor, src: int) -> Work: ...

    def isend(self, t: torch.Tensor, dst: int) -> Work:
        """Start sending `t` (contiguous) to rank `dst`; do not modify `t` before `wait()`."""
        self._check_peer(dst)
        self.bytes_sent += t.numel() * t.element_size()
        self.messages_sent += 1
        return self.isend_unchecked(t, dst)

    def irecv(self, t: torch.Tensor, src: int) -> Work:
        """Start receiving into `t` (contiguous, of the sent size and dtype) from rank `src`."""
        self._check_peer(src)
        return self.irecv_unchecked(t, src)

    def send(self, t: torch.Tensor, dst: int) -> None:
        self.isend(t, dst).wait()

    def recv(self, t: torch.Tensor, src: int) -> None:
        self.irecv(t, src).wait()

    def exchange(self, sends: Sequence[tuple[torch.Tensor, int]] = (),
                 recvs: Sequence[tuple[torch.Tensor, int]] = ()) -> Batch:
        """Post one batch: send each (tensor, dst) and receive into each (tensor, src), all at once,
        so that no order of posting can deadlock (module docstring). Several operations with the
        same peer and direction match the peer's in list order. Zero-element tensors are not sent
        (both ends know the lengths; Gloo rejects zero-size traffic): their Work is done at once.
        Do not touch a sent tensor before its Work completes."""
        for _, peer in (*sends, *recvs):
            self._check_peer(peer)
        live_s = [i for i, (t, _) in enumerate(sends) if t.numel()]
        live_r = [i for i, (t, _) in enumerate(recvs) if t.numel()]
        for i in live_s:
            t = sends[i][0]
            self.bytes_sent += t.numel() * t.element_size()
        self.messages_sent += len(live_s)
        with span("send"):  # posting the batch (the waits are marked by the Works)
            ws, wr = self._exchange([sends[i] for i in live_s], [recvs[i] for i in live_r])
        out_s: list[Work] = [DONE] * len(sends)
        out_r: list[Work] = [DONE] * len(recvs)
        for i, w in zip(live_s, ws):
            out_s[i] = w
        for i, w in zip(live_r, wr):
            out_r[i] = w
        return Batch(out_s, out_r)

    def _exchange(self, sends: list[tuple[torch.Tensor, int]],
                  recvs: list[tuple[torch.Tensor, int]]) -> tuple[list[Work], list[Work]]:
        """Post the non-empty operations of a batch; the Works of its sends and of its receives.
        Default: receives first (an expected message moves fastest), then sends, one at a time."""
        wr = [self.irecv_unchecked(t, src) for t, src in recvs]
        return [self.isend_unchecked(t, dst) for t, dst in sends], wr

    # -- control
    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def native_allreduce(self, buf: torch.Tensor) -> None:
        """The backend's own sum allreduce of an fp32 buffer, in place (the baseline)."""

    @abstractmethod
    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order (control traffic; not counted in bytes_sent)."""

    def check_same(self, value: Any, what: str) -> None:
        """Raise CommError on every rank, before any data moves, if ranks disagree on `value`."""
        values = self.allgather_object(value)
        if any(v != values[0] for v in values):
            listing = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise CommError(f"ranks disagree on {what} ({listing}); every rank must pass the same")

    # -- all-to-all and sub-groups
    def alltoall(self, out: torch.Tensor, inp: torch.Tensor, out_splits: Sequence[int],
                 in_splits: Sequence[int]) -> Work:
        """All-to-all of one flat buffer (MPI's alltoallv, torch's `all_to_all_single`): the i-th
        `in_splits[i]` elements of `inp` go to rank i, and rank i's piece for this rank lands in the
        i-th `out_splits[i]` elements of `out` (this rank's own piece is copied). Every rank calls it.
        Default: one batch of `exchange` (NCCL-safe), peers in the order r+1, r+2, ..."""
        ins, outs = split_by_lengths(inp, in_splits, self.size, "in"), split_by_lengths(out, out_splits, self.size, "out")
        r, P = self.rank, self.size
        if ins[r].numel() != outs[r].numel():
            raise CommError(f"rank {r}: alltoall sends itself {ins[r].numel()} elements into a slot of {outs[r].numel()}")
        outs[r].copy_(ins[r])
        peers = [(r + k) % P for k in range(1, P)]
        return self.exchange([(ins[p], p) for p in peers], [(outs[p], p) for p in peers])

    def group(self, ranks: Sequence[int]) -> "Comm":
        """This rank's view of the sub-group `ranks` (distinct ranks of this comm, including this one),
        numbered 0..len(ranks)-1 in the order given: a `SubComm` whose transfers go to the global
        ranks through this comm (counted here too). Views are cached per group; the whole group in
        order is this comm itself."""
        key = tuple(ranks)
        if key == tuple(range(self.size)):
            return self
        groups = self.__dict__.setdefault("_groups", {})
        if key not in groups:
            groups[key] = SubComm(self, key)
        return groups[key]

    def reset_counters(self) -> None:
        self.bytes_sent = 0
        self.messages_sent = 0

    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.size or peer == self.rank:
            raise CommError(f"rank {self.rank}: peer {peer} is not another rank of 0..{self.size - 1}")


_COUNTING = threading.Lock()


def split_by_lengths(t: torch.Tensor, splits: Sequence[int], P: int, what: str) -> list[torch.Tensor]:
    """`t` (flat, contiguous) cut into consecutive views of the given lengths, one per rank."""
    splits = [int(k) for k in splits]
    if len(splits) != P or any(k < 0 for k in splits) or sum(splits) != t.numel() or t.dim() != 1:
        raise CommError(f"alltoall: {what}_splits {splits} must be {P} lengths >= 0 adding up to the "
                        f"{what} buffer's {t.numel()} elements (a flat tensor)")
    out, off = [], 0
    for k in splits:
        out.append(t[off:off + k])
        off += k
    return out


class SubComm(Comm):
    """A sub-group of a Comm (made by `Comm.group`): rank i of it is global rank `ranks[i]`.

    Point-to-point goes to the global ranks through the parent (on torch.distributed: plain
    batched isend/irecv with global ranks, no new process group), so it works on every backend,
    SimComm's strict NCCL rules included. Control traffic (allgather_object, barrier) and
    native_allreduce are point-to-point among the members too: only the group's ranks take part.
    Bytes are counted on the sub-group and on the parent."""

    def __init__(self, parent: Comm, ranks: Sequence[int]) -> None:
        super().__init__()
        ranks = tuple(ranks)
        if (len(set(ranks)) != len(ranks) or not all(isinstance(p, int) and 0 <= p < parent.size for p in ranks)
                or parent.rank not in ranks):
            raise CommError(f"group {list(ranks)}: allowed are distinct ranks of 0..{parent.size - 1} "
                            f"that include this rank ({parent.rank})")
        self.parent, self.ranks = parent, ranks
        self.rank, self.size = ranks.index(parent.rank), len(ranks)
        self.backend, self.device, self.receive_ahead = parent.backend, parent.device, parent.receive_ahead
        self.concurrent = parent.concurrent

    def _count(self, sends: Sequence[tuple[torch.Tensor, int]]) -> None:
        with _COUNTING:  # two levels' threads may send at once (`Comm.concurrent`)
            self.parent.bytes_sent += sum(t.numel() * t.element_size() for t, _ in sends)
            self.parent.messages_sent += len(sends)

    def isend_unchecked(self, t: torch.Tensor, dst: int) -> Work:
        self._count([(t, dst)])
        return self.parent.isend_unchecked(t, self.ranks[dst])

    def irecv_unchecked(self, t: torch.Tensor, src: int) -> Work:
        return self.parent.irecv_unchecked(t, self.ranks[src])

    def _exchange(self, sends: list[tuple[torch.Tensor, int]],
                  recvs: list[tuple[torch.Tensor, int]]) -> tuple[list[Work], list[Work]]:
        self._count(sends)
        return self.parent._exchange([(t, self.ranks[d]) for t, d in sends], [(t, self.ranks[s]) for t, s in recvs])

    def allgather_object(self, obj: Any) -> list[Any]:
        """Every member's `obj` by point-to-point: lengths, then pickled bytes (one batch each)."""
        import pickle

        mine = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8).to(self.device)
        others = [p for p in range(self.size) if p != self.rank]
        n = torch.tensor([mine.numel()], dtype=torch.int64, device=self.device)
        lens = {p: torch.zeros(1, dtype=torch.int64, device=self.device) for p in others}
        self._control([(n, p) for p in others], [(lens[p], p) for p in others])
        got = {p: torch.empty(int(lens[p].item()), dtype=torch.uint8, device=self.device) for p in others}
        self._control([(mine, p) for p in others], [(got[p], p) for p in others])
        got[self.rank] = mine
        return [pickle.loads(got[p].cpu().numpy().tobytes()) for p in range(self.size)]

    def _control(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]]) -> None:
        """A batch that is not counted as data (like the parent's control all-gather)."""
        saved = [(c, c.bytes_sent, c.messages_sent) for c in (self, self.parent)]
        self.exchange(sends, recvs).wait()
        for c, b, m in saved:
            c.bytes_sent, c.messages_sent = b, m

    def barrier(self) -> None:
        self.allgather_object(None)

    def native_allreduce(self, buf: torch.Tensor) -> None:
        """The exact sum in member order: every member sends its buffer to every other one."""
        others = [p for p in range(self.size) if p != self.rank]
        got = {p: torch.empty_like(buf) for p in others}
        self.exchange([(buf, p) for p in others], [(got[p], p) for p in others]).wait()
        got[self.rank] = buf.clone()
        acc = got[0].clone()
        for p in range(1, self.size):
            acc.add_(got[p])
        buf.copy_(acc)
