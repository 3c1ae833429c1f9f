"""Where did the time go: one measured allreduce per rank as a timeline (one row per rank, coloured by
range kind), and the per-rank split as stacked bars (from lab.experiments.timesplit's tables)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

#: a colour per range kind: codec work warm, transfers cool, Python grey
KIND_COLORS = {"encode": "#d62728", "decode": "#ff7f0e", "hop": "#e377c2", "add": "#bcbd22",
               "send": "#17becf", "recv-wait": "#1f77b4", "python": "#9e9e9e"}
SPLIT_COLORS = {"codec_s": "#d62728", "wire_s": "#1f77b4", "wait_s": "#aec7e8", "python_s": "#9e9e9e"}
SPLIT_NAMES = {"codec_s": "codec work", "wire_s": "on the wire", "wait_s": "waiting", "python_s": "Python"}


def time_split_figure(timeline: pd.DataFrame, title: str = "") -> go.Figure:
    """Rows of `timeline` (rank, kind, start_s, end_s: one call) as a timeline: one row per rank, a bar
    per piece coloured by its range kind, time in ms from the call's start on that rank."""
    fig = go.Figure()
    ranks = sorted(timeline["rank"].unique()) if len(timeline) else []
    for kind, color in KIND_COLORS.items():
        g = timeline[timeline["kind"] == kind]
        if not len(g):
            continue
        fig.add_bar(y=[f"rank {int(r)}" for r in g["rank"]], x=(g["end_s"] - g["start_s"]) * 1e3,
                    base=g["start_s"] * 1e3, orientation="h", name=kind, marker_color=color,
                    customdata=(g["end_s"] - g["start_s"]) * 1e3,
                    hovertemplate=f"{kind}<br>%{{base:.3f}} ms + %{{customdata:.3f}} ms<extra>%{{y}}</extra>")
    fig.update_layout(barmode="overlay", title=title, xaxis_title="time since the call started on the rank (ms)",
                      yaxis=dict(categoryorder="array", categoryarray=[f"rank {int(r)}" for r in ranks][::-1]),
                      legend_title_text="range", height=140 + 60 * max(1, len(ranks)), margin=dict(l=60, r=20))
    return fig


def split_bars_figure(split: pd.DataFrame) -> go.Figure:
    """The per-rank split (codec work, on the wire, waiting, Python; ms) as stacked bars, one per
    (codec, rank)."""
    fig = go.Figure()
    labels = [f"{c} · rank {int(r)}" for c, r in zip(split["codec"], split["rank"])]
    for col, color in SPLIT_COLORS.items():
        fig.add_bar(y=labels, x=split[col] * 1e3, orientation="h", name=SPLIT_NAMES[col], marker_color=color,
                    hovertemplate=f"{SPLIT_NAMES[col]}: %{{x:.3f}} ms<extra>%{{y}}</extra>")
    fig.update_layout(barmode="stack", xaxis_title="ms of one traced call", legend_title_text="time spent",
                      yaxis=dict(autorange="reversed"), height=140 + 34 * max(1, len(labels)),
                      margin=dict(l=60, r=20))
    return fig


__all__ = ["KIND_COLORS", "SPLIT_COLORS", "split_bars_figure", "time_split_figure"]
