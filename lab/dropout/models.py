"""The paper's two networks with a choice of dropout: the MLP of §IV-A/B and the LSTM language
model of §IV-C. kind = "bernoulli" (conventional dropout, the baseline), "row" (RDP), "tile"
(TDP) or "none"; the parameters and their initialisation do not depend on the kind, so runs that
differ only in kind start from the same weights.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .compact import Compact, Input, compact_linear
from .conventional import check_rate
from .kinds import MODEL_KINDS, PATTERN_KINDS
from .layers import ApproxDropoutLinear, CompactLinear
from .pattern import Pattern
from .sampler import PatternSampler, sampler_for_rate
from .tile_pattern import DEFAULT_TILE


def _check_kind(kind: str) -> str:
    if kind not in MODEL_KINDS:
        raise ValueError(f"dropout kind must be one of {MODEL_KINDS}, got {kind!r}")
    return kind


class DropoutMLP(nn.Module):
    """sizes[0] -> hidden ... -> sizes[-1]; ReLU and dropout (rate rates[i]) after hidden layer i (§IV-A)."""

    def __init__(self, sizes: Sequence[int] = (784, 2048, 2048, 10), rates: Sequence[float] = (0.5, 0.5),
                 kind: str = "row", *, max_dp: Optional[int] = None, tile: tuple[int, int] = DEFAULT_TILE,
                 seed: int = 0) -> None:
        super().__init__()
        _check_kind(kind)
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"sizes must list at least input and output widths, all >= 1; got {sizes}")
        if len(rates) != len(sizes) - 2:
            raise ValueError(f"{len(sizes) - 2} hidden layers need {len(sizes) - 2} dropout rates, got {len(rates)}")
        rates = [check_rate(p) for p in rates]
        layer_kind = "bernoulli" if kind == "none" else kind
        self.sizes, self.rates, self.kind = sizes, rates, kind
        self.hidden = nn.ModuleList(
            ApproxDropoutLinear(sizes[i], sizes[i + 1], 0.0 if kind == "none" else rates[i], layer_kind,
                                max_dp=max_dp, tile=tile, seed=seed + 101 * i) for i in range(len(sizes) - 2))
        self.head = CompactLinear(sizes[-2], sizes[-1], seed=seed + 101 * (len(sizes) - 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h: Input = x
        for layer in self.hidden:
            h = layer(h)
        return self.head(h)


def sgd(params, lr: float, momentum: float = 0.0) -> torch.optim.SGD:
    """torch.optim.SGD whose momentum buffers start as dense zeros, so the compact layers'
    row-sparse weight gradients are added into a dense buffer (same update as torch's first step,
    buf = grad, and the same cost for dense and sparse gradients)."""
    params = [p for p in params if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr, momentum=momentum)
    if momentum:
        for p in params:
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return opt


def approx_dropout(x: torch.Tensor, pattern: Pattern) -> Compact:
    """Apply a dropout pattern to an existing (rows, units) activation: keep its blocks, scale by dp.

    Saves nothing on the producer (it was computed in full, e.g. an LSTM output that the recurrence
    needs) but lets the consumer skip the dropped units.
    """
    B, M = x.shape
    blocks = pattern.blocks(B, M, x.device)
    vals = []
    for blk in blocks:
        v = x
        if not (isinstance(blk.rows, slice) and blk.rows == slice(None)):
            v = v.index_select(0, blk.rows)
        if isinstance(blk.cols, slice):
            v = v[:, blk.cols]
        else:
            v = v.index_select(1, blk.cols)
        vals.append(v * pattern.scale)
    return Compact(vals, blocks, (B, M), pattern)


class _Site:
    """One dropout site of the LSTM: conventional, a pattern sampler, or off."""

    def __init__(self, p: float, kind: str, max_dp: Optional[int], tile: tuple[int, int], seed: int) -> None:
        self.p, self.kind = p, kind
        self.sampler: Optional[PatternSampler] = None
        if p > 0 and kind in PATTERN_KINDS:
            self.sampler = sampler_for_rate(p, kind, max_dp=max_dp, tile=tile, seed=seed)

    def __call__(self, x: torch.Tensor, training: bool) -> Input:
        if not training or self.p == 0 or self.kind == "none":
            return x
        if self.kind == "bernoulli":
            return F.dropout(x, self.p, True)
        return approx_dropout(x, self.sampler.sample())


class DropoutLSTM(nn.Module):
    """Word-level LSTM language model with dropout on the non-recurrent connections only (§IV-C):
    embedding -> [drop -> LSTM layer] x L -> drop -> decoder.

    Each layer's input projection (W_ih, stored (in, 4H)) and the decoder (stored (H, V)) consume
    the dropped activation compactly; the recurrent h -> h path has no dropout and stays dense.
    With RDP/TDP a pattern is drawn per site per iteration and shared by all time steps (rows of
    the (T*B, units) activation; TDP tiles run over those rows); conventional dropout draws a new
    mask per entry.
    """

    def __init__(self, vocab: int, hidden: int = 256, layers: int = 2, rates: Sequence[float] = (0.5, 0.5),
                 kind: str = "row", *, embed: Optional[int] = None, max_dp: Optional[int] = None,
                 tile: tuple[int, int] = DEFAULT_TILE, seed: int = 0) -> None:
        super().__init__()
        _check_kind(kind)
        if vocab < 2 or hidden < 1 or layers < 1:
            raise ValueError(f"need vocab >= 2, hidden >= 1, layers >= 1; got {vocab}, {hidden}, {layers}")
        rates = [check_rate(p) for p in rates]
        if len(rates) == 1:
            rates = rates * layers
        if len(rates) != layers:
            raise ValueError(f"{layers} layers need {layers} dropout rates (or one), got {len(rates)}")
        embed = embed or hidden
        self.vocab, self.hidden_size, self.layers, self.kind, self.rates = vocab, hidden, layers, kind, rates
        g = torch.Generator().manual_seed(seed)
        init = 0.1  # Zaremba et al.'s uniform init range for PTB
        self.embedding = nn.Embedding(vocab, embed, sparse=True)
        with torch.no_grad():
            self.embedding.weight.uniform_(-init, init, generator=g)
        self.w_ih = nn.ParameterList()
        self.w_hh = nn.ParameterList()
        self.b = nn.ParameterList()
        for layer in range(layers):
            n_in = embed if layer == 0 else hidden
            self.w_ih.append(nn.Parameter(torch.empty(n_in, 4 * hidden).uniform_(-init, init, generator=g)))
            self.w_hh.append(nn.Parameter(torch.empty(hidden, 4 * hidden).uniform_(-init, init, generator=g)))
            self.b.append(nn.Parameter(torch.zeros(4 * hidden)))
        self.decoder = CompactLinear(hidden, vocab, seed=seed + 7)
        with torch.no_grad():
            self.decoder.weight_t.uniform_(-init, init, generator=g)
            self.decoder.bias.zero_()
        # site l drops the input of layer l (site 0: the embedding); site L the decoder's input
        site_rates = [rates[0]] + [rates[min(l, layers - 1)] for l in range(layers)]
        self.sites = [_Site(p, kind, max_dp, tile, seed + 1000 + i) for i, p in enumerate(site_rates)]

    def init_state(self, batch: int, device: torch.device | str = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
        z = torch.zeros(batch, self.hidden_size, device=device)
        return [(z, z) for _ in range(self.layers)]

    def forward(self, tokens: torch.Tensor, state: list[tuple[torch.Tensor, torch.Tensor]]
                ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """tokens (T, B) -> logits (T*B, vocab), new state (detach it between windows)."""
        T, B = tokens.shape
        x: torch.Tensor = self.embedding(tokens.reshape(-1))  # (T*B, embed)
        new_state = []
        for layer in range(self.layers):
            xin = self.sites[layer](x, self.training)
            gates_x = compact_linear(xin, self.w_ih[layer], self.b[layer], None, layout="in_out").view(T, B, -1)
            h, c = state[layer]
            w_hh = self.w_hh[layer]
            outs = []
            for t in range(T):
                gates = torch.addmm(gates_x[t], h, w_hh)
                i, f, g, o = gates.chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                outs.append(h)
            new_state.append((h, c))
            x = torch.stack(outs).view(T * B, -1)
        logits = self.decoder(self.sites[self.layers](x, self.training))
        return logits, new_state


def grad_norm(params) -> torch.Tensor:
    """Global L2 norm of the gradients, dense or row-sparse (duplicate rows summed first)."""
    sq = []
    for p in params:
        g = p.grad
        if g is None:
            continue
        v = g.coalesce().values() if g.is_sparse else g
        sq.append(v.pow(2).sum())
    return torch.stack(sq).sum().sqrt() if sq else torch.tensor(0.0)


def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients (dense or sparse) so their global norm is at most max_norm."""
    params = list(params)
    total = float(grad_norm(params))
    if math.isfinite(total) and total > max_norm > 0:
        f = max_norm / (total + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(f)
    return total
