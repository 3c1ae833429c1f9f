"""Rounding modes as code thresholds: exact round-to-nearest and the paper kernel's bisection.

Every rounding mode of a table codec is a monotone step function from the scaled input a to a
code, so it is fully described by ascending float32 thresholds: code = #{j : bounds[j] <= a}.
One search (CPU or CUDA) then serves both modes.

'paper' reproduces Dettmers' `kCompression_8bit` (TimDettmers/clusterNet, clusterKernels.cu):
six bisection probes over the sorted magnitudes (pivot 63, steps 32..1), after which the value
at the last pivot is never compared with the input, so inputs above it always take the lower
code: about a quarter of the codes land one step low and errors grow about 1.5x (the paper's
Table 1 was measured with it). Generalised to any sign-symmetric table: the zero and top
magnitudes are caught by thresholds at the midpoints to their neighbours (the original uses
1.5e-6 and 0.995703 for its table, midpoints 1.375e-6 and 0.9957), the inner magnitudes are
searched with ceil(log2(n)) - 1 probes, and slots past the table read +inf, where the
original read uninitialised shared memory for inputs in (0.99140614, 0.995703].
"""
from __future__ import annotations

import numpy as np

from .tables import ValueTable

ROUNDINGS = ("nearest", "paper")


def _f32(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def _next_up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(_f32(x), np.float32(np.inf))


def paper_search(a: np.ndarray, mags: np.ndarray) -> np.ndarray:
    """Magnitude index the clusterNet kernel picks for |a| (vectorised emulation, float32)."""
    a = _f32(a)
    mags = _f32(mags)
    has0 = mags[0] == 0
    inner = mags[1:-1] if has0 else mags[:-1]
    first = 1 if has0 else 0
    n = len(inner)
    if n == 0:
        idx = np.where(a > (mags[0] + mags[-1]) / 2, len(mags) - 1, 0)
        return idx
    k = max(1, int(np.ceil(np.log2(n))))
    t = np.concatenate([inner, np.full(2 ** k + 1, np.inf, dtype=np.float32)])
    pivot = np.full(a.shape, 2 ** (k - 1) - 1)
    lower = np.zeros(a.shape, dtype=np.int64)
    upper = np.full(a.shape, n - 1)
    step = 2 ** (k - 2) if k >= 2 else 0
    while step > 0:
        gt = a > t[pivot]
        lower = np.where(gt, pivot, lower)
        upper = np.where(gt, upper, pivot)
        pivot = np.where(gt, pivot + step, pivot - step)
        step //= 2
    with np.errstate(invalid="ignore"):
        pick_when_lower = np.where(np.abs(t[pivot] - a) < (t[upper] - a), pivot, upper)
        pick_else = np.where((t[pivot] - a) < np.abs(t[lower] - a), pivot, lower)
    idx = np.where(lower == pivot, pick_when_lower, pick_else) + first
    top = (mags[-1].astype(np.float64) + mags[-2]) / 2
    idx = np.where(a > top, len(mags) - 1, idx)
    if has0:
        idx = np.where(a < (mags[0].astype(np.float64) + mags[1]) / 2, 0, idx)
    return idx


def _paper_magnitude_thresholds(mags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thresholds T_i (i=1..M-1) on |a| where the kernel's code first reaches i.

    Returns (T, inclusive): code >= i exactly when |a| >= T_i (inclusive) or |a| > T_i.
    """
    m = _f32(mags).astype(np.float64)
    mids = (m[1:] + m[:-1]) / 2
    crit = np.unique(np.concatenate([m, _f32(mids).astype(np.float64)]))
    between = (crit[1:] + crit[:-1]) / 2
    pts = np.concatenate([crit, between, [crit[-1] * 2 + 1]])
    order = np.argsort(pts)
    pts = pts[order]
    is_crit = np.isin(pts, crit)
    codes = paper_search(pts, mags)
    if np.any(np.diff(codes) < 0):
        raise AssertionError("paper rounding is not monotone for this table")
    T = np.empty(len(m) - 1)
    inclusive = np.empty(len(m) - 1, dtype=bool)
    for i in range(1, len(m)):
        j = int(np.argmax(codes >= i))
        if codes[j] < i:
            raise AssertionError(f"paper rounding never reaches code {i}")
        if is_crit[j]:
            T[i - 1], inclusive[i - 1] = pts[j], True
        else:
            T[i - 1], inclusive[i - 1] = pts[j - 1], False
    return T, inclusive


def bounds(table: ValueTable, rounding: str = "nearest") -> np.ndarray:
    """Ascending float32 thresholds: code = #{j : bounds[j] <= a} over `table`'s sorted values."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}; allowed: {', '.join(ROUNDINGS)}")
    v = table.array
    if not table.symmetric:
        if rounding == "paper":
            raise ValueError(f"rounding='paper' emulates a sign-magnitude kernel; table {table.name!r} "
                             "is not sign-symmetric, use rounding='nearest'")
        return _f32((v[1:] + v[:-1]) / 2)
    mags = table.magnitudes
    if rounding == "nearest":
        T = (mags[1:] + mags[:-1]) / 2
        inclusive = np.ones(len(T), dtype=bool)
    else:
        T, inclusive = _paper_magnitude_thresholds(mags)
    T32 = _f32(T)
    pos = np.where(inclusive, T32, _next_up(T32))
    # Mirror: on the negative side the code rises when |a| falls below T (exclusive <-> inclusive).
    neg = np.where(inclusive, _next_up(-T32), -T32)
    if mags[0] == 0:
        out = np.concatenate([neg[::-1], pos])
    else:
        out = np.concatenate([neg[::-1], [np.float32(0.0)], pos])
    out = _f32(out)
    assert len(out) == len(v) - 1 and np.all(np.diff(out) >= 0)
    return out
