"""Plotly figures built from experiment tables (DESIGN.md rule 3: UIs only render these)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .codecs import TableCodec


def value_table_figure(codecs: list[TableCodec]) -> go.Figure:
    """Positive entries of each value table on a log axis: where a type spends its codes (§3.1)."""
    fig = go.Figure()
    for c in codecs:
        v = c.values
        pos = v[v > 0].tolist()
        fig.add_trace(go.Scatter(x=list(range(len(pos))), y=pos, mode="markers", name=c.describe(),
                                 marker={"size": 4}))
    fig.update_layout(xaxis_title="code index among positive values", yaxis_title="value (× scale)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig


def error_bar_figure(df: pd.DataFrame, metric: str = "mean_rel_error") -> go.Figure:
    """Grouped bars of one error metric per codec and data set, from `error_table`."""
    labels = {"mean_rel_error": "mean relative error (fraction)", "mae": "mean absolute error",
              "rmse": "RMSE", "snr_db": "SNR (dB)", "max_error": "max absolute error"}
    fig = go.Figure()
    for codec, part in df.groupby("codec", sort=False):
        fig.add_trace(go.Bar(x=part["data"], y=part[metric], name=codec))
    fig.update_layout(barmode="group", xaxis_title="data", yaxis_title=labels.get(metric, metric),
                      legend_title="codec", margin={"t": 30})
    return fig


TRAIN_AXES = {"step": "updates", "epoch": "epochs", "bytes": "bytes sent (all workers)",
              "time_s": "modelled wall-clock time (s)", "wall_s": "measured wall-clock time (s)"}


def training_curve_figure(curves: pd.DataFrame, x: str = "epoch", y: str = "test_error") -> go.Figure:
    """Test error (or train loss) per variant against updates, epochs, bytes or modelled time."""
    if x not in TRAIN_AXES:
        raise ValueError(f"x={x!r}; allowed: {', '.join(TRAIN_AXES)}")
    ylabel = {"test_error": "test error (%)", "train_loss": "training loss", "test_loss": "test loss"}.get(y, y)
    fig = go.Figure()
    for name, part in curves.groupby("variant", sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=str(name)))
    fig.update_layout(xaxis_title=TRAIN_AXES[x], yaxis_title=ylabel, legend_title="run", margin={"t": 30})
    return fig


def reproduction_figure(summary: pd.DataFrame) -> go.Figure:
    """Mean final test error per type with its 99% confidence interval (Dettmers 2016 §3.4)."""
    err_hi = (summary["ci99_high"] - summary["mean_test_error"]).fillna(0)
    err_lo = (summary["mean_test_error"] - summary["ci99_low"]).fillna(0)
    fig = go.Figure(go.Bar(x=summary["type"], y=summary["mean_test_error"],
                           error_y={"type": "data", "array": err_hi, "arrayminus": err_lo}))
    fig.update_layout(xaxis_title="data type on the wire", yaxis_title="final test error (%), 99% CI",
                      margin={"t": 30})
    return fig


# --- dropout ---
# Approximate Random Dropout (Song et al. 2019): figures from lab.experiments.dropout's tables.
DROPOUT_LABELS = {"bernoulli": "conventional", "row": "RDP (row)", "tile": "TDP (tile)", "dense": "no dropout",
                  "conventional": "conventional", "none": "no dropout"}


def dropout_mask_figure(masks: pd.DataFrame) -> go.Figure:
    """Keep-masks of sampled patterns, one panel per kind and sample (§III-A/B, Fig. 3), from `pattern_masks`."""
    from plotly.subplots import make_subplots

    panels = list(masks.groupby(["kind", "sample"], sort=False))
    titles = []
    for (kind, s), part in panels:
        dp = part["dp"].iloc[0]
        titles.append(f"{DROPOUT_LABELS.get(kind, kind)}" + (f" dp={int(dp)} b={int(part['bias'].iloc[0])}"
                                                             if pd.notna(dp) else f" #{s + 1}"))
    cols = max(1, int(masks.groupby("kind")["sample"].nunique().max()))
    rows = -(-len(panels) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.03, vertical_spacing=0.08)
    for k, (_, part) in enumerate(panels):
        grid = part.pivot(index="row", columns="unit", values="kept")
        fig.add_trace(go.Heatmap(z=grid.to_numpy(), colorscale=[[0, "#eeeeee"], [1, "#1f77b4"]], zmin=0, zmax=1,
                                 showscale=False, hovertemplate="sample row %{y}, unit %{x}: kept %{z}<extra></extra>"),
                      row=k // cols + 1, col=k % cols + 1)
    fig.update_yaxes(autorange="reversed")
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
    fig.update_layout(xaxis_title="unit", yaxis_title="drop frequency", legend_title="dropout", margin={"t": 30})
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
    fig.update_layout(xaxis_title="dp (pattern keeps 1/dp)", yaxis_title="probability",
                      title=None if step is None else f"step {step}", margin={"t": 40})
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def layer_speedup_figure(df: pd.DataFrame) -> go.Figure:
    """Speedup over conventional dropout + full GEMMs per width and p, with the ceiling 1/(1-p),
    from `layer_speedup`."""
    label = [f"w={w}, p={p:g}" for w, p in zip(df["width"], df["p"])]
    df = df.assign(cell=label)
    fig = go.Figure()
    for c, part in df[df["contestant"] != "conventional"].groupby("contestant", sort=False):
        fig.add_trace(go.Bar(x=part["cell"], y=part["speedup"], name=DROPOUT_LABELS.get(c, c)))
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
    for run, part in curves.dropna(subset=[y]).groupby("run", sort=False):
        fig.add_trace(go.Scatter(x=part[x], y=part[y], mode="lines+markers", name=str(run)))
    fig.update_layout(xaxis_title=labels.get(x, x), yaxis_title=labels.get(y, y), legend_title="run", margin={"t": 30})
    return fig


# --- dashboard ---
# Figures for the dashboard pages and notebooks (codecs, transfer, collectives); every axis has units.

def error_histogram_figure(hist: pd.DataFrame) -> go.Figure:
    """Distribution of log10 relative error per codec, from `errors.error_histogram`."""
    fig = go.Figure()
    for codec, part in hist.groupby("codec", sort=False):
        mid = (part["bin_left"] + part["bin_right"]) / 2
        fig.add_trace(go.Scatter(x=10.0 ** mid, y=100 * part["fraction"], mode="lines", line_shape="hvh",
                                 name=str(codec)))
    fig.update_layout(xaxis_title="relative error |y − x| / |x| (lowest bin: exact or below)",
                      yaxis_title="share of values (%)", xaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig


def codec_speed_figure(speed: pd.DataFrame) -> go.Figure:
    """Encode and decode ns per value per codec on this device, from `errors.codec_speed`."""
    fig = go.Figure()
    for op, part in speed.groupby("op", sort=False):
        fig.add_trace(go.Bar(x=part["codec"], y=part["ns_per_value"], name=str(op)))
    fig.update_layout(barmode="group", xaxis_title="codec", yaxis_title="time per value (ns)", yaxis_type="log",
                      legend_title="operation", margin={"t": 30})
    return fig


def transfer_figure(df: pd.DataFrame, y: str = "seconds") -> go.Figure:
    """Dettmers 2016 Figure 2: one-way time (or speedup over 32-bit) against message size per codec;
    rows of `transfer_model` (source 'model', dashed) and/or `transfer_sweep` (measured, solid)."""
    if y not in ("seconds", "speedup_vs_fp32"):
        raise ValueError(f"y={y!r}; allowed: seconds, speedup_vs_fp32")
    fig = go.Figure()
    src = df["source"] if "source" in df else pd.Series("measured", index=df.index)
    for (s, codec), part in df.assign(source=src).groupby(["source", "codec"], sort=False):
        fig.add_trace(go.Scatter(x=part["n_values"], y=part[y] * (1e3 if y == "seconds" else 1), mode="lines+markers",
                                 name=f"{codec} ({s})", line_dash="dash" if s == "model" else "solid"))
    if y == "speedup_vs_fp32":
        fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(xaxis_title="message size (float32 values)", xaxis_type="log",
                      yaxis_title="one-way time (ms)" if y == "seconds" else "speedup over 32-bit (x)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
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


def dropout_pattern_figure(masks: pd.DataFrame) -> go.Figure:
    """`dropout_mask_figure` laid out for the dashboard: room for the panel titles, axis units."""
    fig = dropout_mask_figure(masks)
    rows = -(-masks.groupby(["kind", "sample"]).ngroups // max(1, int(masks.groupby("kind")["sample"].nunique().max())))
    fig.update_xaxes(showticklabels=False)
    fig.update_xaxes(title_text="unit (column of the activation)", row=rows)
    fig.update_yaxes(title_text="sample in batch", col=1)
    fig.update_layout(height=max(280, 250 * rows), margin={"t": 40, "b": 50})
    return fig


# --- deep image and planner ---
# Deep Image (Wu et al. 2015) and the parallelism planner: figures from lab.experiments.deep_image / .plan.
AUGMENT_LABELS = {"crop": "random crop", "color_cast": "color casting", "vignette": "vignetting",
                  "lens_distortion": "lens distortion", "rotation": "rotation", "flip": "flip",
                  "all": "all (crop first)"}


def _png_uri(hwc) -> str:
    """An (H, W, 3) uint8 array as a PNG data URI: ~10x fewer bytes to the browser than go.Image(z=)."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(hwc).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def augment_preview_figure(preview) -> go.Figure:
    """The preview grid of `augmentation_preview`: one row per augmentation, one column per draw (§4.1,
    Fig. 5); with one image per augmentation (`augmentation_settings`) a grid of up to 4 per row."""
    import torch
    from plotly.subplots import make_subplots

    names = list(preview.panels)
    draws = max(int(p.shape[0]) for p in preview.panels.values())
    if draws == 1:  # one image per augmentation (`augmentation_settings`): a grid of 4 per row
        cols = min(4, len(names))
        cells = [(n, preview.panels[n][0], k // cols, k % cols) for k, n in enumerate(names)]
        titles = [AUGMENT_LABELS.get(n, n) for n in names]
    else:
        cols = draws
        cells = [(n, img, i, j) for i, n in enumerate(names) for j, img in enumerate(preview.panels[n])]
        titles = [f"{AUGMENT_LABELS.get(n, n)} #{j + 1}" for n in names for j in range(cols)]
    rows = 1 + max(r for _, _, r, _ in cells)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.01,
                        vertical_spacing=0.03)
    for _, img, r, c in cells:
        z = img.detach().cpu()
        if z.dtype.is_floating_point:
            z = (z.float().clamp(0, 1) * 255).round().to(torch.uint8)
        fig.add_trace(go.Image(source=_png_uri(z.permute(1, 2, 0).numpy())), row=r + 1, col=c + 1)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=(180 if draws > 1 else 230) * rows, margin={"t": 40, "l": 10, "r": 10, "b": 10})
    return fig


