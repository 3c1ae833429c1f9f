"""The Dropout page's section "How many sub-models?" (Song et al. 2019 §III-A/B): the paper's counts of RDP's and
TDP's patterns, the patterns Algorithm 1 actually mixes, the sub-networks one step trains, and what the tile size
trades (§III-B), computed by lab.experiments.dropout_submodels."""
from __future__ import annotations

import pandas as pd
import streamlit as st

import _common as ui
from lab.experiments.dropout_submodels import sub_model_counts, tile_sizes

FAMILY_ANSWERS = ["RDP (rows)", "TDP (tiles)", "the same"]
COUNT_COLUMNS = {
    "pattern": ("Family",), "formula": ("Paper's count",),
    "dp_max": ("Largest dp", "", "the paper's dp_max: M for RDP, ⌊M/x⌋·⌊N/y⌋ for TDP", 1.0, "%.0f"),
    "max_sub_models": ("Possible patterns", "", "dp_max (dp_max + 1) / 2: dp = i has i biases", 1.0, "%.0f"),
    "log10_sub_models": ("Sub-models, log10", "", "log10 of the count; conventional: 2^M sub-networks of one layer "
                                                  "per sample", 1.0, "%.1f"),
    "search_patterns": ("Patterns Algorithm 1 mixes", "", "N (N + 1) / 2 for the search's largest dp N", 1.0, "%.0f"),
    "effective_patterns": ("Worth (equally likely)", "", "exp(entropy) of the mix of patterns (dp, b)", 1.0, "%.1f"),
    "per_step": ("Sub-networks per step", "", "distinct kept-unit sets across one batch, on average", 1.0, "%.2f"),
    "search_n": ("Search's N",),
}
TILE_COLUMNS = {
    "tile": ("Tile",),
    "dp_max": ("TDP largest dp", "", "⌊units / tile⌋ · ⌊batch / tile⌋", 1.0, "%.0f"),
    "max_sub_models": ("Possible patterns", "", "dp_max (dp_max + 1) / 2", 1.0, "%.0f"),
    "per_step": ("Sub-networks per step", "", "distinct kept-unit sets across one batch, on average", 1.0, "%.2f"),
    "run_fraction": ("Warps that run (branch)", "%", "if a kernel skipped dropped lanes by a branch", 100.0, "%.3g"),
    "busy_fraction": ("Busy lanes in them", "%", "kept lanes over the lanes of the running warps", 100.0, "%.3g"),
    "work_saved": ("Work saved (branch)", "%", "against no dropout", 100.0, "%.3g"),
}


@st.cache_data(max_entries=64, show_spinner=False)
def _counts(p: float, units: int, batch: int, tile: tuple, seed: int) -> pd.DataFrame:
    return sub_model_counts(p, units, batch, tile=tile, seed=seed)


@st.cache_data(max_entries=64, show_spinner=False)
def _tiles(p: float, units: int, batch: int, seed: int) -> pd.DataFrame:
    return tile_sizes(p, units, batch, seed=seed)


def more_patterns(counts: pd.DataFrame) -> str:
    """Which family the paper's formulas give more patterns."""
    by = counts.set_index("kind").max_sub_models
    return FAMILY_ANSWERS[2] if by["row"] == by["tile"] else FAMILY_ANSWERS[0 if by["row"] > by["tile"] else 1]


def section(p: float, units: int, batch: int, tile: tuple, seed: int) -> dict:
    """The section; returns its numbers once revealed ({} before)."""
    st.subheader("How many sub-models? RDP against TDP")
    st.caption("Dropout trains many sub-networks that share weights, and its regularisation comes from their "
               "number. The paper counts the patterns (dp, b) each family can draw (§III-A/B) and credits TDP's "
               f"smaller accuracy loss to having more. Here: a {units}-unit layer, a batch of {batch}, "
               f"{tile[0]}×{tile[1]} tiles (the page's settings).")
    counts = _counts(p, units, batch, tile, seed)
    by = counts.set_index("kind")
    th, tw = tile

    def reveal():
        return more_patterns(counts), (
            f"RDP's dp goes up to M = {units}: {int(by.loc['row', 'max_sub_models']):,} patterns; TDP's up to "
            f"⌊{units}/{tw}⌋·⌊{batch}/{th}⌋ = {int(by.loc['tile', 'dp_max'])}: "
            f"{int(by.loc['tile', 'max_sub_models']):,}. TDP has more only when the batch is above about "
            f"x·y = {th * tw} samples (the paper's condition).")

    ui.predict(f"By the paper's count, which family can draw more different patterns on a {units}-unit layer with "
               f"a batch of {batch} and {th}×{tw} tiles?", FAMILY_ANSWERS, reveal, key="guess_models")
    if not ui.revealed("guess_models"):
        st.caption("The counts show once you answer the question above, or skip it.")
        return {}
    shown = ["pattern", "formula", "max_sub_models", "log10_sub_models", "search_patterns", "effective_patterns",
             "per_step"]
    ui.people_table(counts[shown], "dropout_submodels", COUNT_COLUMNS, shown)  # every column shown: no tick box
    tiles = _tiles(p, units, batch, seed)
    st.markdown(f"**What the tile size trades** (§III-B: a smaller tile gives more patterns but finer, less regular "
                f"access; the paper picks 32×32). The page's tile is {th}×{tw} (More settings).")
    ui.people_table(tiles[list(TILE_COLUMNS)], "dropout_tiles", TILE_COLUMNS, list(TILE_COLUMNS))
    ui.takeaway(takeaway(counts, tiles, batch, tile), key="takeaway_models")
    return {"counts": counts, "tiles": tiles}


def takeaway(counts: pd.DataFrame, tiles: pd.DataFrame, batch: int, tile: tuple) -> str:
    """The section's sentence from the numbers on screen."""
    by = counts.set_index("kind")
    row, til = by.loc["row"], by.loc["tile"]
    text = (f"By the paper's formulas {more_patterns(counts).split(' (')[0]} "
            + ("has" if more_patterns(counts) != FAMILY_ANSWERS[2] else "have")
            + f" more patterns here ({int(row.max_sub_models):,} RDP, {int(til.max_sub_models):,} TDP), but "
            f"Algorithm 1 mixes only {int(row.search_patterns)} patterns (dp ≤ {int(row.search_n)}) for either, "
            f"worth {row.effective_patterns:.1f} equally likely ones. What differs is within a step: RDP gives the "
            f"whole batch one sub-network, TDP {til.per_step:.2f} on average (conventional dropout: one per sample, "
            f"{batch})")
    if til.per_step < 1.001:
        small = tiles[tiles.per_step > 1.001]
        text += (f" — here the batch of {batch} fills one {tile[0]}-row tile row, so TDP trains one per step like "
                 "RDP" + (f"; {small.tile.iloc[-1]} tiles would give {small.per_step.iloc[-1]:.2f}" if len(small)
                          else "; a batch of several tile rows is needed"))
    else:
        text += ": the extra sub-networks per step are where TDP's smaller accuracy loss can come from"
    return text + "."
