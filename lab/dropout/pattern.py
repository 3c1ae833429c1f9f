"""A dropout pattern (kind, dp, bias): the unit of sampling in Approximate Random Dropout (§III).

`Pattern.blocks` describes the kept part of a (batch, units) activation as dense blocks
(batch rows x kept units); the compact layers compute only those blocks. Kept units are scaled
by `Pattern.scale` = dp, the inverse of the pattern's keep probability per unit (see `sampler`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from .kinds import PATTERN_KINDS as KINDS
from .row_pattern import check_pattern, kept_rows, row_pattern
from .tile_pattern import DEFAULT_TILE, check_tile, tile_groups, tile_pattern

Index = Union[slice, torch.Tensor]


@dataclass(frozen=True)
class Block:
    """One dense piece of a compact activation: `rows` of the batch x `cols` units (slice or int64)."""

    rows: Index
    cols: Index


def index_len(ix: Index, n: int) -> int:
    """Length of a slice or index tensor applied to n entries."""
    return len(range(*ix.indices(n))) if isinstance(ix, slice) else int(ix.numel())


def as_index(ix: Index, n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """An index (slice or tensor) over n entries as an int64 tensor."""
    if isinstance(ix, slice):
        return torch.arange(*ix.indices(n), device=device)
    return ix.to(device)


@dataclass(frozen=True)
class Pattern:
    """Row (RDP) or tile (TDP) dropout pattern: keeps the units/tiles with (i - bias) mod dp == 0."""

    kind: str
    dp: int
    bias: int = 0
    tile: tuple[int, int] = DEFAULT_TILE

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"pattern kind must be one of {KINDS}, got {self.kind!r}")
        check_pattern(self.dp, self.bias)
        object.__setattr__(self, "tile", check_tile(self.tile))

    @property
    def scale(self) -> float:
        """Factor on kept units: dp, so that E[mask * scale] = 1 for every unit (bias uniform)."""
        return float(self.dp)

    @property
    def rate(self) -> float:
        """Nominal global dropout rate (dp-1)/dp."""
        return (self.dp - 1) / self.dp

    def mask(self, batch: int, units: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Keep-mask (batch, units), True = kept, the same as conventional dropout's mask."""
        if self.kind == "row":
            return row_pattern(units, self.dp, self.bias, device)[None, :].expand(batch, units)
        return tile_pattern(batch, units, self.dp, self.bias, self.tile, device)

    def blocks(self, batch: int, units: int, device: torch.device | str | None = None) -> list[Block]:
        """Kept part as dense blocks whose rows partition the batch (RDP: one strided block)."""
        if self.kind == "row":
            return [Block(slice(None), kept_rows(units, self.dp, self.bias))]
        if self.dp == 1:  # every tile kept: the whole matrix, as a view
            return [Block(slice(None), slice(None))]
        groups = tile_groups(batch, units, self.dp, self.bias, self.tile, device)
        if len(groups) == 1:
            return [Block(slice(None), groups[0].cols)]
        return [Block(g.rows, g.cols) for g in groups]

    def describe(self) -> str:
        t = f", tile {self.tile[0]}x{self.tile[1]}" if self.kind == "tile" else ""
        return f"{self.kind} dp={self.dp} b={self.bias}{t}"