def augment_counts_figure(counts: pd.DataFrame) -> go.Figure:
    """Table 1's possible changes per augmentation (from the grids) beside the paper's, log scale."""
    part = counts[counts["augmentation"] != "all (product)"]
    return _augment_bars(part["augmentation"], {"from the grids": part["possible_changes"],
                                                "paper (Table 1)": part["paper"]},
                         "possible changes (count, log scale)")


def augment_throughput_figure(df: pd.DataFrame) -> go.Figure:
    """Images/s per op, batched vs a per-image loop (same run), from `augmentation_throughput`."""
    return _augment_bars(df["op"], {"batched": df["batched_img_s"], "per-image loop": df["loop_img_s"]},
                         "throughput (images/s, log scale)")


def _augment_bars(names, series: dict, y_title: str) -> go.Figure:
    """Grouped bars per augmentation on a log axis, one bar series per entry of `series`."""
    labels = [AUGMENT_LABELS.get(n, n) for n in names]
    fig = go.Figure([go.Bar(x=labels, y=y, name=name) for name, y in series.items()])
    fig.update_layout(barmode="group", xaxis_title="augmentation", yaxis_title=y_title,
                      yaxis_type="log", legend_title="", margin={"t": 30})
    return fig


def fusion_figure(table: pd.DataFrame) -> go.Figure:
    """Test error of each single-scale model and of the fusion (§4.2), from `multiscale_fusion(...).table`."""
    fig = go.Figure(go.Bar(x=table["model"], y=table["test_error"],
                           marker_color=["#1f77b4"] * (len(table) - 1) + ["#d62728"],
                           text=[f"{e:.2f}%" for e in table["test_error"]], textposition="outside"))
    fig.update_layout(xaxis_title="model (input scale)", yaxis_title="test error (%)", margin={"t": 30})
    return fig


