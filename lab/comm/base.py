"""The `Comm` interface every collective is written against (DESIGN.md "Core interfaces").

A Comm is one rank's view of a group of `size` ranks: blocking and async send/recv of whole
tensors between pairs, in FIFO order per pair, a barrier, and a small all-gather of Python
objects for control (length checks). Implementations: `TorchComm` (torch.distributed: Gloo on
CPU, NCCL on GPU, real processes) and `SimComm` (P virtual ranks in one process).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch


class CommError(RuntimeError):
    """A collective failed: a peer died or hung, ranks disagree, or bad input."""


class Work:
    """A pending send or receive; `wait()` blocks until it completes."""

    def wait(self) -> None:
        raise NotImplementedError


class Done(Work):
    """An operation that completed when it was posted."""

    def wait(self) -> None:
        return None


class Comm(ABC):
    """One rank of a group. Counters `bytes_sent` and `messages_sent` cover this rank's sends."""

    rank: int
    size: int
    backend: str
    device: torch.device

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.messages_sent = 0

    # -- point to point
    @abstractmethod
    def _isend(self, t: torch.Tensor, dst: int) -> Work: ...

    @abstractmethod
    def _irecv(self, t: torch.Tensor, src: int) -> Work: ...

    def isend(self, t: torch.Tensor, dst: int) -> Work:
        """Start sending `t` (contiguous) to rank `dst`; do not modify `t` before `wait()`."""
        self._check_peer(dst)
        self.bytes_sent += t.numel() * t.element_size()
        self.messages_sent += 1
        return self._isend(t, dst)

    def irecv(self, t: torch.Tensor, src: int) -> Work:
        """Start receiving into `t` (contiguous, of the sent size and dtype) from rank `src`."""
        self._check_peer(src)
        return self._irecv(t, src)

    def send(self, t: torch.Tensor, dst: int) -> None:
        self.isend(t, dst).wait()

    def recv(self, t: torch.Tensor, src: int) -> None:
        self.irecv(t, src).wait()

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

    def reset_counters(self) -> None:
        self.bytes_sent = 0
        self.messages_sent = 0

    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.size or peer == self.rank:
            raise CommError(f"rank {self.rank}: peer {peer} is not another rank of 0..{self.size - 1}")
