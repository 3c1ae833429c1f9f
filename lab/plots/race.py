"""The race to the target: validation loss of every codec spec against steps or modelled
time on a cluster, fp32's target as a horizontal line, each spec's arrival marked. From
`lab.experiments.race(...)`'s curves and arrivals. The legend sits below the plot (one row per
line at most what the width holds), so a narrow window keeps the plot's width."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from .units import seconds_label

RACE_AXES = {"step": "training steps", "modelled_s": "modelled time (s)"}
PALETTE = 10  # the theme's categorical colours (the #0000NN placeholders app/chart.js and Streamlit fill in)
DASHES = ("solid", "dash", "dot")  # past PALETTE lines the colours repeat with another dash
HEIGHT = 420  # px of the plot and its axes; the legend below adds LEGEND_ROW_PX per row
LEGEND_ROW_PX = 28
LEGEND_ROW_CHARS = 48  # legend text per row at the narrowest width the page is read at (about 450 px of figure)


def _style(i: int) -> dict:
    return {"color": f"#{i % PALETTE + 1:06d}", "dash": DASHES[(i // PALETTE) % len(DASHES)]}


def _names(curves: pd.DataFrame, arrivals: pd.DataFrame) -> dict[str, tuple[str, dict]]:
    """spec -> (its legend name, its line style), in the curves' order."""
    arr = {r["spec"]: r for r in arrivals.to_dict(orient="records")}
    out = {}
    for i, spec in enumerate(dict.fromkeys(curves["spec"])):
        a = arr.get(spec, {})
        never = a and a.get("seeds") and not math.isfinite(a.get("arrival_step", math.nan))
        out[spec] = (f"{spec} (never)" if never else str(spec), _style(i))
    return out


def _hits(arrivals: pd.DataFrame, shown) -> pd.DataFrame:
    # a bool mask even when there are no arrivals yet (a live race): an empty object-dtype one selects columns
    hits = arrivals[arrivals["arrival_step"].map(lambda v: isinstance(v, (int, float)) and math.isfinite(v))
                    .astype(bool)]
    return hits[hits["spec"].isin(shown)]


def _draw(fig: go.Figure, curves: pd.DataFrame, arrivals: pd.DataFrame, target: float, x: str, log_y: bool,
          first: bool, **where) -> None:
    """One view's lines, arrival stars and target line into `fig` (`where`: row/col of a subplot); the legend
    entries only where `first`."""
    names = _names(curves, arrivals)
    for spec, part in curves.groupby("spec", sort=False):
        name, line = names[spec]
        fig.add_trace(go.Scatter(x=part[x], y=part["val_loss"], mode="lines", name=name, legendgroup=str(spec),
                                 showlegend=first, line=line,
                                 hovertemplate=f"{spec}: loss %{{y:.4g}} at %{{x:.4g}}<extra></extra>"), **where)
    hits = _hits(arrivals, names)
    if len(hits):
        xs = hits["arrival_step"] if x == "step" else hits["arrival_modelled_s"]
        text = [f"{s}: step {int(k)}, {seconds_label(float(f'{1e6 * t:.3g}')) if math.isfinite(t) else 'not priced'}"
                for s, k, t in zip(hits["spec"], hits["arrival_step"], hits["arrival_modelled_s"])]
        fig.add_trace(go.Scatter(x=xs, y=hits["arrival_val_loss"], mode="markers", name="reaches the target",
                                 legendgroup="reaches", showlegend=first,
                                 marker={"symbol": "star", "size": 12, "color": "black"}, text=text,
                                 hovertemplate="%{text}<extra></extra>"), **where)
    if math.isfinite(target) and target > 0:
        fig.add_hline(y=target, line={"dash": "dash", "color": "red"}, **where)


def _legend_below(fig: go.Figure, names: list[str]) -> None:
    """The legend in rows below the plot, the figure taller by the rows the narrowest reading width needs."""
    rows = 1
    used = 0
    for n in names:
        w = len(n) + 6  # the line sample and the gap
        if used and used + w > LEGEND_ROW_CHARS:
            rows, used = rows + 1, 0
        used += w
    fig.update_layout(height=HEIGHT + LEGEND_ROW_PX * rows,
                      legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                              "xanchor": "left", "title": {"text": "codec spec", "side": "top"}})


def _target_label(fig: go.Figure, target: float, log_y: bool, xref: str = "x domain", yref: str = "y") -> None:
    if math.isfinite(target) and target > 0:  # on a log axis an annotation takes the value's log10
        fig.add_annotation(x=1, xref=xref, y=math.log10(target) if log_y else target, yref=yref,
                           text=f"target {target:.4g}", showarrow=False, xanchor="right", yanchor="bottom")


def race_figure(curves: pd.DataFrame, arrivals: pd.DataFrame, target: float, x: str = "step",
                log_y: bool = True) -> go.Figure:
    """One line per spec (validation loss against `x`: 'step' or 'modelled_s'), the target as a dashed
    line, a star where each spec first reaches it (specs that never do are named in the legend, below)."""
    if x not in RACE_AXES:
        raise ValueError(f"x={x!r}; allowed: {', '.join(RACE_AXES)}")
    fig = go.Figure()
    _draw(fig, curves, arrivals, target, x, log_y, True)
    _target_label(fig, target, log_y)
    fig.update_xaxes(title_text=RACE_AXES[x], exponentformat="none")
    fig.update_yaxes(title_text="validation loss" + (" (log scale)" if log_y else ""),
                     type="log" if log_y else "linear")
    fig.update_layout(margin={"t": 30})
    _legend_below(fig, [t.name for t in fig.data if t.showlegend is not False])
    return fig


def race_pair_figure(curves: pd.DataFrame, arrivals: pd.DataFrame, target: float, log_y: bool = True) -> go.Figure:
    """The race's two views side by side, one shared loss axis and one legend below both: against training steps
    (what compression costs in accuracy) and against modelled time on the cluster (what it is worth)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("against training steps", "against modelled time"))
    for col, x in ((1, "step"), (2, "modelled_s")):
        _draw(fig, curves, arrivals, target, x, log_y, col == 1, row=1, col=col)
        fig.update_xaxes(title_text=RACE_AXES[x], exponentformat="none", row=1, col=col)
    _target_label(fig, target, log_y, "x2 domain", "y2")
    fig.update_yaxes(title_text="validation loss" + (" (log scale)" if log_y else ""),
                     type="log" if log_y else "linear", row=1, col=1)
    fig.update_yaxes(type="log" if log_y else "linear", row=1, col=2)
    fig.update_layout(margin={"t": 40})
    _legend_below(fig, [t.name for t in fig.data if t.showlegend is not False])
    return fig


__all__ = ["RACE_AXES", "race_figure", "race_pair_figure"]