def fusion_curve_figure(curves: pd.DataFrame, y: str = "test_error") -> go.Figure:
    """Test error (or training loss) per epoch of each single-scale model, from `multiscale_fusion(...).curves`."""
    label = {"test_error": "test error (%)", "train_loss": "training loss (cross-entropy)"}.get(y, y)
    fig = go.Figure()
    for name, part in curves.groupby("model", sort=False):
        fig.add_trace(go.Scatter(x=part["epoch"], y=part[y], mode="lines+markers", name=str(name)))
    fig.update_layout(xaxis_title="epoch", yaxis_title=label, legend_title="model", margin={"t": 30})
    return fig


def plan_breakdown_figure(sweep: pd.DataFrame) -> go.Figure:
    """Stacked bars per strategy and P: compute, exposed communication and pipeline bubble (ms per step),
    from `planner_sweep`."""
    ok = sweep[sweep["feasible"]]
    x = [ok["strategy"].tolist(), [f"P={p}" for p in ok["P"]]]
    fig = go.Figure()
    for col, name in (("compute_ms", "compute"), ("exposed_comm_ms", "communication (not hidden)"),
                      ("idle_ms", "pipeline bubble")):
        fig.add_trace(go.Bar(x=x, y=ok[col], name=name))
    fig.update_layout(barmode="stack", xaxis_title="strategy, GPUs", yaxis_title="time per step (ms)",
                      legend_title="", margin={"t": 30})
    return fig


