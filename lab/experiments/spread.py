"""The spread of repeated measurements: a distribution-free confidence interval of the median (from order
statistics: the binomial count of samples below the true median, no normality assumed) and whether two
measurements are separable by their intervals or within noise of each other."""
from __future__ import annotations

import math
from typing import Sequence

LEVEL = 0.95


def median_interval(samples: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(low, high, coverage) of the sorted samples bracketing the median: the widest pair of order statistics
    x_(j), x_(n+1-j) whose coverage 1 - 2·P(Binomial(n, 1/2) < j) is at least `level`. Below 6 samples no pair
    reaches 95 %: then (min, max) with its coverage (93.75 % for 5 samples, 75 % for 3)."""
    xs = sorted(float(v) for v in samples)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval: no samples")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}: allowed 0 < level < 1")
    best, below = 1, 0.0  # below = P(B <= j - 1) for the candidate rank j
    for j in range(1, (n + 1) // 2 + 1):
        below += math.comb(n, j - 1) / 2 ** n
        if 1 - 2 * below < level:
            break
        best = j
    cover = 1 - 2 * sum(math.comb(n, i) for i in range(best)) / 2 ** n
    return xs[best - 1], xs[n - best], cover


def separable(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the intervals (low, high) a and b do not overlap: the measurements differ beyond their noise."""
    return a[1] < b[0] or b[1] < a[0]


__all__ = ["LEVEL", "median_interval", "separable"]
