"""Rounding onto a grid of representable values: to nearest, or stochastically (Gupta et al. 2015, "Deep
Learning with Limited Numerical Precision", §3; Ben-Nun & Hoefler's "Communication optimizations": "the main
trick is stochastic rounding - expectation is more accurate").

A value x between two neighbouring grid values lo < x < hi rounds up to hi with probability (x - lo) / (hi - lo)
and down to lo otherwise, so E[Q(x)] = x: an update smaller than half a gap is kept on average instead of lost.
The grids are the lab's own: the hardware floats' codes (fp16, bf16, fp8 E4M3 / E5M2, enumerated from torch's
dtypes) and every value-table codec's sorted table (in its own units: x / absmax for the absmax-scaled ones).
Past the grid's ends both roundings saturate to the end values (a stored weight never becomes ±inf)."""
from __future__ import annotations

from functools import lru_cache

import torch

#: the two roundings
ROUNDINGS = ("nearest", "stochastic")

#: the hardware floats by their codec names
FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn,
                "fp8_e5m2": torch.float8_e5m2}
_INT_OF = {1: torch.uint8, 2: torch.int16}


@lru_cache(maxsize=32)
def _grid(name: str) -> torch.Tensor:
    if name in FLOAT_DTYPES:
        dt = FLOAT_DTYPES[name]
        size = torch.finfo(dt).bits // 8
        codes = torch.arange(1 << (8 * size), dtype=torch.int64)
        if size == 2:
            codes = torch.where(codes >= 1 << 15, codes - (1 << 16), codes)
        v = codes.to(_INT_OF[size]).view(dt).double()
        return torch.unique(v[torch.isfinite(v)] + 0.0)  # sorted; ±0 as one value
    from .registry import get_codec
    from .table_codec import TableCodec

    codec = get_codec(name)
    if not isinstance(codec, TableCodec):
        raise ValueError(f"format {name!r} has no value grid; allowed: {', '.join(grid_formats())}")
    return torch.unique(codec.values.double())


def grid_formats() -> list[str]:
    """Every format with a grid: the hardware floats and the registered value-table codecs."""
    from .registry import codec_infos, get_codec
    from .table_codec import TableCodec

    out = list(FLOAT_DTYPES)
    for info in codec_infos():
        try:
            c = get_codec(info.name)
        except Exception:  # noqa: BLE001 - a codec that needs options to build has no default grid
            continue
        if isinstance(c, TableCodec) and info.name not in out:
            out.append(info.name)
    return out


def grid(name: str) -> torch.Tensor:
    """The sorted, distinct, finite values of format `name` (float64): a hardware float's codes or a value-table
    codec's table."""
    if not isinstance(name, str):
        raise ValueError(f"format {name!r}: allowed {', '.join(grid_formats())}")
    try:
        return _grid(name)
    except KeyError:
        raise ValueError(f"format {name!r}: allowed {', '.join(grid_formats())}") from None


def _around(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x clamped to the grid's ends, index of lo, lo, hi) with g[i] = lo <= x < hi = g[i + 1]; at the top end
    lo = hi = the largest value."""
    xd = x.double().clamp(float(g[0]), float(g[-1]))
    i = (torch.searchsorted(g, xd, right=True) - 1).clamp(0, len(g) - 2)
    lo, hi = g[i], g[i + 1]
    top = xd >= g[-1]
    return xd, i, torch.where(top, g[-1], lo), torch.where(top, g[-1], hi)


def neighbours(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The grid values lo <= x < hi around each x (float64; saturated: lo = hi = the end value past an end)."""
    _, _, lo, hi = _around(x, g)
    return lo, hi


def round_to_grid(x: torch.Tensor, g: torch.Tensor, rounding: str = "nearest",
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """`x` rounded onto sorted grid `g` (float64): 'nearest' (a tie takes the value an even number of grid steps
    from 0: for a hardware float the even code, as its round-to-nearest-even cast does) or 'stochastic' (up with
    probability (x - lo) / (hi - lo), drawn from `generator`). Returns x's dtype; the values are exact grid
    values."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: allowed {' or '.join(ROUNDINGS)}")
    xd, i, lo, hi = _around(x, g)
    frac = (xd - lo) / (hi - lo).clamp_min(torch.finfo(torch.float64).tiny)
    if rounding == "nearest":
        up = frac > 0.5
        tie = frac == 0.5
        if bool(tie.any()):
            zero = int(torch.searchsorted(g, torch.zeros((), dtype=g.dtype)))
            up = up | (tie & ((i - zero) % 2 == 1))
    else:
        up = torch.rand(xd.shape, generator=generator, dtype=torch.float64) < frac
    return torch.where(up, hi, lo).to(x.dtype)


def round_to(x: torch.Tensor, name: str, rounding: str = "nearest",
             generator: torch.Generator | None = None) -> torch.Tensor:
    """`x` rounded onto format `name`'s grid (see `grid`), to nearest or stochastically."""
    return round_to_grid(x, grid(name), rounding, generator)


def ulp(x: float, name: str) -> float:
    """The gap between the grid values around `x` in format `name` (the one above x when x is on the grid; at or
    past the largest value, the last gap)."""
    g = grid(name)
    lo, hi = neighbours(torch.tensor([float(x)]), g)
    return float(hi[0] - lo[0]) or float(g[-1] - g[-2])


__all__ = ["FLOAT_DTYPES", "ROUNDINGS", "grid", "grid_formats", "neighbours", "round_to", "round_to_grid", "ulp"]
