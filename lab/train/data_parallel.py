"""Simulated data parallelism: K virtual workers in one process (Dettmers 2016 §2.1, §3.4).

Every worker holds a replica of the model and its optimizer. A mini-batch of B samples is split
into K shards; worker k's gradient is d(sum of its shard's losses)/B, so the sum over workers is
the full batch's mean gradient whatever the shard sizes. The K gradients are summed per tensor
by `lab.comm.allreduce` on `SimComm` ranks: with a codec on the wire and a requantizing
algorithm (ring, tree, ...) every hop decodes, adds and re-encodes, as a real cluster would.

Schemes (what goes through the codec):
  all:   every gradient is compressed, the worker's own too (the paper's single-GPU simulation,
         §3.4: "no 32-bit gradients or activations were used").
  paper: 8-bit for the incoming gradients, 32-bit for the local one (§3.4, "usually"): gather
         mode, each worker adds its own gradient exactly, so replicas drift apart by their
         own quantisation error; test error is measured on worker 0.
Error feedback (1-bit SGD's residual memory) keeps one residual per worker and tensor; it needs
gather mode (each worker encodes its own gradient once).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.codecs.registry import get_codec
from lab.codecs.error_feedback import ErrorFeedback
from lab.comm import simulate
from lab.comm.allreduce import allreduce, check_algorithm, resolve_mode

SCHEMES = ("all", "paper")
IDENTITY = ("", "none", "fp32")


@dataclass(frozen=True)
class GradientExchange:
    """How the workers' gradients are summed: codec (None = fp32), allreduce algorithm, mode,
    scheme ('all' | 'paper') and error feedback."""

    codec: str | None = None
    algorithm: str = "ring"
    mode: str = "auto"
    scheme: str = "all"
    error_feedback: bool = False

    def __post_init__(self) -> None:
        check_algorithm(self.algorithm)
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme={self.scheme!r}; allowed: {', '.join(SCHEMES)} "
                             "(all: every gradient compressed; paper: own gradient in 32-bit)")
        codec = self.make_codec()
        if codec is None:
            if self.error_feedback:
                raise ValueError("error feedback needs a lossy codec; the gradients travel in fp32")
            if self.scheme == "paper":
                raise ValueError("scheme='paper' (own gradient exact, incoming compressed) needs a codec")
            return
        if self.error_feedback and self.scheme == "paper":
            raise ValueError("error feedback re-sends what the others did not receive; with scheme='paper' a "
                             "worker's own gradient is exact, so its residual would be added twice: use scheme='all'")
        if self.algorithm == "native":
            raise ValueError("the native all_reduce carries fp32 only; pick an algorithm such as ring")
        resolve_mode(codec, self.effective_mode, self.algorithm)

    @property
    def compressed(self) -> bool:
        return self.codec is not None and self.codec not in IDENTITY

    @property
    def effective_mode(self) -> str:
        """'gather' for the paper's scheme and for error feedback, else what the caller asked."""
        if self.compressed and (self.scheme == "paper" or self.error_feedback):
            if self.mode == "requantize":
                raise ValueError("scheme='paper' and error feedback encode each worker's gradient once: "
                                 "mode must be 'gather' or 'auto', not 'requantize'")
            return "gather"
        return self.mode

    def make_codec(self) -> Codec | None:
        """A fresh codec for one worker (its own RNG and residual memory)."""
        if not self.compressed:
            return None
        codec = get_codec(str(self.codec))
        return ErrorFeedback(codec) if self.error_feedback else codec

    def label(self) -> str:
        if not self.compressed:
            return "32-bit"
        name = f"ef({self.codec})" if self.error_feedback else str(self.codec)
        return name + (" (own 32-bit)" if self.scheme == "paper" else "")


def roundtrip(codec: Codec | None, x: torch.Tensor, key: str) -> tuple[torch.Tensor, int]:
    """x through the codec (encode, decode) and the payload's wire bytes; fp32 when codec is None."""
    if codec is None:
        return x, x.numel() * 4
    enc = codec.encode_as(x, key)
    return codec.decode(enc).to(x.dtype).view(x.shape), enc.wire_bytes


