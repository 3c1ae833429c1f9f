"""The Operators page's figure (Ben-Nun & Hoefler 2018, the convolution table): the multiplications each method
performs on one layer beside the survey's work W, and the average parallelism W/D as the input channels double,
against the threads the device runs at once."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def operators_figure(wd: pd.DataFrame, growth: pd.DataFrame, threads: int) -> go.Figure:
    """Left: per method of `wd` (columns label, work, multiplications), the survey's W and the multiplications
    performed here (log scale). Right: direct convolution's W/D against C_in from `growth` (columns c_in,
    parallelism), with `threads` as a horizontal line: where W/D is above it, the layer alone can fill the device."""
    ok = wd.dropna(subset=["work"])
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("Work per method, this layer", "Average parallelism W/D as C_in doubles"))
    fig.add_trace(go.Bar(x=ok["label"], y=ok["work"], name="the survey's W", marker_color="#7f7f7f",
                         hovertemplate="%{x}: W = %{y:.3g}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=ok["label"], y=ok["multiplications"], name="multiplications here",
                         marker_color="#1f77b4", hovertemplate="%{x}: %{y:.3g} multiplications<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=growth["c_in"], y=growth["parallelism"], mode="lines+markers", name="direct: W/D",
                             line={"color": "#d62728"},
                             hovertemplate="C_in %{x}: W/D = %{y:.3g}<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Scatter(x=[growth["c_in"].min(), growth["c_in"].max()], y=[threads, threads], mode="lines",
                             name=f"threads at once here ({threads:,})", line={"color": "black", "dash": "dash"},
                             hoverinfo="skip"), row=1, col=2)
    fig.update_yaxes(type="log", title_text="operations", row=1, col=1)
    fig.update_yaxes(type="log", title_text="W / D", row=1, col=2)
    fig.update_xaxes(type="log", title_text="input channels C_in", tickvals=list(growth["c_in"]), row=1, col=2)
    fig.update_layout(barmode="group", height=380, margin={"t": 60})
    return fig
