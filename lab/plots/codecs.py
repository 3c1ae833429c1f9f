"""Codec figures (Dettmers 2016 §3.1-3.2, Table 1; OCP MX v1.0 and NVFP4 blocks): value tables, error bars
and histograms, encode/decode speed, Table 1 paper vs measured, one block of a block-scaled format."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.codecs import TableCodec

SUPER = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down")


def decade_ticks(lo: float, hi: float, *, percent: bool = False) -> dict:
    """Explicit log-axis ticks, one per power of ten spanning [lo, hi] (labels '10⁻⁶' ... '1', '10', '100';
    no SI prefixes): a dict for `update_xaxes`/`update_yaxes`."""
    lo, hi = max(lo, 1e-300), max(hi, 1e-300)
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, -(-(b - a) // 10))
    vals = [10.0 ** e for e in range(a, b + 1, step)]
    text = [(f"{v:g}" if -2 <= e <= 3 else f"10{str(e).translate(SUPER)}") + (" %" if percent else "")
            for e, v in zip(range(a, b + 1, step), vals)]
    return {"tickvals": vals, "ticktext": text}


def value_table_figure(codecs: list[TableCodec]) -> go.Figure:
    """Positive entries of each value table on a log axis: where a type spends its codes (§3.1)."""
    fig = go.Figure()
    lo, hi = 1.0, 1.0
    for i, c in enumerate(codecs):
        v = c.values
        pos = v[v > 0].tolist()
        if pos:
            lo, hi = min(lo, min(pos)), max(hi, max(pos))
        fig.add_trace(go.Scatter(x=list(range(len(pos))), y=pos, mode="markers", name=c.describe(),
                                 marker={"size": 5, "symbol": SYMBOLS[i % len(SYMBOLS)]}))
    fig.update_layout(xaxis_title="code number among the positive values", yaxis_title="value (× the tensor's scale)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30, "l": 80})
    fig.update_yaxes(**decade_ticks(lo, hi))
    return fig


ERROR_LABELS = {"mean_rel_error": "Mean relative error (%)", "mae": "Mean absolute error",
                "rmse": "RMSE", "snr_db": "SNR (dB)", "max_error": "Largest absolute error"}


def error_bar_figure(df: pd.DataFrame, metric: str = "mean_rel_error") -> go.Figure:
    """Grouped bars of one error metric per codec and data set, from `error_table` (relative error in %)."""
    scale = 100.0 if metric == "mean_rel_error" else 1.0
    fig = go.Figure()
    for codec, part in df.groupby("codec", sort=False):
        y = part[metric] * scale
        fig.add_trace(go.Bar(x=part["data"], y=y, name=codec, text=[f"{v:.3g}" for v in y], textposition="outside"))
    fig.update_layout(barmode="group", xaxis_title="data", yaxis_title=ERROR_LABELS.get(metric, metric),
                      legend_title="codec", margin={"t": 30, "l": 80}, legend={"orientation": "h", "y": -0.2})
    return fig


def error_histogram_figure(hist: pd.DataFrame) -> go.Figure:
    """Distribution of the relative error per codec (in %), from `errors.error_histogram`."""
    fig = go.Figure()
    for i, (codec, part) in enumerate(hist.groupby("codec", sort=False)):
        mid = (part["bin_left"] + part["bin_right"]) / 2
        fig.add_trace(go.Scatter(x=100 * 10.0 ** mid, y=100 * part["fraction"], mode="lines", line_shape="hvh",
                                 name=str(codec), line_dash=DASHES[i % len(DASHES)]))
    fig.update_layout(xaxis_title="relative error |y − x| / |x| (%); lowest bin: exact or below",
                      yaxis_title="share of values (%)", xaxis_type="log", legend_title="codec", margin={"t": 30, "l": 80})
    if len(hist):
        fig.update_xaxes(**decade_ticks(100 * 10.0 ** hist["bin_left"].min(), 100 * 10.0 ** hist["bin_right"].max()))
    return fig


def codec_speed_figure(speed: pd.DataFrame) -> go.Figure:
    """Encode and decode ns per value per codec on this device, from `errors.codec_speed`: the median of the
    repeats, its 95 % interval as the error bar (ns_lo..ns_hi) and min–max in the hover."""
    fig = go.Figure()
    for op, part in speed.groupby("op", sort=False):
        spread = {}
        if {"ns_lo", "ns_hi"} <= set(part):
            spread = {"error_y": {"type": "data", "symmetric": False, "array": part["ns_hi"] - part["ns_per_value"],
                                  "arrayminus": part["ns_per_value"] - part["ns_lo"], "thickness": 1.5},
                      "customdata": part[["ns_lo", "ns_hi", "ns_min", "ns_max", "repeats"]].to_numpy(),
                      "hovertemplate": "%{x}<br>median %{y:.3g} ns per value<br>95 % interval %{customdata[0]:.3g}–"
                                       "%{customdata[1]:.3g}<br>min–max %{customdata[2]:.3g}–%{customdata[3]:.3g} "
                                       "(%{customdata[4]} repeats)<extra>" + str(op) + "</extra>"}
        fig.add_trace(go.Bar(x=part["codec"], y=part["ns_per_value"], name=str(op), **spread))
    fig.update_layout(barmode="group", xaxis_title="codec", yaxis_title="time per value (ns), median",
                      yaxis_type="log", legend_title="operation", margin={"t": 30, "l": 80},
                      legend={"orientation": "h", "y": -0.35})
    if len(speed):
        lo = speed["ns_lo"].min() if "ns_lo" in speed else speed["ns_per_value"].min()
        hi = speed["ns_hi"].max() if "ns_hi" in speed else speed["ns_per_value"].max()
        fig.update_yaxes(**(decade_ticks(lo, hi) if hi > 100 * lo else _ticks_125(lo, hi)))
    return fig


def _ticks_125(lo: float, hi: float) -> dict:
    """Log-axis ticks at 1, 2 and 5 times the powers of ten in [lo, hi] (a span of two decades or less, where
    one tick per decade would leave one or none)."""
    vals = [m * 10.0 ** e for e in range(math.floor(math.log10(max(lo, 1e-300))), math.ceil(math.log10(hi)) + 1)
            for m in (1, 2, 5) if lo / 1.3 <= m * 10.0 ** e <= hi * 1.3]
    return {"tickvals": vals, "ticktext": [f"{v:g}" for v in vals]}


#: the colour of each field of a code, in the bit explorer's figure and its bits (sign, exponent, mantissa; an
#: index into a table or an integer's bits: one colour)
FIELD_COLORS = {"sign": "#4c78a8", "exponent": "#54a24b", "mantissa": "#e45756", "index into the sorted table": "#9467bd",
                "two's complement": "#9467bd"}


def number_line_figure(line: pd.DataFrame) -> go.Figure:
    """The number line of one code (`bits.number_line`): the format's values around it (grey ticks), the code's
    value and its neighbours (dots, labelled), the interval of inputs that round to it (shaded; an arrow where it
    runs on to ±∞) and the typed value (a red triangle) when there is one; the legend below names them."""
    a = line.attrs
    v, lo, hi, typed = a["value"], a["lo"], a["hi"], a.get("typed")
    xs = [x for x in line["value"].tolist() + [typed] if x is not None and math.isfinite(x)]
    left, right = min(xs), max(xs)
    pad = (right - left) * 0.08 or max(abs(v), 1.0) * 0.1
    left, right = left - pad, right + pad
    fig = go.Figure()
    fig.add_vrect(x0=max(lo, left), x1=min(hi, right), fillcolor="#f2b134", opacity=0.3, line_width=0,
                  annotation_text="rounds to this code", annotation_position="top left")
    for end, edge, arrow in ((lo, left, "← to −∞"), (hi, right, "to +∞ →")):
        if not math.isfinite(end) or (end < left if end == lo else end > right):
            fig.add_annotation(x=edge, y=0, text=arrow, showarrow=False, yshift=-22,
                               xanchor="left" if end == lo else "right", font={"color": "#a66f00"})
    grid = line[line.role == "grid"]
    fig.add_trace(go.Scatter(x=grid["value"], y=[0] * len(grid), mode="markers", name="other values of the format",
                             marker={"symbol": "line-ns-open", "size": 18, "color": "#888", "line": {"width": 2}},
                             customdata=grid[["code", "bits"]].to_numpy(),
                             hovertemplate="%{x:.9g}<br>code %{customdata[0]} = %{customdata[1]}<extra></extra>"))
    for role, color, size, where in (("next below", "#4c78a8", 11, "bottom center"),
                                     ("next above", "#4c78a8", 11, "bottom center"), ("this code", "#111", 15, "top center")):
        part = line[line.role == role]
        if len(part):
            fig.add_trace(go.Scatter(
                x=part["value"], y=[0] * len(part), mode="markers+text", name=role, marker={"size": size, "color": color},
                text=[f"{x:.{a.get('digits', 6)}g}" for x in part["value"]], textposition=where, customdata=part[["code", "bits"]].to_numpy(),
                hovertemplate=role + ": %{x:.9g}<br>code %{customdata[0]} = %{customdata[1]}<extra></extra>"))
    if typed is not None and math.isfinite(typed):
        fig.add_trace(go.Scatter(x=[typed], y=[-0.3], mode="markers", name=f"your value {typed:.9g}",
                                 marker={"symbol": "triangle-up", "size": 14, "color": "#d62728"},
                                 hovertemplate="your value %{x:.9g}<extra></extra>"))
    fig.update_layout(height=300, margin={"t": 30, "l": 20, "r": 20, "b": 90},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0,
                              "title": {"text": f"values of {a.get('fmt', '')}:"}},
                      xaxis={"range": [left, right], "tickformat": f".{a.get('digits', 6)}~g",
                             "zeroline": False},
                      yaxis={"visible": False, "range": [-1, 1.2], "fixedrange": True})
    return fig


TYPE_LABELS = {"dynamic_tree": "dynamic tree", "linear": "linear", "mantissa": "mantissa", "static_tree": "static tree"}


def table1_figure(t1: pd.DataFrame) -> go.Figure:
    """Dettmers 2016 Table 1: mean relative error (%) per type, one panel per distribution (2 x 2): the paper's
    published figure beside ours measured with the paper's rounding and with exact (nearest) rounding."""
    t1 = t1[t1["paper_rel_pct"].notna()] if "paper_rel_pct" in t1 else t1
    dists = list(dict.fromkeys(t1["distribution"]))
    cols = 2 if len(dists) > 1 else 1
    rows = -(-len(dists) // cols) or 1
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=dists, shared_yaxes=True, vertical_spacing=0.14)
    series = [("paper_rel_pct", "published (paper)", "#444"), ("rel_pct_paper", "ours, paper's rounding", "#1f77b4"),
              ("rel_pct_nearest", "ours, exact rounding", "#ff7f0e")]
    for j, d in enumerate(dists):
        part = t1[t1["distribution"] == d]
        x = [TYPE_LABELS.get(t, t) for t in part["type"]]
        for col, name, color in series:
            if col in part:
                fig.add_trace(go.Bar(x=x, y=part[col], name=name, marker_color=color, legendgroup=name,
                                     showlegend=j == 0), row=j // cols + 1, col=j % cols + 1)
    fig.update_layout(barmode="group", legend_title="", margin={"t": 40, "l": 70}, height=260 * rows + 80,
                      legend={"orientation": "h", "y": -0.12})
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="relative error (%)", row=r, col=1)
    fig.update_xaxes(tickangle=0)
    return fig


