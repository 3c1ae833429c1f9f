"""Transfer and collective figures (Dettmers 2016 Figure 2; Ben-Nun & Hoefler 2018): time and busbw, model
vs measured, the step-by-step trace, error at scale."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from lab.plots.units import bytes_label, seconds_label


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# one colour per codec (plotly's default sequence), shared by its measured and modelled lines
CODEC_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
                "#fecb52")
FP32_COLOR = "#444444"
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
    rows of `transfer_model` (source 'model') and/or `transfer_sweep` (measured). Each codec has one
    colour and one marker for both sources; measured lines are solid and thicker, model lines dashed with a
    dash of their codec's own, so codecs whose curves coincide (dynamic tree and linear: same bytes, same
    kernels) both stay visible. Columns `<y>_lo` and `<y>_hi`, where present, draw as error bars (the spread of
    the measured codec speeds behind a model line)."""
    import math

    if y not in ("seconds", "speedup_vs_fp32"):
        raise ValueError(f"y={y!r}; allowed: seconds, speedup_vs_fp32")
    fig = go.Figure()
    src = df["source"] if "source" in df else pd.Series("measured", index=df.index)
    codecs = [c for c in dict.fromkeys(df["codec"]) if c != "fp32"]
    scale = 1e3 if y == "seconds" else 1
    for (s, codec), part in df.assign(source=src).groupby(["source", "codec"], sort=False):
        if y == "speedup_vs_fp32" and codec == "fp32":
            continue  # the 32-bit line is the dotted 1x line
        i = codecs.index(codec) if codec != "fp32" else -1
        color = FP32_COLOR if codec == "fp32" else CODEC_COLORS[i % len(CODEC_COLORS)]
        yy = part[y] * scale
        width = max(1.5, 7.0 - 2.0 * (i % 4)) + (1.0 if s != "model" else 0.0)  # earlier traces wider: both show
        err = {}
        if f"{y}_lo" in part and part[f"{y}_lo"].notna().all():
            err = {"error_y": {"type": "data", "array": part[f"{y}_hi"] * scale - yy,
                               "arrayminus": yy - part[f"{y}_lo"] * scale, "color": color, "thickness": 1.5}}
        fig.add_trace(go.Scatter(x=part["n_values"], y=yy, mode="lines+markers", name=f"{codec} ({s})",
                                 line={"dash": "solid" if s != "model" else "dot" if codec == "fp32"
                                       else DASHES[1 + i % (len(DASHES) - 1)],
                                       "width": width, "color": color},
                                 marker={"symbol": SYMBOLS[i % len(SYMBOLS)], "size": width + 5, "color": color},
                                 opacity=0.9 if s == "model" else 1.0, **err))
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


def log_ticks(lo: float, hi: float, fmt, steps: tuple[float, ...] = (1, 2, 5)) -> dict:
    """Explicit tick values and labels for a log axis spanning [lo, hi] (1-2-5 per decade, or decades
    only when the span is wide), so the axis never reads '2'/'3' or uses SI prefixes."""
    import math

    lo, hi = float(lo), float(hi)
    if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return {}
    if math.log10(hi / lo) > 3:
        steps = (1,)
    elif math.log10(hi / lo) < 0.7:  # less than a factor 5: more ticks per decade
        steps = (1, 1.5, 2, 3, 4, 5, 7)
    vals = [m * 10 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
            for m in steps if lo / 1.5 <= m * 10 ** e <= hi * 1.5]
    return {"tickvals": vals, "ticktext": [fmt(v) for v in vals]}


def bytes_ticks(lo: float, hi: float) -> dict:
    """Tick values at powers of 2 (every 4th, or every 2nd for a narrow range) labelled in B/kB/MB/GB."""
    import math

    k0, k1 = max(0, math.floor(math.log2(lo))), math.ceil(math.log2(hi))
    step = 4 if k1 - k0 > 12 else 2 if k1 - k0 > 6 else 1
    vals = [1 << k for k in range(k0 - k0 % step, k1 + 1, step) if lo / 2 <= (1 << k) <= hi * 2]
    return {"tickvals": vals, "ticktext": [bytes_label(v) for v in vals]}


def percent_label(x: float) -> str:
    return f"{x * 100:.3g} %"


