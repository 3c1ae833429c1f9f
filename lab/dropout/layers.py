"""Layers with Approximate Random Dropout that skip the dropped work (Song et al. §III, Fig. 3).

`ApproxDropoutLinear` = linear -> activation -> dropout on its outputs. In training it draws a
pattern per call and returns a `Compact` activation holding only the kept units (scaled by the
pattern's dp); the next `ApproxDropoutLinear` or `CompactLinear` consumes it and skips the dropped
input units. kind="bernoulli" is conventional dropout (dense, the baseline); in eval mode every
layer is dense and dropout is off.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .compact import Compact, Input, compact_linear
from .conventional import check_rate
from .kinds import LAYER_KINDS, PATTERN_KINDS as KINDS
from .pattern import Pattern
from .sampler import PatternSampler, sampler_for_rate
from .tile_pattern import DEFAULT_TILE

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "identity": lambda t: t}


def _activation(a: Union[str, Callable, None]) -> Callable[[torch.Tensor], torch.Tensor]:
    if a is None:
        return ACTIVATIONS["identity"]
    if callable(a):
        return a
    if a not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)} or a callable, got {a!r}")
    return ACTIVATIONS[a]


def approx_dropout_linear(x: Input, weight: torch.Tensor, bias: Optional[torch.Tensor], pattern: Optional[Pattern],
                          activation: Union[str, Callable, None] = None, *, layout: str = "out_in",
                          sparse_grad: bool = True) -> Input:
    """dropout(activation(x @ W^T + b)) under `pattern`, computing only the kept units.

    Equals conventional dropout driven by the mask `pattern.mask(batch, out)` with kept units
    scaled by pattern.scale (= dp): `out.to_dense() == act(x W^T + b) * mask * dp`.
    pattern=None: no dropout on the output (dense Tensor), x may still be a Compact.
    """
    act = _activation(activation)
    z = compact_linear(x, weight, bias, pattern, layout=layout, sparse_grad=sparse_grad)
    if pattern is None:
        return act(z)
    s = pattern.scale
    return z.map(lambda v: act(v) * s if s != 1.0 else act(v))


def _init_linear(w: torch.Tensor, b: Optional[torch.Tensor], fan_in: int, generator: torch.Generator) -> None:
    """nn.Linear's default init (uniform +-1/sqrt(fan_in)), from an explicit generator."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with torch.no_grad():
        w.uniform_(-bound, bound, generator=generator)
        if b is not None:
            b.uniform_(-bound, bound, generator=generator)


class ApproxDropoutLinear(nn.Module):
    """Linear (in -> out) + activation + dropout of rate p with patterns of `kind` (row | tile) or
    conventional Bernoulli dropout (kind="bernoulli").

    weight is (out, in) as in nn.Linear: RDP's kept output units are the view weight[b::dp].
    Patterns come from Algorithm 1's distribution over dp = 1..max_dp (`sampler_for_rate`).
    """

    def __init__(self, in_features: int, out_features: int, p: float = 0.5, kind: str = "row", *,
                 activation: Union[str, Callable, None] = "relu", max_dp: Optional[int] = None,
                 tile: tuple[int, int] = DEFAULT_TILE, bias: bool = True, sparse_grad: bool = True,
                 seed: int = 0, device: Optional[torch.device | str] = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        if kind not in LAYER_KINDS:
            raise ValueError(f"kind must be one of {LAYER_KINDS}, got {kind!r}")
        if in_features < 1 or out_features < 1:
            raise ValueError(f"features must be >= 1, got in={in_features}, out={out_features}")
        self.in_features, self.out_features, self.kind = in_features, out_features, kind
        self.p = check_rate(p)
        self.activation = _activation(activation)
        self.sparse_grad = sparse_grad
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        g = torch.Generator().manual_seed(seed)
        _init_linear(self.weight, self.bias, in_features, g)
        self.sampler: Optional[PatternSampler] = None
        if self.p > 0 and kind in KINDS:
            self.sampler = sampler_for_rate(self.p, kind, max_dp=max_dp, tile=tile, seed=seed + 1)
        self.last_pattern: Optional[Pattern] = None

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, p={self.p}, kind={self.kind}"

    def forward(self, x: Input, pattern: Optional[Pattern] = None) -> Input:
        """Training: a Compact (row/tile) or a dense dropped Tensor (bernoulli); eval: dense, no dropout."""
        if not self.training or self.p == 0:
            return approx_dropout_linear(x, self.weight, self.bias, None, self.activation)
        if self.kind == "bernoulli":
            # torch's own dropout kernel (global RNG: seed it with torch.manual_seed)
            return F.dropout(approx_dropout_linear(x, self.weight, self.bias, None, self.activation,
                                                  sparse_grad=self.sparse_grad), self.p, True)
        pat = pattern if pattern is not None else self.sampler.sample()
        self.last_pattern = pat
        return approx_dropout_linear(x, self.weight, self.bias, pat, self.activation, sparse_grad=self.sparse_grad)


class CompactLinear(nn.Module):
    """Linear (in -> out) that consumes a Compact input and skips its dropped input units.

    `weight_t` is stored (in, out) so RDP's kept input units are the strided rows weight_t[b::dp]
    (a view); a dense input works too. Output is dense.
    """

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, sparse_grad: bool = True,
                 seed: int = 0, device: Optional[torch.device | str] = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ValueError(f"features must be >= 1, got in={in_features}, out={out_features}")
        self.in_features, self.out_features, self.sparse_grad = in_features, out_features, sparse_grad
        self.weight_t = nn.Parameter(torch.empty(in_features, out_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        _init_linear(self.weight_t, self.bias, in_features, torch.Generator().manual_seed(seed))

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}"

    def forward(self, x: Input) -> torch.Tensor:
        return compact_linear(x, self.weight_t, self.bias, None, layout="in_out", sparse_grad=self.sparse_grad)


def dense(x: Input) -> torch.Tensor:
    """A Compact as a dense tensor (zeros at dropped units); a Tensor as is."""
    return x.to_dense() if isinstance(x, Compact) else x
