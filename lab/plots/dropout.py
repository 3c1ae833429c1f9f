"""Approximate Random Dropout figures (Song et al. 2019): masks, drop frequency, Algorithm 1's trace and
distribution, layer speedup, MLP/LSTM tables and curves."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from lab.dropout.kinds import KIND_LABELS


# the kinds' labels, and the benchmark's contestants (conventional dropout + full GEMM; no dropout at all)
DROPOUT_LABELS = {**KIND_LABELS, "conventional": "conventional", "dense": "no dropout"}


KEPT_COLOURS = [[0, "#e6e6e6"], [0.5, "#e6e6e6"], [0.5, "#1f77b4"], [1, "#1f77b4"]]


def dropout_mask_figure(masks: pd.DataFrame) -> go.Figure:
    """Keep-masks of sampled patterns, one panel per kind and sample (§III-A/B, Fig. 3), from `pattern_masks`.
    One colour legend (kept / dropped); tick labels on the outer panels only, so they never overlap."""
    from plotly.subplots import make_subplots

    panels = list(masks.groupby(["kind", "sample"], sort=False))
    titles = []
    for (kind, s), part in panels:
        dp = part["dp"].iloc[0]
        short = {"row": "RDP", "tile": "TDP"}.get(kind, DROPOUT_LABELS.get(kind, kind))
        titles.append(short + (f": 1 in {int(dp)} kept, offset {int(part['bias'].iloc[0])}"
                                                             if pd.notna(dp) else f" #{s + 1}"))
    cols = max(1, int(masks.groupby("kind")["sample"].nunique().max()))
    rows = -(-len(panels) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.12)
    for k, (_, part) in enumerate(panels):
        grid = part.pivot(index="row", columns="unit", values="kept")
        fig.add_trace(go.Heatmap(z=grid.to_numpy(), x=grid.columns, y=grid.index, colorscale=KEPT_COLOURS, zmin=0,
                                 zmax=1, showscale=k == 0,
                                 colorbar={"tickvals": [0.25, 0.75], "ticktext": ["dropped", "kept"], "len": 0.5,
                                           "thickness": 14, "y": 1.0, "yanchor": "top", "title": {"text": ""}},
                                 hovertemplate="sample %{y}, unit %{x}: kept %{z}<extra></extra>"),
                      row=k // cols + 1, col=k % cols + 1)
    fig.update_yaxes(autorange="reversed", nticks=3)
    fig.update_xaxes(nticks=5)
    for c in range(2, cols + 1):
        fig.update_yaxes(showticklabels=False, col=c)
    fig.update_layout(margin={"t": 40}, height=max(250, 220 * rows))
    return fig


def drop_frequency_figure(freq: pd.DataFrame) -> go.Figure:
    """Each unit's empirical drop frequency per kind against the target p (Eq. 2), from `drop_frequency`."""
    fig = go.Figure()
    for kind, part in freq.groupby("kind", sort=False):
        fig.add_trace(go.Scatter(x=part["unit"], y=part["drop_freq"], mode="markers",
                                 name=DROPOUT_LABELS.get(kind, kind)))
    p = float(freq["target_p"].iloc[0])
    fig.add_hline(y=p, line_dash="dash", annotation_text=f"target p = {p:g}")
    fig.update_layout(xaxis_title="unit", yaxis_title="fraction of steps the unit is dropped", legend_title="dropout",
                      margin={"t": 30}, height=340)
    return fig


def search_trace_figure(trace: pd.DataFrame) -> go.Figure:
    """Algorithm 1's loss (log scale) and expected rate d.p_u per step, from `search_trace(...).trace`."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_trace(go.Scatter(x=trace["step"], y=trace["loss"] - trace["loss"].min() + 1e-12, name="loss - min"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=trace["step"], y=trace["e_p"], name="E_p = (d.p_u - p)^2"), row=1, col=1)
    fig.add_trace(go.Scatter(x=trace["step"], y=trace["rate"], name="expected rate d.p_u"), row=2, col=1)
    fig.update_yaxes(type="log", title_text="loss terms", row=1, col=1)
    fig.update_yaxes(title_text="rate", row=2, col=1)
    fig.update_xaxes(title_text="SGD step", row=2, col=1)
    fig.update_layout(margin={"t": 30})
    return fig


def search_distribution_figure(distribution: pd.DataFrame, step: int | None = None) -> go.Figure:
    """The distribution d over dp at one traced step (default: the last), from `search_trace(...).distribution`
    or `.final`."""
    part = distribution
    if "step" in distribution:
        step = int(distribution["step"].max()) if step is None else step
        part = distribution[distribution["step"] == step]
    fig = go.Figure(go.Bar(x=part["dp"], y=part["prob"], name="d"))
    fig.update_layout(xaxis_title="dp (the pattern keeps 1 unit in dp)", yaxis_title="probability of the pattern",
                      title=None if step is None else f"step {step}", margin={"t": 40}, height=320)
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def layer_speedup_figure(df: pd.DataFrame) -> go.Figure:
    """Speedup over conventional dropout + full GEMMs per width and p, with the ceiling 1/(1-p),
    from `layer_speedup`; error bars: the range of the repeats' own ratios (when the table has it)."""
    label = [f"w={w}, p={p:g}" for w, p in zip(df["width"], df["p"])]
    df = df.assign(cell=label)
    fig = go.Figure()
    spread = "speedup_lo" in df
    for c, part in df[df["contestant"] != "conventional"].groupby("contestant", sort=False):
        err = ({"error_y": {"type": "data", "array": list(part["speedup_hi"] - part["speedup"]),
                            "arrayminus": list(part["speedup"] - part["speedup_lo"]), "thickness": 1.5}}
               if spread else {})
        hover = ([f"{DROPOUT_LABELS.get(c, c)}, {cell}: median {s:.2f}x, repeats {lo:.2f}–{hi:.2f}x"
                  + (" (within noise: the range includes 1x)" if lo <= 1 <= hi else "")
                  for cell, s, lo, hi in zip(part["cell"], part["speedup"], part["speedup_lo"], part["speedup_hi"])]
                 if spread else None)
        fig.add_trace(go.Bar(x=part["cell"], y=part["speedup"], name=DROPOUT_LABELS.get(c, c), hovertext=hover,
                             hoverinfo="text" if spread else None, **err))
    ceil = df.drop_duplicates("cell")
    fig.add_trace(go.Scatter(x=ceil["cell"], y=ceil["ceiling"], mode="markers", name="ceiling 1/(1-p)",
                             marker={"symbol": "line-ew-open", "size": 24, "color": "black"}))
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(barmode="group", xaxis_title="layer pair", yaxis_title="speedup (x)", legend_title="",
                      margin={"t": 30})
    return fig


