"""The dropout kinds and the tile size, defined once (Song et al. 2019 §III).

`bernoulli` is conventional dropout (a random mask per entry); `row` and `tile` are the paper's
Row-based and Tile-based Dropout Patterns (RDP §III-A, TDP §III-B); a model may also have `none`.
The tile is the paper's 32x32 (§III-B: "the size of tile is set to be 32×32 to balance the
maximization of the number of sub-models" against fine-grained, irregular access)."""
from __future__ import annotations

PATTERN_KINDS: tuple[str, ...] = ("row", "tile")
LAYER_KINDS: tuple[str, ...] = ("bernoulli", *PATTERN_KINDS)
MODEL_KINDS: tuple[str, ...] = (*LAYER_KINDS, "none")
KIND_LABELS: dict[str, str] = {"bernoulli": "conventional", "row": "RDP (row)", "tile": "TDP (tile)",
                               "none": "no dropout"}
DEFAULT_TILE: tuple[int, int] = (32, 32)
