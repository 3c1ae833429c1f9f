"""Approximate Random Dropout (Song et al., DATE 2019): the dropout kinds (kinds.py, once), row/tile
dropout patterns, the SGD search for their distribution, and compact layers that compute only the
kept units. Data sets and corpora come from lab.data."""
from .compact import Compact, compact_linear
from .conventional import bernoulli_mask, check_rate, conventional_dropout
from .kinds import DEFAULT_TILE, KIND_LABELS, LAYER_KINDS, MODEL_KINDS, PATTERN_KINDS
from .layers import ApproxDropoutLinear, CompactLinear, approx_dropout_linear, dense
from .pattern import Block, Pattern
from .row_pattern import kept_rows, row_pattern, row_rate
from .sampler import PatternSampler, sampler_for_rate
from .search import SearchResult, UnreachableRate, default_max_dp, expected_rate, max_rate, rate_vector, search
from .tile_pattern import tile_groups, tile_pattern

__all__ = ["KIND_LABELS", "LAYER_KINDS", "MODEL_KINDS", "PATTERN_KINDS", "Compact", "compact_linear", "bernoulli_mask",
           "check_rate", "conventional_dropout",
           "ApproxDropoutLinear", "CompactLinear", "approx_dropout_linear", "dense", "Block", "Pattern",
           "kept_rows", "row_pattern", "row_rate", "PatternSampler", "sampler_for_rate", "SearchResult",
           "UnreachableRate", "default_max_dp", "expected_rate", "max_rate", "rate_vector", "search", "DEFAULT_TILE",
           "tile_groups", "tile_pattern"]
