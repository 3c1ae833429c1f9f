"""Codec figures (Dettmers 2016 §3.1-3.2): value tables, error bars and histograms, encode/decode speed."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from lab.codecs import TableCodec


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



def error_histogram_figure(hist: pd.DataFrame) -> go.Figure:
    """Distribution of log10 relative error per codec, from `errors.error_histogram`."""
    fig = go.Figure()
    for codec, part in hist.groupby("codec", sort=False):
        mid = (part["bin_left"] + part["bin_right"]) / 2
        fig.add_trace(go.Scatter(x=10.0 ** mid, y=100 * part["fraction"], mode="lines", line_shape="hvh",
                                 name=str(codec)))
    fig.update_layout(xaxis_title="relative error |y − x| / |x| (lowest bin: exact or below)",
                      yaxis_title="share of values (%)", xaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig


def codec_speed_figure(speed: pd.DataFrame) -> go.Figure:
    """Encode and decode ns per value per codec on this device, from `errors.codec_speed`."""
    fig = go.Figure()
    for op, part in speed.groupby("op", sort=False):
        fig.add_trace(go.Bar(x=part["codec"], y=part["ns_per_value"], name=str(op)))
    fig.update_layout(barmode="group", xaxis_title="codec", yaxis_title="time per value (ns)", yaxis_type="log",
                      legend_title="operation", margin={"t": 30})
    return fig
