"""Tile-based dropout pattern TDP (Song et al. §III-B).

The layer's output matrix (batch rows x units) is cut into tiles of `tile = (th, tw)` entries
(32 x 32 by default, the paper's choice), numbered row-major t = i*J + j over the grid of
I = ceil(batch/th) tile rows and J = ceil(units/tw) tile columns; edge tiles may be partial.
A pattern (dp, b) keeps the tiles with (t - b) mod dp == 0 and drops the other dp-1 of every dp
successive tiles, so (dp-1)/dp of the entries are dropped (same reading as RDP, see
`row_pattern`; b is 0-based).

Reading: the paper says a tile is "a sub-matrix in weight matrix", but its dp_max =
floor(M/x) * floor(N/y) counts tiles of the *output* matrix, and its equivalence claim is with
conventional (per-unit) dropout. Tiles of the output matrix satisfy both: a kept tile is one
tile-row of W times one tile-column of the input, a dropped tile is 32 units switched off for
32 samples, and a TDP mask is a conventional dropout mask with tile structure. (Tiles of W
would be block DropConnect, a different regulariser, and would not shrink the next layer.)

Compute: within tile row i the kept tile columns are j = o_i, o_i + dp, ... with
o_i = (b - i*J) mod dp, so tile rows with the same offset share one set of kept units. A TDP
activation is therefore a few dense blocks (`tile_groups`): one per distinct offset, at most
min(I, dp); each is a GEMM on gathered rows of W.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .kinds import DEFAULT_TILE
from .row_pattern import check_pattern


def check_tile(tile: tuple[int, int]) -> tuple[int, int]:
    """Validate a (rows, cols) tile size."""
    try:
        th, tw = (int(t) for t in tile)
    except (TypeError, ValueError):
        raise ValueError(f"tile must be a pair of positive integers, got {tile!r}") from None
    if th < 1 or tw < 1:
        raise ValueError(f"tile must be a pair of positive integers, got {tile!r}")
    return th, tw


def tile_grid(rows: int, cols: int, tile: tuple[int, int] = DEFAULT_TILE) -> tuple[int, int]:
    """(I, J): tile rows and tile columns covering a rows x cols matrix (partial edge tiles count)."""
    th, tw = check_tile(tile)
    if rows < 0 or cols < 0:
        raise ValueError(f"matrix shape must be non-negative, got ({rows}, {cols})")
    return -(-rows // th), -(-cols // tw)


def tile_pattern(rows: int, cols: int, dp: int, bias: int, tile: tuple[int, int] = DEFAULT_TILE,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Keep-mask (rows, cols), True = kept: entry (r, c) is kept iff its tile t has (t-b) mod dp == 0."""
    check_pattern(dp, bias)
    th, tw = check_tile(tile)
    _, J = tile_grid(rows, cols, tile)
    ti = torch.arange(rows, device=device) // th
    tj = torch.arange(cols, device=device) // tw
    t = ti[:, None] * J + tj[None, :]
    return (t - bias) % dp == 0


@dataclass(frozen=True)
class TileGroup:
    """Batch rows that share one set of kept units (both sorted, int64)."""

    rows: torch.Tensor
    cols: torch.Tensor


def tile_groups(rows: int, cols: int, dp: int, bias: int, tile: tuple[int, int] = DEFAULT_TILE,
                device: torch.device | str | None = None) -> list[TileGroup]:
    """Partition of the batch rows into groups with identical kept units (possibly none).

    Every batch row appears in exactly one group; a group whose kept set is empty is kept too,
    so consumers know those rows carry no units.
    """
    check_pattern(dp, bias)
    th, tw = check_tile(tile)
    I, J = tile_grid(rows, cols, tile)
    by_offset: dict[int, list[int]] = {}
    for i in range(I):
        by_offset.setdefault((bias - i * J) % dp, []).append(i)
    groups = []
    for off, blocks in by_offset.items():
        r = torch.cat([torch.arange(i * th, min((i + 1) * th, rows)) for i in blocks])
        jb = torch.arange(off, J, dp) if off < J else torch.zeros(0, dtype=torch.long)
        c = (jb[:, None] * tw + torch.arange(tw)[None, :]).reshape(-1)
        c = c[c < cols]
        groups.append(TileGroup(r.to(device), c.to(device)))
    return groups


def tile_rate(rows: int, cols: int, dp: int, bias: int, tile: tuple[int, int] = DEFAULT_TILE) -> float:
    """Fraction of entries this one pattern drops (about (dp-1)/dp; exact for partial tiles)."""
    m = tile_pattern(rows, cols, dp, bias, tile)
    return 1.0 - m.float().mean().item() if m.numel() else 0.0
