"""Training curves on a Train section (Dettmers 2016 §3.4's curves): the x/y axis pickers, the figure for the
chosen axes, and the live drawer of a running job's curves so far. Used by app/views/training.py and its
sharded view (app/views/_fsdp_training.py)."""
from __future__ import annotations

from typing import Callable, NamedTuple

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import _common as ui
from lab import plots


class Curves(NamedTuple):
    """The curve columns picked on screen: `figure(points)` draws them, `draw(job)` draws a running job's."""
    x: str
    y: str
    figure: Callable[[pd.DataFrame], go.Figure]
    draw: Callable[[object], None]


def pick(x: dict[str, str], y: dict[str, str], keys: tuple[str, str], y_default: str, live: str,
         live_key: str) -> Curves:
    """The "x axis" / "y axis" pickers (labels of `x` / `y` -> curve columns; widget keys `keys`; x starts at
    epochs) and what draws the chosen curves; the live figure is `live`, keyed `live_key`_<points so far>."""
    x1, x2, _ = st.columns([1, 1, 2])
    xname = ui.select("x axis", list(x), keys[0], "epochs", where=x1, help="what the curves are drawn against")
    yname = ui.select("y axis", list(y), keys[1], y_default, where=x2, help="what the curves show")
    xc, yc = x[xname], y[yname]

    def figure(points: pd.DataFrame) -> go.Figure:
        return plots.training_curve_figure(points, xc, yc)

    def draw(job) -> None:
        points = pd.DataFrame(job.curve())
        if len(points):
            ui.figure(figure(points), None, live, key=f"{live_key}_{len(points)}")

    return Curves(xc, yc, figure, draw)