FATE_COLORS = {"exact": "#2ca02c", "rounded": "#1f77b4", "saturated": "#d62728", "flushed to zero": "#9467bd",
               "zero": "#7f7f7f"}


def block_figure(block: pd.DataFrame) -> go.Figure:
    """One block of a block-scaled format (`errors.block_view`): each value (hollow) and its decoded value
    (filled, coloured by its fate), the block's largest representable magnitude (red lines) and its
    smallest positive one (grey band: values inside it flush to zero)."""
    a = block.attrs
    fig = go.Figure()
    fig.add_hrect(y0=-a.get("smallest", 0) / 2, y1=a.get("smallest", 0) / 2, fillcolor="#bbb", opacity=0.35,
                  line_width=0, annotation_text="flushes to 0", annotation_position="top left")
    fig.add_hline(y=a.get("largest", 0), line_color="#d62728", line_dash="dot",
                  annotation_text=f"largest = {a.get('largest', 0):.4g}: beyond it values saturate")
    fig.add_hline(y=-a.get("largest", 0), line_color="#d62728", line_dash="dot")
    fig.add_trace(go.Scatter(x=block["position"], y=block["value"], mode="markers", name="value (float32)",
                             marker={"symbol": "circle-open", "size": 11, "color": "#333", "line": {"width": 1.5}}))
    for fate, part in block.groupby("fate", sort=False):
        fig.add_trace(go.Scatter(x=part["position"], y=part["decoded"], mode="markers", name=f"decoded: {fate}",
                                 marker={"size": 7, "color": FATE_COLORS.get(fate, "#000")},
                                 customdata=part[["value", "scaled"]].to_numpy(),
                                 hovertemplate="position %{x}<br>decoded %{y:.5g}<br>value %{customdata[0]:.5g}"
                                               "<br>value / scale %{customdata[1]:.4g}<extra></extra>"))
    fig.update_layout(xaxis_title=f"position in block {a.get('block', '?')} (of {a.get('blocks', '?')})",
                      yaxis_title="value", legend_title="", margin={"t": 30, "l": 80})
    return fig


