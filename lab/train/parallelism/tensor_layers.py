"""Tensor (model) parallelism's building blocks over the lab's Comm: the collectives of one tensor-parallel
group with a codec on the activations, the autograd functions that place them, and the two splits of a Linear.

Dettmers 2016 §2.2 splits a layer two ways: by output (each rank holds rows of W; the input is replicated and
the outputs are gathered) and by input (each rank holds columns of W and its slice of the input; the partial
outputs are summed). Megatron-LM (Shoeybi et al. 2019, §3) pairs them, column then row, so that a pair needs one
all-reduce forward (`g`: the row half's partial outputs summed, bias added once after the sum) and one backward
(`f`: the gradient of the column half's replicated input). Sequence parallelism (Korthikanti et al. 2022, §4.2.2)
cuts that all-reduce in its two halves: the row half's outputs are reduce-scattered along the token dimension
(dim 0), elementwise work (LayerNorm, dropout, the residual) runs on the rank's shard of the tokens, and the
shard is all-gathered before the next column half; backward runs the reverse.

The codec rides the activation collectives (forward all-reduce, reduce-scatter and all-gather, and the same
collectives on their gradients backward), the paper's 8-bit model-parallel activations; gradients of parameters
(data-parallel, and the partial gradients of replicated parameters under sequence parallelism) travel in fp32.
Every collective adds to `TensorGroup.fp32_bytes` what it would send in fp32, and to its per-op counters.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.comm.base import Comm

NATIVE = "native"


def split_sizes(n: int, parts: int) -> list[int]:
    """Sizes of `torch.tensor_split` of n into parts (the first n % parts one larger): uneven splits allowed."""
    return [len(t) for t in torch.arange(n).tensor_split(parts)]


def split_range(n: int, parts: int, k: int) -> tuple[int, int]:
    """[start, stop) of part k of n cut as `split_sizes` cuts it."""
    sizes = split_sizes(n, parts)
    start = sum(sizes[:k])
    return start, start + sizes[k]


def shard_rows(n: int, parts: int) -> int:
    """Rows per shard when n rows are cut in `parts` equal shards (the last padded): ceil(n / parts)."""
    return -(-n // parts)


class TensorGroup:
    """The ranks of one tensor-parallel group (`comm`), the codec on its activation collectives (None: fp32)
    and the algorithm of its all-reduces (reduce-scatter and all-gather run the ring). Counts per (op, phase)
    calls, values, bytes that really went out and `fp32_bytes`, what the same collectives send in fp32."""

    def __init__(self, comm: Comm, codec: Codec | None = None, algorithm: str = "ring") -> None:
        if comm.backend == "sim" and comm.size > 1:
            raise ValueError("tensor parallelism runs its collectives inside autograd, whose state SimComm's ranks "
                             "(greenlets of one thread) would share: run it on real ranks (lab.comm.launch.run)")
        self.comm, self.codec, self.algorithm = comm, codec, algorithm
        #: while True (an evaluation), every collective counts under phase 'eval'
        self.evaluating = False
        self.counts: dict[tuple[str, str], dict[str, float]] = defaultdict(
            lambda: dict(calls=0, values=0, bytes=0, fp32_bytes=0.0))

    @property
    def size(self) -> int:
        return self.comm.size

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def fp32_bytes(self) -> float:
        return sum(c["fp32_bytes"] for c in self.counts.values())

    def _count(self, op: str, phase: str, values: int, sent: int, fp32: float) -> None:
        c = self.counts[(op, "eval" if self.evaluating else phase)]
        c["calls"] += 1
        c["values"] += values
        c["bytes"] += sent
        c["fp32_bytes"] += fp32

    def _allreduce_fp32_bytes(self, n: int) -> float:
        from lab.comm.algorithms import get_algorithm

        return get_algorithm("ring" if self.algorithm == NATIVE else self.algorithm).bytes_per_rank(self.size, 4.0 * n)

    def all_reduce(self, x: torch.Tensor, phase: str, codec: bool = True) -> torch.Tensor:
        """The sum over the group of x (every rank ends with the same tensor); codec=False: fp32."""
        if self.size == 1:
            return x
        from lab.comm.allreduce import allreduce

        b0 = self.comm.bytes_sent
        out = allreduce(self.comm, x.contiguous(), algorithm=self.algorithm, codec=self.codec if codec else None,
                        check=False)
        self._count("all_reduce" if codec else "grad_all_reduce", phase, x.numel(), self.comm.bytes_sent - b0,
                    self._allreduce_fp32_bytes(x.numel()))
        return out

    def reduce_scatter(self, x: torch.Tensor, phase: str) -> torch.Tensor:
        """This rank's shard of dim 0 (ceil(rows / size) rows; the tokens past the end are zero padding) of the
        sum over the group of x."""
        if self.size == 1:
            return x
        from lab.comm.collectives.api import reduce_scatter

        P, n = self.size, x.shape[0]
        k = shard_rows(n, P)
        if k * P != n:
            x = torch.cat([x, x.new_zeros((k * P - n, *x.shape[1:]))])
        b0 = self.comm.bytes_sent
        out = reduce_scatter(self.comm, x.contiguous(), algorithm="ring", codec=self.codec, check=False)
        self._count("reduce_scatter", phase, x.numel(), self.comm.bytes_sent - b0, 4.0 * (P - 1) * x.numel() / P)
        return out

    def all_gather(self, x: torch.Tensor, phase: str, dim: int = 0, sizes: Sequence[int] | None = None) -> torch.Tensor:
        """Every rank's x concatenated along `dim` in rank order, every rank decoding every payload (its own
        too, so that all end with the same tensor). sizes: each rank's length along dim when they differ (an
        uneven split); shorter ones travel padded."""
        if self.size == 1:
            return x
        from lab.comm.collectives.api import all_gather

        P = self.size
        sizes = list(sizes) if sizes is not None else [x.shape[dim]] * P
        m = max(sizes)
        rows = x.movedim(dim, 0)
        if rows.shape[0] < m:
            rows = torch.cat([rows, rows.new_zeros((m - rows.shape[0], *rows.shape[1:]))])
        b0 = self.comm.bytes_sent
        got = all_gather(self.comm, rows.contiguous(), algorithm="ring", codec=self.codec, check=False)
        self._count("all_gather", phase, rows.numel() * P, self.comm.bytes_sent - b0, 4.0 * (P - 1) * rows.numel())
        if any(s != m for s in sizes):
            got = torch.cat([got[p * m:p * m + s] for p, s in enumerate(sizes)])
        return got.movedim(0, dim)

    def table(self) -> list[dict]:
        """One row per (op, phase): calls, values, bytes sent, fp32_bytes."""
        return [dict(op=op, phase=phase, calls=int(c["calls"]), values=int(c["values"]), bytes=int(c["bytes"]),
                     fp32_bytes=int(round(c["fp32_bytes"])))
                for (op, phase), c in sorted(self.counts.items())]


# -- where the collectives sit (Megatron's f and g; sequence parallelism's all-gather and reduce-scatter)

class CopyToTensor(torch.autograd.Function):
    """Megatron's f: forward identity (the replicated input of a column half), backward the all-reduce of its
    gradient (each rank's columns contribute a part)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return ctx.group.all_reduce(g, "backward"), None


class ReduceFromTensor(torch.autograd.Function):
    """Megatron's g: forward the all-reduce of the row half's partial outputs, backward identity."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup) -> torch.Tensor:  # type: ignore[override]
        return group.all_reduce(x, "forward")

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return g, None


class GatherSplit(torch.autograd.Function):
    """A column half's output slices gathered along `dim` for a replicated consumer (Dettmers' split by output:
    the outputs gathered); backward each rank keeps its slice of the (replicated) gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup, dim: int,  # type: ignore[override]
                sizes: tuple[int, ...]) -> torch.Tensor:
        ctx.dim, ctx.start, ctx.n = dim, sum(sizes[:group.rank]), sizes[group.rank]
        return group.all_gather(x, "forward", dim, sizes)

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return g.narrow(ctx.dim, ctx.start, ctx.n).contiguous(), None, None, None


