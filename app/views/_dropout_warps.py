"""The Dropout page's lesson "Why not just skip the dropped units?" (Song et al. 2019 §II-C, Fig. 1b): a branch
`if (keep) work` saves a warp's time only when all 32 of its lanes are dropped. Predict first, then the warp grid
of one step per pattern and each pattern's useful work, computed by lab.experiments.dropout_warps."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import _common as ui
from lab.experiments.dropout_warps import LANE_LABELS, element_wise_skip_fraction, warp_divergence, warp_grid

SKIP_ANSWERS = ["almost none (under 1 %)", "a few (1–10 %)", "some (10–40 %)", "about half or more (over 40 %)"]
STATES = ("skipped", "idle", "kept")  # heatmap codes 0, 1, 2
STATE_WORDS = {"skipped": "dropped, warp skips", "idle": "dropped, idles in a warp that runs",
               "kept": "kept: works"}
STATE_COLOURS = [[0, "#e6e6e6"], [1 / 3, "#e6e6e6"], [1 / 3, "#d62728"], [2 / 3, "#d62728"], [2 / 3, "#1f77b4"],
                 [1, "#1f77b4"]]
PICTURE = (32, 64)  # the picture's batch x units: 64 warps of 32 lanes
WARP_COLUMNS = {
    "pattern": ("Pattern",),
    "run_fraction": ("Warps that still run", "%", "warps with at least one kept lane: they execute the branch", 100.0,
                     "%.3g"),
    "busy_fraction": ("Busy lanes in them", "%", "kept lanes over the lanes of the warps that run", 100.0, "%.3g"),
    "work_saved": ("Work saved by the branch", "%", "against no dropout, where every warp runs", 100.0, "%.3g"),
    "kept_fraction": ("Work compaction needs", "%", "kept lanes over all lanes: what a compact GEMM computes", 100.0,
                      "%.3g"),
    "patterns": ("Patterns averaged",), "exact": ("Exact",),
}


def percent(x: float) -> str:
    """A share as people write it: '70.0%', and a tiny one with its digits ('0.0011 %', not '0.0%')."""
    return f"{x:.1%}" if x >= 0.001 or x == 0 else f"{100 * x:.2g} %"


def band(share: float) -> str:
    """The answer band a share of warps falls in."""
    return SKIP_ANSWERS[0 if share < 0.01 else 1 if share < 0.1 else 2 if share < 0.4 else 3]


@st.cache_data(max_entries=64, show_spinner=False)
def _summary(p: float, kinds: tuple, batch: int, units: int, tile: tuple, lanes: str, seed: int) -> pd.DataFrame:
    return warp_divergence(p, list(kinds), batch=batch, units=units, tile=tile, lanes_along=lanes, seed=seed)


@st.cache_data(max_entries=64, show_spinner=False)
def _grid(p: float, kinds: tuple, tile: tuple, lanes: str, seed: int) -> pd.DataFrame:
    return warp_grid(p, list(kinds), batch=PICTURE[0], units=PICTURE[1], tile=tile, lanes_along=lanes, seed=seed)


def warp_figure(grid: pd.DataFrame) -> go.Figure:
    """One panel per pattern: warps (rows) x 32 lanes, kept lanes blue, dropped lanes of warps that still run red
    (they idle through the branch), dropped lanes of warps that skip grey."""
    from plotly.subplots import make_subplots

    panels = list(grid.groupby("kind", sort=False))
    titles = []
    for _, part in panels:
        runs = part[part.state != "skipped"].warp.nunique()
        dp = part.dp.iloc[0]
        what = f" (dp = {int(dp)}, b = {int(part.bias.iloc[0])})" if pd.notna(dp) else ""
        titles.append(f"{part.pattern.iloc[0]}{what}<br>{runs} of {part.warp.nunique()} warps run")
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=titles, horizontal_spacing=0.05)
    for k, (_, part) in enumerate(panels):
        z = part.pivot(index="warp", columns="lane", values="state").map(STATES.index)
        who = part.pivot(index="warp", columns="lane", values="sample").astype(str) + ", unit " + part.pivot(
            index="warp", columns="lane", values="unit").astype(str)
        fig.add_trace(go.Heatmap(z=z.to_numpy(), x=z.columns, y=z.index, colorscale=STATE_COLOURS, zmin=0, zmax=2,
                                 text=who.to_numpy(), showscale=k == 0,
                                 colorbar={"tickvals": [1 / 3, 1, 5 / 3], "ticktext": [STATE_WORDS[s] for s in STATES],
                                           "len": 0.6, "thickness": 14, "title": {"text": ""}},
                                 hovertemplate="warp %{y}, lane %{x}: sample %{text}<extra></extra>"),
                      row=1, col=k + 1)
        fig.update_yaxes(autorange="reversed", showticklabels=k == 0, row=1, col=k + 1)
        fig.update_xaxes(title_text="lane", row=1, col=k + 1)
    fig.update_yaxes(title_text="warp", row=1, col=1)
    fig.update_layout(height=480, margin={"t": 70, "b": 40, "l": 60, "r": 10})
    return fig


def section(p: float, kinds: tuple, batch: int, units: int, tile: tuple, seed: int) -> dict:
    """The lesson; returns its numbers once revealed ({} before)."""
    st.subheader("Why not just skip the dropped units?")
    st.caption("Fig. 1b of the paper: a kernel could test each unit's mask, `if (keep) { y = f(w·x + b) } else "
               "{ y = 0 }`. A GPU runs threads in warps of 32 lanes that issue one instruction together: the branch "
               "runs for a warp when any of its lanes takes it, and the other lanes idle through it.")
    with ui.more_settings("Warp layout", key="more_warps"):
        lanes = ui.radio("Warp runs along", ["batch", "units"], "lanes", "batch", format_func=LANE_LABELS.get,
                         help="which way 32 consecutive threads run over the layer's output: along the batch (a "
                              "warp is one unit for 32 samples, the paper's Fig. 3 matrix) or along the units (32 "
                              "units of one sample, torch's row-major activation)")
    skip = element_wise_skip_fraction(p)

    def reveal():
        return band(skip), (f"A warp skips only when all 32 of its lanes are dropped: p³² = {p:g}³² = {skip:.2g} "
                            f"({100 * skip:.2g} % of the warps); every other warp runs the whole branch with only its "
                            "kept lanes doing useful work.")

    ui.predict(f"With conventional (element-wise) dropout at p = {p:g}, what share of the warps can skip their "
               "work by the branch?", SKIP_ANSWERS, reveal, key="guess_warps")
    if not ui.revealed("guess_warps"):
        st.caption("The warp grid and each pattern's useful work show once you answer the question above, or "
                   "skip it.")
        return {}
    summary = _summary(p, kinds, batch, units, tile, lanes, seed)
    cols = st.columns(len(summary))
    for c, r in zip(cols, summary.itertuples()):
        c.metric(f"{r.pattern}: work saved by the branch", percent(r.work_saved),
                 delta=f"{r.run_fraction:.1%} of warps run, {r.busy_fraction:.0%} busy",
                 delta_color="off", delta_arrow="off",
                 help=f"{r.run_fraction:.1%} of the warps still run, {r.busy_fraction:.0%} of their lanes busy; a "
                      f"{units}-unit layer, batch {batch}, p = {p:g}, warps along the {lanes}; compaction would "
                      f"compute {r.kept_fraction:.1%} of the lanes")
    grid = _grid(p, kinds, tile, lanes, seed)
    st.caption(f"One step of each pattern on a {PICTURE[0]}-sample × {PICTURE[1]}-unit activation, warps along the "
               f"{lanes} ({tile[0]}×{tile[1]} tiles). Blue lanes work; red lanes are dropped but idle through the "
               "branch because a lane of their warp is kept; grey warps skip. The numbers above are over many "
               "steps of the page's layer.")
    ui.figure(warp_figure(grid), grid, "dropout_warps")
    with st.expander("Table: warps, busy lanes and work saved per pattern"):
        ui.people_table(summary, "dropout_warps", WARP_COLUMNS, ["pattern", "run_fraction", "busy_fraction",
                                                                  "work_saved", "kept_fraction"])
    ui.takeaway(takeaway(summary, p, lanes), key="takeaway_warps")
    return {"summary": summary, "lanes": lanes}


def takeaway(summary: pd.DataFrame, p: float, lanes: str) -> str:
    """The lesson's sentence from the numbers on screen."""
    by = summary.set_index("kind")
    parts = []
    if "bernoulli" in by.index:
        b = by.loc["bernoulli"]
        parts.append(f"at p = {p:g} a branch saves conventional dropout {100 * b.work_saved:.2g} % of the work: "
                     f"{b.run_fraction:.1%} of the warps still run, with {b.busy_fraction:.0%} of their lanes busy")
    pats = [k for k in ("row", "tile") if k in by.index]
    if pats:
        said = "; ".join(f"{by.loc[k, 'pattern']} saves {by.loc[k, 'work_saved']:.0%} with "
                         f"{by.loc[k, 'busy_fraction']:.0%} of the running lanes busy" for k in pats)
        parts.append(said)
        whole = [k for k in pats if by.loc[k, "busy_fraction"] > 0.999]
        if whole:
            parts.append(("a pattern drops units in step along each warp, so whole warps skip — and a kernel that "
                          "knows the pattern needs no branch at all: it computes the compact GEMM"))
        if any(by.loc[k, "busy_fraction"] < 0.999 for k in pats):
            parts.append(f"with warps along the {lanes}, " + ", ".join(
                by.loc[k, "pattern"] for k in pats if by.loc[k, "busy_fraction"] < 0.999)
                + " mixes kept and dropped lanes in a warp, so its warps diverge too")
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]