def plan_speedup_figure(sweep: pd.DataFrame, y: str = "speedup") -> go.Figure:
    """Speedup (or scaling efficiency) against P per strategy, with the ideal line, from `planner_sweep`."""
    ok = sweep[sweep["feasible"]]
    fig = go.Figure()
    for s, part in ok.groupby("strategy", sort=False):
        fig.add_trace(go.Scatter(x=part["P"], y=part[y], mode="lines+markers", name=str(s)))
    Ps = sorted(ok["P"].unique())
    fig.add_trace(go.Scatter(x=Ps, y=Ps if y == "speedup" else [1.0] * len(Ps), mode="lines", name="ideal",
                             line={"dash": "dot", "color": "gray"}))
    label = {"speedup": "speedup vs one GPU (x, log scale)", "efficiency": "scaling efficiency (speedup / P)"}
    fig.update_layout(xaxis_title="GPUs (P, log scale)", yaxis_title=label.get(y, y), xaxis_type="log",
                      yaxis_type="log" if y == "speedup" else "linear", legend_title="strategy", margin={"t": 30})
    return fig


def plan_layers_figure(layers: pd.DataFrame) -> go.Figure:
    """Per-layer compute and communication of one step (ms), from `planner_breakdown(...).layers`."""
    fig = go.Figure([go.Bar(x=layers["layer"], y=layers["compute_ms"], name="compute"),
                     go.Bar(x=layers["layer"], y=layers["comm_ms"], name="communication")])
    fig.update_layout(barmode="group", xaxis_title="layer", yaxis_title="time per step (ms)", legend_title="",
                      margin={"t": 30})
    return fig


def codec_advice_figure(advice: pd.DataFrame) -> go.Figure:
    """Each candidate codec's predicted time per layer (ms, log scale), from `planner_advice`."""
    fig = go.Figure()
    for col in [c for c in advice.columns if c.endswith("_ms") and c != "saving_ms"]:
        fig.add_trace(go.Bar(x=advice["layer"], y=advice[col], name=col[:-3]))
    fig.update_layout(barmode="group", xaxis_title="layer", yaxis_title="communication time per step (ms, log scale)",
                      yaxis_type="log", legend_title="codec", margin={"t": 30})
    return fig
# --- end deep image and planner ---
