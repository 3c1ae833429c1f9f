""""Does compression pay?" figures: speedup against the best bf16 step vs the NIC bandwidth, one line per
codec (its best algorithm at each bandwidth), the break-even points marked; per-codec bars at the cluster."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from .codecs import decade_ticks

SPEEDUP_TICKS = (0.1, 0.2, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)  # explicit: no "2" for 20


def pays_sweep_figure(sweep: pd.DataFrame, summary: pd.DataFrame, nic_GBps: float | None = None,
                      codecs: list[str] | None = None, time_to_accuracy: bool = False) -> go.Figure:
    """Speedup vs bf16 (its best algorithm at each bandwidth) against the NIC bandwidth, log-log, one line
    per codec (each at its best algorithm there), break-even points as markers on the 1x line, and the
    cluster's own NIC bandwidth as a vertical line. From `pays(...).sweep` and `.summary`. time_to_accuracy:
    the speedup in time to the target (per step / the measured steps penalty; its hover gives the interval the
    penalty's 95% CI puts it in); a codec without a measurement, or one that never reaches the target, has no
    line."""
    col, be_col = (("time_to_accuracy_speedup", "break_even_tta_GBps") if time_to_accuracy
                   else ("speedup_vs_bf16", "break_even_GBps"))
    ci = ["time_to_accuracy_speedup_ci_low", "time_to_accuracy_speedup_ci_high"]
    ci = ci if time_to_accuracy and set(ci) <= set(sweep.columns) else []
    best = (sweep.sort_values(col, ascending=False, na_position="last")  # each codec's best algorithm there
            .drop_duplicates(["codec", "inter_GBps"]).sort_values("inter_GBps")[["codec", "inter_GBps", col, *ci]]
            .rename(columns={col: "speedup_vs_bf16"}))
    best = best[best["speedup_vs_bf16"] > 0]  # not measured (nan) or never reaching the target (0): no line
    fig = go.Figure()
    keep = [c for c in summary["codec"] if c != "bf16" and (codecs is None or c in codecs)]
    for c in keep:
        part = best[best["codec"] == c]
        if part.empty:
            continue
        interval = " (95% interval %{customdata[0]:.2f}-%{customdata[1]:.2f}x)" if ci else ""
        fig.add_trace(go.Scatter(x=part["inter_GBps"], y=part["speedup_vs_bf16"], mode="lines", name=c,
                                 legendgroup=c, customdata=part[ci].to_numpy() if ci else None,
                                 hovertemplate=c + ": %{y:.2f}x" + interval
                                 + " at %{x:.3g} GB/s per NIC<extra></extra>"))
    be = summary[summary["codec"].isin(keep)]
    pts = [(c, b) for c, b in zip(be["codec"], be[be_col]) if isinstance(b, float) and math.isfinite(b)]
    if pts:
        fig.add_trace(go.Scatter(x=[p[1] for p in pts], y=[1.0] * len(pts), mode="markers", name="break-even",
                                 marker={"symbol": "x", "size": 10, "color": "black"}, text=[p[0] for p in pts],
                                 hovertemplate="%{text} pays below %{x:.3g} GB/s per NIC<extra></extra>"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "gray"})
    if nic_GBps:  # on a log axis a shape takes the value, an annotation its log10
        fig.add_shape(type="line", xref="x", yref="paper", x0=nic_GBps, x1=nic_GBps, y0=0, y1=1,
                      line={"dash": "dash", "color": "gray"})
        fig.add_annotation(x=math.log10(nic_GBps), y=1, xref="x", yref="paper",
                           text=f"this cluster ({nic_GBps:g} GB/s)", showarrow=False, yanchor="bottom")
    fig.update_layout(xaxis_title="network bandwidth per NIC (GB/s per direction, log scale)",
                      yaxis_title=("speedup in time to accuracy vs bf16 (x, log scale)" if time_to_accuracy else
                                   "speedup of a training step vs bf16 (x, log scale)"), xaxis_type="log",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
    xs = best["inter_GBps"] if len(best) else sweep["inter_GBps"]
    fig.update_xaxes(**decade_ticks(float(xs.min()), float(xs.max())))
    ys = best[best["codec"].isin(keep)]["speedup_vs_bf16"]
    lo, hi = (float(ys.min()), float(ys.max())) if len(ys) else (1.0, 1.0)
    ticks = [v for v in SPEEDUP_TICKS if lo / 1.3 <= v <= hi * 1.3] or [1.0]
    fig.update_yaxes(tickvals=ticks, ticktext=[f"{v:g}x" for v in ticks])
    return fig


def pays_bars_figure(rows: pd.DataFrame) -> go.Figure:
    """Step time (ms) of every codec × algorithm at the cluster: compute, then the communication the step
    waits for, split into transfer, codec work and kernel launches in proportion. From `pays(...).rows`."""
    fig = go.Figure()
    x = [rows["codec"].tolist(), rows["algorithm"].tolist()]
    comm = rows["comm_ms"].where(rows["comm_ms"] > 0, 1.0)
    share = rows["exposed_comm_ms"] / comm
    fig.add_trace(go.Bar(x=x, y=rows["compute_ms"], name="compute"))
    for col, name in (("transfer_ms", "transfer (not hidden)"), ("codec_ms", "codec work (not hidden)"),
                      ("launch_ms", "kernel launches (not hidden)")):
        fig.add_trace(go.Bar(x=x, y=rows[col] * share, name=name))
    fig.update_layout(barmode="stack", xaxis_title="codec, algorithm", yaxis_title="time per step (ms)",
                      legend_title="", margin={"t": 30})
    return fig


__all__ = ["pays_sweep_figure", "pays_bars_figure"]
