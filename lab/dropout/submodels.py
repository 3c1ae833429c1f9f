"""How many sub-models (sub-networks) the dropout pattern families can produce (Song et al. 2019 §III-A/B).

The paper counts patterns (dp, b): dp = i has i biases, so patterns with dp <= D number sum_{i=1}^{D} i =
D (D + 1) / 2. (The extracted text prints "(M+1)/2" and "(1+dp_max)/2", which lost the factor: the sum it
writes is M (M + 1) / 2.) RDP on an output matrix of M units x N samples has dp_max = M; TDP with x x y tiles
(x units by y samples) has dp_max = floor(M / x) * floor(N / y), so TDP has more patterns when N is above
about x * y. Conventional dropout draws every unit independently: 2^M sub-networks per sample.

What a count of patterns leaves out, and what this module also computes: within one step, an RDP pattern gives
every sample the same sub-network, whereas a TDP pattern's tile rows keep different units (`tile_groups`), so
one step trains up to min(tile rows, dp) sub-networks at once (conventional dropout: one per sample). This
is the diversity the paper credits for TDP's smaller accuracy loss (§IV-A).
"""
from __future__ import annotations

import math

import torch

from .kinds import DEFAULT_TILE, PATTERN_KINDS
from .row_pattern import check_pattern
from .tile_pattern import check_tile, tile_groups


def patterns_up_to(dp_max: int) -> int:
    """Patterns (dp, b) with 1 <= dp <= dp_max and 0 <= b < dp: dp_max (dp_max + 1) / 2."""
    if dp_max < 0:
        raise ValueError(f"dp_max must be >= 0, got {dp_max}")
    return dp_max * (dp_max + 1) // 2


def rdp_max_dp(units: int) -> int:
    """RDP's largest dp on an output matrix of `units` rows (neurons): M (§III-A)."""
    if units < 1:
        raise ValueError(f"units must be >= 1, got {units}")
    return units


def tdp_max_dp(units: int, batch: int, tile: tuple[int, int] = DEFAULT_TILE) -> int:
    """TDP's largest dp: floor(M / x) * floor(N / y) for M units, N samples and tiles of y samples x x units
    (the lab's tile is (rows = samples, cols = units)) (§III-B)."""
    th, tw = check_tile(tile)
    if units < 1 or batch < 1:
        raise ValueError(f"units and batch must be >= 1, got ({units}, {batch})")
    return (units // tw) * (batch // th)


def max_sub_models(kind: str, units: int, batch: int, tile: tuple[int, int] = DEFAULT_TILE) -> int:
    """The paper's maximum number of sub-models of RDP ("row") or TDP ("tile"): dp_max (dp_max + 1) / 2."""
    if kind == "row":
        return patterns_up_to(rdp_max_dp(units))
    if kind == "tile":
        return patterns_up_to(tdp_max_dp(units, batch, tile))
    raise ValueError(f"pattern kind must be one of {PATTERN_KINDS}, got {kind!r}")


def conventional_log10_sub_models(units: int) -> float:
    """log10 of conventional dropout's sub-networks of one layer for one sample: M log10 2."""
    if units < 1:
        raise ValueError(f"units must be >= 1, got {units}")
    return units * math.log10(2)


def sub_networks_in_step(kind: str, dp: int, bias: int, batch: int, units: int,
                         tile: tuple[int, int] = DEFAULT_TILE) -> int:
    """Distinct sub-networks (kept-unit sets) one pattern gives the samples of one batch: RDP 1, TDP one per
    group of tile rows with the same kept tiles (`tile_groups`)."""
    check_pattern(dp, bias)
    if kind == "row":
        return 1
    if kind == "tile":
        return len({tuple(g.cols.tolist()) for g in tile_groups(batch, units, dp, bias, tile)})
    raise ValueError(f"pattern kind must be one of {PATTERN_KINDS}, got {kind!r}")


def expected_sub_networks_in_step(kind: str, d: torch.Tensor, batch: int, units: int,
                                  tile: tuple[int, int] = DEFAULT_TILE) -> float:
    """E[sub-networks in one step] when dp ~ d (d[i] = P(dp = i + 1)) and b is uniform (Algorithm 1's sampling)."""
    d = torch.as_tensor(d, dtype=torch.float64).flatten()
    total = 0.0
    for i, q in enumerate(d.tolist()):
        if q > 0:
            dp = i + 1
            total += q * sum(sub_networks_in_step(kind, dp, b, batch, units, tile) for b in range(dp)) / dp
    return total


def effective_patterns(d: torch.Tensor) -> float:
    """exp(entropy) of the patterns (dp, b) drawn with probability d_dp / dp: how many equally likely patterns
    the search's mix is worth (at most patterns_up_to(N))."""
    d = torch.as_tensor(d, dtype=torch.float64).flatten()
    h = 0.0
    for i, q in enumerate(d.tolist()):
        if q > 0:
            h -= q * math.log(q / (i + 1))
    return math.exp(h)
