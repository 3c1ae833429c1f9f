"""Row-based dropout pattern RDP (Song et al. §III-A, Eq. 1).

A pattern (dp, b) keeps the units i with (i - b) mod dp == 0 and drops all the others: 1/dp of
the units are kept and (dp-1)/dp dropped. Reading: the paper's text says both "drop all rows with
(i-b) mod dp = 0" and "when dp=3 we drop two rows in every three"; its rate vector
p_u = [(i-1)/i] (Algorithm 1, line 2) only matches the second, so the rows satisfying Eq. 1 are the
*kept* ones. Indices and the bias are 0-based here (b in {0, ..., dp-1}), the paper's are 1-based.

A unit of a torch (batch, units) activation is a column; it is a row of the producing layer's
weight W (out, in), so the kept rows are the strided view W[b::dp], which BLAS (CPU and cuBLAS)
takes without a copy (leading dimension dp * in).
"""
from __future__ import annotations

import torch


def check_pattern(dp: int, bias: int) -> tuple[int, int]:
    """Validate (dp, bias): dp >= 1 and 0 <= bias < dp."""
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise ValueError(f"dp must be an integer >= 1, got {dp!r}")
    if isinstance(bias, bool) or not isinstance(bias, int) or not 0 <= bias < dp:
        raise ValueError(f"bias must be an integer in [0, dp) = [0, {dp}), got {bias!r}")
    return dp, bias


def kept_rows(n: int, dp: int, bias: int) -> slice:
    """The kept units as a slice: bias, bias+dp, ... below n (empty when bias >= n)."""
    check_pattern(dp, bias)
    if n < 0:
        raise ValueError(f"number of units must be >= 0, got {n}")
    return slice(bias, n, dp) if bias < n else slice(0, 0, 1)


def kept_count(n: int, dp: int, bias: int) -> int:
    """How many of n units the pattern keeps (ceil((n - bias) / dp), or 0)."""
    return len(range(*kept_rows(n, dp, bias).indices(n)))


def row_pattern(n: int, dp: int, bias: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Keep-mask over n units (True = kept): (i - bias) mod dp == 0."""
    check_pattern(dp, bias)
    i = torch.arange(n, device=device)
    return (i - bias) % dp == 0


def row_rate(dp: int) -> float:
    """Global dropout rate of an RDP with this dp: (dp-1)/dp (the paper's p_u entry)."""
    return (dp - 1) / dp
