"""How many sub-models each dropout family can train (Song et al. 2019 §III-A/B) and what the tile size trades
(§III-B), as tables for the UIs."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import pandas as pd

from lab.dropout.conventional import check_rate
from lab.dropout.divergence import pattern_activity
from lab.dropout.kinds import DEFAULT_TILE, KIND_LABELS
from lab.dropout.sampler import sampler_for_rate
from lab.dropout.search import default_max_dp
from lab.dropout.submodels import (conventional_log10_sub_models, effective_patterns, expected_sub_networks_in_step,
                                   max_sub_models, patterns_up_to, rdp_max_dp, tdp_max_dp)
from lab.dropout.tile_pattern import check_tile

TILE_SIDES = (8, 16, 32, 64)


def sub_model_counts(p: float, units: int, batch: int, *, tile: tuple[int, int] = DEFAULT_TILE,
                     max_dp: Optional[int] = None, seed: int = 0) -> pd.DataFrame:
    """Per family (conventional, RDP, TDP) on an output matrix of `units` x `batch`: the paper's largest dp and
    maximum sub-models dp_max (dp_max + 1) / 2 (conventional: 2^units per sample, as log10), the lab's patterns
    with Algorithm 1's N, their effective number exp(entropy), and the sub-networks one step trains."""
    p = check_rate(p)
    tile = check_tile(tile)
    n = max_dp if max_dp is not None else default_max_dp(p) if p > 0 else 1
    rows = [{"kind": "bernoulli", "pattern": KIND_LABELS["bernoulli"], "dp_max": None, "max_sub_models": None,
             "log10_sub_models": conventional_log10_sub_models(units), "formula": f"2^{units} per sample",
             "search_n": None, "search_patterns": None, "effective_patterns": None,
             "per_step": float(batch) if p > 0 else 1.0}]
    for kind in ("row", "tile"):
        dmax = rdp_max_dp(units) if kind == "row" else tdp_max_dp(units, batch, tile)
        count = max_sub_models(kind, units, batch, tile)
        formula = (f"M(M+1)/2, M = {units}" if kind == "row" else
                   f"D(D+1)/2, D = ⌊{units}/{tile[1]}⌋·⌊{batch}/{tile[0]}⌋ = {dmax}")
        if p > 0:
            d = sampler_for_rate(p, kind, max_dp=n, tile=tile, seed=seed).d
            eff, step = effective_patterns(d), expected_sub_networks_in_step(kind, d, batch, units, tile)
        else:
            eff, step = 1.0, 1.0
        rows.append({"kind": kind, "pattern": KIND_LABELS[kind], "dp_max": dmax, "max_sub_models": count,
                     "log10_sub_models": math.log10(count) if count else None, "formula": formula,
                     "search_n": n, "search_patterns": patterns_up_to(n), "effective_patterns": eff, "per_step": step})
    return pd.DataFrame(rows)


def tile_sizes(p: float, units: int, batch: int, sides: Sequence[int] = TILE_SIDES, *, lanes_along: str = "batch",
               max_dp: Optional[int] = None, seed: int = 0) -> pd.DataFrame:
    """What the tile size trades (§III-B: "the smaller size of the tile, the more ... sub-models, while small tile
    leads to fine-grained control"): per square tile, TDP's largest dp and sub-models, the sub-networks one step
    trains, and under a branch that skips dropped units the warps that still run and their busy lanes."""
    p = check_rate(p)
    rows = []
    for s in sides:
        t = check_tile((s, s))
        row = {"tile": f"{s}×{s}", "side": s, "dp_max": tdp_max_dp(units, batch, t),
               "max_sub_models": max_sub_models("tile", units, batch, t)}
        if p > 0:
            d = sampler_for_rate(p, "tile", max_dp=max_dp, tile=t, seed=seed).d
            row["per_step"] = expected_sub_networks_in_step("tile", d, batch, units, t)
        else:
            row["per_step"] = 1.0
        a = pattern_activity("tile", p, batch, units, tile=t, lanes_along=lanes_along, max_dp=max_dp, seed=seed)
        row.update(run_fraction=a.run_fraction, busy_fraction=a.busy_fraction, work_saved=a.work_saved)
        rows.append(row)
    return pd.DataFrame(rows)
