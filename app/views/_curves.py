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


def settled(job, waiting: str, x: dict[str, str], y: dict[str, str], prefix: str) -> tuple[object, Curves] | None:
    """A Train section's run until it is done: `waiting` before any, its error when it failed, its curves live
    while it runs and the curves so far when it was stopped (None in those cases); once done, (its result, the
    curves picked with keys `prefix`_x / `prefix`_y)."""
    if job is None:
        st.info(waiting)
        return None
    if job.state == "failed":
        st.error(job.error)
        return None
    curves = pick(x, y, (f"{prefix}_x", f"{prefix}_y"), "training loss", f"{prefix}_live", f"{prefix}_live")
    if job.running:
        import _runs as jobs

        jobs.watch(f"{prefix}_run", curves.draw)
        return None
    if job.state != "done":
        points = pd.DataFrame(job.curve())
        if len(points):
            st.warning(f"Stopped: the curves end where each run was ({len(points)} evaluations).")
            ui.figure(curves.figure(points), points, f"{prefix}_curves")
        return None
    return job.result, curves
