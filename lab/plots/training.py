"""Training figures (Dettmers 2016 §3.4): curves against updates/epochs/bytes/time, the reproduction CIs."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


TRAIN_AXES = {"step": "updates", "epoch": "epochs", "bytes": "bytes sent (all workers)",
              "time_s": "modelled wall-clock time (s)", "wall_s": "measured wall-clock time (s)"}


def training_curve_figure(curves: pd.DataFrame, x: str = "epoch", y: str = "test_error") -> go.Figure:
    """Test error (or train loss) per variant against updates, epochs, bytes or modelled time."""
    if x not in TRAIN_AXES:
        raise ValueError(f"x={x!r}; allowed: {', '.join(TRAIN_AXES)}")
    ylabel = {"test_error": "test error (%)", "train_loss": "training loss", "test_loss": "test loss"}.get(y, y)
    fig = go.Figure()
    for name, part in curves.groupby("variant", sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=str(name)))
    fig.update_layout(xaxis_title=TRAIN_AXES[x], yaxis_title=ylabel, legend_title="run", margin={"t": 30})
    return fig


def reproduction_figure(summary: pd.DataFrame) -> go.Figure:
    """Mean final test error per type with its 99% confidence interval (Dettmers 2016 §3.4)."""
    err_hi = (summary["ci99_high"] - summary["mean_test_error"]).fillna(0)
    err_lo = (summary["mean_test_error"] - summary["ci99_low"]).fillna(0)
    fig = go.Figure(go.Bar(x=summary["type"], y=summary["mean_test_error"],
                           error_y={"type": "data", "array": err_hi, "arrayminus": err_lo}))
    fig.update_layout(xaxis_title="data type on the wire", yaxis_title="final test error (%), 99% CI",
                      margin={"t": 30})
    return fig


# --- dropout ---
