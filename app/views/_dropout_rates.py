"""The Dropout page's dropout rates per hidden layer (Song et al. 2019 §IV-A, Fig. 4: "two hidden layers may have
varied dropout rate"): one p for both layers, a rate per layer, or Fig. 4's sweep (0.3,0.3)…(0.7,0.7); and the
sweep's view (speedup and accuracy against the rate pair, the takeaway from its numbers)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import _common as ui
from lab.experiments import DEFAULT_RATES, KIND_LABELS
from lab.plots.dropout import DROPOUT_LABELS

MODES = ["one p for both layers", "a rate per layer", "Fig. 4 sweep"]
COLOURS = {"bernoulli": "#1f77b4", "row": "#ff7f0e", "tile": "#2ca02c"}  # one colour per pattern, both panels
SWEEP_WORDS = ", ".join(f"({a:g},{b:g})" for a, b in DEFAULT_RATES)
# §IV-A's text (the figure's bars are not in the extracted text): speedups and the largest accuracy loss
PAPER_FIG4 = "RDP 1.2–1.8x, TDP 1.18–1.6x, accuracy within 0.47 points of conventional dropout"
SWEEP_COLUMNS = {
    "rates": ("Dropout rates",), "pattern": ("Pattern",),
    "test_acc": ("Test accuracy", "%", "", 1.0, "%.2f"),
    "acc_change": ("Accuracy change", "points", "against conventional dropout at the same rates", 1.0, "%+.2f"),
    "test_ppl": ("Test perplexity", "", "", 1.0, "%.1f"),
    "epoch_s": ("Epoch", "s", "median training-step time of an epoch", 1.0, "%.3g"),
    "speedup": ("Speedup vs conventional", "x", "at the same rates", 1.0, "%.2f"),
    "paper_acc": ("Paper's accuracy", "%"), "paper_speedup": ("Paper's speedup", "x"),
}


def controls(p: float, where_mode, where_p2) -> tuple[str, float]:
    """The rate-mode radio and, for "a rate per layer", hidden layer 2's rate (layer 1 takes p)."""
    mode = ui.radio("Rates per hidden layer", MODES, "rate_mode", MODES[0], where=where_mode,
                    help=f"one p for both layers; a rate per layer (layer 1 takes p, layer 2 its own); or Fig. 4's "
                         f"sweep, training every pattern at {SWEEP_WORDS} (three times the runs)")
    p2 = p
    if mode == MODES[1]:
        p2 = float(ui.slider("Layer 2 rate", "p2", p, 0.0, 0.95, where=where_p2, step=0.05,
                             help="hidden layer 2's dropout rate, 0–0.95 (hidden layer 1 takes p)"))
    return mode, p2


def rates(mode: str, p: float, p2: float) -> list[tuple[float, float]]:
    """The rate pairs the training runs."""
    if mode == MODES[2]:
        return [tuple(r) for r in DEFAULT_RATES]
    return [(p, p2 if mode == MODES[1] else p)]


def sweep_figure(t: pd.DataFrame, metric: str) -> go.Figure:
    """Speedup (left) and `metric` (right: test accuracy, %) per rate pair, a bar per pattern; the paper's numbers as
    markers where it has them (the LSTM's Table II)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["speedup vs conventional (x)", "test accuracy (%)"])
    for kind, part in t.groupby("kind", sort=False):
        name = DROPOUT_LABELS.get(kind, kind)
        if kind != "bernoulli":
            fig.add_trace(go.Bar(x=part.rates, y=part.speedup, name=name, legendgroup=kind, showlegend=False,
                                 marker_color=COLOURS.get(kind), text=[f"{v:.2f}" for v in part.speedup],
                                 textposition="outside"), row=1, col=1)
        fig.add_trace(go.Bar(x=part.rates, y=part[metric], name=name, legendgroup=kind, marker_color=COLOURS.get(kind),
                             text=[f"{v:.1f}" for v in part[metric]], textposition="outside"), row=1, col=2)
        if "paper_acc" in part and part.paper_acc.notna().any():
            fig.add_trace(go.Scatter(x=part.rates, y=part.paper_acc, mode="markers", name=f"paper: {name}",
                                     marker={"symbol": "diamond-open", "size": 11, "color": COLOURS.get(kind)}),
                          row=1, col=2)
    fig.add_hline(y=1.0, line_dash="dot", row=1, col=1)
    lo = float(t[metric].min())
    fig.update_yaxes(range=[max(0.0, lo - 10), 100], row=1, col=2)
    fig.update_xaxes(title_text="rates (layer 1, layer 2)")
    fig.update_layout(barmode="group", height=380, margin={"t": 40})
    return fig


def sweep_view(t: pd.DataFrame, curves: pd.DataFrame, is_mlp: bool) -> str:
    """The Fig. 4 sweep's figure and table; returns its takeaway."""
    st.markdown("**Fig. 4: accuracy and speedup across the rate pairs** (every pattern at every pair):")
    ui.paper_callout(_paper_text(t, is_mlp), "dropout-fig4")
    ui.figure(sweep_figure(t, "test_acc"), t, "dropout_rate_sweep")
    with st.expander("Table of the runs"):
        shown = ["rates", "pattern", "test_acc", "acc_change", "speedup", "epoch_s"] + (
            [] if is_mlp else ["test_ppl", "paper_acc", "paper_speedup"])
        ui.people_table(t, "dropout_sweep_runs", SWEEP_COLUMNS, shown)
    return takeaway(t)


def _paper_text(t: pd.DataFrame, is_mlp: bool) -> str:
    if is_mlp:
        return (f"§IV-A sweeps a 784-2048-2048-10 MLP on MNIST from (0.3,0.3) to (0.7,0.7): {PAPER_FIG4}. Here the "
                f"MLP is {t.hidden.iloc[0]} on {t.dataset.iloc[0]}, on this CPU.")
    return ("Table II (2-layer LSTM, 1500 units, PTB-like text): RDP 1.18x → 1.53x and TDP 1.18x → 1.49x from "
            "(0.3,0.3) to (0.7,0.7), accuracy within 1.4 points (the diamonds). Here the corpus is "
            f"{t.corpus.iloc[0]}, smaller and shorter.")


def takeaway(t: pd.DataFrame) -> str:
    """How speedup and accuracy change move across the rate pairs, per pattern, from the runs' numbers."""
    parts = []
    for kind, part in t[t.kind != "bernoulli"].groupby("kind", sort=False):
        a, b = part.iloc[0], part.iloc[-1]
        parts.append(f"{KIND_LABELS.get(kind, kind)} runs {a.speedup:.2f}x at {a.rates} and {b.speedup:.2f}x at "
                     f"{b.rates}, accuracy {a.acc_change:+.1f} → {b.acc_change:+.1f} points against conventional")
    if not parts:
        return "Add RDP or TDP to compare them with conventional dropout across the rates."
    grows = all(p.speedup.iloc[-1] > p.speedup.iloc[0] for _, p in t[t.kind != "bernoulli"].groupby("kind"))
    return ("; ".join(parts) + (": the higher the rate, the more the GEMMs shrink and the faster a step, as in the "
                                "paper" if grows else ": the speedup does not grow with the rate in this run (the "
                                "epochs' timing noise on a shared CPU can hide it)") + f" (paper: {PAPER_FIG4}).")
