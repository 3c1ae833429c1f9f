"""P ranks as OS threads of this process, for collectives that run inside autograd (tensor parallelism).

SimComm's ranks are greenlets of one thread and share its autograd state (grad mode, the engine's ready queue),
so a backward node of one rank can run on another's stack. Here each rank is a thread of its own: torch's CPU
autograd runs a backward on the thread that calls it, so each rank's graph stays its own. Sends are buffered
(a copy is queued); the k-th receive posted from a peer gets the k-th message that peer sent, whenever it
is waited for (the order of posting, as torch.distributed matches them)."""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Callable

import torch

from lab.comm.base import DONE, Comm, CommError, Work

TIMEOUT_S = 60.0


class _World:
    def __init__(self, size: int) -> None:
        self.size = size
        self.cond = threading.Condition()
        self.messages: dict[tuple[int, int], dict[int, torch.Tensor]] = defaultdict(dict)
        self.sent: dict[tuple[int, int], int] = defaultdict(int)
        self.posted: dict[tuple[int, int], int] = defaultdict(int)
        self.objects: dict[int, list] = defaultdict(lambda: [None] * size)
        self.arrived: dict[int, int] = defaultdict(int)
        self.failed: str | None = None

    def wait_for(self, ready: Callable[[], bool], what: str) -> None:
        """Under cond: wait until ready(); CommError if a rank failed or nothing came in TIMEOUT_S."""
        if not self.cond.wait_for(lambda: ready() or self.failed is not None, TIMEOUT_S):
            raise CommError(f"timed out waiting for {what}")
        if self.failed is not None and not ready():
            raise CommError(f"stopped: {self.failed}")


class _Recv(Work):
    def __init__(self, comm: "ThreadComm", t: torch.Tensor, src: int) -> None:
        self.comm, self.t, self.src, self.done = comm, t, src, False
        w, self.pair = comm.world, (src, comm.rank)
        with w.cond:
            self.index = w.posted[self.pair]
            w.posted[self.pair] += 1

    def wait(self) -> None:
        if self.done:
            return
        w, box = self.comm.world, self.comm.world.messages[self.pair]
        with w.cond:
            w.wait_for(lambda: self.index in box, f"a message from rank {self.src}")
            msg = box.pop(self.index)
        if msg.shape != self.t.shape or msg.dtype != self.t.dtype:
            raise CommError(f"rank {self.comm.rank}: message from rank {self.src} is {tuple(msg.shape)} {msg.dtype}, "
                            f"the receive buffer is {tuple(self.t.shape)} {self.t.dtype}")
        self.t.copy_(msg)
        self.done = True


class ThreadComm(Comm):
    backend = "threads"

    def __init__(self, world: _World, rank: int) -> None:
        super().__init__()
        self.world, self.rank, self.size, self.device = world, rank, world.size, torch.device("cpu")
        self._gen = 0

    def isend_unchecked(self, t: torch.Tensor, dst: int) -> Work:
        with self.world.cond:
            pair = (self.rank, dst)
            self.world.messages[pair][self.world.sent[pair]] = t.detach().clone()
            self.world.sent[pair] += 1
            self.world.cond.notify_all()
        return DONE

    def irecv_unchecked(self, t: torch.Tensor, src: int) -> Work:
        return _Recv(self, t, src)

    def allgather_object(self, obj: Any) -> list[Any]:
        w, gen = self.world, self._gen
        self._gen += 1
        with w.cond:
            w.objects[gen][self.rank] = obj
            w.arrived[gen] += 1
            w.cond.notify_all()
            w.wait_for(lambda: w.arrived[gen] == w.size, "allgather_object")
            return list(w.objects[gen])

    def barrier(self) -> None:
        self.allgather_object(None)

    def native_allreduce(self, buf: torch.Tensor) -> None:
        parts = self.allgather_object(buf.detach().clone())
        acc = parts[0].clone()
        for p in parts[1:]:
            acc += p
        buf.copy_(acc)


def run_threads(fn: Callable[..., Any], procs: int, *args: Any, **kwargs: Any) -> list[Any]:
    """fn(comm, *args, **kwargs) on `procs` thread ranks; the results in rank order (the first error re-raised)."""
    world = _World(procs)
    results: list[Any] = [None] * procs
    errors: list[tuple[int, BaseException]] = []

    def body(r: int) -> None:
        try:
            results[r] = fn(ThreadComm(world, r), *args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            errors.append((r, e))
            with world.cond:
                world.failed = f"rank {r} raised {type(e).__name__}: {e}"
                world.cond.notify_all()

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        r, e = min(errors, key=lambda re: isinstance(re[1], CommError))  # the root cause before its echoes
        raise CommError(f"rank {r} raised {type(e).__name__}: {e}") from e
    return results
