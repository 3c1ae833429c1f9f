"""Layer benchmark: forward + backward of a hidden-layer pair with conventional dropout + full GEMMs
vs RDP vs TDP compact layers, measured in the same run (Song et al. §IV; docs/design.md "Measuring").

The pair is x (batch, w) -> Linear(w, w) -> ReLU -> dropout(p) -> Linear(w, w) -> y; the dropout
sits between the two GEMMs, so RDP/TDP shrink the first layer's output side and the second
layer's input side: 1/(1-p) is the ceiling of both GEMMs and so of the pair. One timed sample is
a sequence of `steps` training steps (gradients set to None, forward, backward with a fixed
upstream gradient). The patterns of a sequence are stratified draws from Algorithm 1's d (the
dp of step k is d's quantile at (k + 1/2)/steps, biases uniform, order shuffled), so a short
sequence keeps d's mean keep fraction; the same sequence serves every repeat. Contestants are
interleaved within each repeat so load drift hits them alike; medians are reported.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable, Optional

import pandas as pd
import torch
import torch.nn.functional as F

from .. import backend
from .compact import compact_linear
from .kinds import PATTERN_KINDS
from .layers import approx_dropout_linear
from .pattern import Pattern
from .search import default_max_dp, search
from .tile_pattern import DEFAULT_TILE
from lab.backend import Progress

CONTESTANTS = ("dense", "conventional", *PATTERN_KINDS)


def stratified_patterns(d: torch.Tensor, kind: str, steps: int, *, tile: tuple[int, int] = DEFAULT_TILE,
                        seed: int = 0) -> list[Pattern]:
    """`steps` patterns whose dp follow d's quantiles at (k + 1/2)/steps; biases uniform; shuffled."""
    g = torch.Generator().manual_seed(seed)
    cdf = torch.cumsum(d.double(), 0)
    u = (torch.arange(steps, dtype=torch.float64) + 0.5) / steps
    dps = (torch.searchsorted(cdf, u).clamp_max(d.numel() - 1) + 1).tolist()
    order = torch.randperm(steps, generator=g).tolist()
    out = []
    for k in order:
        dp = int(dps[k])
        b = int(torch.randint(dp, (1,), generator=g))
        out.append(Pattern(kind, dp, b, tile))
    return out


def _time(fn: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pair_steps(width: int, p: float, *, batch: int = 128, steps: int = 16, max_dp: Optional[int] = None,
               tile: tuple[int, int] = DEFAULT_TILE, device: torch.device | str = "cpu",
               seed: int = 0) -> tuple[dict[str, Callable[[], None]], dict]:
    """The four contestants' step sequences on one layer pair, and the pattern statistics."""
    dev = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, width, generator=g).to(dev)
    gy = torch.randn(batch, width, generator=g).to(dev)
    scale = 1.0 / math.sqrt(width)
    w1 = (torch.randn(width, width, generator=g) * scale).to(dev).requires_grad_(True)
    w2 = (torch.randn(width, width, generator=g) * scale).to(dev).requires_grad_(True)
    w2t = w2.detach().t().contiguous().requires_grad_(True)  # consumer stored (in, out): rows = kept inputs
    b1 = torch.zeros(width, device=dev, requires_grad=True)
    b2 = torch.zeros(width, device=dev, requires_grad=True)
    params = (w1, w2, w2t, b1, b2)
    d = search(p, max_dp, seed=seed, trace_every=10**9).d if p > 0 else torch.tensor([1.0], dtype=torch.float64)
    pats = {k: stratified_patterns(d, k, steps, tile=tile, seed=seed + i) for i, k in enumerate(PATTERN_KINDS)}

    def zero() -> None:
        for q in params:
            q.grad = None

    def dense() -> None:
        for _ in range(steps):
            zero()
            F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2).backward(gy)

    def conventional() -> None:
        for _ in range(steps):
            zero()
            h = F.dropout(torch.relu(F.linear(x, w1, b1)), p, True)
            F.linear(h, w2, b2).backward(gy)

    def approx(kind: str) -> Callable[[], None]:
        def run() -> None:
            for pat in pats[kind]:
                zero()
                h = approx_dropout_linear(x, w1, b1, pat, "relu")
                compact_linear(h, w2t, b2, None, layout="in_out").backward(gy)
        return run

    keep = {k: sum(float(q.mask(batch, width).float().mean()) for q in v) / len(v) for k, v in pats.items()}
    stats = {"expected_keep": 1.0 - p, "row_keep": keep["row"], "tile_keep": keep["tile"],
             "row_dp": [q.dp for q in pats["row"]], "tile_dp": [q.dp for q in pats["tile"]]}
    return {"dense": dense, "conventional": conventional, "row": approx("row"), "tile": approx("tile")}, stats


