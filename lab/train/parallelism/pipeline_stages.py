"""A model cut into pipeline stages: its layers in order (`layers_of`), grouped into contiguous stages of about
equal work (floating-point operations of one sample, counted by torch's FlopCounterMode), and the shape of what
each stage hands the next (GPipe, Huang et al. 2019 §2: "partition ... into K cells ... balanced")."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class _Embed(nn.Module):
    """TinyGPT's token + position embeddings, as one layer."""

    def __init__(self, gpt: nn.Module) -> None:
        super().__init__()
        self.tok, self.pos = gpt.tok, gpt.pos

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class _Head(nn.Module):
    """TinyGPT's final LayerNorm and output head, logits as (batch, vocab, time)."""

    def __init__(self, gpt: nn.Module) -> None:
        super().__init__()
        self.ln, self.head = gpt.ln, gpt.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(x)).transpose(1, 2)


def _flat(model: nn.Module) -> list[nn.Module]:
    from ..gpt import TinyGPT
    from ..models import SmallCNN

    if isinstance(model, nn.Sequential):
        return list(model)
    if isinstance(model, SmallCNN):
        return [nn.Unflatten(1, (1, *model.image_shape)), *model.features, *model.head]
    if isinstance(model, TinyGPT):
        return [_Embed(model), *model.blocks, _Head(model)]
    raise ValueError(f"cannot cut a {type(model).__name__} into pipeline stages; known: nn.Sequential (the MLP), "
                     "SmallCNN, TinyGPT")


def layers_of(model: nn.Module) -> list[nn.Module]:
    """The model's layers in the order its forward runs them, each holding one layer with parameters and the
    parameter-free ones after it (activation, pooling, dropout); leading parameter-free ones join the first.
    MLP: [dropout, linear, relu, dropout], [linear, relu, dropout], ..., [linear]; SmallCNN: conv block, conv
    block (+ flatten, dropout), dense; TinyGPT: embeddings, each block, final norm + head."""
    units: list[list[nn.Module]] = []
    for layer in _flat(model):
        has = any(True for _ in layer.parameters())
        if not units or (has and any(any(True for _ in m.parameters()) for m in units[-1])):
            units.append([layer])
        else:
            units[-1].append(layer)
    return [u[0] if len(u) == 1 else nn.Sequential(*u) for u in units]


def flops(layers: list[nn.Module], example: torch.Tensor) -> tuple[list[float], list[tuple[int, ...]]]:
    """(floating-point operations of each layer's forward on `example`, one sample; each layer's output
    shape without the batch dimension). The random stream is left as it was."""
    from torch.utils.flop_counter import FlopCounterMode

    costs, shapes = [], []
    x = example
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for layer in layers:
            counter = FlopCounterMode(display=False)
            with counter:
                x = layer(x)
            costs.append(float(counter.get_total_flops()))
            shapes.append(tuple(x.shape[1:]))
    return costs, shapes


def partition(costs: list[float], k: int) -> list[tuple[int, int]]:
    """`costs` cut into k contiguous non-empty groups [lo, hi) whose largest total is smallest (the linear
    partition problem, by dynamic programming); ValueError if there are fewer than k."""
    n = len(costs)
    if not 1 <= k <= n:
        raise ValueError(f"cannot cut {n} layers into {k} stages; allowed: 1..{n} stages")
    pre = [0.0]
    for c in costs:
        pre.append(pre[-1] + max(c, 1.0))  # a layer without FLOPs (an embedding) still costs something
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n + 1):
            for m in range(j - 1, i):
                v = max(best[j - 1][m], pre[i] - pre[m])
                if v < best[j][i]:
                    best[j][i], cut[j][i] = v, m
    bounds, i = [], n
    for j in range(k, 0, -1):
        bounds.append((cut[j][i], i))
        i = cut[j][i]
    return bounds[::-1]


@dataclass
class Stages:
    """A model cut into stages: `modules[s]` runs stage s, `spans[s]` its layers [lo, hi) of `layers_of`,
    `shapes[s]` what it outputs for one sample (without the batch dimension), `flops[s]` its forward's
    operations on one sample."""

    modules: list[nn.Module]
    spans: list[tuple[int, int]]
    shapes: list[tuple[int, ...]]
    flops: list[float]


def cut(model: nn.Module, k: int, example: torch.Tensor) -> Stages:
    """`model` cut into k stages of about equal forward FLOPs on `example` (one sample). The stages share the
    model's parameters."""
    layers = layers_of(model)
    if k > len(layers):
        raise ValueError(f"{k} stages are more than the {len(layers)} layers of the {type(model).__name__}; "
                         f"allowed: at most {len(layers)} stages (pipeline ranks x stages per rank)")
    costs, shapes = flops(layers, example)
    spans = partition(costs, k)
    return Stages([nn.Sequential(*layers[lo:hi]) for lo, hi in spans], spans,
                  [shapes[hi - 1] for _, hi in spans], [sum(costs[lo:hi]) for lo, hi in spans])


__all__ = ["layers_of", "flops", "partition", "cut", "Stages"]
