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


def _p_ticks(Ps) -> dict:
    """Explicit ticks for a log axis of GPU counts: the powers of two in range (1, 2, 4, ... 1024)."""
    Ps = [int(p) for p in Ps]
    if not Ps:
        return {}
    vals = [2 ** k for k in range(0, 11) if min(Ps) <= 2 ** k <= max(Ps)] or sorted(set(Ps))
    return {"tickvals": vals, "ticktext": [str(v) for v in vals]}


def _pow_ticks(values) -> dict:
    """Explicit ticks for a log axis of ratios: 1, 2, 5, 10, 20, 50, ... within the values' range."""
    v = [float(x) for x in values if x and x > 0]
    if not v:
        return {}
    lo, hi = min(v), max(v)
    vals = [m * 10 ** e for e in range(-3, 5) for m in (1, 2, 5) if lo / 1.5 <= m * 10 ** e <= hi * 1.5]
    if len(vals) > 10:  # a wide range: powers of ten only
        vals = [x for x in vals if f"{x:g}".lstrip("0.").startswith("1")]
    return {"tickvals": vals, "ticktext": [f"{x:g}" for x in vals]}


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
    fig.update_xaxes(**_p_ticks(Ps))
    if y == "speedup":
        fig.update_yaxes(**_pow_ticks(list(ok[y]) + list(Ps)))
    return fig


def plan_comm_figure(sweep: pd.DataFrame, crossover: int | None = None, paper_crossover: int | None = None
                     ) -> go.Figure:
    """Communication per step (ms) against P for each strategy (Wu et al. 2015 Figure 2's comparison without
    the compute both share), the model's crossover and the paper's marked, from `deep_image_figure2(...).sweep`
    or `planner_sweep`."""
    ok = sweep[sweep["feasible"] & (sweep["P"] > 1)]
    fig = go.Figure()
    for s, part in ok.groupby("strategy", sort=False):
        fig.add_trace(go.Scatter(x=part["P"], y=part["comm_ms"], mode="lines", name=f"{s} parallelism",
                                 hovertemplate="P = %{x}: %{y:,.0f} ms<extra>" + str(s) + "</extra>"))
    top = float(ok["comm_ms"].max()) * 1.05 if len(ok) else 1.0
    for P, name, dash in ((paper_crossover, f"paper: data faster beyond {paper_crossover} GPUs", "dash"),
                          (crossover, f"model: data faster from {crossover} GPUs", "dot")):
        if P:  # a vertical line as a trace: shapes on a log axis take log10 coordinates
            fig.add_trace(go.Scatter(x=[P, P], y=[0, top], mode="lines", name=name, hoverinfo="name",
                                     line={"dash": dash, "color": "gray" if dash == "dash" else "black", "width": 1.5}))
    fig.update_layout(xaxis_title="GPUs (P, log scale)", yaxis_title="communication per step (ms)", xaxis_type="log",
                      legend_title="", margin={"t": 30}, height=380,
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0})
    fig.update_xaxes(**_p_ticks(ok["P"]))
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
    cols = [c for c in advice.columns if c.endswith("_ms") and c != "saving_ms"]
    fig.update_yaxes(**_pow_ticks([v for c in cols for v in advice[c]]))
    return fig
# --- end deep image and planner ---