def run(widths: tuple[int, ...] = (1024, 2048, 4096), rates: tuple[float, ...] = (0.3, 0.5, 0.7), *,
        batch: int = 128, steps: int = 16, repeats: int = 5, max_dp: Optional[int] = None,
        tile: tuple[int, int] = DEFAULT_TILE, device: Optional[str | torch.device] = None,
        threads: Optional[int] = None, seed: int = 0, progress: Optional[Progress] = None
        ) -> tuple[pd.DataFrame, dict]:
    """Time every contestant at every (width, p); returns (rows, run info).

    rows: width, p, contestant, seconds per step (median over repeats), speedup over conventional,
    ceiling 1/(1-p), speedup / ceiling, and the kept fraction of the patterns actually run.
    """
    dev = torch.device(device) if device is not None else backend.default_device()
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    if batch < 1 or steps < 1 or repeats < 1:
        raise ValueError("batch, steps and repeats must be >= 1")
    for w in widths:
        if w < 1:
            raise ValueError(f"widths must be >= 1, got {w}")
    rows = []
    n_cells = len(widths) * len(rates)
    for ci, (w, p) in enumerate((w, p) for w in widths for p in rates):
        if progress:
            progress(ci / n_cells, f"width {w}, p={p}")
        fns, stats = pair_steps(w, p, batch=batch, steps=steps, max_dp=max_dp, tile=tile, device=dev,
                                seed=seed)
        for f in fns.values():  # warm-up: one sequence each
            f()
        samples: dict[str, list[float]] = {k: [] for k in fns}
        for r in range(repeats):
            for k, f in fns.items():
                samples[k].append(_time(f, dev) / steps)
            if progress:
                progress((ci + (r + 1) / repeats) / n_cells, f"width {w}, p={p}: repeat {r + 1}/{repeats}")
        med = {k: statistics.median(v) for k, v in samples.items()}
        ceiling = 1.0 / (1.0 - p)
        for k in fns:
            keep = {"row": stats["row_keep"], "tile": stats["tile_keep"]}.get(k, 1.0 if k == "dense" else 1 - p)
            speed = med["conventional"] / med[k]
            per = [c / t for c, t in zip(samples["conventional"], samples[k])]  # each repeat's own ratio
            rows.append({"width": w, "p": p, "contestant": k, "seconds": med[k], "ms": med[k] * 1e3,
                         "min_ms": min(samples[k]) * 1e3, "speedup": speed, "speedup_lo": min(per),
                         "speedup_hi": max(per), "ceiling": ceiling,
                         "of_ceiling": speed / ceiling, "kept_fraction": keep,
                         "sequence_ceiling": (1.0 / keep) if k in PATTERN_KINDS and keep > 0 else float("nan")})
    if progress:
        progress(1.0, "done")
    info = {"device": backend.device_name(dev), "device_type": dev.type, "versions": backend.versions(),
            "threads": torch.get_num_threads(), "batch": batch, "steps_per_sample": steps,
            "repeats": repeats, "max_dp": max_dp, "tile": list(tile), "widths": list(widths),
            "max_dp_per_rate": {str(p): max_dp or default_max_dp(p) for p in rates if p > 0},
            "rates": list(rates), "seed": seed,
            "pair": "x -> Linear(w,w) -> ReLU -> dropout(p) -> Linear(w,w); fwd + bwd, grads set to None per step",
            "speedup": "conventional dropout + full GEMMs seconds / contestant seconds (same run, interleaved)",
            "ceiling": "1/(1-p): both GEMMs of the pair shrink by the kept fraction",
            "sequence_ceiling": "1 / mean kept fraction of the pattern sequence actually timed",
            "weight_grad": "row/tile: row-sparse COO (kept rows only); dense/conventional: dense"}
    return pd.DataFrame(rows), info
