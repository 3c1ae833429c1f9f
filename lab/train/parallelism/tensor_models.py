"""The lab's models split over a tensor-parallel group: the paper's MLP (Dettmers 2016 §3.4) and the tiny GPT,
Megatron-style (Shoeybi et al. 2019 §3), with or without sequence parallelism (Korthikanti et al. 2022 §4.2.2).

MLP (features-h1-h2-...-classes): Linear layers alternate column, row, column, ...; each column-row pair costs
one all-reduce forward (the row half's outputs) and one backward (the next column half's input gradient). The
last layer, when it is a column half (the paper's 784-h1-h2-10 has three Linear layers: column, row, column),
is split by output and its logits all-gathered (Dettmers' split by output, outputs gathered), so every rank
holds the same logits and computes the same loss; when it is a row half its all-reduce yields the logits.
Uneven splits are allowed (`torch.tensor_split`'s sizes; gathered slices travel padded to the longest).
Sequence parallelism on the MLP: the tokens are the samples of the batch. A row half's outputs are
reduce-scattered by samples, its bias, activation and the next layer's dropout run on the rank's samples, and
the samples are all-gathered before the next column half: the same bytes as the all-reduce, the elementwise
work and its saved activations divided by the tensor ranks.

GPT: attention heads split (qkv a column half holding its heads' q, k and v rows, proj a row half), the MLP
block column then row; embeddings, LayerNorms and the output layer replicated. Under sequence parallelism the
residual stream, LayerNorms and embeddings run on the rank's sequence positions, and the replicated parameters
used there get partial gradients, summed over the group in fp32.

Dropout: every rank draws each layer's whole mask from the same stream as the unsplit network and keeps its
slice, so with an fp32 wire a step is the single-process step up to the order of floating-point sums.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.comm.base import Comm

from ..gpt import TinyGPT
from ..models import ACTIVATIONS, MLP
from .tensor_layers import (ColumnParallelLinear, CopyToTensor, GatherFromSequence, GatherSequenceSplit,
                            GatherSplit, PartialGrad, ReduceFromTensor, RowParallelLinear, ScatterToSequence,
                            TensorGroup, dropout_noise, pad_rows, shard_rows, split_range, split_sizes)


def as_group(group: TensorGroup | Comm, codec: Codec | None = None) -> TensorGroup:
    """A TensorGroup, or one over a Comm with `codec` on its activation collectives."""
    return group if isinstance(group, TensorGroup) else TensorGroup(group, codec)


def column_widths(hidden: tuple[int, ...]) -> tuple[int, ...]:
    """The hidden widths split by output (layers 0, 2, 4, ...: the column halves; the row halves split the same
    widths by input)."""
    return tuple(hidden[0::2])


class TensorParallelMLP(nn.Module):
    """This rank's part of an `MLP` over `group` (a TensorGroup, or a Comm and `codec`; module docstring).
    seed: the dropout stream's seed (the unsplit network's global stream seeded alike draws the same masks)."""

    def __init__(self, mlp: MLP, group: TensorGroup | Comm, sequence_parallel: bool = False, seed: int = 0,
                 codec: Codec | None = None) -> None:
        super().__init__()
        group = as_group(group, codec)
        if not isinstance(mlp, MLP):
            raise ValueError("tensor parallelism splits the MLP's Linear layers (or TinyGPT: TensorParallelGPT)")
        T, r = group.size, group.rank
        dense = mlp.dense
        for i in range(0, len(dense), 2):
            if dense[i].out_features < T and i < len(dense) - 1:
                raise ValueError(f"a hidden layer of {dense[i].out_features} units cannot be split over {T} "
                                 "tensor ranks; give every split layer at least one unit per rank")
        self.group, self.sequence_parallel = group, bool(sequence_parallel)
        self.sizes, self.rates = mlp.sizes, mlp.rates
        self.act = ACTIVATIONS[mlp.activation]()
        self.kinds = ["column" if i % 2 == 0 else "row" for i in range(len(dense))]
        self.splits = [split_sizes(dense[i - (i % 2)].out_features, T) for i in range(len(dense))]
        self.ranges = [split_range(dense[i - (i % 2)].out_features, T, r) for i in range(len(dense))]
        layers: list[nn.Module] = []
        for i, lin in enumerate(dense):
            idx = torch.arange(*self.ranges[i])
            layers.append(ColumnParallelLinear(lin, idx) if self.kinds[i] == "column" else RowParallelLinear(lin, idx))
        self.layers = nn.ModuleList(layers)
        self.gen = torch.Generator().manual_seed(int(seed))

    def forward(self, x: torch.Tensor, rows: tuple[int, int] | None = None) -> torch.Tensor:
        """Logits of the samples x (the same on every rank of the group). rows: (start, total): x is rows
        start.. of a batch of `total` samples split over data-parallel groups (dropout masks are drawn for the
        whole batch, as the unsplit network draws them)."""
        g, T, r = self.group, self.group.size, self.group.rank
        B = x.shape[0]
        start, total = rows if rows is not None else (0, B)
        k = shard_rows(B, T)
        h, state = x, "full"  # full: every rank the same (B, w); cols: its slice of columns; tokens: its samples
        last = len(self.layers) - 1
        for i, lin in enumerate(self.layers):
            p = self.rates[i]
            if self.training and p > 0:
                noise = dropout_noise((total, self.sizes[i]), p, self.gen)[start:start + B].to(h.device)
                if state == "cols":
                    noise = noise[:, self.ranges[i][0]:self.ranges[i][1]]
                elif state == "tokens":
                    noise = pad_rows(noise, k * T)[r * k:(r + 1) * k]
                h = h * noise
            if self.kinds[i] == "column":
                h = GatherFromSequence.apply(h, g, B) if state == "tokens" else CopyToTensor.apply(h, g)
                h = lin(h)
                if i == last:
                    return GatherSplit.apply(h, g, 1, tuple(self.splits[i]))
                state = "cols"
            else:
                z = lin(h)
                if self.sequence_parallel and i < last:
                    h = ScatterToSequence.apply(z, g) + PartialGrad.apply(lin.bias, g)
                    state = "tokens"
                else:
                    h = ReduceFromTensor.apply(z, g) + lin.bias
                    state = "full"
                if i == last:
                    return h
            h = self.act(h)
        raise AssertionError("an MLP ends with a Linear layer")


class _Block(nn.Module):
    """One TinyGPT block's part on this rank: its heads' qkv rows and proj columns, its slice of the MLP."""

    def __init__(self, block: nn.Module, T: int, r: int) -> None:
        super().__init__()
        C, H = block.qkv.in_features, block.heads
        hd, hl = C // H, H // T
        self.local_heads, self.head_dim = hl, hd
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)
        cols = torch.arange(r * hl * hd, (r + 1) * hl * hd)
        self.qkv = ColumnParallelLinear(block.qkv, torch.cat([cols + j * C for j in range(3)]))
        self.proj = RowParallelLinear(block.proj, cols)
        fc1, fc2 = block.mlp[0], block.mlp[2]
        mid = torch.arange(*split_range(fc1.out_features, T, r))
        self.fc1, self.fc2 = ColumnParallelLinear(fc1, mid), RowParallelLinear(fc2, mid)


class TensorParallelGPT(nn.Module):
    """This rank's part of a `TinyGPT` over `group` (a TensorGroup, or a Comm and `codec`; module docstring):
    forward(idx) returns the whole batch's logits (batch, vocab, time) on every rank, as TinyGPT does. Dropout
    must be 0: attention dropout inside scaled_dot_product_attention draws from a stream a head split cannot
    reproduce."""

    def __init__(self, gpt: TinyGPT, group: TensorGroup | Comm, sequence_parallel: bool = False,
                 codec: Codec | None = None) -> None:
        super().__init__()
        group = as_group(group, codec)
        if not isinstance(gpt, TinyGPT):
            raise ValueError(f"TensorParallelGPT splits a TinyGPT, got {type(gpt).__name__}")
        T, r = group.size, group.rank
        heads = gpt.blocks[0].heads
        if heads % T:
            raise ValueError(f"{heads} attention heads cannot be split over {T} tensor ranks; allowed: a number of "
                             f"ranks that divides {heads}")
        if any(b.dropout > 0 for b in gpt.blocks):
            raise ValueError("tensor-parallel TinyGPT needs dropout=0: attention dropout inside "
                             "scaled_dot_product_attention draws from a stream a head split cannot reproduce")
        self.group, self.sequence_parallel, self.context = group, bool(sequence_parallel), gpt.context
        self.tok, self.pos = copy.deepcopy(gpt.tok), copy.deepcopy(gpt.pos)
        self.blocks = nn.ModuleList([_Block(b, T, r) for b in gpt.blocks])
        self.ln, self.head = copy.deepcopy(gpt.ln), copy.deepcopy(gpt.head)

    def _p(self, t: torch.Tensor) -> torch.Tensor:
        """A replicated parameter as used on the rank's positions: its gradient summed over the group (SP)."""
        return PartialGrad.apply(t, self.group) if self.sequence_parallel else t

    def _ln(self, ln: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, ln.normalized_shape, self._p(ln.weight), self._p(ln.bias), ln.eps)

    def _enter(self, h: torch.Tensor, n: int) -> torch.Tensor:
        """Before a column half: f, or the all-gather of the positions."""
        if self.sequence_parallel:
            return GatherFromSequence.apply(h, self.group, n)
        return CopyToTensor.apply(h, self.group)

    def _leave(self, z: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """After a row half: g, or the reduce-scatter over positions; then the bias, once."""
        if self.sequence_parallel:
            return ScatterToSequence.apply(z, self.group) + self._p(bias)
        return ReduceFromTensor.apply(z, self.group) + bias

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, n = idx.shape
        if n > self.context:
            raise ValueError(f"a sequence of {n} tokens is longer than the context of {self.context}")
        T, r = self.group.size, self.group.rank
        if self.sequence_parallel:  # this rank's positions, (k, B, C), padded to k
            k = shard_rows(n, T)
            pos = torch.arange(r * k, min((r + 1) * k, n), device=idx.device)
            x = F.embedding(idx[:, pos], self._p(self.tok.weight)).transpose(0, 1) + \
                F.embedding(pos, self._p(self.pos.weight))[:, None]
            x = pad_rows(x, k)
        else:  # every position, (n, B, C), the same on every rank
            x = self.tok(idx).transpose(0, 1) + self.pos(torch.arange(n, device=idx.device))[:, None]
        for b in self.blocks:
            hl, hd = b.local_heads, b.head_dim
            qkv = b.qkv(self._enter(self._ln(b.ln1, x), n))  # (n, B, 3 hl hd)
            q, k_, v = qkv.view(n, B, 3, hl, hd).permute(2, 1, 3, 0, 4)
            a = F.scaled_dot_product_attention(q, k_, v, is_causal=True)  # (B, hl, n, hd)
            x = x + self._leave(b.proj(a.permute(2, 0, 1, 3).reshape(n, B, hl * hd)), b.proj.bias)
            h = F.gelu(b.fc1(self._enter(self._ln(b.ln2, x), n)))
            x = x + self._leave(b.fc2(h), b.fc2.bias)
        h = self._ln(self.ln, x)
        if self.sequence_parallel:
            h = GatherSequenceSplit.apply(h, self.group, n)
        return self.head(h).permute(1, 2, 0)


__all__ = ["TensorParallelMLP", "TensorParallelGPT", "as_group", "column_widths"]
