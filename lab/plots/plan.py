"""Parallelism-planner figures: step-time breakdown, speedup or efficiency vs P, per-layer cost, codec advice."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def plan_breakdown_figure(sweep: pd.DataFrame) -> go.Figure:
    """Stacked bars per strategy and P: compute, exposed communication and pipeline bubble (ms per step),
    from `planner_sweep`."""
    ok = sweep[sweep["feasible"]]
    x = [ok["strategy"].tolist(), [f"P={p}" for p in ok["P"]]]
    fig = go.Figure()
    for col, name in (("compute_ms", "compute"), ("exposed_comm_ms", "communication (not hidden)"),
                      ("idle_ms", "pipeline bubble")):
        fig.add_trace(go.Bar(x=x, y=ok[col], name=name))
    fig.update_layout(barmode="stack", xaxis_title="strategy, GPUs", yaxis_title="time per step (ms)",
                      legend_title="", margin={"t": 30})
    return fig


def plan_speedup_figure(sweep: pd.DataFrame, y: str = "speedup") -> go.Figure:
    """Speedup (or scaling efficiency) against P per strategy, with the ideal line, from `planner_sweep`."""
    ok = sweep[sweep["feasible"]]
    fig = go.Figure()
    for s, part in ok.groupby("strategy", sort=False):
        fig.add_trace(go.Scatter(x=part["P"], y=part[y], mode="lines+markers", name=str(s)))
    Ps = sorted(ok["P"].unique())
    fig.add_trace(go.Scatter(x=Ps, y=Ps if y == "speedup" else [1.0] * len(Ps), mode="lines", name="ideal",
                             line={"dash": "dot", "color": "gray"}))
    label = {"speedup": "speedup vs one GPU (x, log scale)", "efficiency": "scaling efficiency (speedup / P)"}
    fig.update_layout(xaxis_title="GPUs (P, log scale)", yaxis_title=label.get(y, y), xaxis_type="log",
                      yaxis_type="log" if y == "speedup" else "linear", legend_title="strategy", margin={"t": 30})
    return fig


def plan_layers_figure(layers: pd.DataFrame) -> go.Figure:
    """Per-layer compute and communication of one step (ms), from `planner_breakdown(...).layers`."""
    fig = go.Figure([go.Bar(x=layers["layer"], y=layers["compute_ms"], name="compute"),
                     go.Bar(x=layers["layer"], y=layers["comm_ms"], name="communication")])
    fig.update_layout(barmode="group", xaxis_title="layer", yaxis_title="time per step (ms)", legend_title="",
                      margin={"t": 30})
    return fig


def codec_advice_figure(advice: pd.DataFrame) -> go.Figure:
    """Each candidate codec's predicted time per layer (ms, log scale), from `planner_advice`."""
    fig = go.Figure()
    for col in [c for c in advice.columns if c.endswith("_ms") and c != "saving_ms"]:
        fig.add_trace(go.Bar(x=advice["layer"], y=advice[col], name=col[:-3]))
    fig.update_layout(barmode="group", xaxis_title="layer", yaxis_title="communication time per step (ms, log scale)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig
# --- end deep image and planner ---
