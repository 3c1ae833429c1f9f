"""Transfer and collective figures (Dettmers 2016 Figure 2; Ben-Nun & Hoefler 2018): time and busbw, model
vs measured, the step-by-step trace, error at scale."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down")


def count_ticks(lo: float, hi: float) -> dict:
    """Explicit log-axis ticks for a count of values: powers of ten written out ('1,000', '1 million'),
    no SI prefixes; a dict for `update_xaxes`."""
    import math

    vals = [10.0 ** e for e in range(max(0, math.floor(math.log10(max(lo, 1)))), math.ceil(math.log10(max(hi, 1))) + 1)]

    def name(v: float) -> str:
        return f"{v / 1e6:g} million" if v >= 1e6 else f"{v:,.0f}"
    return {"tickvals": vals, "ticktext": [name(v) for v in vals]}


def ratio_ticks(lo: float, hi: float) -> dict:
    """Explicit log-axis ticks for a ratio (0.1x ... 20x)."""
    cand = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500]
    vals = [v for v in cand if lo / 1.5 <= v <= hi * 1.5] or [1]
    return {"tickvals": vals, "ticktext": [f"{v:g}x" for v in vals]}


def transfer_figure(df: pd.DataFrame, y: str = "seconds") -> go.Figure:
    """Dettmers 2016 Figure 2: one-way time (or speedup over 32-bit) against message size per codec;
    rows of `transfer_model` (source 'model') and/or `transfer_sweep` (measured). Each codec has its
    own dash and marker, so codecs whose curves coincide (dynamic tree and linear: same bytes, same
    kernels) both stay visible; measured curves are drawn thicker."""
    import math

    if y not in ("seconds", "speedup_vs_fp32"):
        raise ValueError(f"y={y!r}; allowed: seconds, speedup_vs_fp32")
    fig = go.Figure()
    src = df["source"] if "source" in df else pd.Series("measured", index=df.index)
    codecs = list(dict.fromkeys(df["codec"]))
    for (s, codec), part in df.assign(source=src).groupby(["source", "codec"], sort=False):
        if y == "speedup_vs_fp32" and codec == "fp32":
            continue  # the 32-bit line is the dotted 1x line
        i = codecs.index(codec)
        yy = part[y] * (1e3 if y == "seconds" else 1)
        width = max(1.5, 7.0 - 2.0 * (i % 4)) + (1.0 if s != "model" else 0.0)  # earlier traces wider: both show
        fig.add_trace(go.Scatter(x=part["n_values"], y=yy, mode="lines+markers", name=f"{codec} ({s})",
                                 line={"dash": DASHES[i % len(DASHES)], "width": width},
                                 marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": width + 5},
                                 opacity=0.9 if s == "model" else 1.0))
    if y == "speedup_vs_fp32":
        fig.add_hline(y=1.0, line_dash="dot", line_color="black")
        # on a log axis an annotation's y is log10 of the value: 0 is the 1x line
        fig.add_annotation(x=1.0, xref="paper", xanchor="right", y=0.0, yref="y", yanchor="top", text="32-bit (1x)",
                           showarrow=False)
    fig.update_layout(xaxis_title="message size (float32 values)", xaxis_type="log",
                      yaxis_title="one-way time (ms)" if y == "seconds" else "speedup over 32-bit",
                      yaxis_type="log", legend_title="codec (source)", margin={"t": 30})
    if len(df):
        fig.update_xaxes(**count_ticks(df["n_values"].min(), df["n_values"].max()))
        vals = (df[y] * (1e3 if y == "seconds" else 1)).replace([math.inf], math.nan).dropna()
        vals = vals[vals > 0]
        if len(vals) and y == "speedup_vs_fp32":
            fig.update_yaxes(**ratio_ticks(float(vals.min()), float(vals.max())))
        elif len(vals):
            lo, hi = math.floor(math.log10(vals.min())), math.ceil(math.log10(vals.max()))
            tv = [10.0 ** e for e in range(lo, hi + 1)]
            fig.update_yaxes(tickvals=tv, ticktext=[f"{v:g}" for v in tv])
    return fig


def collective_time_figure(model: pd.DataFrame, measured: pd.DataFrame | None = None) -> go.Figure:
    """Allreduce time against message size per algorithm: the model (dashed), the lower bound
    (black), and measured times (solid) when given (`collective_model`, `collective_sweep`)."""
    fig = go.Figure()
    for a, part in model.groupby("algorithm", sort=False):
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part["model_s"] * 1e6, mode="lines", line_dash="dash",
                                 name=f"{a} (model)"))
    lb = model.drop_duplicates("nbytes")
    fig.add_trace(go.Scatter(x=lb["nbytes"], y=lb["lower_bound_s"] * 1e6, mode="lines", name="lower bound",
                             line={"color": "black", "width": 3}))
    if measured is not None and len(measured):
        ycol = "time_us" if "time_us" in measured else None
        for a, part in measured.groupby("algorithm", sort=False):
            y = part[ycol] if ycol else part["seconds"] * 1e6
            fig.add_trace(go.Scatter(x=part["nbytes"], y=y, mode="lines+markers", name=f"{a} (measured)"))
    fig.update_layout(xaxis_title="message size per rank (bytes)", yaxis_title="allreduce time (µs)",
                      xaxis_type="log", yaxis_type="log", legend_title="algorithm", margin={"t": 30})
    return fig


def busbw_figure(model: pd.DataFrame, measured: pd.DataFrame | None = None) -> go.Figure:
    """nccl-tests bus bandwidth against message size: model per algorithm and the lower bound's."""
    fig = go.Figure()
    for a, part in model.groupby("algorithm", sort=False):
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part["busbw_GBps"], mode="lines", line_dash="dash",
                                 name=f"{a} (model)"))
    lb = model.drop_duplicates("nbytes")
    fig.add_trace(go.Scatter(x=lb["nbytes"], y=lb["bound_busbw_GBps"], mode="lines", name="lower bound",
                             line={"color": "black", "width": 3}))
    if measured is not None and len(measured) and "busbw_GBps" in measured:
        for a, part in measured.groupby("algorithm", sort=False):
            fig.add_trace(go.Scatter(x=part["nbytes"], y=part["busbw_GBps"], mode="lines+markers",
                                     name=f"{a} (measured)"))
    fig.update_layout(xaxis_title="message size per rank (bytes)", yaxis_title="bus bandwidth (GB/s)",
                      xaxis_type="log", legend_title="algorithm", margin={"t": 30})
    return fig


