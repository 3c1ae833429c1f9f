"""`SimComm`: P virtual ranks in one process, running the same collective code as real ranks.

Each rank is a greenlet (cooperative, one OS thread); a receive that finds no message switches
to the next runnable rank. Runs are deterministic (ranks start in order 0..P-1 and messages are
FIFO per pair), so a simulated experiment with a seed repeats exactly. A step in which every
unfinished rank waits is a deadlock and raises CommError naming the ranks and their peers.
Sends are buffered (a copy is queued), like an eager protocol; sizes must match on receive.

`strict=True` follows NCCL's rules instead (base.py): a transfer moves only while both of its
ends are posted and at the head of their rank's stream, where each batch of `exchange` (and each
lone isend/irecv) waits until the rank's earlier ones are complete, and a send is not buffered
(its tensor is read when the transfer happens). An exchange pattern that could hang on NCCL,
with messages beyond its buffer, deadlocks here and is reported. One stream per rank is what
torch gives batched operations; for lone ones (one stream per peer pair there) it is stricter.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Callable

import torch
from greenlet import GreenletExit, getcurrent, greenlet

from .base import Comm, CommError, Done, Work

MAX_RANKS = 1024


class _World:
    def __init__(self, size: int, device: torch.device, strict: bool = False) -> None:
        self.size, self.device, self.strict = size, device, strict
        # strict mode: each rank's batches in posting order; unmatched sends / receives per (src, dst)
        self.streams: list[deque[_Batch]] = [deque() for _ in range(size)]
        self.sends: dict[tuple[int, int], deque[_Op]] = defaultdict(deque)
        self.recvs: dict[tuple[int, int], deque[_Op]] = defaultdict(deque)
        self.queues: dict[tuple[int, int], deque[torch.Tensor]] = defaultdict(deque)
        self.waiting: dict[int, tuple[str, Any, greenlet]] = {}  # rank -> (kind, key, greenlet)
        self.ready: deque[greenlet] = deque()
        self.gathers: dict[int, list[Any]] = {}
        self.scheduler: greenlet | None = None

    def block(self, rank: int, kind: str, key: Any) -> None:
        self.waiting[rank] = (kind, key, getcurrent())
        assert self.scheduler is not None
        self.scheduler.switch()

    def wake(self, rank: int, kind: str, key: Any) -> None:
        w = self.waiting.get(rank)
        if w is not None and w[0] == kind and w[1] == key:
            del self.waiting[rank]
            self.ready.append(w[2])

    # -- strict (NCCL) mode
    def post(self, rank: int, sends: list[tuple[torch.Tensor, int]],
             recvs: list[tuple[torch.Tensor, int]]) -> tuple[list[Work], list[Work]]:
        batch = _Batch()
        ws = [_Op(self, batch, rank, t, dst, True) for t, dst in sends]
        wr = [_Op(self, batch, rank, t, src, False) for t, src in recvs]
        batch.pending = len(ws) + len(wr)
        if batch.pending:
            for op in (*wr, *ws):
                (self.sends if op.is_send else self.recvs)[op.pair].append(op)
            self.streams[rank].append(batch)
            self.settle(rank)
        return ws, wr

    def settle(self, first: int) -> None:
        """Start the batches that reached the head of their stream and move every transfer whose
        two ends are started; ranks whose batches complete are revisited."""
        todo = deque([first])
        while todo:
            stream = self.streams[todo.popleft()]
            while stream:
                b = stream[0]
                if not b.active:
                    b.active = True
                    for op in b.ops:
                        todo.extend(self.match(op.pair))
                if b.pending:
                    break
                stream.popleft()

    def match(self, pair: tuple[int, int]) -> list[int]:
        """Move the transfers of `pair` whose send and receive both run; the ranks touched."""
        sq, rq, touched = self.sends[pair], self.recvs[pair], []
        while sq and rq and sq[0].batch.active and rq[0].batch.active:
            s, r = sq.popleft(), rq.popleft()
            if s.t.shape != r.t.shape or s.t.dtype != r.t.dtype:
                raise CommError(f"rank {r.rank}: message from rank {s.rank} is {tuple(s.t.shape)} "
                                f"{s.t.dtype}, the receive buffer is {tuple(r.t.shape)} {r.t.dtype}")
            r.t.copy_(s.t)
            for op in (s, r):
                op.done = True
                op.batch.pending -= 1
                self.wake(op.rank, "op", op)
            touched += [s.rank, r.rank]
        return touched


class SimComm(Comm):
    """Rank `rank` of a simulated group; made by `simulate`, not directly."""

    backend = "sim"

    def __init__(self, world: _World, rank: int) -> None:
        super().__init__()
        self._w, self.rank, self.size, self.device = world, rank, world.size, world.device
        self.receive_ahead = not world.strict
        self._calls = 0

    def isend_unchecked(self, t: torch.Tensor, dst: int) -> Work:
        if self._w.strict:
            return self._w.post(self.rank, [(t, dst)], [])[0][0]
        self._w.queues[(self.rank, dst)].append(t.detach().clone())
        self._w.wake(dst, "recv", self.rank)
        return Done()

    def irecv_unchecked(self, t: torch.Tensor, src: int) -> Work:
        if self._w.strict:
            return self._w.post(self.rank, [], [(t, src)])[1][0]
        return _Recv(self, t, src)

    def _exchange(self, sends: list[tuple[torch.Tensor, int]],
                  recvs: list[tuple[torch.Tensor, int]]) -> tuple[list[Work], list[Work]]:
        if self._w.strict:
            return self._w.post(self.rank, sends, recvs)
        return super()._exchange(sends, recvs)

    def allgather_object(self, obj: Any) -> list[Any]:
        w, call = self._w, self._calls
        self._calls += 1
        slot = w.gathers.setdefault(call, [])
        slot.append((self.rank, obj))
        if len(slot) == self.size:
            for r in range(self.size):
                w.wake(r, "gather", call)
        while len(slot) < self.size:
            w.block(self.rank, "gather", call)
        return [o for _, o in sorted(slot, key=lambda p: p[0])]

    def barrier(self) -> None:
        self.allgather_object(None)

    def native_allreduce(self, buf: torch.Tensor) -> None:
        """The exact sum in rank order (the simulator's stand-in for the backend's allreduce)."""
        parts = self.allgather_object(buf.clone())
        acc = parts[0].clone()
        for p in parts[1:]:
            acc.add_(p)
        buf.copy_(acc)


class _Recv(Work):
    __slots__ = ("comm", "t", "src", "done")

    def __init__(self, comm: SimComm, t: torch.Tensor, src: int) -> None:
        self.comm, self.t, self.src, self.done = comm, t, src, False

    def wait(self) -> None:
        if self.done:
            return
        c, t, src = self.comm, self.t, self.src
        q = c._w.queues[(src, c.rank)]
        while not q:
            c._w.block(c.rank, "recv", src)
        msg = q.popleft()
        if msg.shape != t.shape or msg.dtype != t.dtype:
            raise CommError(f"rank {c.rank}: message from rank {src} is {tuple(msg.shape)} "
                            f"{msg.dtype}, the receive buffer is {tuple(t.shape)} {t.dtype}")
        t.copy_(msg)
        self.done = True


class _Batch:
    __slots__ = ("ops", "pending", "active")

    def __init__(self) -> None:
        self.ops: list[_Op] = []
        self.pending, self.active = 0, False


class _Op(Work):
    """One send or receive of a strict-mode batch."""

    __slots__ = ("w", "batch", "rank", "t", "peer", "is_send", "pair", "done")

    def __init__(self, w: _World, batch: _Batch, rank: int, t: torch.Tensor, peer: int, is_send: bool) -> None:
        self.w, self.batch, self.rank, self.t, self.peer, self.is_send = w, batch, rank, t, peer, is_send
        self.pair = (rank, peer) if is_send else (peer, rank)
        self.done = False
        batch.ops.append(self)

    def wait(self) -> None:
        while not self.done:
            self.w.block(self.rank, "op", self)

    def __repr__(self) -> str:
        return f"{'send to' if self.is_send else 'receive from'} rank {self.peer}"


def _unwind(lets: list[greenlet]) -> None:
    """Kill the ranks still suspended (a rank raised, or the caller was interrupted: Streamlit's stop and rerun are
    BaseExceptions raised inside a rank's progress callback) here, in the thread that made them. Left alive, they
    were freed later by another thread (Streamlit runs each rerun in a new one), which greenlet does not survive
    reliably: the dashboard's server died once in a suite run with a segfault inside _greenlet."""
    for g in lets:
        if not g.dead:
            try:
                g.throw(GreenletExit)
            except Exception:  # what a rank's own clean-up raised while unwinding
                pass


def simulate(fn: Callable[..., Any], procs: int, *args: Any, device: str | torch.device = "cpu",
             strict: bool = False, **kwargs: Any) -> list[Any]:
    """Run fn(comm, *args, **kwargs) on `procs` virtual ranks; return the results in rank order.

    strict=True: NCCL's point-to-point rules (module docstring). An exception on any rank stops
    the run and is re-raised as CommError naming the rank.
    """
    if isinstance(procs, bool) or not isinstance(procs, int) or not 1 <= procs <= MAX_RANKS:
        raise ValueError(f"procs={procs!r}; SimComm runs 1..{MAX_RANKS} virtual ranks")
    world = _World(procs, torch.device(device), strict)
    comms = [SimComm(world, r) for r in range(procs)]
    results: list[Any] = [None] * procs
    world.scheduler = getcurrent()

    def body(r: int) -> None:
        results[r] = fn(comms[r], *args, **kwargs)

    lets = [greenlet(lambda r=r: body(r)) for r in range(procs)]
    world.ready.extend(lets)
    try:
        while world.ready:
            g = world.ready.popleft()
            try:
                g.switch()
            except CommError as e:
                raise CommError(f"rank {lets.index(g)}: {e}") from e
            except Exception as e:
                raise CommError(f"rank {lets.index(g)} raised {type(e).__name__}: {e}") from e
        stuck = [r for r, g in enumerate(lets) if not g.dead]
        if stuck:
            what = ", ".join(f"rank {r} waits for " + (repr(world.waiting[r][1]) if world.waiting[r][0] == "op"
                                                       else f"{world.waiting[r][0]} {world.waiting[r][1]}")
                             for r in stuck[:8] if r in world.waiting)
            raise CommError(f"deadlock: {len(stuck)} rank(s) blocked forever ({what})")
        left = [(r, op) for r, stream in enumerate(world.streams) for b in stream for op in b.ops if not op.done]
        if left:
            what = ", ".join(f"rank {r}: {op!r}" for r, op in left[:8])
            raise CommError(f"deadlock: {len(left)} operation(s) never matched ({what})")
        return results
    finally:
        _unwind(lets)
        # nothing of the run keeps a greenlet, this thread's own included: a result or an error may outlive the
        # thread (Streamlit's reruns), and greenlets freed from another thread are what _greenlet crashes on
        world.scheduler = None
        world.waiting.clear()
        world.ready.clear()
        lets.clear()
