"""Notebook helper: redraw a plotly FigureWidget in place from a figure built here (no new output cell)."""
from __future__ import annotations

import plotly.graph_objects as go


def refresh(fw: go.FigureWidget, fig: go.Figure) -> None:
    """Put `fig`'s traces and layout into the FigureWidget `fw` in one batched update."""
    with fw.batch_update():
        fw.data = []
        fw.add_traces(list(fig.data))
        fw.layout = fig.layout
