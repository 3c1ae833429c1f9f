"""Stochastic rounding against rounding to nearest, on any grid the lab has (hardware floats fp16 / bf16 / fp8,
value-table codecs): the bias E[Q(x)] - x across x, a weight under many updates smaller than half a gap, and a
short training run with the weights stored on the grid. Gupta et al. 2015 §3 (stochastic rounding); Ben-Nun &
Hoefler, "Communication optimizations" ("the main trick is stochastic rounding")."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd
import torch

from lab.codecs.stochastic import ROUNDINGS, grid, grid_formats, neighbours, round_to, round_to_grid, ulp

Progress = Callable[[float, str], None]


def check_format(name: str) -> str:
    """`name` when it has a grid, else a ValueError naming the allowed formats."""
    grid(name)
    return name


def bias_sweep(fmt: str = "bf16", start: float = 1.0, gaps: int = 3, points: int = 61, draws: int = 4000,
               seed: int = 0) -> pd.DataFrame:
    """E[Q(x)] - x for x across `gaps` grid gaps from the grid value at or below `start`, for both roundings:
    nearest (deterministic) and stochastic (mean of `draws` seeded draws per x, its 95 % interval from the draws'
    standard deviation). Columns: x, gap (the local grid gap), rounding, bias, lo95, hi95 (equal to bias for
    nearest), bias_in_gaps (bias / gap). attrs: fmt, draws, start (the grid value the sweep starts at)."""
    if not isinstance(gaps, int) or not 1 <= gaps <= 20:
        raise ValueError(f"gaps={gaps!r}: allowed a whole number 1..20")
    if not isinstance(draws, int) or not 10 <= draws <= 100_000:
        raise ValueError(f"draws={draws!r}: allowed a whole number 10..100000")
    g = grid(fmt)
    if not math.isfinite(start) or not float(g[0]) <= start <= float(g[-1]):
        raise ValueError(f"start={start!r}: allowed a value in [{float(g[0]):.6g}, {float(g[-1]):.6g}] for {fmt}")
    i = int(torch.searchsorted(g, torch.tensor(start, dtype=torch.float64), right=True)) - 1
    i = max(0, min(i, len(g) - 1 - gaps))  # at the top end: the last `gaps` gaps
    j = min(i + gaps, len(g) - 1)
    x = torch.linspace(float(g[i]), float(g[j]), points, dtype=torch.float64)
    x = x.float().double()  # the values a float32 weight holds
    gen = torch.Generator().manual_seed(seed)
    near = round_to_grid(x, g, "nearest").double() - x
    draws_x = x.repeat(draws, 1)
    sto = round_to_grid(draws_x, g, "stochastic", gen).double() - draws_x
    mean, sd = sto.mean(0), sto.std(0)
    half = 1.96 * sd / math.sqrt(draws)
    lo, hi = neighbours(x, g)
    gap = hi - lo
    rows = [pd.DataFrame({"x": x.numpy(), "gap": gap.numpy(), "rounding": "nearest", "bias": near.numpy(),
                          "lo95": near.numpy(), "hi95": near.numpy()}),
            pd.DataFrame({"x": x.numpy(), "gap": gap.numpy(), "rounding": "stochastic", "bias": mean.numpy(),
                          "lo95": (mean - half).numpy(), "hi95": (mean + half).numpy()})]
    out = pd.concat(rows, ignore_index=True)
    out["bias_in_gaps"] = out.bias / out.gap
    out.attrs.update(fmt=fmt, draws=draws, start=float(g[i]))
    return out


def tiny_updates(fmt: str = "bf16", start: float = 1.0, update: float = 1e-4, steps: int = 10_000, seeds: int = 8,
                 seed: int = 0, points: int = 201) -> pd.DataFrame:
    """A weight stored in `fmt`, starting at `start` (rounded onto the grid), gets `steps` updates of `update`,
    each sum w + update rounded back onto the grid: to nearest, and stochastically (`seeds` seeded runs), beside
    exact float64 arithmetic. Columns: step, exact, nearest, stochastic_mean, stochastic_min, stochastic_max
    (over the seeds), at `points` steps. attrs: fmt, update, steps, seeds, w0 (the stored start), gap (the grid
    gap above it), final_nearest, final_exact, final_stochastic (one per seed)."""
    if not isinstance(steps, int) or not 1 <= steps <= 100_000:
        raise ValueError(f"steps={steps!r}: allowed a whole number 1..100000")
    if not isinstance(seeds, int) or not 1 <= seeds <= 64:
        raise ValueError(f"seeds={seeds!r}: allowed a whole number 1..64")
    if not math.isfinite(update) or update == 0:
        raise ValueError(f"update={update!r}: allowed a finite non-zero number")
    g = grid(fmt)
    if not math.isfinite(start) or not float(g[0]) <= start <= float(g[-1]):
        raise ValueError(f"start={start!r}: allowed a value in [{float(g[0]):.6g}, {float(g[-1]):.6g}] for {fmt}")
    w0 = round_to_grid(torch.tensor([start], dtype=torch.float32), g, "nearest")
    gen = torch.Generator().manual_seed(seed)
    near = w0.clone()
    sto = w0.repeat(seeds)
    u = torch.tensor(update, dtype=torch.float32)
    keep = set(np.unique(np.linspace(0, steps, points).round().astype(int)).tolist())
    rows, stalled = [], False
    for k in range(steps + 1):
        if k in keep:
            rows.append((k, float(w0[0]) + k * float(u), float(near[0]), float(sto.double().mean()),
                         float(sto.min()), float(sto.max())))
        if k == steps:
            break
        if not stalled:
            nxt = round_to_grid(near + u, g, "nearest")
            stalled = bool((nxt == near).all())  # deterministic: once w + u rounds back to w, it always will
            near = nxt
        sto = round_to_grid(sto + u, g, "stochastic", gen)
    out = pd.DataFrame(rows, columns=["step", "exact", "nearest", "stochastic_mean", "stochastic_min",
                                      "stochastic_max"])
    out.attrs.update(fmt=fmt, update=float(u), steps=steps, seeds=seeds, w0=float(w0[0]), gap=ulp(float(w0[0]), fmt),
                     final_nearest=float(near[0]), final_exact=float(w0[0]) + steps * float(u),
                     smallest=float(g[0]), largest=float(g[-1]),
                     final_stochastic=sto.tolist())
    return out


def _mlp(features: int, hidden: int, classes: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(features, hidden, generator=g) * math.sqrt(2 / features)
    w2 = torch.randn(hidden, classes, generator=g) * math.sqrt(2 / hidden)
    return [w1, torch.zeros(hidden), w2, torch.zeros(classes)]


def _forward(p: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ p[0] + p[1]) @ p[2] + p[3]


def low_precision_training(fmt: str = "bf16", steps: int = 300, lr: float = 0.02, hidden: int = 64,
                           batch: int = 32, seed: int = 0, every: int = 10,
                           progress: Progress | None = None) -> pd.DataFrame:
    """The digits MLP (64 → `hidden` → 10, ReLU, plain SGD at `lr`, batches of `batch`, seeded) trained three
    ways from the same start and the same batches: weights in float32, and weights stored in `fmt` with each
    update w − lr·∇w rounded back onto the grid to nearest or stochastically (seeded). Every `every` steps: the
    training loss on the batch's run so far and the test accuracy. Columns: step, weights ('float32', 'nearest',
    'stochastic'), test_accuracy, train_loss, frozen (the fraction of the last step's weight updates that
    rounding threw away). attrs: fmt, lr, steps, seed, test (test images)."""
    from lab.data.images import load_digits

    if not isinstance(steps, int) or not 1 <= steps <= 5000:
        raise ValueError(f"steps={steps!r}: allowed a whole number 1..5000")
    if not math.isfinite(lr) or not 0 < lr <= 10:
        raise ValueError(f"lr={lr!r}: allowed a number in (0, 10]")
    g = grid(fmt)
    data = load_digits(seed=0)
    start = _mlp(data.features, hidden, data.classes, seed)
    runs = {"float32": [p.clone() for p in start],
            "nearest": [round_to_grid(p, g, "nearest") for p in start],
            "stochastic": [round_to_grid(p, g, "nearest") for p in start]}
    gen = torch.Generator().manual_seed(seed + 1)
    order = torch.Generator().manual_seed(seed + 2)
    n = len(data.train_y)
    rows, losses = [], {k: [] for k in runs}
    frozen = {k: 0.0 for k in runs}
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            for name, p in runs.items():
                with torch.no_grad():
                    acc = float((_forward(p, data.test_x).argmax(1) == data.test_y).double().mean())
                recent = losses[name][-every:]
                rows.append((step, name, acc, float(np.mean(recent)) if recent else float("nan"), frozen[name]))
            if progress:
                progress(step / steps, f"step {step} of {steps}")
        if step == steps:
            break
        idx = torch.randint(0, n, (batch,), generator=order)
        x, y = data.train_x[idx], data.train_y[idx]
        for name, p in runs.items():
            q = [t.clone().requires_grad_(True) for t in p]
            loss = torch.nn.functional.cross_entropy(_forward(q, x), y)
            grads = torch.autograd.grad(loss, q)
            losses[name].append(float(loss.detach()))
            new = [t - lr * d for t, d in zip(p, grads)]
            if name != "float32":
                new = [round_to_grid(t, g, name, gen) for t in new]
            moved = sum(int(((a != b) | (d == 0)).sum()) for a, b, d in zip(new, p, grads))
            frozen[name] = 1 - moved / sum(t.numel() for t in p)
            runs[name] = new
    out = pd.DataFrame(rows, columns=["step", "weights", "test_accuracy", "train_loss", "frozen"])
    out.attrs.update(fmt=fmt, lr=lr, steps=steps, seed=seed, test=len(data.test_y))
    return out


__all__ = ["ROUNDINGS", "bias_sweep", "check_format", "grid_formats", "low_precision_training", "round_to",
           "tiny_updates"]
