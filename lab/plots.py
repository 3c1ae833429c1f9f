"""Plotly figures built from experiment tables (DESIGN.md rule 3: UIs only render these)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .codecs import TableCodec


def value_table_figure(codecs: list[TableCodec]) -> go.Figure:
    """Positive entries of each value table on a log axis: where a type spends its codes (§3.1)."""
    fig = go.Figure()
    for c in codecs:
        v = c.values
        pos = v[v > 0].tolist()
        fig.add_trace(go.Scatter(x=list(range(len(pos))), y=pos, mode="markers", name=c.describe(),
                                 marker={"size": 4}))
    fig.update_layout(xaxis_title="code index among positive values", yaxis_title="value (× scale)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig


def error_bar_figure(df: pd.DataFrame, metric: str = "mean_rel_error") -> go.Figure:
    """Grouped bars of one error metric per codec and data set, from `error_table`."""
    labels = {"mean_rel_error": "mean relative error (fraction)", "mae": "mean absolute error",
              "rmse": "RMSE", "snr_db": "SNR (dB)", "max_error": "max absolute error"}
    fig = go.Figure()
    for codec, part in df.groupby("codec", sort=False):
        fig.add_trace(go.Bar(x=part["data"], y=part[metric], name=codec))
    fig.update_layout(barmode="group", xaxis_title="data", yaxis_title=labels.get(metric, metric),
                      legend_title="codec", margin={"t": 30})
    return fig
