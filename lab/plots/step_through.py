"""The step-through of one allreduce (`lab.experiments.step_through`), as one animated plotly figure:
ranks on a circle with each step's messages drawn as arrows (a packet moves along each while playing),
every rank's buffer filling with partial sums, bytes sent per link so far, and the codec's error at
each hop. One frame per step (plus an in-between frame per step for the moving packets), with
play/pause buttons and a step slider; Ben-Nun & Hoefler 2018 (the algorithms), Dettmers 2016 §3.2
(decode-add-encode at every hop)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from lab.plots.units import si_bytes_label

#: message kinds (`StepThrough.messages.kind`) and their colours, in legend order
KIND_COLORS = {"own data": "#7f7f7f", "partial sum": "#1f77b4", "full sum": "#2ca02c", "mixed": "#d62728",
               "unknown": "#d62728", "data": "#9467bd"}
_KINDS = ["own data", "partial sum", "full sum", "mixed", "data"]
#: ops whose buffers hold one rank's data per value (no sums): the grid says whose
_GATHER_OPS = ("all_gather", "alltoall", "broadcast", "sendrecv")
_NODE_R = 0.17      # node radius in circle coordinates (arrows stop short of it)
_OFFSET = 0.05      # arrows a→b and b→a run side by side
_PACKET_AT = (0.5,)  # in-between frames: where the packet is along its arrow


def _positions(P: int, k: int = 0) -> np.ndarray:
    """Rank r on the unit circle, rank 0 at the top, clockwise; on a two-level machine (k ranks per
    node) each node's ranks sit together on a small circle around their node's centre."""
    if not k:
        a = math.pi / 2 - 2 * math.pi * np.arange(P) / P
        return np.stack([np.cos(a), np.sin(a)], 1)
    centres, rr = _node_layout(P, k)
    out = []
    for r in range(P):
        j, i = divmod(r, k)
        th = math.atan2(centres[j][1], centres[j][0])
        phi = th + math.pi / 2 - 2 * math.pi * i / k
        out.append([centres[j][0] + rr * math.cos(phi), centres[j][1] + rr * math.sin(phi)])
    return np.array(out)


def _node_layout(P: int, k: int) -> tuple[np.ndarray, float]:
    """Node centres (N = P/k on a circle, node 0 at the top, clockwise) and the radius of each node's
    small circle of ranks, sized so neighbouring nodes do not overlap."""
    N = P // k
    R, rr = {2: (0.72, 0.42), 3: (0.8, 0.38)}.get(N, (0.9, 0.33))
    a = math.pi / 2 - 2 * math.pi * np.arange(N) / N
    return np.stack([R * np.cos(a), R * np.sin(a)], 1), rr


#: index of the trace of the arrows between nodes: after the circle's 5, the buffers, the link bytes and the
#: error traces (last, so the other traces keep their places)
_SLOW = 5 + 2 + 4 + 1

#: the two levels of a two-level machine: colour and width of their arrows
_LEVELS = {"inside a node (fast link)": ("#4c78a8", 2.5), "between nodes (slow link)": ("#d62728", 4.5)}


def _r(x: float) -> float:
    return round(float(x), 3)


def _arrows(tr) -> dict[int, list[dict]]:
    """Per step, the arrows of its messages: one per (src, dst) with start/end points, angle, bytes,
    kind and a hover text (computed once per figure: plain lists, no pandas per frame)."""
    k = getattr(tr, "ranks_per_node", 0)
    pos = _positions(tr.P, k)
    out: dict[int, list[dict]] = {}
    groups: dict[tuple[int, int, int], list[dict]] = {}
    for m in tr.messages.to_dict("records"):
        groups.setdefault((m["step"], m["src"], m["dst"]), []).append(m)
    for (step, s, d), ms in sorted(groups.items()):
        p0, p1 = pos[s], pos[d]
        u = (p1 - p0) / np.linalg.norm(p1 - p0)
        perp = np.array([u[1], -u[0]]) * _OFFSET
        a, b = p0 + u * _NODE_R + perp, p1 - u * _NODE_R + perp
        kinds = {m["kind"] for m in ms}
        kind = kinds.pop() if len(kinds) == 1 else "mixed"
        errs = [m["max_abs_error"] for m in ms if not pd.isna(m["max_abs_error"])]
        nbytes = sum(m["bytes"] for m in ms)
        values = sum(max(m["values"], 0) for m in ms)
        inter = bool(k) and s // k != d // k
        level = "" if not k else (f"<br>between nodes {s // k} and {d // k}: the slow link" if inter
                                  else f"<br>inside node {s // k}: the fast link")
        arith = (f" = {values} values × {nbytes / values:.3g} B" if values else "") + (
            f" in {len(ms)} messages" if len(ms) > 1 else "")
        text = (f"rank {s} → rank {d}: {nbytes:,} B{arith} ({si_bytes_label(nbytes)}){level}<br>"
                f"carries {kind}: ranks {', '.join(sorted({m['ranks'] for m in ms}))}"
                + (f"<br>largest |error| vs exact partial sum: {max(errs):.3g}" if errs else ""))
        out.setdefault(step, []).append({"src": s, "dst": d, "bytes": nbytes, "kind": kind, "text": text,
                                         "inter": inter,
                                         "x0": _r(a[0]), "y0": _r(a[1]), "x1": _r(b[0]), "y1": _r(b[1]),
                                         "angle": round(math.degrees(math.atan2(u[0], u[1])), 1)})
    return out


def _circle_traces(tr, arrows: list[dict], frame: int, packet: float | None) -> list[dict]:
    """Traces 0-4 and 12 (plain dicts: a figure of many frames builds fast unvalidated): arrow lines,
    arrowheads, byte labels, packets, rank nodes; and (12) the arrows between nodes of a two-level machine."""
    lx, ly, ix, iy = [], [], [], []
    for a in arrows:
        xs, ys = (ix, iy) if a.get("inter") else (lx, ly)
        xs += [a["x0"], a["x1"], None]
        ys += [a["y0"], a["y1"], None]
    labels = len(arrows) <= 16 and tr.P <= 6  # at P = 7, 8 the labels would cover the ranks: hover only
    mid = [(_r((a["x0"] + a["x1"]) / 2 + (a["y1"] - a["y0"]) * 0.2), _r((a["y0"] + a["y1"]) / 2 - (a["x1"] - a["x0"]) * 0.2))
           for a in arrows] if labels else []
    t = [] if packet is None else [(_r(a["x0"] + (a["x1"] - a["x0"]) * packet), _r(a["y0"] + (a["y1"] - a["y0"]) * packet))
                                   for a in arrows]
    k = getattr(tr, "ranks_per_node", 0)
    pos = _positions(tr.P, k)
    full = tr.counts[frame]
    share = np.where(full >= 0, full, 0).mean(1) / tr.P
    done = (full == tr.P).mean(1)
    node_text = [f"rank {r}<br>buffer: {share[r]:.0%} of all contributions summed;<br>"
                 f"{done[r]:.0%} of its values hold the full sum" for r in range(tr.P)]
    xy = {"xaxis": "x", "yaxis": "y", "showlegend": False}
    (fast, (fc, fw)), (slow, (sc, sw)) = _LEVELS.items()
    return [
        {"type": "scatter", "x": lx, "y": ly, "mode": "lines", "line": {"color": fc, "width": fw},
         "hoverinfo": "skip", **xy, **({"name": fast, "showlegend": True, "legendgroup": "level"} if k else {})},
        {"type": "scatter", "x": [a["x1"] for a in arrows], "y": [a["y1"] for a in arrows], "mode": "markers",
         "hovertext": [a["text"] for a in arrows], "hoverinfo": "text",
         "marker": {"symbol": "arrow", "size": 15, "angle": [a["angle"] for a in arrows],
                    "color": [KIND_COLORS.get(a["kind"], "#d62728") for a in arrows], "line": {"width": 0}}, **xy},
        {"type": "scatter", "x": [p[0] for p in mid], "y": [p[1] for p in mid], "mode": "text",
         "text": [si_bytes_label(a["bytes"]) for a in arrows] if labels else [],
         "textfont": {"size": 11, "color": "#333"}, "hoverinfo": "skip", **xy},
        {"type": "scatter", "x": [p[0] for p in t], "y": [p[1] for p in t], "mode": "markers", "hoverinfo": "skip",
         "marker": {"size": 12, "color": "#ff7f0e", "line": {"width": 1, "color": "white"}}, **xy},
        {"type": "scatter", "x": [_r(v) for v in pos[:, 0]], "y": [_r(v) for v in pos[:, 1]], "mode": "markers+text",
         "text": [str(r) for r in range(tr.P)], "textfont": {"color": "white", "size": 15}, "hovertext": node_text,
         "hoverinfo": "text", "marker": {"size": 30 if k and tr.P >= 6 else 38, "color": [_r(v) for v in share], "cmin": 0, "cmax": 1,
                                         "colorscale": [[0, "#9ecae1"], [1, "#08306b"]],
                                         "line": {"width": 1, "color": "#08306b"}}, **xy},
        {"type": "scatter", "x": ix, "y": iy, "mode": "lines", "line": {"color": sc, "width": sw},
         "hoverinfo": "skip", **xy, **({"name": slow, "showlegend": True, "legendgroup": "level"} if k else {})},
    ]


#: buffer columns drawn at most (longer vectors are shown in bins of consecutive values)
_MAX_COLUMNS = 48


_BLUES = [[0, "#f7fbff"], [0.5, "#6baed6"], [1, "#08306b"]]
_ORANGES = [[0, "#fff5eb"], [0.5, "#fd8d3c"], [1, "#7f2704"]]


def _grid(z: np.ndarray, text: list | None, custom: list, hovertemplate: str, axes: tuple[str, str], cmax: float,
          colorscale: list, colorbar: dict | None) -> dict:
    """A grid of coloured cells (rows × columns of z; NaN cells left out) as one bar trace: cell (r, c) is
    a bar at x = c from r − 0.45 to r + 0.45. Bars redraw at once in an animation, where a heatmap's
    image blinks while it is re-rendered."""
    rows, cols = np.nonzero(~np.isnan(z))
    out = {"type": "bar", "x": cols.tolist(), "y": [0.9] * len(rows), "base": (rows - 0.45).round(2).tolist(),
           "width": 0.92 if z.shape[1] <= 60 else 1.0, "xaxis": axes[0], "yaxis": axes[1], "showlegend": False,
           "marker": {"color": [_r(v) for v in z[rows, cols]], "cmin": 0, "cmax": cmax, "colorscale": colorscale,
                      "showscale": colorbar is not None, "line": {"width": 0},
                      **({"colorbar": colorbar} if colorbar else {})},
           "customdata": [custom[r][c] for r, c in zip(rows, cols)], "hovertemplate": hovertemplate}
    if text is not None:
        out.update(text=[text[r][c] for r, c in zip(rows, cols)], textposition="inside", insidetextanchor="middle",
                   textangle=0, textfont={"size": 11})
    return out


def _buffer_trace(tr, frame: int, stacked: bool = False) -> dict:
    """Trace 5: ranks × values, how many ranks' contributions each value holds (bins of consecutive
    values, their fewest, when n > 48)."""
    c = tr.counts[frame].astype(float)
    c[c < 0] = np.nan
    width = -(-tr.n // _MAX_COLUMNS)
    if width > 1:
        cols = -(-tr.n // width)
        pad = np.full((tr.P, cols * width), np.inf)
        pad[:, :tr.n] = np.where(np.isnan(c), -np.inf, c)
        c = pad.reshape(tr.P, cols, width).min(2)
        c[np.isneginf(c)] = np.nan
        custom = [[r] * cols for r in range(tr.P)]
    else:
        who = tr.masks[frame]
        custom = [[[r, _ranks(who[r, i])] for i in range(tr.n)] for r in range(tr.P)]
    gather = getattr(tr, "op", "all_reduce") in _GATHER_OPS
    if gather and width == 1:  # one rank's data per value: say whose
        who = tr.masks[frame]
        c = np.where(who >= 0, np.log2(np.maximum(who, 1)), np.nan)
    # numbers in the cells only while they stay legible (at P = 8 a 24-wide grid is hover-only)
    text = ([[str(int(v)) if not np.isnan(v) else "" for v in row] for row in c]
            if tr.n <= 24 and tr.P * tr.n <= 144 else None)
    if gather and width == 1:
        hover, title, cmax = "rank %{customdata[0]}, value %{x}: rank %{customdata[1]}'s data<extra></extra>", "from<br>rank", tr.P - 1
    elif width == 1:
        hover = (f"rank %{{customdata[0]}}, value %{{x}}: sum of ranks %{{customdata[1]}} "
                 f"(%{{marker.color}} of {tr.P})<extra></extra>")
        title, cmax = "ranks<br>summed", tr.P
    else:
        hover = (f"rank %{{customdata}}, bin %{{x}} ({width} values): at least %{{marker.color}} of {tr.P} "
                 "ranks summed<extra></extra>")
        title, cmax = "ranks<br>summed", tr.P
    return _grid(c, text, custom, hover, ("x2", "y2"), cmax, _BLUES,
                 {"title": {"text": title, "side": "top"}, "tickvals": list(range(cmax + 1)),
                  "len": 0.2 if stacked else 0.44, "y": sum(_SY[2]) / 2 if stacked else 0.75, "yanchor": "middle",
                  "x": 0.92, "xanchor": "left", "thickness": 12})


def _ranks(mask: int) -> str:
    return ",".join(str(r) for r in range(8) if mask >> r & 1) if mask >= 0 else "?"


def _link_trace(tr, step: int | None, zmax: float) -> dict:
    """Trace 6: bytes sent src → dst in steps 0..step (the per-link byte counters); hovering a cell
    shows its sum: each message's bytes added up."""
    z = tr.link_bytes(step) if step is not None else np.zeros((tr.P, tr.P))
    z[np.eye(tr.P, dtype=bool)] = np.nan  # no link to itself
    text = [[si_bytes_label(z[s, d]) if z[s, d] else "·" for d in range(tr.P)] for s in range(tr.P)] if tr.P <= 6 else None
    m = tr.messages.iloc[0:0] if step is None else tr.messages[tr.messages.step <= step]
    parts: dict[tuple[int, int], list[int]] = {}
    for s_, d_, b in zip(m.src, m.dst, m.bytes):
        parts.setdefault((int(s_), int(d_)), []).append(int(b))
    k = getattr(tr, "ranks_per_node", 0)

    def sum_text(s_: int, d_: int) -> str:
        b = parts.get((s_, d_), [])
        level = "" if not k else (" (inside a node)" if s_ // k == d_ // k else " (between nodes)")
        if not b:
            return f"nothing sent yet{level}"
        terms = " + ".join(f"{v:,}" for v in b) if len(b) <= 6 else f"{len(b)} messages of {min(b):,}–{max(b):,}"
        return f"{terms} = {sum(b):,} B{level}"
    custom = [[[s_, sum_text(s_, d_)] for d_ in range(tr.P)] for s_ in range(tr.P)]
    # no colour bar: the cells say their bytes (P <= 6) or on hover; the colour only ranks them
    return _grid(z, text, custom, "rank %{customdata[0]} → rank %{x}: %{customdata[1]} so far<extra></extra>",
                 ("x3", "y3"), max(zmax, 1.0), _ORANGES, None)


def _error_traces(tr, step: int | None) -> list[dict]:
    """Traces 7-11: each message's largest |error| against the exact partial sum it carries, by kind,
    up to `step`, and the largest per step so far."""
    m = tr.messages.iloc[0:0] if step is None else tr.messages[tr.messages.step <= step]
    out = []
    for kind in _KINDS:
        part = m[m.kind.isin([kind] if kind != "mixed" else ["mixed", "unknown"])]
        out.append({"type": "scatter", "x": list(part.step + 1), "y": [None if pd.isna(e) else e for e in part.max_abs_error],
                    "mode": "markers", "name": kind, "legendgroup": kind, "xaxis": "x4", "yaxis": "y4",
                    "marker": {"color": KIND_COLORS[kind], "size": 8, "opacity": 0.8},
                    "customdata": [f"rank {a} → {b}, ranks {w}" for a, b, w in zip(part.src, part.dst, part.ranks)],
                    "hovertemplate": f"step %{{x}}: %{{customdata}} ({kind}): largest |error| %{{y:.3g}}<extra></extra>"})
    per = m.groupby("step").max_abs_error.max()
    out.append({"type": "scatter", "x": list(per.index + 1), "y": [None if pd.isna(e) else e for e in per.values],
                "mode": "lines", "name": "largest per step", "line": {"color": "#444", "dash": "dot"},
                "hoverinfo": "skip", "xaxis": "x4", "yaxis": "y4"})
    return out


# subplot domains (paper coordinates): circle | buffers on top, link bytes | error below
_X = {1: [0.0, 0.36], 2: [0.47, 0.9], 3: [0.04, 0.34], 4: [0.5, 1.0]}
_Y = {1: [0.52, 1.0], 2: [0.56, 0.96], 3: [0.04, 0.36], 4: [0.04, 0.36]}
# stacked (for a window about 800 px wide): the ranks' circle, then the buffers, each across the width,
# then bytes per link beside the error
_SX = {1: [0.1, 0.9], 2: [0.06, 0.9], 3: [0.06, 0.44], 4: [0.58, 1.0]}
_SY = {1: [0.64, 1.0], 2: [0.37, 0.58], 3: [0.03, 0.2], 4: [0.03, 0.2]}


class AnimatedFigure(go.Figure):
    """A go.Figure whose animation frames stay the plain dicts this module built (valid by
    construction): go.Figure validates every trace of every frame when it is made, ~0.1-0.5 s per figure
    here, and the page makes one figure per step shown, all sharing the frames of one trace.
    `frames` validates them on access; `to_dict` (what Streamlit and `to_json` serialise) carries them."""

    def __init__(self, data=None, layout=None, frames=None, **kwargs) -> None:
        if isinstance(data, dict):  # go.Figure's pickling and copying pass one dict
            data, layout, frames = data.get("data"), data.get("layout"), data.get("frames", frames)
        super().__init__({"data": data or [], "layout": layout or {}}, _validate=False)
        self._raw_frames = list(frames or [])

    @property
    def frames(self) -> tuple:
        return tuple(go.Frame(f) for f in self._raw_frames)

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self._raw_frames:
            d["frames"] = list(self._raw_frames)
        return d


def step_through_frames(tr, *, height: int | None = None, stacked: bool = False) -> dict:
    """The animation of `tr` (a `StepThrough`), built once: {"frames": the plotly frames (one per step,
    named "0".."S", and an in-between frame "k.0" per step with the packets halfway), "layout"}.
    `step_through_figure` opens it at any step without rebuilding it."""
    S = tr.steps
    X, Y = (_SX, _SY) if stacked else (_X, _Y)
    height = height or (1150 if stacked else 780)
    total = tr.link_bytes()
    zmax = float(total.max()) if total.size else 1.0
    err = tr.messages.max_abs_error
    errmax = float(err.max()) if err.notna().any() else 1.0
    what = "fp32 rounding only" if tr.codec == "fp32" else tr.codec.split("[")[0]

    arrows = _arrows(tr)

    def frame_data(f: int, packet: float | None = None, partial: bool = False) -> list[dict]:
        s = None if f == 0 else f - 1
        a = arrows.get(s, []) if s is not None else []
        if partial:  # in-between frame of step f: the messages of step f-1 moving (the rest: its base frame)
            c = _circle_traces(tr, a, f - 1, packet)
            return [*c[:4], c[5]]
        c = _circle_traces(tr, a, f, None)
        return [*c[:5], _buffer_trace(tr, f, stacked), _link_trace(tr, s, zmax), *_error_traces(tr, s), c[5]]

    frames = []
    for f in range(S + 1):
        if f > 0:
            for j, at in enumerate(_PACKET_AT):
                # merged with frame f-1 in the browser: every trace redrawn (a frame of traces 0-3
                # alone makes plotly drop the bars while it redraws), none sent twice
                frames.append({"name": f"{f}.{j}", "data": frame_data(f, at, partial=True), "traces": [0, 1, 2, 3, _SLOW],
                               "baseframe": str(f - 1)})
        frames.append({"name": str(f), "data": frame_data(f)})
    k = getattr(tr, "ranks_per_node", 0)
    shapes, node_notes = [], []
    if k:
        centres, rr = _node_layout(tr.P, k)
        lim = float(np.hypot(*centres.T).max()) + rr + _NODE_R + 0.24  # room for the node labels
        for j, (cx, cy) in enumerate(centres):
            R = rr + _NODE_R + 0.06
            shapes.append({"type": "circle", "xref": "x", "yref": "y", "x0": _r(cx - R), "x1": _r(cx + R),
                           "y0": _r(cy - R), "y1": _r(cy + R), "fillcolor": "rgba(76,120,168,0.08)",
                           "line": {"color": "#4c78a8", "width": 1.5, "dash": "dot"}, "layer": "below"})
            ranks = f"{j * k}–{j * k + k - 1}" if k > 2 else f"{j * k}, {j * k + 1}"
            node_notes.append({"text": f"node {j}<br>ranks {ranks}", "x": _r(cx * (1 + (R + 0.02) / max(
                math.hypot(cx, cy), 1e-9))), "y": _r(cy * (1 + (R + 0.02) / max(math.hypot(cx, cy), 1e-9))),
                "xref": "x", "yref": "y", "showarrow": False, "font": {"size": 11, "color": "#4c78a8"}})
    else:
        lim = 1.0 + _NODE_R + 0.14
    bin_width = -(-tr.n // _MAX_COLUMNS)
    ncols = -(-tr.n // bin_width)
    ticks = list(range(0, ncols, max(1, ncols // 6)))
    axes = {
        "xaxis": {"domain": X[1], "range": [-lim, lim], "visible": False, "anchor": "y"},
        "yaxis": {"domain": Y[1], "range": [-lim, lim], "visible": False, "anchor": "x", "scaleanchor": "x",
                  "scaleratio": 1},
        "xaxis2": {"domain": X[2], "anchor": "y2", "range": [-0.5, ncols - 0.5], "zeroline": False,
                   "title": {"text": "value index in the vector" if bin_width == 1 else
                             f"values, in bins of {bin_width}", "standoff": 4},
                   **({} if bin_width == 1 else {"tickvals": ticks, "ticktext": [str(t * bin_width) for t in ticks]})},
        "yaxis2": {"domain": Y[2], "anchor": "x2", "range": [tr.P - 0.5, -0.5], "tickvals": list(range(tr.P)),
                   "ticktext": [f"rank {r}" for r in range(tr.P)], "zeroline": False, "showgrid": False},
        "xaxis3": {"domain": X[3], "anchor": "y3", "title": {"text": "to rank", "standoff": 4}, "range": [-0.5, tr.P - 0.5],
                   "tickvals": list(range(tr.P)), "zeroline": False, "showgrid": False},
        "yaxis3": {"domain": Y[3], "anchor": "x3", "title": {"text": "from rank"}, "range": [tr.P - 0.5, -0.5],
                   "tickvals": list(range(tr.P)), "zeroline": False, "showgrid": False},
        "xaxis4": {"domain": X[4], "anchor": "y4", "title": {"text": "step", "standoff": 4}, "range": [0.5, S + 0.5],
                   "dtick": 1 if S <= 16 else 2},
        "yaxis4": {"domain": Y[4], "anchor": "x4", "title": {"text": "largest |error|, inputs N(0,1)"},
                   "range": [0, errmax * 1.15 if errmax > 0 else 1], "exponentformat": "e" if errmax < 1e-3 else "none"},
    }
    titles = [(X[1], Y[1][1], "Messages in this step"),
              (X[2], Y[2][1] + 0.035, "Buffers: whose data each value holds" if getattr(tr, "op", "all_reduce")
               in _GATHER_OPS else "Buffers: ranks summed into each value"),
              (X[3], Y[3][1] + 0.05, "Bytes sent per link so far"),
              (X[4], Y[4][1] + 0.05, f"Error vs exact partial sums ({what})")]
    annotations = [{"text": f"<b>{t}</b>", "x": x[0], "y": y, "xref": "paper", "yref": "paper",
                    "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 13}}
                   for x, y, t in titles] + node_notes
    play = {"frame": {"duration": 260, "redraw": True}, "transition": {"duration": 0}, "fromcurrent": True,
            "mode": "immediate"}
    layout = {
        "height": height, "shapes": shapes, "barmode": "overlay", "bargap": 0, "uniformtext": {"minsize": 9, "mode": "hide"}, "margin": {"t": 30, "b": 90, "l": 10, "r": 10}, "annotations": annotations,
        "legend": {"orientation": "h", "y": -0.075, "x": 1.0, "xanchor": "right", "yanchor": "top"},
        "updatemenus": [{"type": "buttons", "direction": "left", "x": 0.0, "y": -0.09, "xanchor": "left",
                         "yanchor": "top", "showactive": False, "pad": {"t": 0, "r": 6},
                         "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, play]},
                                     {"label": "❚❚ Pause", "method": "animate",
                                      "args": [[None], {"frame": {"duration": 0, "redraw": False},
                                                        "mode": "immediate", "transition": {"duration": 0}}]}]}],
        "sliders": [{"active": 0, "x": 0.17, "len": 0.28, "y": -0.05, "yanchor": "top", "pad": {"t": 0},
                     "currentvalue": {"prefix": "step ", "font": {"size": 12}},
                     "steps": [{"label": "start" if f == 0 else str(f), "method": "animate",
                                "args": [[str(f)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                                    "transition": {"duration": 0}}]} for f in range(S + 1)]}],
        **axes}
    return {"frames": frames, "layout": layout}


def step_title(step: int, steps: int) -> str:
    """The title of the messages panel at `step` of `steps`, short enough for the panel at 800 px:
    "Step 3 of 8: its messages", or, at step 0, "Step 0 of 8: none sent yet"."""
    return f"Step {step} of {steps}: " + ("none sent yet" if step == 0 else "its messages")


def step_through_figure(tr, step: int = 0, *, frames: dict | None = None, animate: bool = True) -> go.Figure:
    """The animated step-through of `tr` (a `StepThrough`), opened at frame `step` (0 = start, k = after
    step k's messages arrived, up to `tr.steps`): ranks and messages, buffers, bytes per link so far,
    error per message. Play/pause buttons and a slider move through the frames in the browser.
    `frames`: `step_through_frames(tr)`, when already built. animate=False: the figure of that one step,
    without play buttons, slider or frames (a page whose own step control drives it: one step state)."""
    anim = frames if frames is not None else step_through_frames(tr)
    step = int(min(max(step, 0), tr.steps))
    data = next(f["data"] for f in anim["frames"] if f["name"] == str(step))
    if not animate:  # the first panel's title names the step drawn: the figure says which step it shows
        notes = [dict(anim["layout"]["annotations"][0], text=f"<b>{step_title(step, tr.steps)}</b>"),
                 *anim["layout"]["annotations"][1:]]
        return AnimatedFigure(data, {k: v for k, v in anim["layout"].items() if k not in ("updatemenus", "sliders")}
                              | {"annotations": notes, "margin": {"t": 30, "b": 40, "l": 10, "r": 10}, "legend": {
                                  "orientation": "h", "y": -0.04, "x": 1.0, "xanchor": "right", "yanchor": "top"}})
    layout = dict(anim["layout"], sliders=[dict(sl, active=step) for sl in anim["layout"]["sliders"]])
    return AnimatedFigure(data, layout, anim["frames"])


def step_traffic_figure(df: pd.DataFrame) -> go.Figure:
    """Bytes through the busiest rank of each algorithm (`algorithm_traffic`), as multiples of n,
    against nccl-tests' 2(P−1)/P·n, which busbw assumes."""
    ok = df[df.note.fillna("") == ""]
    fig = go.Figure()
    has = "n_bytes" in ok
    rank_hover = [f"{a}: rank {r} moves {b:,.0f} B (the larger of sent and received)<br>"
                  f"{b:,.0f} B / n = {b:,.0f} / {nb:,.0f} B = {x:.3g}·n"
                  for a, r, b, nb, x in zip(ok.algorithm, ok.busiest_rank, ok.busiest_rank_bytes, ok.n_bytes,
                                            ok.busiest_rank_x_n)] if has else None
    link_hover = [f"{a}: link {lk} carries {b:,.0f} B<br>{b:,.0f} B / n = {b:,.0f} / {nb:,.0f} B = {x:.3g}·n"
                  for a, lk, b, nb, x in zip(ok.algorithm, ok.busiest_link, ok.busiest_link_bytes, ok.n_bytes,
                                             ok.busiest_link_x_n)] if has else None
    fig.add_trace(go.Bar(x=ok.algorithm, y=ok.busiest_rank_x_n, name="busiest rank (sent or received)",
                         marker_color="#4c78a8", text=[f"{v:.3g}" for v in ok.busiest_rank_x_n], textposition="outside",
                         hovertext=rank_hover, hoverinfo="text" if has else None))
    fig.add_trace(go.Bar(x=ok.algorithm, y=ok.busiest_link_x_n, name="busiest single link",
                         marker_color="#f58518", text=[f"{v:.3g}" for v in ok.busiest_link_x_n], textposition="outside",
                         hovertext=link_hover, hoverinfo="text" if has else None))
    if len(ok):
        share = float(ok.nccl_share_x_n.iloc[0])
        fig.add_trace(go.Scatter(x=list(ok.algorithm), y=[share] * len(ok), mode="lines",
                                 line={"dash": "dash", "color": "black"}, hoverinfo="skip",
                                 name=f"2(P−1)/P·n = {share:.3g}·n: what busbw assumes"))
    top = float(max(ok.busiest_rank_x_n.max(), ok.busiest_link_x_n.max())) if len(ok) else 1.0
    fig.update_layout(barmode="group", yaxis_title="bytes per allreduce (× n)", xaxis_title="algorithm",
                      yaxis_range=[0, top * 1.25], legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
                      margin={"t": 60, "b": 10}, height=360)
    return fig
