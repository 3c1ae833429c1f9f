"""Branch divergence when a kernel skips dropped units with `if (keep) work` (Song et al. 2019 §II-C, Fig. 1b).

SIMT model: a warp's 32 lanes issue one instruction stream. A branch body runs for a warp when at least one of
its lanes takes the branch; the lanes that do not take it idle through it (Fig. 1b's red crosses). So skipping
dropped units by a branch saves a warp's work only when every one of its lanes is dropped: under element-wise
(Bernoulli) dropout at rate p a full warp skips with probability p^32 (1e-7 at p = 0.6), so nearly every warp
still runs and the time is not reduced. A row or tile pattern drops units in step along the warp, so whole
warps skip (the paper then goes further and compacts the GEMM, which needs no branch at all).

Thread order: thread i handles element i of the flattened mask; warp w is threads [32 w, 32 w + 32) (a block
size that is a multiple of 32). A (batch, units) activation is laid out either as the paper's Fig. 3 output
matrix, units x batch row-major (`lanes_along="batch"`: a warp is one unit over 32 samples), or as torch's
(batch, units) row-major activation (`lanes_along="units"`: a warp is 32 units of one sample).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .conventional import check_rate
from .kinds import DEFAULT_TILE, LAYER_KINDS
from .pattern import Pattern
from .tile_pattern import check_tile

WARP_SIZE = 32
LANE_LAYOUTS: tuple[str, ...] = ("batch", "units")
#: above this many mask entries x patterns, `pattern_activity` averages sampled patterns instead of all of them
EXACT_LIMIT = 20_000_000


def check_warp_size(warp_size: int) -> int:
    """Validate a warp size: an integer >= 1."""
    if isinstance(warp_size, bool) or not isinstance(warp_size, int) or warp_size < 1:
        raise ValueError(f"warp size must be an integer >= 1, got {warp_size!r}")
    return warp_size


def _lanes(keep: torch.Tensor) -> torch.Tensor:
    """keep as a flat bool tensor in thread order (0/1 integers accepted)."""
    keep = torch.as_tensor(keep)
    if keep.dtype != torch.bool:
        if keep.is_floating_point() or keep.is_complex() or not bool(((keep == 0) | (keep == 1)).all()):
            raise ValueError("keep must be a bool tensor or integers 0/1 (1 = kept)")
        keep = keep != 0
    return keep.reshape(-1)


@dataclass(frozen=True)
class WarpActivity:
    """What `if (keep[i]) work` costs a SIMT machine: per-warp lanes entering the branch and the totals."""

    warp_size: int
    threads: int
    warps: int
    active_lanes: torch.Tensor  # int64 (warps,): lanes of each warp that enter the branch
    warps_run: int  # warps with at least one active lane: they execute the branch body
    kept: int  # useful lanes (active_lanes.sum())
    lane_slots: int  # warps_run * warp_size: lane slots the branch occupies
    busy_fraction: float  # kept / lane_slots (0 when no warp runs)
    work_fraction: float  # warps_run / warps: the branch's time against no dropout, where every warp runs
    work_saved: float  # 1 - work_fraction


def warp_activity(keep: torch.Tensor, warp_size: int = WARP_SIZE) -> WarpActivity:
    """Count, per warp, the lanes of `keep` (thread order, flattened row-major) that take the branch."""
    warp_size = check_warp_size(warp_size)
    lanes = _lanes(keep)
    n = lanes.numel()
    warps = -(-n // warp_size)
    padded = torch.zeros(warps * warp_size, dtype=torch.bool, device=lanes.device)
    padded[:n] = lanes  # lanes past the end (i >= n) never enter the branch
    active = padded.view(warps, warp_size).sum(1, dtype=torch.int64).cpu()
    run = int((active > 0).sum())
    kept = int(active.sum())
    slots = run * warp_size
    frac = run / warps if warps else 0.0
    return WarpActivity(warp_size, n, warps, active, run, kept, slots, kept / slots if slots else 0.0, frac,
                        1.0 - frac)


def bernoulli_run_probability(p: float, warp_size: int = WARP_SIZE) -> float:
    """P(a full warp runs the branch) under element-wise dropout at rate p: 1 - p**warp_size."""
    return 1.0 - check_rate(p) ** check_warp_size(warp_size)


def thread_order(mask: torch.Tensor, lanes_along: str = "batch") -> torch.Tensor:
    """A (batch, units) keep-mask flattened in thread order: along "batch" (the paper's units x batch output
    matrix) or "units" (torch's (batch, units) activation)."""
    if lanes_along not in LANE_LAYOUTS:
        raise ValueError(f"lanes_along must be one of {LANE_LAYOUTS}, got {lanes_along!r}")
    if mask.dim() != 2:
        raise ValueError(f"mask must be (batch, units), got shape {tuple(mask.shape)}")
    return (mask.t() if lanes_along == "batch" else mask).reshape(-1)


@dataclass(frozen=True)
class PatternActivity:
    """Expected branch cost of one dropout kind at rate p over many steps (ratios of expectations)."""

    kind: str
    p: float
    run_fraction: float  # E[warps that run] / warps
    busy_fraction: float  # E[kept lanes] / E[lane slots of the running warps]: the useful work in them
    work_saved: float  # 1 - run_fraction: the branch's saving against no dropout
    kept_fraction: float  # E[kept lanes] / threads (1 - p): the time compaction would need, ideally
    exact: bool  # True: every pattern weighted by its probability (Bernoulli: closed form); False: sampled
    patterns: int  # patterns averaged (0 for the closed form)


def _bernoulli(p: float, threads: int, warp_size: int) -> PatternActivity:
    full, rest = divmod(threads, warp_size)
    warps = full + (rest > 0)
    runs = full * (1 - p ** warp_size) + (1 - p ** rest if rest else 0.0)
    kept = threads * (1 - p)
    slots = runs * warp_size
    frac = runs / warps if warps else 0.0
    return PatternActivity("bernoulli", p, frac, kept / slots if slots else 0.0, 1 - frac,
                           kept / threads if threads else 0.0, True, 0)


def pattern_activity(kind: str, p: float, batch: int, units: int, *, tile: tuple[int, int] = DEFAULT_TILE,
                     lanes_along: str = "batch", warp_size: int = WARP_SIZE, max_dp: int | None = None,
                     samples: int = 256, seed: int = 0) -> PatternActivity:
    """Expected warps run, busy lanes and work saved of `kind` ("bernoulli", "row", "tile") at rate p on a
    (batch, units) activation. Row/tile: every pattern (dp, b) of Algorithm 1's distribution weighted by
    d_dp / dp (exact), or `samples` sampled patterns when that is over `EXACT_LIMIT` mask entries."""
    from .sampler import sampler_for_rate

    p = check_rate(p)
    warp_size = check_warp_size(warp_size)
    if kind not in LAYER_KINDS:
        raise ValueError(f"dropout kind must be one of {LAYER_KINDS}, got {kind!r}")
    if batch < 1 or units < 1:
        raise ValueError(f"batch and units must be >= 1, got ({batch}, {units})")
    if lanes_along not in LANE_LAYOUTS:
        raise ValueError(f"lanes_along must be one of {LANE_LAYOUTS}, got {lanes_along!r}")
    tile = check_tile(tile)
    n = batch * units
    if kind == "bernoulli" or p == 0.0:
        if p == 0.0:
            full = _bernoulli(0.0, n, warp_size)
            return PatternActivity(kind, 0.0, full.run_fraction, full.busy_fraction, full.work_saved, 1.0, True, 0)
        return _bernoulli(p, n, warp_size)
    sampler = sampler_for_rate(p, kind, max_dp=max_dp, tile=tile, seed=seed)
    d = sampler.d
    pairs = [(dp, b, float(d[dp - 1]) / dp) for dp in range(1, d.numel() + 1) if d[dp - 1] > 0 for b in range(dp)]
    exact = len(pairs) * n <= EXACT_LIMIT
    if not exact:
        dps, bs = sampler.sample_params(samples)
        pairs = [(int(a), int(b), 1.0 / samples) for a, b in zip(dps, bs)]
    runs = kept = 0.0
    warps = -(-n // warp_size)
    for dp, b, w in pairs:
        act = warp_activity(thread_order(Pattern(kind, dp, b, tile).mask(batch, units), lanes_along), warp_size)
        runs += w * act.warps_run
        kept += w * act.kept
    frac = min(1.0, runs / warps)  # a sum of weights 1 - 1e-16 would say -0 % saved
    return PatternActivity(kind, p, frac, kept / (runs * warp_size) if runs else 0.0, 1 - frac, kept / n, exact,
                           len(pairs))


def rate_for_skipping(share: float = 0.01, warp_size: int = WARP_SIZE) -> float:
    """The element-wise dropout rate at which a `share` of full warps skip the branch: share ** (1 / warp_size)
    (0.866 for 1 % of 32-lane warps)."""
    check_warp_size(warp_size)
    if not 0.0 < share < 1.0:
        raise ValueError(f"share must be in (0, 1), got {share!r}")
    return share ** (1.0 / warp_size)
