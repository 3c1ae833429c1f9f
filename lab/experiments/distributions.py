"""Seeded sample distributions for codec experiments (Dettmers 2016 Table 1 and beyond).

A distribution is named by a spec string: 'uniform(a,b)', 'normal(mu,sigma)', 'laplace(mu,b)',
'student_t(df)', 'lognormal(mu,sigma)'. Note: normal takes the standard deviation, so the
paper's N(0, 10^2) is 'normal(0,10)'.
"""
from __future__ import annotations

import re

import torch

from .torch_sampling_private import standard_gamma

_KINDS = {
    "uniform": (2, lambda g, n, a, b: torch.rand(n, generator=g) * (b - a) + a),
    "normal": (2, lambda g, n, mu, s: torch.randn(n, generator=g) * s + mu),
    "laplace": (2, lambda g, n, mu, b: mu - b * torch.sign(u := torch.rand(n, generator=g) - 0.5)
                * torch.log1p(-2 * u.abs())),
    "student_t": (1, lambda g, n, df: torch.randn(n, generator=g)
                  / torch.sqrt(standard_gamma(torch.full((n,), df / 2), g) * 2 / df)),
    "lognormal": (2, lambda g, n, mu, s: torch.exp(torch.randn(n, generator=g) * s + mu)),
}
_SPEC = re.compile(r"^\s*([a-z_]+)\s*\(([^)]*)\)\s*$")


def parse(spec: str) -> tuple[str, list[float]]:
    """'normal(0,1)' -> ('normal', [0.0, 1.0]); ValueError naming the allowed forms."""
    m = _SPEC.match(spec)
    allowed = "uniform(a,b), normal(mu,sigma), laplace(mu,b), student_t(df), lognormal(mu,sigma)"
    if not m or m.group(1) not in _KINDS:
        raise ValueError(f"unknown distribution {spec!r}; allowed: {allowed}")
    kind = m.group(1)
    try:
        params = [float(p) for p in m.group(2).split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"distribution {spec!r}: parameters must be numbers") from None
    if len(params) != _KINDS[kind][0]:
        raise ValueError(f"{kind} takes {_KINDS[kind][0]} parameter(s), got {len(params)} in {spec!r}")
    if kind == "uniform" and not params[0] < params[1]:
        raise ValueError(f"{spec!r}: uniform(a,b) needs a < b")
    if kind in ("normal", "laplace", "lognormal") and params[1] <= 0:
        raise ValueError(f"{spec!r}: the scale parameter must be > 0")
    if kind == "student_t" and params[0] <= 0:
        raise ValueError(f"{spec!r}: degrees of freedom must be > 0")
    return kind, params


def sample(spec: str, n: int, seed: int = 0) -> torch.Tensor:
    """n float32 samples of `spec`, reproducible from `seed` (CPU)."""
    if n < 0:
        raise ValueError(f"n={n}: the sample size must be >= 0")
    kind, params = parse(spec)
    g = torch.Generator().manual_seed(seed)
    return _KINDS[kind][1](g, n, *params).float()