def _data_label(name: str) -> str:
    return name.replace(": ", "<br>").replace(" with ", "<br>with ").replace(" of the ", "<br>of the ")


def block_lesson_figure(df: pd.DataFrame, metric: str = "mean_rel_error") -> go.Figure:
    """`errors.block_scaling_lesson`: one error metric per data set, per-tensor types (hatched) beside
    block-scaled formats (solid)."""
    scale = 100.0 if metric == "mean_rel_error" else 1.0
    fig = go.Figure()
    for codec, part in df.groupby("codec", sort=False):
        blockwise = bool(part["per_block"].iloc[0])
        bits = part["bits_per_value"].iloc[0]
        fig.add_trace(go.Bar(x=[_data_label(d) for d in part["data"]], y=part[metric] * scale,
                             name=f"{codec.split('[')[0]} ({bits:.3g} bits{'' if blockwise else ', per tensor'})",
                             marker_pattern_shape="" if blockwise else "/"))
    fig.update_layout(barmode="group", yaxis_title=ERROR_LABELS.get(metric, metric), legend_title="",
                      margin={"t": 30, "l": 80}, legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(tickangle=0)
    if metric == "mean_rel_error":
        v = df[metric] * scale
        vals = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if v.min() / 2.5 <= t <= v.max() * 2.5]
        fig.update_yaxes(type="log", tickvals=vals, ticktext=[f"{t:g} %" for t in vals])
    return fig
