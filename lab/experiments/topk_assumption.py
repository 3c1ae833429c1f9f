"""Assumption 1 of the top-k SGD analysis (Alistarh et al., NeurIPS 2018, "The convergence of sparsified
gradient methods"; paper 001, "Sparsification - top-k Stochastic Gradient Descent"): the top-k of the
workers' mean gradient is close to the mean of each worker's top-k,

    xi = || TopK(G) - (1/P) sum_p TopK(g_p) || / || G ||,   G = (1/P) sum_p g_p,

measured on real gradients: P workers each take the gradient of the paper's MLP (Dettmers 2016, relu,
dropout off) on their own batch of digits, all at the same weights; top-k is the lab's `topk` codec,
applied to the gradient of all weight matrices as one vector.
"""
from __future__ import annotations

import pandas as pd
import torch

from lab.codecs import get_codec

WORKERS = (1, 2, 4, 8, 16, 32)
RATIOS = (0.001, 0.01, 0.1)


def _check(workers: tuple[int, ...], ratios: tuple[float, ...], batch: int) -> None:
    if not workers or any(isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 64 for p in workers):
        raise ValueError(f"workers={workers!r}; allowed: integers from 1 to 64")
    if not ratios or any(isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 1 for r in ratios):
        raise ValueError(f"ratios={ratios!r}; allowed: numbers in (0, 1] (fraction of values top-k keeps)")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 64:
        raise ValueError(f"batch={batch!r}; allowed: an integer from 1 to 64 (samples per worker)")


def worker_gradients(workers: int, *, batch: int = 16, hidden: tuple[int, ...] = (256, 256),
                     seed: int = 0) -> torch.Tensor:
    """(workers, n) float32: each worker's gradient of the weight matrices (flattened, concatenated) of the
    paper's MLP at its seeded initial weights, on its own `batch` digits (disjoint batches, drawn by seed)."""
    from lab.data.images import load_dataset
    from lab.train.models import build_model

    ds = load_dataset("digits", seed=seed)
    if workers * batch > len(ds.train_y):
        raise ValueError(f"{workers} workers x {batch} samples > the {len(ds.train_y)} digits to draw from")
    torch.manual_seed(seed)
    model = build_model("mlp", ds.features, ds.classes, hidden=hidden, dropout=(0.0,) * (len(hidden) + 1))
    model.eval()
    order = torch.randperm(len(ds.train_y), generator=torch.Generator().manual_seed(seed))
    rows = []
    for p in range(workers):
        idx = order[p * batch:(p + 1) * batch]
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(ds.train_x[idx]), ds.train_y[idx]).backward()
        rows.append(torch.cat([q.grad.reshape(-1) for q in model.parameters() if q.dim() > 1]))
    return torch.stack(rows)


def topk_gap(grads: torch.Tensor, ratio: float) -> float:
    """xi = ||TopK(mean) - mean(TopK of each row)|| / ||mean|| for the (P, n) gradients `grads`."""
    codec = get_codec("topk", ratio=ratio)
    mean = grads.double().mean(0)
    of_mean = codec.decode(codec.encode(mean.float())).double()
    mean_of = torch.stack([codec.decode(codec.encode(g)).double() for g in grads]).mean(0)
    return float((of_mean - mean_of).norm() / mean.norm())


def topk_assumption(*, workers: tuple[int, ...] = WORKERS, ratios: tuple[float, ...] = RATIOS, batch: int = 16,
                    seed: int = 0) -> pd.DataFrame:
    """Alistarh et al.'s xi against the number of workers P and top-k's ratio: one row per (P, ratio) with
    columns workers, ratio, k (values kept of n), n and xi (dimensionless; 0 at P = 1). The P workers are
    the first P of max(workers) disjoint batches, so a larger P adds workers to a smaller one's."""
    workers, ratios = tuple(workers), tuple(ratios)
    _check(workers, ratios, batch)
    grads = worker_gradients(max(workers), batch=batch, seed=seed)
    n = grads.shape[1]
    from lab.codecs.sparsify import kept_count

    rows = [dict(workers=p, ratio=float(r), k=kept_count(n, float(r), None), n=n, xi=topk_gap(grads[:p], float(r)))
            for r in ratios for p in sorted(set(workers))]
    return pd.DataFrame(rows)