def collective_time_figure(model: pd.DataFrame, measured: pd.DataFrame | None = None) -> go.Figure:
    """Allreduce time against message size per algorithm (`collective_model`): the model (dashed) and
    the lower bound (black); measured times (solid) from `collective_sweep` when given."""
    fig = go.Figure()
    ys = []
    for a, part in model.groupby("algorithm", sort=False):
        ys.append(part["model_s"] * 1e6)
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part["model_s"] * 1e6, mode="lines", line_dash="dash",
                                 name=f"{a} (model)"))
    lb = model.drop_duplicates("nbytes")
    ys.append(lb["lower_bound_s"] * 1e6)
    fig.add_trace(go.Scatter(x=lb["nbytes"], y=lb["lower_bound_s"] * 1e6, mode="lines", name="lower bound",
                             line={"color": "black", "width": 3}))
    if measured is not None and len(measured):
        for a, part in measured.groupby("algorithm", sort=False):
            ys.append(part["time_us"])
            fig.add_trace(go.Scatter(x=part["nbytes"], y=part["time_us"], mode="lines+markers",
                                     name=f"{a} (measured)"))
    y = pd.concat(ys)
    y = y[y > 0]
    fig.update_xaxes(type="log", title_text="message size per rank", **bytes_ticks(model.nbytes.min(), model.nbytes.max()))
    fig.update_yaxes(type="log", title_text="allreduce time", **(log_ticks(y.min(), y.max(), seconds_label)
                                                                 if len(y) else {}))
    fig.update_layout(legend_title="algorithm", margin={"t": 30})
    return fig


def busbw_figure(model: pd.DataFrame) -> go.Figure:
    """nccl-tests bus bandwidth (GB/s) against message size: the model per algorithm and the lower bound's."""
    fig = go.Figure()
    for a, part in model.groupby("algorithm", sort=False):
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part["busbw_GBps"], mode="lines", line_dash="dash",
                                 name=f"{a} (model)"))
    lb = model.drop_duplicates("nbytes")
    fig.add_trace(go.Scatter(x=lb["nbytes"], y=lb["bound_busbw_GBps"], mode="lines", name="lower bound",
                             line={"color": "black", "width": 3}))
    fig.update_xaxes(type="log", title_text="message size per rank", **bytes_ticks(model.nbytes.min(), model.nbytes.max()))
    fig.update_yaxes(title_text="bus bandwidth (GB/s)", rangemode="tozero")
    fig.update_layout(legend_title="algorithm", margin={"t": 30})
    return fig


def measured_fit_figure(measured: pd.DataFrame) -> go.Figure:
    """Measured allreduce time per algorithm (solid, `collective_sweep`) beside the cost model on the link
    fitted to these measurements (dashed, column model_us), against message size."""
    fig = go.Figure()
    ys = [measured["time_us"]]
    models: dict[tuple, int] = {}  # identical model curves (native is modelled as a ring) drawn once, both named
    for i, (a, part) in enumerate(measured.groupby("algorithm", sort=False)):
        color = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"][i % 4]
        fig.add_trace(go.Scatter(x=part["nbytes"], y=part["time_us"], mode="lines+markers", name=f"{a} (measured)",
                                 line={"color": color}))
        if "model_us" in part:
            key = tuple(round(v, 6) for v in part["model_us"]) + tuple(part["nbytes"])
            if key in models:
                tr = fig.data[models[key]]
                tr.name = tr.name.replace(" (model", f" & {a} (model")
                continue
            ys.append(part["model_us"])
            models[key] = len(fig.data)
            fig.add_trace(go.Scatter(x=part["nbytes"], y=part["model_us"], mode="lines", line_dash="dash",
                                     name=f"{a} (model, fitted link)", line={"color": color}))
    y = pd.concat(ys)
    y = y[y > 0]
    fig.update_xaxes(type="log", title_text="message size per rank",
                     **bytes_ticks(measured.nbytes.min(), measured.nbytes.max()))
    fig.update_yaxes(type="log", title_text="allreduce time", **(log_ticks(y.min(), y.max(), seconds_label)
                                                                 if len(y) else {}))
    fig.update_layout(legend_title="algorithm", margin={"t": 30})
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
    """Relative L2 error of a compressed allreduce against the exact sum as P grows (`error_at_scale`);
    P on a log axis with the measured P values as ticks, the error in percent."""
    fig = go.Figure()
    keys = [k for k in ("codec", "algorithm", "mode") if k == "codec" or (k in df and df[k].nunique() > 1)]
    for vals, part in df.groupby(keys, sort=False):
        vals = vals if isinstance(vals, tuple) else (vals,)
        fig.add_trace(go.Scatter(x=part["P"], y=part["rel_error"], mode="lines+markers", name=", ".join(vals)))
    Ps = sorted(set(int(p) for p in df["P"])) if len(df) else []
    y = df["rel_error"][df["rel_error"] > 0] if len(df) else pd.Series(dtype=float)
    fig.update_xaxes(type="log", title_text="ranks P", tickvals=Ps, ticktext=[str(p) for p in Ps])
    fig.update_yaxes(type="log", title_text="relative error of the sum",
                     **(log_ticks(y.min(), y.max(), percent_label) if len(y) else {}))
    fig.update_layout(legend_title=", ".join(keys), margin={"t": 30})
    return fig
