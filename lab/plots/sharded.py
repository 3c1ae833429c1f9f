"""What does FSDP send? Bytes per collective per step, across nodes and inside a node, from
`lab.experiments.fsdp_traffic` (or the per-collective fields of a `paralab pays --strategy fsdp` row)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

LABELS = {"forward_all_gather": "forward all-gather", "backward_all_gather": "backward all-gather",
          "reduce_scatter": "reduce-scatter"}


def fsdp_bytes_figure(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Grouped bars: MB leaving one node and MB a node's GPUs send each other, per collective of one step
    (the 'step' row left out), each bar's hover with its milliseconds and where it ran."""
    rows = df[df["collective"] != "step"]
    names = [LABELS.get(c, c) for c in rows["collective"]]
    fig = go.Figure()
    for col, label, color in (("cross_node_MB", "across nodes (per node)", "#d62728"),
                              ("intra_node_MB", "inside a node (per node)", "#1f77b4")):
        fig.add_trace(go.Bar(x=names, y=rows[col], name=label, marker_color=color,
                             customdata=list(zip(rows["ms"], rows["where"], rows["codec"])),
                             hovertemplate="%{x}: %{y:.4g} MB " + label + "<br>%{customdata[0]:.3g} ms, "
                                           "%{customdata[1]}, %{customdata[2]}<extra></extra>"))
    fig.update_layout(barmode="group", yaxis_title="MB per step", height=360, margin={"t": 50, "b": 40},
                      title=title or "What one FSDP step sends, per collective", legend={"orientation": "h"})
    return fig


def fsdp_row_frame(row: dict) -> pd.DataFrame:
    """A `paralab pays --strategy fsdp` row's per-collective fields as an `fsdp_traffic`-shaped table."""
    return pd.DataFrame([{"collective": k, "cross_node_MB": row[f"{k}_cross_node_MB"],
                          "intra_node_MB": row[f"{k}_intra_node_MB"], "ms": row[f"{k}_ms"],
                          "where": row[f"{k}_where"], "codec": row.get("grads_codec" if k == "reduce_scatter"
                                                                       else "weights_codec", "")}
                         for k in LABELS])