class ScatterToSequence(torch.autograd.Function):
    """Sequence parallelism's reduce-scatter: the row half's partial outputs (n tokens in dim 0) summed and cut
    into token shards; backward the all-gather of the shards' gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup) -> torch.Tensor:  # type: ignore[override]
        ctx.group, ctx.n = group, x.shape[0]
        return group.reduce_scatter(x, "forward")

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return ctx.group.all_gather(g.contiguous(), "backward")[:ctx.n], None


class GatherFromSequence(torch.autograd.Function):
    """Sequence parallelism's all-gather of token shards back to all n tokens (padding dropped), before a
    column half; backward the reduce-scatter of the gradient (each rank's columns contribute a part)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup, n: int) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        return group.all_gather(x, "forward")[:n]

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return ctx.group.reduce_scatter(g.contiguous(), "backward"), None, None


class GatherSequenceSplit(torch.autograd.Function):
    """Token shards all-gathered (padding dropped) for a replicated consumer (the output layer, the loss every
    rank computes alike); backward each rank keeps its shard of the replicated gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: TensorGroup, n: int) -> torch.Tensor:  # type: ignore[override]
        ctx.k, ctx.rank, ctx.n = x.shape[0], group.rank, n
        return group.all_gather(x, "forward")[:n]

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        start = ctx.rank * ctx.k
        part = g[start:start + ctx.k]
        if part.shape[0] < ctx.k:
            part = torch.cat([part, part.new_zeros((ctx.k - part.shape[0], *part.shape[1:]))])
        return part.contiguous(), None, None


class PartialGrad(torch.autograd.Function):
    """A replicated parameter used on this rank's token shard only: forward identity, backward its gradient
    summed over the group in fp32 (Megatron's all-reduce of LayerNorm gradients under sequence parallelism)."""

    @staticmethod
    def forward(ctx, p: torch.Tensor, group: TensorGroup) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        return p.view_as(p)

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        return ctx.group.all_reduce(g.contiguous(), "backward", codec=False), None


# -- the two splits of a Linear

class ColumnParallelLinear(nn.Module):
    """Split by output: this rank's rows `index` of a Linear's weight (and bias); y_k = x W_kᵀ + b_k for the
    replicated input x. `index`: the output features it holds (a LongTensor, or a [start, stop) range)."""

    def __init__(self, linear: nn.Linear, index: torch.Tensor) -> None:
        super().__init__()
        self.index = index
        self.weight = nn.Parameter(linear.weight.detach()[index].clone())
        self.bias = nn.Parameter(linear.bias.detach()[index].clone()) if linear.bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Split by input: this rank's columns `index` of a Linear's weight, applied to its slice of the input; the
    partial outputs are summed by the caller's collective, then the (replicated) bias is added once."""

    def __init__(self, linear: nn.Linear, index: torch.Tensor) -> None:
        super().__init__()
        self.index = index
        self.weight = nn.Parameter(linear.weight.detach()[:, index].clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The partial output x_k W_kᵀ (no bias)."""
        return F.linear(x, self.weight)


# -- dropout from the unsplit network's stream

def dropout_noise(shape: Sequence[int], p: float, gen: torch.Generator) -> torch.Tensor | None:
    """The scaled keep-mask torch's CPU dropout draws for a tensor of `shape` (bernoulli(1 - p), divided by
    1 - p), from `gen`; None for p = 0 (torch draws nothing). Each rank draws the whole layer's mask from the
    same stream and keeps its slice, so a split network drops exactly what the unsplit one drops."""
    if p == 0:
        return None
    noise = torch.empty(tuple(shape), dtype=torch.float32).bernoulli_(1 - p, generator=gen)
    return noise.div_(1 - p)


def pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """t with zero rows appended up to `rows` rows in dim 0."""
    if t.shape[0] >= rows:
        return t
    return torch.cat([t, t.new_zeros((rows - t.shape[0], *t.shape[1:]))])


__all__ = ["TensorGroup", "CopyToTensor", "ReduceFromTensor", "GatherSplit", "ScatterToSequence",
           "GatherFromSequence", "GatherSequenceSplit", "PartialGrad", "ColumnParallelLinear", "RowParallelLinear",
           "dropout_noise", "pad_rows", "split_sizes", "split_range", "shard_rows"]