def allreduce_trace_figure(trace: pd.DataFrame, upto: int | None = None) -> go.Figure:
    """Space-time diagram of one allreduce (`allreduce_trace`): ranks down, rounds across, one arrow
    per message; messages after round `upto` are greyed out."""
    fig = go.Figure()
    P = int(max(trace["src"].max(), trace["dst"].max())) + 1 if len(trace) else 1
    for s, part in trace.groupby("step"):
        active = upto is None or s <= upto
        xs, ys = [], []
        for _, r in part.iterrows():
            xs += [s, s + 1, None]
            ys += [r["src"], r["dst"], None]
        kb = part["bytes"].sum() / 1e3
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"round {s}: {len(part)} msgs, {kb:.3g} kB",
                                 opacity=1.0 if active else 0.15, marker={"symbol": "arrow", "angleref": "previous",
                                                                          "size": 10}))
    fig.update_yaxes(autorange="reversed", tickvals=list(range(P)), title_text="rank")
    fig.update_layout(xaxis_title="round (send → receive)", legend_title="messages", margin={"t": 30})
    return fig


def error_at_scale_figure(df: pd.DataFrame) -> go.Figure:
    """Relative L2 error of a compressed allreduce against the exact sum as P grows (`error_at_scale`)."""
    fig = go.Figure()
    for (codec, a), part in df.groupby(["codec", "algorithm"], sort=False):
        fig.add_trace(go.Scatter(x=part["P"], y=part["rel_error"], mode="lines+markers", name=f"{codec}, {a}"))
    fig.update_layout(xaxis_title="ranks P", yaxis_title="relative L2 error of the sum", xaxis_type="log",
                      yaxis_type="log", legend_title="codec, algorithm", margin={"t": 30})
    return fig