def sum_gradients(grads: Sequence[Sequence[torch.Tensor]], codecs: Sequence[Codec | None],
                  exchange: GradientExchange, names: Sequence[str]) -> tuple[list[list[torch.Tensor]], int]:
    """Every worker's view of the sum over workers of grads[k][i], tensor by tensor, and the
    bytes all workers sent. One worker: its gradient makes one codec round trip (the paper's
    single-GPU simulation), and the bytes are what that one gradient message carries."""
    K = len(grads)
    if K == 1:
        out, nbytes = [], 0
        for g, name in zip(grads[0], names):
            q, b = roundtrip(codecs[0], g, name)
            out.append(q)
            nbytes += b
        return [out], nbytes
    mode, own = exchange.effective_mode, "exact" if exchange.scheme == "paper" else "compressed"

    def rank(comm) -> tuple[list[torch.Tensor], int]:
        mine = [allreduce(comm, g, algorithm=exchange.algorithm, codec=codecs[comm.rank], mode=mode,
                          own=own, key=name, check=False)
                for g, name in zip(grads[comm.rank], names)]
        return mine, comm.bytes_sent

    results = simulate(rank, K, device=grads[0][0].device)
    return [r[0] for r in results], sum(r[1] for r in results)


def split_batch(x: torch.Tensor, y: torch.Tensor, K: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """K shards of a batch (sizes differ by at most one); a batch smaller than K is an error."""
    if len(y) < K:
        raise ValueError(f"a batch of {len(y)} samples cannot feed {K} workers; use a batch of at least {K}")
    return list(zip(x.tensor_split(K), y.tensor_split(K)))


class Workers:
    """K replicas of a model, each with its optimizer and codec (`GradientExchange.make_codec`)."""

    def __init__(self, model: nn.Module, K: int, make_optimizer: Callable[[Sequence[nn.Parameter]], torch.optim.Optimizer],
                 exchange: GradientExchange) -> None:
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"workers={K!r}; it must be an int >= 1")
        self.K, self.exchange, self.make_optimizer = K, exchange, make_optimizer
        self.models = [model] + [copy.deepcopy(model) for _ in range(K - 1)]
        self.optimizers = [make_optimizer(list(m.parameters())) for m in self.models]
        self.codecs = [exchange.make_codec() for _ in range(K)]
        self.names = [n for n, _ in model.named_parameters()]

    def train(self, mode: bool = True) -> None:
        for m in self.models:
            m.train(mode)

    def gradient(self, k: int, x: torch.Tensor, y: torch.Tensor, denom: int) -> tuple[list[torch.Tensor], float]:
        """Worker k's gradient of (sum of losses on x)/denom, and its mean loss."""
        m = self.models[k]
        m.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), y, reduction="sum")
        (loss / denom).backward()
        return [p.grad for p in m.parameters()], float(loss.detach()) / len(y)

    def apply(self, k: int, grads: Sequence[torch.Tensor]) -> None:
        for p, g in zip(self.models[k].parameters(), grads):
            p.grad = g
        self.optimizers[k].step()

    def sync_step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
        """One synchronous data-parallel step on a batch; (mean loss, bytes on the wire)."""
        shards = split_batch(x, y, self.K)
        grads, loss = [], 0.0
        for k, (xs, ys) in enumerate(shards):
            g, lk = self.gradient(k, xs, ys, len(y))
            grads.append(g)
            loss += lk * len(ys)
        summed, nbytes = sum_gradients(grads, self.codecs, self.exchange, self.names)
        for k in range(self.K):
            self.apply(k, summed[k])
        return loss / len(y), nbytes

    def gradient_values(self) -> int:
        return sum(p.numel() for p in self.models[0].parameters())


__all__ = ["GradientExchange", "Workers", "SCHEMES", "sum_gradients", "split_batch", "roundtrip"]