def dropout_table_figure(table: pd.DataFrame, metric: str = "test_acc") -> go.Figure:
    """Grouped bars of one column of `mlp_table(...).table` / `lstm_table(...).table` per run and pattern."""
    labels = {"test_acc": "test accuracy (%)", "speedup": "speedup vs conventional (x)",
              "test_ppl": "test perplexity", "epoch_s": "time per epoch (s)", "acc_change": "accuracy change (points)"}
    x = table["hidden"].astype(str) + " " + table["rates"] if "dataset" in table else table["rates"]
    t = table.assign(x=x)
    fig = go.Figure()
    for kind, part in t.groupby("kind", sort=False):
        fig.add_trace(go.Bar(x=part["x"], y=part[metric], name=DROPOUT_LABELS.get(kind, kind)))
    fig.update_layout(barmode="group", xaxis_title="network, dropout rates", yaxis_title=labels.get(metric, metric),
                      legend_title="dropout", margin={"t": 30})
    return fig


def dropout_curve_figure(curves: pd.DataFrame, x: str = "epoch", y: str = "train_loss") -> go.Figure:
    """Training curves of the MLP / LSTM runs (one line per run), from the experiments' `.curves`
    or the points streamed to `on_point`."""
    labels = {"train_loss": "training loss", "test_acc": "test accuracy (%)", "train_ppl": "training perplexity",
              "valid_ppl": "validation perplexity", "epoch": "epochs", "step": "updates"}
    fig = go.Figure()
    if y not in curves or x not in curves or "run" not in curves:  # a live curve before its first point of y
        fig.update_layout(xaxis_title=labels.get(x, x), yaxis_title=labels.get(y, y), margin={"t": 30})
        return fig
    for run, part in curves.dropna(subset=[y]).groupby("run", sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=str(run)))
    fig.update_layout(xaxis_title=labels.get(x, x), yaxis_title=labels.get(y, y), legend_title="run", margin={"t": 30})
    return fig


# --- dashboard ---
# Figures for the dashboard pages and notebooks (codecs, transfer, collectives); every axis has units.


def dropout_pattern_figure(masks: pd.DataFrame) -> go.Figure:
    """`dropout_mask_figure` laid out for the dashboard: room for the panel titles, axis units."""
    fig = dropout_mask_figure(masks)
    rows = -(-masks.groupby(["kind", "sample"]).ngroups // max(1, int(masks.groupby("kind")["sample"].nunique().max())))
    for r in range(1, rows):
        fig.update_xaxes(showticklabels=False, row=r)
    fig.update_xaxes(title_text="unit (column of the activation)", row=rows)
    fig.update_yaxes(title_text="sample in batch", col=1)
    fig.update_layout(height=max(280, 200 * rows), margin={"t": 40, "b": 50, "l": 60, "r": 10})
    return fig


def dropout_paper_figure(table: pd.DataFrame, metric: str = "speedup") -> go.Figure:
    """Our runs beside the paper's (Table I for the MLP at p = 0.7, Table II for the LSTM): one pair of bars
    per pattern and size, `metric` 'speedup' (x vs conventional) or 'acc' (test accuracy, %). Rows without a
    paper number show ours alone."""
    paper_col = {"speedup": "paper_speedup", "acc": "paper_acc"}[metric]
    ours_col = {"speedup": "speedup", "acc": "test_acc"}[metric]
    t = table[table["kind"] != "bernoulli"] if metric == "speedup" else table
    size = t["hidden"].astype(str) if "dataset" in t else t["rates"].astype(str)
    x = [DROPOUT_LABELS.get(k, k) + (f", {s}" if size.nunique() > 1 else "") for k, s in zip(t["kind"], size)]
    fig = go.Figure([go.Bar(x=x, y=t[ours_col], name="here", text=[f"{v:.2f}" for v in t[ours_col]],
                            textposition="outside")])
    if paper_col in t and t[paper_col].notna().any():
        fig.add_trace(go.Bar(x=x, y=t[paper_col], name="paper", text=[
            "" if pd.isna(v) else f"{v:.2f}" for v in t[paper_col]], textposition="outside"))
    if metric == "speedup":
        fig.add_hline(y=1.0, line_dash="dot")
    y = {"speedup": "speedup per epoch (x; 1 = conventional)", "acc": "test accuracy (%)"}[metric]
    fig.update_layout(barmode="group", yaxis_title=y, xaxis_title="pattern", legend_title="", margin={"t": 30},
                      height=340)
    if metric == "acc":
        lo = float(min(t[ours_col].min(), t[paper_col].min() if paper_col in t else 100))
        fig.update_yaxes(range=[max(0.0, lo - 10), 100])
    return fig
