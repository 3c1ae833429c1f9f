"""`SimComm`: P virtual ranks in one process, running the same collective code as real ranks.

Each rank is a greenlet (cooperative, one OS thread); a receive that finds no message switches
to the next runnable rank. Runs are deterministic (ranks start in order 0..P-1 and messages are
FIFO per pair), so a simulated experiment with a seed repeats exactly. A step in which every
unfinished rank waits is a deadlock and raises CommError naming the ranks and their peers.
Sends are buffered (a copy is queued), like an eager protocol; sizes must match on receive.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Callable

import torch
from greenlet import getcurrent, greenlet

from .base import Comm, CommError, Done, Work

MAX_RANKS = 1024


class _World:
    def __init__(self, size: int, device: torch.device) -> None:
        self.size, self.device = size, device
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


class SimComm(Comm):
    """Rank `rank` of a simulated group; made by `simulate`, not directly."""

    backend = "sim"

    def __init__(self, world: _World, rank: int) -> None:
        super().__init__()
        self._w, self.rank, self.size, self.device = world, rank, world.size, world.device
        self._calls = 0

    def _isend(self, t: torch.Tensor, dst: int) -> Work:
        self._w.queues[(self.rank, dst)].append(t.detach().clone())
        self._w.wake(dst, "recv", self.rank)
        return Done()

    def _irecv(self, t: torch.Tensor, src: int) -> Work:
        return _Recv(self, t, src)

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


def simulate(fn: Callable[..., Any], procs: int, *args: Any, device: str | torch.device = "cpu",
             **kwargs: Any) -> list[Any]:
    """Run fn(comm, *args, **kwargs) on `procs` virtual ranks; return the results in rank order.

    An exception on any rank stops the run and is re-raised as CommError naming the rank.
    """
    if isinstance(procs, bool) or not isinstance(procs, int) or not 1 <= procs <= MAX_RANKS:
        raise ValueError(f"procs={procs!r}; SimComm runs 1..{MAX_RANKS} virtual ranks")
    world = _World(procs, torch.device(device))
    comms = [SimComm(world, r) for r in range(procs)]
    results: list[Any] = [None] * procs
    world.scheduler = getcurrent()

    def body(r: int) -> None:
        results[r] = fn(comms[r], *args, **kwargs)

    lets = [greenlet(lambda r=r: body(r)) for r in range(procs)]
    world.ready.extend(lets)
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
        what = ", ".join(f"rank {r} waits for {world.waiting[r][0]} {world.waiting[r][1]}"
                         for r in stuck[:8] if r in world.waiting)
        raise CommError(f"deadlock: {len(stuck)} rank(s) blocked forever ({what})")
    return results
