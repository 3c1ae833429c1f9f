"""Figures of every nccl-tests collective: modelled bus bandwidth or time against the op's
size per algorithm, beside the op's lower bound (`lab.experiments.op_model`)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .collectives import bytes_ticks


def op_model_figure(model: pd.DataFrame, y: str = "busbw") -> go.Figure:
    """busbw (GB/s) or time (µs) against nccl-tests' size of the op, one dashed line per algorithm and
    the lower bound in black (y: 'busbw' or 'time')."""
    if y not in ("busbw", "time"):
        raise ValueError(f"y={y!r}; allowed: busbw, time")
    col, bound, scale = (("busbw_GBps", "bound_busbw_GBps", 1.0) if y == "busbw" else
                         ("model_s", "lower_bound_s", 1e6))
    fig = go.Figure()
    for a, part in model.groupby("algorithm", sort=False):
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part[col] * scale, mode="lines", line_dash="dash", name=a))
    lb = model.drop_duplicates("nbytes")
    fig.add_trace(go.Scatter(x=lb["nbytes"], y=lb[bound] * scale, mode="lines", name="lower bound",
                             line={"color": "black", "width": 3}))
    op = model["op"].iloc[0] if len(model) else ""
    fig.update_xaxes(type="log", title_text=f"{op} size (nccl-tests: bytes)",
                     **bytes_ticks(model.nbytes.min(), model.nbytes.max()))
    if y == "busbw":
        fig.update_yaxes(title_text="bus bandwidth (GB/s)", rangemode="tozero")
    else:
        fig.update_yaxes(type="log", title_text="time (µs)")
    fig.update_layout(legend_title="algorithm", margin={"t": 30})
    return fig
