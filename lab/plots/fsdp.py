"""Sharded-training figures (ZeRO-3 / FSDP2, ZeRO++): bytes per step per collective, one bar per run."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

COLLECTIVE_LABELS = {"all_gather_forward": "all-gather (forward)", "all_gather_backward": "all-gather (backward)",
                     "reduce_scatter": "reduce-scatter (gradients)", "all_reduce": "all-reduce (DDP)"}


def fsdp_run_bytes_figure(collectives: pd.DataFrame, column: str = "bytes_per_step") -> go.Figure:
    """Bytes per training step on each collective (MB = 1e6 bytes), all ranks, one bar group per run
    (`lab.experiments.fsdp_training`'s collectives table); column: bytes_per_step or cross_node_per_step."""
    if column not in ("bytes_per_step", "cross_node_per_step"):
        raise ValueError(f"column={column!r}; allowed: bytes_per_step, cross_node_per_step")
    fig = go.Figure()
    for variant, part in collectives.groupby("variant", sort=False):
        fig.add_trace(go.Bar(x=[COLLECTIVE_LABELS.get(c, c) for c in part["collective"]], y=part[column] / 1e6,
                             name=str(variant)))
    what = "crossing nodes" if column == "cross_node_per_step" else "sent"
    fig.update_layout(barmode="group", yaxis_title=f"MB {what} per step, all ranks", legend_title="run",
                      margin={"t": 30})
    fig.update_yaxes(exponentformat="none")
    return fig


__all__ = ["fsdp_run_bytes_figure", "COLLECTIVE_LABELS"]
