"""`TorchComm`: the Comm over torch.distributed (Gloo on CPU, NCCL on GPU).

Made by the local launcher (`launch.run`) or, across machines, under `torchrun`:
    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m lab bench collectives
`from_env()` joins the group torchrun describes (env:// rendezvous). A failed or timed-out
transfer raises CommError naming the peer rank it was exchanging with. Every batch of `exchange`
is one `torch.distributed.batch_isend_irecv` (ncclGroupStart/End on NCCL), see base.py.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .base import Comm, CommError, Done, Work, split_by_lengths
from .spans import span

BACKENDS = ("gloo", "nccl")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)} "
                         "(gloo: CPU processes; nccl: one GPU per process)")


class _Work(Work):
    """Waits once: a second wait() on Gloo's receive would wait for a second message."""

    def __init__(self, work: Any, comm: "TorchComm", what: str, peer: int | str) -> None:
        self.work, self.comm, self.what, self.peer, self.done = work, comm, what, peer, False
        self.kind = "send" if what.startswith("send") else "recv-wait"  # its range in a trace (spans.py)

    def wait(self) -> None:
        if self.done:
            return
        try:
            with span(self.kind):
                self.work.wait()
            self.done = True
        except Exception as e:  # Gloo raises RuntimeError / DistBackendError on a dead or silent peer
            raise CommError(f"rank {self.comm.rank}: {self.what} rank {self.peer} failed; rank {self.peer} "
                            f"may have died or hung ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from e


class TorchComm(Comm):
    """This process's rank in the default torch.distributed group."""

    def __init__(self) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise CommError("torch.distributed is not initialized; use lab.comm.launch.run or TorchComm.from_env()")
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.backend = str(dist.get_backend())
        if self.backend == "nccl":
            self.device = torch.device("cuda", torch.cuda.current_device())
            # batches of a rank run in order on one stream: a receive posted a batch early would
            # hold its batch until the peer's next one, which waits for this one (base.py)
            self.receive_ahead = False
            # batch_isend_irecv as the group's first collective needs every rank in it (torch
            # docs); a barrier first makes the group's communicator with all ranks
            dist.barrier()
        else:
            self.device = torch.device("cpu")
            self.concurrent = True  # Gloo's pairs take sends and receives from any thread

    @classmethod
    def from_env(cls, backend: str | None = None, timeout: float = 300.0) -> "TorchComm":
        """Join the group described by torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR...)."""
        if not dist.is_initialized():
            backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
            check_backend(backend)
            if backend == "nccl":
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=timeout))
        return cls()

    def isend_unchecked(self, t: torch.Tensor, dst: int) -> Work:
        return _Work(dist.isend(t, dst), self, "send to", dst)

    def irecv_unchecked(self, t: torch.Tensor, src: int) -> Work:
        return _Work(dist.irecv(t, src), self, "receive from", src)

    def _exchange(self, sends: list[tuple[torch.Tensor, int]],
                  recvs: list[tuple[torch.Tensor, int]]) -> tuple[list[Work], list[Work]]:
        """One batch_isend_irecv: receives first (Gloo posts them in list order, and an expected
        message moves at line rate), then sends. NCCL returns one Work for the whole batch."""
        ops = [dist.P2POp(dist.irecv, t, src) for t, src in recvs] + [dist.P2POp(dist.isend, t, dst) for t, dst in sends]
        if not ops:
            return [], []
        try:
            works = dist.batch_isend_irecv(ops)
        except Exception as e:
            peers = sorted({p for _, p in (*recvs, *sends)})
            raise CommError(f"rank {self.rank}: posting a batch with ranks {peers} failed ({e})") from e
        peers = [("receive from", src) for _, src in recvs] + [("send to", dst) for _, dst in sends]
        if len(works) == len(ops):
            wrapped = [_Work(w, self, what, p) for w, (what, p) in zip(works, peers)]
        else:  # one Work for the batch (NCCL's coalesced group)
            names = ", ".join(str(p) for p in sorted({p for _, p in peers}))
            one = _Work(works[0], self, "exchange with", names) if works else None
            wrapped = [one or Done() for _ in ops]
        return wrapped[len(recvs):], wrapped[:len(recvs)]

    def alltoall(self, out: torch.Tensor, inp: torch.Tensor, out_splits, in_splits) -> Work:
        """torch.distributed.all_to_all_single with split sizes (Gloo's alltoallv, NCCL's grouped
        sends): the backend's own all-to-all. Every rank takes this path whatever its sizes (one
        with nothing to send or receive too: Gloo accepts empty buffers here), else ranks would hang."""
        if not hasattr(dist, "all_to_all_single"):
            return super().alltoall(out, inp, out_splits, in_splits)
        ins = split_by_lengths(inp, in_splits, self.size, "in")
        split_by_lengths(out, out_splits, self.size, "out")
        sent = [t for p, t in enumerate(ins) if p != self.rank and t.numel()]
        self.bytes_sent += sum(t.numel() * t.element_size() for t in sent)
        self.messages_sent += len(sent)
        try:
            work = dist.all_to_all_single(out, inp, [int(k) for k in out_splits], [int(k) for k in in_splits],
                                          async_op=True)
        except Exception as e:
            raise CommError(f"rank {self.rank}: all_to_all_single failed; a rank died or hung ({e})") from e
        return _Work(work, self, "all-to-all with", "any")

    def barrier(self) -> None:
        try:
            dist.barrier()
        except Exception as e:
            raise CommError(f"rank {self.rank}: barrier failed; a rank died or hung ({e})") from e

    def allgather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        try:
            dist.all_gather_object(out, obj)
        except Exception as e:
            raise CommError(f"rank {self.rank}: control all-gather failed; a rank died or hung ({e})") from e
        return out

    def native_allreduce(self, buf: torch.Tensor) -> None:
        if buf.numel():  # Gloo rejects zero-element collectives
            try:
                with span("recv-wait"):  # the backend's whole allreduce: wire, waits and its adds
                    dist.all_reduce(buf)
            except Exception as e:
                raise CommError(f"rank {self.rank}: all_reduce failed; a rank died or hung ({e})") from e


def in_torchrun() -> bool:
    """True when this process was started by torchrun (or another env:// launcher)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ
                                                   and "MASTER_ADDR" in os.environ)
