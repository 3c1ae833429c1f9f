"""The race to the target: validation loss of every codec spec against steps or modelled
time on a cluster, fp32's target as a horizontal line, each spec's arrival marked. From
`lab.experiments.race(...)`'s curves and arrivals."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from .units import seconds_label

RACE_AXES = {"step": "training steps", "modelled_s": "modelled time on the cluster (s)"}


def race_figure(curves: pd.DataFrame, arrivals: pd.DataFrame, target: float, x: str = "step",
                log_y: bool = True) -> go.Figure:
    """One line per spec (validation loss against `x`: 'step' or 'modelled_s'), the target as a dashed
    line, a star where each spec first reaches it (specs that never do are named in the legend)."""
    if x not in RACE_AXES:
        raise ValueError(f"x={x!r}; allowed: {', '.join(RACE_AXES)}")
    fig = go.Figure()
    arr = {r["spec"]: r for r in arrivals.to_dict(orient="records")}
    colors = {}
    for i, (spec, part) in enumerate(curves.groupby("spec", sort=False)):
        a = arr.get(spec, {})
        never = a and a.get("seeds") and not math.isfinite(a.get("arrival_step", math.nan))
        name = f"{spec} (never reaches it)" if never else str(spec)
        tr = go.Scatter(x=part[x], y=part["val_loss"], mode="lines", name=name, legendgroup=str(spec),
                        hovertemplate=f"{spec}: loss %{{y:.4g}} at %{{x:.4g}}<extra></extra>")
        fig.add_trace(tr)
        colors[spec] = i
    # a bool mask even when there are no arrivals yet (a live race): an empty object-dtype one selects columns
    hits = arrivals[arrivals["arrival_step"].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v))
                    .astype(bool)]
    hits = hits[hits["spec"].isin(colors)]
    if len(hits):
        xs = hits["arrival_step"] if x == "step" else hits["arrival_modelled_s"]
        text = [f"{s}: step {int(k)}, {seconds_label(float(f'{1e6 * t:.3g}')) if math.isfinite(t) else 'not priced'}"
                for s, k, t in zip(hits["spec"], hits["arrival_step"], hits["arrival_modelled_s"])]
        fig.add_trace(go.Scatter(x=xs, y=hits["arrival_val_loss"], mode="markers", name="reaches the target",
                                 marker={"symbol": "star", "size": 12, "color": "black"}, text=text,
                                 hovertemplate="%{text}<extra></extra>"))
    if math.isfinite(target) and target > 0:
        fig.add_hline(y=target, line={"dash": "dash", "color": "red"})
        # on a log axis a shape takes the value, an annotation its log10
        fig.add_annotation(x=1, xref="paper", y=math.log10(target) if log_y else target, yref="y",
                           text=f"target {target:.4g}", showarrow=False, xanchor="right", yanchor="bottom")
    fig.update_xaxes(title_text=RACE_AXES[x], exponentformat="none")
    fig.update_yaxes(title_text="validation loss (cross-entropy" + (", log scale)" if log_y else ")"),
                     type="log" if log_y else "linear")
    fig.update_layout(legend_title="codec spec", margin={"t": 30})
    return fig


__all__ = ["RACE_AXES", "race_figure"]
