"""Why not skip the dropped units with a branch? (Song et al. 2019 §II-C, Fig. 1b) as tables for the UIs: each
dropout kind's expected warps that still run, busy lanes and work saved under `if (keep) work`, and one step's
warp grid (kept, idle and skipped lanes) for the picture."""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd
import torch

from lab.dropout.conventional import check_rate
from lab.dropout.divergence import (LANE_LAYOUTS, WARP_SIZE, bernoulli_run_probability, pattern_activity,
                                    thread_order, warp_activity)
from lab.dropout.kinds import DEFAULT_TILE, KIND_LABELS, LAYER_KINDS
from lab.dropout.sampler import sampler_for_rate

LANE_LABELS = {"batch": "the batch (the paper's Fig. 3 layout)", "units": "the units (torch's layout)"}


def _kinds(kinds: Sequence[str]) -> list[str]:
    kinds = list(kinds)
    for k in kinds:
        if k not in LAYER_KINDS:
            raise ValueError(f"dropout kind {k!r}; allowed: {', '.join(LAYER_KINDS)}")
    return kinds


def warp_divergence(p: float, kinds: Sequence[str] = LAYER_KINDS, *, batch: int = 32, units: int = 1024,
                    tile: tuple[int, int] = DEFAULT_TILE, lanes_along: str = "batch", max_dp: Optional[int] = None,
                    seed: int = 0) -> pd.DataFrame:
    """Per kind, what skipping dropped units by a branch buys on a (batch, units) activation at rate p, over many
    steps: kind, pattern, run_fraction (warps that still run), skip_fraction, busy_fraction (useful lanes in
    them), work_saved (against no dropout), kept_fraction (what compaction would compute), exact, patterns."""
    p = check_rate(p)
    rows = []
    for k in _kinds(kinds):
        a = pattern_activity(k, p, batch, units, tile=tile, lanes_along=lanes_along, max_dp=max_dp, seed=seed)
        rows.append({"kind": k, "pattern": KIND_LABELS[k], "p": p, "run_fraction": a.run_fraction,
                     "skip_fraction": 1 - a.run_fraction, "busy_fraction": a.busy_fraction,
                     "work_saved": a.work_saved, "kept_fraction": a.kept_fraction, "exact": a.exact,
                     "patterns": a.patterns, "batch": batch, "units": units, "lanes_along": lanes_along})
    return pd.DataFrame(rows)


def element_wise_skip_fraction(p: float, warp_size: int = WARP_SIZE) -> float:
    """Share of full warps that skip under element-wise dropout at rate p: p ** warp_size."""
    return 1.0 - bernoulli_run_probability(p, warp_size)


def warp_grid(p: float, kinds: Sequence[str] = LAYER_KINDS, *, batch: int = 32, units: int = 64,
              tile: tuple[int, int] = DEFAULT_TILE, lanes_along: str = "batch", max_dp: Optional[int] = None,
              seed: int = 0) -> pd.DataFrame:
    """One step's mask per kind in thread order, one row per lane: kind, pattern, dp, bias, warp, lane, sample,
    unit, state ("kept": works; "idle": dropped in a warp that runs; "skipped": dropped in a warp that skips).
    For RDP/TDP the step is the first sampled pattern that drops something (dp > 1), named by dp and bias."""
    p = check_rate(p)
    if lanes_along not in LANE_LAYOUTS:
        raise ValueError(f"lanes_along must be one of {LANE_LAYOUTS}, got {lanes_along!r}")
    g = torch.Generator().manual_seed(seed)
    # which (sample, unit) each thread handles, in the same order as the mask
    s_idx, u_idx = torch.meshgrid(torch.arange(batch), torch.arange(units), indexing="ij")
    sample, unit = thread_order(s_idx, lanes_along), thread_order(u_idx, lanes_along)
    frames = []
    for k in _kinds(kinds):
        dp = bias = None
        if k == "bernoulli" or p == 0:
            mask = torch.rand(batch, units, generator=g) >= p
        else:
            sampler = sampler_for_rate(p, k, max_dp=max_dp, tile=tile, seed=seed)
            pat = sampler.sample()
            for _ in range(200):  # a dp = 1 step keeps everything: show a step that drops
                if pat.dp > 1:
                    break
                pat = sampler.sample()
            mask, dp, bias = pat.mask(batch, units), pat.dp, pat.bias
        keep = thread_order(mask, lanes_along)
        act = warp_activity(keep)
        n = keep.numel()
        lane = torch.arange(n)
        runs = (act.active_lanes > 0)[lane // WARP_SIZE]
        state = ["kept" if kk else "idle" if r else "skipped" for kk, r in zip(keep.tolist(), runs.tolist())]
        frames.append(pd.DataFrame({"kind": k, "pattern": KIND_LABELS[k], "dp": dp, "bias": bias,
                                    "warp": (lane // WARP_SIZE).numpy(), "lane": (lane % WARP_SIZE).numpy(),
                                    "sample": sample.numpy(), "unit": unit.numpy(), "state": state}))
    return pd.concat(frames, ignore_index=True)
