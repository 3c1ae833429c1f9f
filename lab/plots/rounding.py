"""Stochastic-rounding figures: the bias E[Q(x)] − x across x, a weight under tiny updates, a low-precision
training curve (from lab.experiments.rounding); and the send-the-factors chart (lab.plan.factors)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

#: one colour per rounding (and the exact / float32 reference)
ROUNDING_COLORS = {"nearest": "#e45756", "stochastic": "#4c78a8", "exact": "#555555", "float32": "#555555"}


def _legend_below(fig: go.Figure) -> go.Figure:
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0}, margin={"t": 30})
    return fig


def bias_figure(df: pd.DataFrame) -> go.Figure:
    """E[Q(x)] − x in grid gaps against x, per rounding: nearest's saw-tooth, stochastic's mean with its 95 %
    interval shaded (from `bias_sweep`)."""
    fig = go.Figure()
    for r in ("nearest", "stochastic"):
        d = df[df.rounding == r]
        c = ROUNDING_COLORS[r]
        if r == "stochastic":
            fig.add_trace(go.Scatter(x=np.r_[d.x, d.x[::-1]], y=np.r_[d.hi95 / d.gap, (d.lo95 / d.gap)[::-1]],
                                     fill="toself", fillcolor="rgba(76,120,168,0.25)", line={"width": 0},
                                     name="stochastic: 95 % interval of the mean", hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=d.x, y=d.bias_in_gaps, mode="lines+markers", marker={"size": 4},
                                 line={"color": c}, name=f"{r}: E[Q(x)] − x"))
    fig.add_hline(y=0, line={"color": "#999", "dash": "dot"})
    fig.update_layout(xaxis_title=f"x (stored in {df.attrs.get('fmt', '')})",
                      yaxis_title="bias E[Q(x)] − x (grid gaps)")
    return _legend_below(fig)


def tiny_updates_figure(df: pd.DataFrame) -> go.Figure:
    """The weight against the update count: exact arithmetic, rounding to nearest, and stochastic rounding (the
    mean over seeds, the range shaded), from `tiny_updates`."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.r_[df.step, df.step[::-1]], y=np.r_[df.stochastic_max, df.stochastic_min[::-1]],
                             fill="toself", fillcolor="rgba(76,120,168,0.25)", line={"width": 0},
                             name=f"stochastic: range over {df.attrs.get('seeds', '')} seeds", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=df.step, y=df.exact, name="exact sum", line={"color": ROUNDING_COLORS["exact"],
                                                                              "dash": "dash"}))
    fig.add_trace(go.Scatter(x=df.step, y=df.nearest, name="round to nearest", line={"color": ROUNDING_COLORS["nearest"],
                                                                                       "width": 3}))
    fig.add_trace(go.Scatter(x=df.step, y=df.stochastic_mean, name="stochastic rounding (mean)",
                             line={"color": ROUNDING_COLORS["stochastic"]}))
    fig.update_layout(xaxis_title="updates applied", yaxis_title=f"weight stored in {df.attrs.get('fmt', '')}")
    return _legend_below(fig)


def low_precision_figure(df: pd.DataFrame) -> go.Figure:
    """Test accuracy against the step for float32 weights and for weights rounded each way onto the grid
    (from `low_precision_training`)."""
    fig = go.Figure()
    names = {"float32": "float32 weights", "nearest": f"{df.attrs.get('fmt', '')} weights, round to nearest",
             "stochastic": f"{df.attrs.get('fmt', '')} weights, stochastic rounding"}
    for w, name in names.items():
        d = df[df.weights == w]
        fig.add_trace(go.Scatter(x=d.step, y=100 * d.test_accuracy, name=name,
                                 line={"color": ROUNDING_COLORS[w], "dash": "dash" if w == "float32" else None}))
    fig.update_layout(xaxis_title="SGD step", yaxis_title="test accuracy (%)")
    return _legend_below(fig)


FACTOR_DASH = {"factors": None, "∇w, fp32": "dash", "∇w, 8-bit": "dot", "PowerSGD": "dashdot"}


def factor_figure(curves: pd.DataFrame, table: pd.DataFrame) -> go.Figure:
    """Bytes a worker sends per FC layer against its batch B (log-log): the factors grow with B, ∇w (fp32, 8-bit)
    and PowerSGD rank r are flat; each layer's crossover B* (factors = fp32 ∇w) marked, the table's batch drawn as
    a vertical line. One colour per layer, one line style per way of sending (the legend keys both). From
    `factor_curves` and `factor_table`."""
    fig = go.Figure()
    palette = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2"]
    whats = list(curves.what.unique())
    dash_of = {w: next((v for k, v in FACTOR_DASH.items() if w.startswith(k)), None) for w in whats}
    for i, layer in enumerate(curves.layer.unique()):
        c = palette[i % len(palette)]
        for what in whats:
            d = curves[(curves.layer == layer) & (curves.what == what)]
            fig.add_trace(go.Scatter(x=d.batch, y=d.bytes, mode="lines", line={"color": c, "dash": dash_of[what]},
                                     name=layer, legendgroup=layer, showlegend=what == whats[0],
                                     hovertemplate=f"{layer}, {what}<br>B = %{{x}}<br>%{{y:.3s}} bytes<extra></extra>"))
        row = table[table.layer == layer].iloc[0]
        fig.add_trace(go.Scatter(x=[row.crossover], y=[row.grad_bytes], mode="markers+text",
                                 marker={"color": c, "size": 10, "symbol": "diamond"},
                                 text=[f"B* = {row.crossover:,.0f}"], textposition="top left",
                                 name=f"{layer}: crossover B*", legendgroup=layer, showlegend=False))
    for what in whats:  # the line styles' key, in grey
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": "#666", "dash": dash_of[what]},
                                 name=what))
    if "batch" in table.attrs:  # a trace, not a shape: a shape's x on a log axis is log10 of the value
        b = table.attrs["batch"]
        fig.add_trace(go.Scatter(x=[b, b], y=[float(curves.bytes.min()), float(curves.bytes.max())],
                                 mode="lines+text", line={"color": "#999", "dash": "dot"}, text=["", f"B = {b:,}"],
                                 textposition="bottom right", name=f"this batch, B = {b:,}", showlegend=False))
    fig.update_layout(xaxis_title="samples per worker B (log scale)", yaxis_title="bytes sent up per step "
                      "(log scale)", xaxis_type="log", yaxis_type="log", height=520)
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0}, margin={"t": 30, "b": 10})
    return fig
