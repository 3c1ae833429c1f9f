"""The Pipeline page's figures, built from the pipeline's tables (no Streamlit here): a timeline per rank (one
block per forward F, backward-for-input I, backward-for-weights W or full backward B, the sends and receives as a
thin strip under them; blank is idle: the bubble), every schedule's planned timeline in one figure, the bubble
fraction per schedule (formula beside the planned timeline) and the activations each stage holds."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

#: a colour per block kind: the forward pass cool, the backward warm (input part red, weight part purple), the wire grey
KIND_COLORS = {"F": "#1f77b4", "B": "#ff7f0e", "I": "#d62728", "W": "#9467bd",
               "SEND_F": "#7f7f7f", "RECV_F": "#c7c7c7", "SEND_B": "#525252", "RECV_B": "#a5a5a5"}
KIND_NAMES = {"F": "F: forward", "B": "B: backward (input and weights)", "I": "I: backward for the input",
              "W": "W: backward for the weights", "SEND_F": "send activation", "RECV_F": "receive activation",
              "SEND_B": "send gradient", "RECV_B": "receive gradient"}
COMPUTE = ("F", "B", "I", "W")
SHADE = (1.0, 0.55, 0.75, 0.4)  # opacity of a rank's 1st, 2nd, 3rd, 4th stage (SVG patterns cost a first visit ~1 s)
LABELS_UP_TO = 160  # blocks: above this many, the micro-batch numbers inside the blocks are left to the hover


def _blocks(fig: go.Figure, df: pd.DataFrame, unit: str, scale: float, row: int | None, legend: bool,
            kinds: tuple[str, ...] = tuple(KIND_COLORS)) -> None:
    """One horizontal bar trace per kind: compute blocks as wide rows at y = rank, sends and receives as a thin
    strip under them."""
    labels = len(df[df.kind.isin(COMPUTE)]) <= LABELS_UP_TO
    chunks = {(int(r), int(s)): i for r, g in df.groupby("rank") for i, s in enumerate(sorted(g.stage.unique()))}
    for kind in kinds:
        g = df[df.kind == kind]
        if not len(g):
            continue
        wire = kind not in COMPUTE
        start, end = g.start.astype(float) * scale, g.end.astype(float) * scale
        nbytes = g["bytes"].fillna(0).astype(float) if "bytes" in g else pd.Series(0.0, index=g.index)
        custom = list(zip(g.stage.astype(int), g.microbatch.astype(int), start, end, end - start, g["rank"].astype(int),
                          nbytes))
        # a rank's second (third, ...) stage lighter: interleaved and V-shaped schedules hold several per rank
        chunk = [chunks.get((int(r), int(s)), 0) for r, s in zip(g["rank"], g.stage)]
        what = (f"{KIND_NAMES[kind]}<br>rank %{{customdata[5]}} · stage %{{customdata[0]}} · micro-batch "
                f"%{{customdata[1]}}<br>%{{customdata[2]:.3g}}–%{{customdata[3]:.3g}} {unit} "
                f"(%{{customdata[4]:.3g}} {unit})")
        if wire:
            what += "<br>%{customdata[6]:,.0f} B on the wire"
        trace = go.Bar(y=(g["rank"].astype(float) + (0.46 if wire else 0.0)).tolist(), x=(end - start).tolist(),
                       base=start.tolist(),
                       orientation="h", width=0.14 if wire else 0.72,
                       marker=dict(color=KIND_COLORS[kind], line=dict(width=0 if wire else 0.5, color="white"),
                                   opacity=[SHADE[c % len(SHADE)] for c in chunk] if any(chunk) else None),
                       name=KIND_NAMES[kind], legendgroup=kind, showlegend=legend, customdata=custom,
                       text=None if wire or not labels else g.microbatch.astype(int).astype(str),
                       textposition="inside", insidetextanchor="middle", textangle=0,
                       hovertemplate=what + "<extra></extra>")
        if row is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=row, col=1)


def _ranks_axis(ranks: int) -> dict:
    return dict(tickvals=list(range(ranks)), ticktext=[f"rank {r}" for r in range(ranks)], autorange="reversed",
                range=None, zeroline=False, showgrid=False)


def timeline_figure(df: pd.DataFrame, unit: str, scale: float = 1.0, title: str = "") -> go.Figure:
    """A timeline of one pipeline step (rows rank, stage, microbatch, kind, start, end[, bytes]): a row per rank,
    a block per action coloured by kind with its micro-batch inside, sends and receives as a thin strip under
    the rank; hover: rank, stage, micro-batch and time (`start`/`end` times `scale`, in `unit`)."""
    ranks = int(df["rank"].max()) + 1 if len(df) else 1
    fig = go.Figure()
    _blocks(fig, df, unit, scale, None, True)
    fig.update_layout(barmode="overlay", title=title or None, height=150 + 62 * ranks, bargap=0,
                      margin=dict(l=60, r=20, t=40, b=40), legend_title_text="block",
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
                      xaxis_title=f"time ({unit})", yaxis=_ranks_axis(ranks))
    return fig


def schedules_figure(planned: dict[str, pd.DataFrame], bubbles: dict[str, float], unit: str = "F times") -> go.Figure:
    """Every schedule's planned timeline (name -> its rows) stacked on one time axis, each titled with its
    bubble fraction (`bubbles`), so their lengths and gaps compare at a glance."""
    from plotly.subplots import make_subplots

    names = list(planned)
    ranks = max((int(d["rank"].max()) + 1 for d in planned.values() if len(d)), default=1)
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.34 / max(len(names), 1),
                        subplot_titles=[f"{n}: bubble {bubbles[n]:.1%}" for n in names])
    seen: set[str] = set()
    for i, n in enumerate(names, 1):
        d = planned[n]
        kinds = tuple(k for k in KIND_COLORS if k in set(d.kind))
        for k in kinds:
            _blocks(fig, d, unit, 1.0, i, k not in seen, (k,))
            seen.add(k)
        fig.update_yaxes(row=i, col=1, **_ranks_axis(ranks))
    fig.update_xaxes(title_text=f"time ({unit})", row=len(names), col=1)
    fig.update_layout(barmode="overlay", bargap=0, height=150 + len(names) * (36 + 26 * ranks),
                      margin=dict(l=60, r=20, t=90, b=40), legend=dict(orientation="h", yanchor="bottom", x=0,
                                                                       y=1 + 70 / (len(names) * (36 + 26 * ranks))),
                      legend_title_text="block")
    fig.update_annotations(font_size=13, xanchor="left", x=0)
    return fig


def bubble_figure(table: pd.DataFrame) -> go.Figure:
    """Bubble fraction per schedule (rows schedule, formula, planned; NaN where a schedule cannot run): the
    published formula beside the planned timeline's idle share."""
    fig = go.Figure()
    for col, name, color in (("formula", "published formula", "#7f7f7f"), ("planned", "planned timeline", "#1f77b4")):
        fig.add_bar(x=table["schedule"].tolist(), y=(100 * table[col]).tolist(), name=name, marker_color=color,
                    text=[("" if pd.isna(v) else f"{100 * v:.1f} %") for v in table[col]], textposition="outside",
                    hovertemplate=f"%{{x}}<br>{name}: %{{y:.2f}} %<extra></extra>")
    for name in table.loc[table["planned"].isna() & table["formula"].isna(), "schedule"]:
        fig.add_annotation(x=name, y=0, text="cannot<br>run", showarrow=False, yanchor="bottom", font_size=11)
    fig.update_layout(barmode="group", yaxis_title="bubble: idle share of the step (%)", legend_title_text="",
                      height=380, margin=dict(l=60, r=20, t=20, b=60), uniformtext=dict(minsize=10, mode="hide"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def memory_figure(memory: pd.DataFrame) -> go.Figure:
    """Peak activation bytes each stage held (rows rank, stage, peak_activation_bytes, microbatches_held)."""
    labels = [f"rank {int(r)} · stage {int(s)}" for r, s in zip(memory["rank"], memory["stage"])]
    kb = memory["peak_activation_bytes"].astype(float) / 1e3
    fig = go.Figure(go.Bar(x=labels, y=kb.tolist(), marker_color="#2ca02c",
                           customdata=list(zip(memory["microbatches_held"].astype(int),
                                               memory["peak_activation_bytes"])),
                           text=[f"{int(h)} held" for h in memory["microbatches_held"]], textposition="outside",
                           hovertemplate="%{x}<br>peak activations %{customdata[1]:,.0f} B<br>"
                                         "%{customdata[0]} micro-batches held at once<extra></extra>"))
    fig.update_layout(yaxis_title="peak activations held (kB)", height=340, margin=dict(l=60, r=20, t=20, b=60))
    return fig


__all__ = ["KIND_COLORS", "KIND_NAMES", "timeline_figure", "schedules_figure", "bubble_figure", "memory_figure"]
