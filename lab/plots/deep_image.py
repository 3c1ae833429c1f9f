"""Deep Image figures (Wu et al. 2015 §4): augmentation previews, counts and throughput, multi-scale fusion."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


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


def log_ticks(values) -> dict:
    """Explicit tick values and labels for a log axis over `values`: every power of ten, written out up to
    100,000 and as 10^k beyond (no SI prefixes on counts)."""
    import math

    v = [float(x) for x in pd.Series(values).dropna() if float(x) > 0]
    if not v:
        return {}
    lo, hi = math.floor(math.log10(min(v))), math.ceil(math.log10(max(v)))
    step = max(1, -(-(hi - lo) // 8))
    ks = list(range(lo, hi + 1, step))
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    text = [f"{10 ** k:,.0f}" if 0 <= k <= 5 else f"{10 ** k:g}" if k < 0 else "10" + str(k).translate(sup) for k in ks]
    return {"tickvals": [10.0 ** k for k in ks], "ticktext": text}


def _augment_bars(names, series: dict, y_title: str) -> go.Figure:
    """Grouped bars per augmentation on a log axis with explicit ticks, one bar series per entry of `series`."""
    labels = [AUGMENT_LABELS.get(n, n) for n in names]
    fig = go.Figure([go.Bar(x=labels, y=y, name=name) for name, y in series.items()])
    fig.update_layout(barmode="group", xaxis_title="augmentation", yaxis_title=y_title,
                      yaxis_type="log", legend_title="", margin={"t": 30})
    fig.update_yaxes(**log_ticks(pd.concat([pd.Series(list(y)) for y in series.values()])))
    return fig


def fusion_figure(table: pd.DataFrame) -> go.Figure:
    """Test error of each single-scale model and of the fusion (§4.2), from `multiscale_fusion(...).table` (or any
    table of model, test_error with the fusion last). Colour says better/worse only: the fusion's bar is green when
    it beats every single model, orange when not."""
    err = list(table["test_error"])
    better = len(err) > 1 and err[-1] < min(err[:-1])
    fig = go.Figure(go.Bar(x=table["model"], y=err,
                           marker_color=["#7f8fa6"] * (len(table) - 1) + ["#2ca02c" if better else "#ff7f0e"],
                           text=[f"{e:.2f}%" for e in err], textposition="outside", cliponaxis=False))
    fig.update_layout(xaxis_title="model (input scale)", yaxis_title="test error (%)", margin={"t": 30}, height=340)
    fig.update_yaxes(range=[0, max(err) * 1.2 if err else 1])
    return fig


def fusion_curve_figure(curves: pd.DataFrame, y: str = "test_error") -> go.Figure:
    """Test error (or training loss) per epoch of each single-scale model, from `multiscale_fusion(...).curves`."""
    label = {"test_error": "test error (%)", "train_loss": "training loss (cross-entropy)"}.get(y, y)
    fig = go.Figure()
    for name, part in curves.groupby("model", sort=False):
        fig.add_trace(go.Scatter(x=part["epoch"], y=part[y], mode="lines+markers", name=str(name)))
    fig.update_layout(xaxis_title="epoch", yaxis_title=label, legend_title="model", margin={"t": 30})
    return fig
