"""The kernels' roofline (lab.experiments.kernel_report.kernel_card_frame): instructions issued per ns against
instructions per DRAM byte, the GPU's two roofs (HBM bandwidth x intensity, the issue rate) and each kernel at its
predicted place (Williams, Waterman and Patterson 2009; instructions for flops as in Ding and Williams 2019)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

FAMILY_SYMBOLS = {"encoder": "circle", "decoder": "square", "fused hop": "diamond", "decode_sum": "triangle-up"}


def roofline_figure(frame: pd.DataFrame, gpu: dict, highlight: str | None = None) -> go.Figure:
    """Log-log roofline of `gpu` ({name, hbm_GBps, issue_per_ns, balance_instructions_per_byte}): the memory roof
    (intensity x GB/s), the issue roof (instructions per ns) meeting at the ridge, and one marker per kernel of
    `frame` at (instructions per byte, instructions per ns it is predicted to sustain), by family; `highlight`
    circles one kernel."""
    fig = go.Figure()
    x = frame["instructions_per_byte"]
    lo, hi = min(x.min(), gpu["balance_instructions_per_byte"]) / 3, max(x.max(), gpu["balance_instructions_per_byte"]) * 3
    xs = np.geomspace(lo, hi, 64)
    roof = np.minimum(xs * gpu["hbm_GBps"], gpu["issue_per_ns"])
    fig.add_trace(go.Scatter(x=xs, y=roof, mode="lines", name=f"{gpu['name']} roofs", line={"color": "black"},
                             hovertemplate="%{x:.3g} instructions/byte: at most %{y:.4g} instructions/ns"
                                           "<extra></extra>"))
    for family, part in frame.groupby("family", sort=False):
        y = part["instructions_per_value"] / (part["predicted_ps"] / 1000)
        fig.add_trace(go.Scatter(
            x=part["instructions_per_byte"], y=y, mode="markers", name=family,
            marker={"symbol": FAMILY_SYMBOLS.get(family, "circle"), "size": 10},
            customdata=np.stack([part["kernel"], part["bound"], part["predicted_ps"]], axis=-1),
            hovertemplate="%{customdata[0]}: %{x:.3g} instructions/byte, %{customdata[1]} bound, "
                          "%{customdata[2]:.3g} ps/value<extra></extra>"))
    if highlight is not None and (frame["kernel"] == highlight).any():
        r = frame.loc[frame["kernel"] == highlight].iloc[0]
        fig.add_trace(go.Scatter(x=[r["instructions_per_byte"]],
                                 y=[r["instructions_per_value"] / (r["predicted_ps"] / 1000)], mode="markers",
                                 name=highlight, marker={"symbol": "circle-open", "size": 22, "color": "red",
                                                         "line": {"width": 3}}, hoverinfo="skip"))
    ridge = gpu["balance_instructions_per_byte"]
    fig.add_vline(x=ridge, line_dash="dot", line_color="gray")
    fig.add_annotation(x=np.log10(ridge), y=np.log10(gpu["issue_per_ns"]), text=f"ridge {ridge:.1f}/byte",
                       showarrow=False, yshift=12, xanchor="right")
    fig.update_xaxes(type="log", title_text="SASS instructions per DRAM byte")
    fig.update_yaxes(type="log", title_text="instructions issued per ns")
    fig.update_layout(title=f"{gpu['name']}: each kernel under the memory and issue roofs", legend_title="kernel",
                      margin={"t": 50})
    return fig


__all__ = ["FAMILY_SYMBOLS", "roofline_figure"]
