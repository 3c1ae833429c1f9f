"""Training figures (Dettmers 2016 §3.4): curves against updates/epochs/bytes/time, the reproduction CIs."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


TRAIN_AXES = {"step": "updates", "epoch": "epochs", "bytes": "bytes sent, all workers (MB)",
              "time_s": "modelled wall-clock time (s)", "wall_s": "measured wall-clock time (s)"}
TRAIN_Y = {"test_error": "test error (%)", "train_loss": "training loss (cross-entropy)",
           "test_loss": "test loss (cross-entropy)"}


def training_curve_figure(curves: pd.DataFrame, x: str = "epoch", y: str = "test_error") -> go.Figure:
    """Test error (or train loss) per variant against updates, epochs, bytes (drawn in MB = 1e6 bytes) or
    modelled time (Dettmers 2016 §3.4's curves; one line per run)."""
    if x not in TRAIN_AXES:
        raise ValueError(f"x={x!r}; allowed: {', '.join(TRAIN_AXES)}")
    fig = go.Figure()
    for name, part in curves.groupby("variant", sort=False):
        xs = part[x] / 1e6 if x == "bytes" else part[x]
        fig.add_trace(go.Scatter(x=xs, y=part[y], mode="lines+markers", name=str(name)))
    fig.update_xaxes(title_text=TRAIN_AXES[x], exponentformat="none")
    fig.update_yaxes(title_text=TRAIN_Y.get(y, y), exponentformat="none")
    fig.update_layout(legend_title="run", margin={"t": 30})
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
