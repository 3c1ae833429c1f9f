"""Codecs page: how much error each way of squeezing float32 into 8 (or fewer) bits costs, on a
distribution, captured tensors or your file; Dettmers 2016 Table 1 beside the paper; your own bit layout;
one block of a block-scaled format (OCP MX, NVFP4) and where block scaling beats the per-tensor types."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (BLOCK_PICKS, FIRST_CODECS, BLOCK_SCALED_TYPES, CAPTURE_KINDS, FLOATS, TABLE1_NOTE, TABLE1_TYPES,
                             TableCodec, block_scaling_lesson, block_view, capture_tensors, check_code, code_bits,
                             codec_catalog, codec_speed, compare_formats, element_format, error_histogram, error_table,
                             explorable, explore, format_digits, format_kind, get_codec, grid, load_tensor, number_line,
                             parse_distribution, requantize_block, round_to_code, sample, separable, table1,
                             PAPER_TYPES, mantissa_band, paper_code, paper_codes_of, worked_examples)
from lab.plots import FIELD_COLORS

# distribution -> its parameters: (name, default, what it is and its range); each has its own URL key
# `<dist>.<param>`, so switching distributions never carries one's parameter over as another's
DISTS = {
    "normal": (("mu", 0.0, "mean μ, any number"), ("sigma", 1.0, "standard deviation σ > 0")),
    "uniform": (("a", 0.0, "lower end a, any number below b"), ("b", 1.0, "upper end b > a")),
    "laplace": (("mu", 0.0, "location μ, any number"), ("b", 1.0, "scale b > 0")),
    "student_t": (("df", 3.0, "degrees of freedom > 0; small = heavy tails (3: the usual heavy-tail test)"),),
    "lognormal": (("mu", 0.0, "mean of log x, any number"), ("sigma", 1.0, "standard deviation of log x > 0")),
}
SAMPLES = [10_000, 30_000, 100_000, 1_000_000]
T1_SAMPLES = [100_000, 1_000_000, 25_000_000]
T1_INSTANT = 100_000
SECTIONS = {"Table 1 beside the paper": "Dettmers 2016 Table 1, the paper's numbers beside ours with both roundings",
            "One MX / NVFP4 block": "one block of a block-scaled format on your data: its shared scale, which values "
                                    "saturate and which flush to zero",
            "Block scaling vs per tensor": "where one scale per 16 or 32 values beats the paper's one scale per "
                                           "tensor at the same bits, and where not",
            "Speed": "encode / decode time on this device, each with its spread",
            "Top-k of the mean": "Alistarh et al.'s assumption: is the top-k of the workers' mean gradient the mean "
                                 "of their top-ks, against the number of workers and k",
            "Bit explorer": "Float Toy: type a value or flip a code's bits in fp32, fp16, bf16, fp8 (E4M3, E5M2), the "
                            "value tables and the block-scaled formats; its neighbours, rounding interval and number "
                            "line, your value in every format; one MX / NVFP4 block under a shared scale you set"}
VIEWS = ["Error per codec", "Error histograms", "Value tables"]

COLUMNS = {  # error_table column -> (plain name, tooltip with the paper's symbol)
    "data": ("Data", "the distribution (spec string) or the tensor's name"),
    "codec": ("Codec", "codec and its options: [rounding, scale] for the value tables"),
    "mean_rel_error": ("Mean relative error (%)", "mean of |y − x| / |x| over x ≠ 0: Table 1's 'relative error'"),
    "mae": ("Mean absolute error", "MAE: mean |y − x| in the data's units (Table 1's 'absolute error')"),
    "snr_db": ("SNR (dB)", "signal-to-noise ratio 10·log10(Σx² / Σ(y − x)²); higher is better"),
    "max_error": ("Largest absolute error", "max |y − x|: what the worst value (an outlier) suffers"),
    "bits_per_value": ("Bits per value", "wire bits per value, scales included (32 = float32)"),
}
T1_COLUMNS = {
    "distribution": ("Distribution", "Table 1's distributions; N(0, 10²) means σ = 10"),
    "type": ("Type", "the paper's four 8-bit data types (§3.1)"),
    "paper_rel_pct": ("Paper %", "relative error in %, published in Dettmers 2016 Table 1 (25 M samples)"),
    "rel_pct_paper": ("Ours %", "relative error in %, measured here with the paper's rounding (the original "
                                "kernel's bisection: about a quarter of codes one step low)"),
    "rel_pct_nearest": ("Ours exact %", "relative error in %, measured here rounding to the nearest table value"),
    "paper_mae": ("Paper MAE", "mean absolute error published in Table 1 ('paper_mae' in the CSV)"),
    "mae_paper": ("Our MAE", "mean absolute error measured here with the paper's rounding ('mae_paper' in the CSV; "
                             "'mae_nearest' there: exact rounding)"),
}


def _show(df: pd.DataFrame, columns: dict, name: str, pct: tuple[str, ...] = ()) -> None:
    """A table with plain column names, the paper's symbol/meaning in each header's tooltip."""
    out = df[[c for c in columns if c in df]].copy()
    for c in pct:
        if c in out:
            out[c] = 100 * out[c]
    out = out.rename(columns={c: columns[c][0] for c in out.columns})
    ui.table(out, name, help={columns[c][0]: columns[c][1] for c in columns if c in df})


@st.cache_data(show_spinner=False, max_entries=16)
def _data(dist: str | None, capture: str | None, upload_key, samples: int, seed: int, _upload=None):
    """{name: tensor} of the chosen data (a distribution's sample, captured tensors or the upload)."""
    if capture:
        return capture_tensors(capture, seed=seed)
    if upload_key is not None:
        return {upload_key[0]: load_tensor(_upload, upload_key[0])}
    return {dist: sample(dist, samples, seed)}


@st.cache_data(show_spinner="measuring…", max_entries=32)
def _errors(specs: tuple, layout_key, dist, capture, upload_key, samples: int, seed: int, _layout=None, _upload=None):
    import torch

    codecs = [get_codec(c) for c in specs] + ([_layout] if _layout is not None else [])
    tensors = _data(dist, capture, upload_key, samples, seed, _upload=_upload)
    if dist and not capture and upload_key is None:
        df = error_table(codecs, [dist], samples=samples, seed=seed)
        hist = error_histogram(codecs, dist, samples=samples, seed=seed)
    else:
        df = error_table(codecs, [], tensors=tensors, seed=seed)
        hist = error_histogram(codecs, tensor=torch.cat([t.reshape(-1) for t in tensors.values()]))
    return df, hist


@st.cache_data(show_spinner="Table 1…", max_entries=8)
def _table1(samples: int, seed: int):
    return table1(samples=samples, seed=seed)


@st.cache_data(show_spinner="measuring block scaling…", max_entries=8)
def _lesson(bits: int, seed: int):
    return block_scaling_lesson(bits, seed=seed)


@st.cache_data(show_spinner=False, max_entries=32)
def _block(codec: str, key, block, _x=None):
    return block_view(codec, _x, block)


def _pct(v: float) -> str:
    return f"{100 * v:.3g} %"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2g}x" if b > 0 else "∞x"


@st.fragment
def block_section(x, data_name: str, data_key) -> None:
    """One block of a block-scaled format on the user's data: values, decoded values, saturation, flushes."""
    st.subheader("One block of a block-scaled format, on your data")
    st.caption("OCP MX formats share one power-of-two scale (E8M0) per 32 values; NVFP4 one E4M3 scale per 16 "
               "values times an fp32 scale per tensor. Hollow circles: your values; dots: what comes back.")
    c1, c2, c3 = st.columns([2, 2, 1])
    fmt = ui.select("Format", list(BLOCK_SCALED_TYPES), "blk_fmt", "mxfp4_e2m1", where=c1,
                    help="the block-scaled codec to draw: mxfp8_e4m3 … mxint8 (OCP MX v1.0, 32-value blocks), "
                         "nvfp4 (16-value blocks)")
    pick = ui.select("Which block", list(BLOCK_PICKS), "blk_pick", BLOCK_PICKS[0], where=c2,
                     help="the block holding the largest |x|, the one losing most values to zero, the one with "
                          "most clipped values, or a block by its number")
    block = pick
    if pick == "by number":
        block = ui.number("Block number", "blk_num", 0, where=c3, min_value=0, step=1,
                          help="0 = the first block; the last is (values − 1) // block size")
    try:
        view = _block(fmt, (data_key, fmt), block, _x=x)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return
    a, n = view.attrs, view.attrs["counts"]
    m = st.columns(4)
    m[0].metric("Shared scale", f"{a['scale']:.4g}", help="the block's scale: decoded = element × scale")
    m[1].metric("Saturated", f"{n['saturated']} of {len(view)}", help="|x| above the largest representable "
                "value of this block (red dotted lines), clipped to it", delta_color="off")
    m[2].metric("Flushed to zero", f"{n['flushed to zero']} of {len(view)}", help="non-zero values below half "
                "the smallest positive value of this block (grey band): decoded as 0")
    m[3].metric("Block range", f"{a['smallest']:.2g} … {a['largest']:.3g}",
                help="smallest positive and largest magnitude this block can represent")
    ui.figure(plots.block_figure(view), view, "codec_block")
    worst = view.assign(err=(view.decoded - view.value).abs()).sort_values("err").iloc[-1]
    ui.takeaway(f"In block {a['block']} of {data_name} ({a['blocks']:,} blocks of {a['block_size']}), "
                f"{a['codec']} shares the scale {a['scale']:.3g}: {n['saturated']} value(s) saturate at ±{a['largest']:.3g}, "
                f"{n['flushed to zero']} non-zero value(s) below {a['smallest'] / 2:.2g} flush to 0, and the largest "
                f"error is {abs(worst.decoded - worst.value):.3g} (value {worst.value:.4g} → {worst.decoded:.4g}).",
                key="takeaway-block")


@st.fragment
def lesson_section(seed: int) -> None:
    """Block scaling against the paper's per-tensor types at equal bits, on four kinds of data."""
    st.subheader("Block scaling vs the paper's one scale per tensor")
    st.caption("Same data, about the same bits per value: the paper's dynamic tree and linear types (one fp32 absmax "
               "per tensor) against the block-scaled formats (one scale per 16 or 32 values).")
    c1, c2 = st.columns(2)
    bits = ui.radio("Bits per value", ["8", "4"], "les_bits", "8", where=c1,
                    help="8: dynamic tree and linear vs MXFP8 (E4M3, E5M2) and MXINT8; 4: a 4-bit dynamic tree vs "
                         "MXFP4 and NVFP4")
    metric = ui.radio("Error measure", ["Mean relative error (%)", "SNR (dB)"], "les_metric",
                      "Mean relative error (%)", where=c2,
                      help="relative error weighs every value alike (small ones too); SNR weighs by energy")
    df = _lesson(int(bits), seed)
    col = "mean_rel_error" if metric.startswith("Mean") else "snr_db"
    ui.figure(plots.block_lesson_figure(df, col), df, "codec_block_lesson")
    wins, ties, losses = [], [], []
    for data, part in df.groupby("data", sort=False):
        tens = part[~part.per_block].sort_values("mean_rel_error").iloc[0]
        blk = part[part.per_block].sort_values("mean_rel_error").iloc[0]
        short = data.split(":")[0].split(" (")[0]
        item = f"{short} ({_pct(blk.mean_rel_error)} vs {_pct(tens.mean_rel_error)})"
        r = blk.mean_rel_error / tens.mean_rel_error
        (ties if abs(r - 1) < 0.03 else wins if r < 1 else losses).append(item)
    best_block = df[df.per_block].groupby("codec").mean_rel_error.mean().idxmin()
    text = (f"At {bits} bits, block scaling (best: {best_block}) has a lower mean relative error than the best "
            f"per-tensor type on " + (", ".join(wins) if wins else "none of the data sets")
            + (f"; it loses on {', '.join(losses)}" if losses else "")
            + (f"; about equal on {', '.join(ties)}" if ties else "") + ".")
    ui.takeaway(text, key="takeaway-lesson")


@st.fragment
def topk_assumption_section(seed: int) -> None:
    """Alistarh et al. 2018's Assumption 1, live: xi = ||TopK(mean) - mean(TopK)|| / ||mean|| against P and k."""
    import plotly.graph_objects as go

    from lab.experiments import TOPK_ASSUMPTION_RATIOS, topk_assumption

    st.subheader("Is top-k of the mean the mean of the top-ks?")
    st.caption("Top-k SGD (Alistarh et al. 2018) sends each worker's k largest gradient values and averages them; "
               "its convergence proof assumes that this is close to the top-k of the averaged gradient: "
               "xi = ||TopK(G) - mean of the P workers' TopK(g_p)|| / ||G|| stays bounded (Assumption 1). Here P "
               "workers take real gradients of the paper's MLP on their own digits, at the same weights.")
    c1, c2 = st.columns(2)
    labels = {f"{100 * r:g} %": r for r in TOPK_ASSUMPTION_RATIOS}
    picked = ui.multiselect("Top-k keeps (fraction of values)", list(labels), "ta_ratios", list(labels), where=c1,
                            help="k = this fraction of the MLP's weight gradients, for each worker and for the mean")
    batch = ui.select_slider("Samples per worker", [4, 8, 16, 32], "ta_batch", 16, where=c2,
                             help="each worker's batch of digits: 4 to 32 (P up to 32 workers)")
    if not picked:
        st.error("Top-k keeps (fraction of values): pick at least one of " + ", ".join(labels) + ".")
        return
    df = _topk_gap(tuple(labels[p] for p in picked), int(batch), seed)
    last, first = df.workers.max(), 2
    grow = df[df.workers == last].xi.mean() / df[df.workers == first].xi.mean()
    trend = "grows with P" if grow > 1.25 else "shrinks with P" if grow < 0.8 else "stays about the same"

    def reveal():
        return trend, (f"From P = {first} to P = {last} workers, xi averaged over the k shown goes from "
                       f"{df[df.workers == first].xi.mean():.2f} to {df[df.workers == last].xi.mean():.2f} "
                       f"({grow:.2f}x).")

    ui.predict("As more workers average their gradients, does the top-k of the mean drift away from the mean "
               "of the workers' top-ks (xi, relative to the mean gradient's norm)?",
               ["grows with P", "stays about the same", "shrinks with P"], reveal, key="ta_guess")
    if not ui.revealed("ta_guess"):
        st.info("The chart of xi against P and the takeaway show once you answer the question above, or skip it.")
        return
    fig = go.Figure()
    for r, part in df.groupby("ratio", sort=True):
        fig.add_trace(go.Scatter(x=part.workers, y=part.xi, mode="lines+markers",
                                 name=f"top {100 * r:g} % (k = {int(part.k.iloc[0]):,})"))
    fig.update_layout(xaxis_title="workers P", yaxis_title="xi = ||TopK(G) - mean TopK(g_p)|| / ||G||",
                      margin={"t": 30, "l": 80}, legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(type="log", tickvals=sorted(df.workers.unique()))
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="xi = 1: the gap as large as the gradient")
    ui.figure(fig, df, "topk_assumption")
    top = df[df.workers > 1]
    worst = top.loc[top.xi.idxmax()]
    held = "stays below 1" if top.xi.max() < 1 else "reaches 1 or more"
    ui.takeaway(f"On these gradients xi {held} for every P and k shown (largest {worst.xi:.2f}, at P = "
                f"{int(worst.workers)} and top {100 * worst.ratio:g} %); from P = {first} to {last} it changes "
                f"{grow:.2f}x on average: summing the workers' top-ks loses a bounded share of the mean gradient, "
                "which error feedback carries to the next step.", key="takeaway-topk-assumption")


@st.cache_data(show_spinner="taking the workers' gradients…", max_entries=8)
def _topk_gap(ratios: tuple, batch: int, seed: int):
    from lab.experiments import topk_assumption

    return topk_assumption(ratios=ratios, batch=batch, seed=seed)


@st.fragment
def table1_section(seed: int) -> None:
    """Dettmers 2016 Table 1 beside the paper, both roundings."""
    st.subheader("Table 1 of the paper, beside ours")
    st.caption("The paper's conditions: absmax per tensor for dynamic tree and linear, exponent offset 10¹ for "
               "mantissa and static tree (10² on N(0, 10²)). We measure each type with the paper's kernel rounding "
               "and with exact rounding.")
    n = ui.select_slider("Table 1 samples", T1_SAMPLES, "t1_samples", T1_INSTANT,
                         format_func=lambda v: f"{v / 1e6:g} million" + (" (the paper's)" if v == 25_000_000 else ""),
                         help="samples per distribution: 0.1 million shows at once; more (the paper used 25 million) "
                              "behind the Run button, 1 to 60 seconds")
    if n == T1_INSTANT:
        t1 = _table1(n, seed)
    elif ui.run_button(f"Run Table 1 at {n / 1e6:g} million samples", "t1_run", [n, seed]):
        cb = ui.progress()
        t1 = ui.cached_run("table1", [n, seed], lambda: table1(samples=n, seed=seed, progress=cb))
        cb(1.0, "done")
    else:
        st.caption("Showing 0.1 million samples until Run is pressed.")
        t1 = _table1(T1_INSTANT, seed)
    ui.figure(plots.table1_figure(t1), t1, "codec_table1")
    st.caption("Relative error (%) = mean |y − x| / |x|. Paper: published; Ours: measured here with the paper's "
               "rounding; Ours exact: rounding to the nearest value; MAE: mean absolute error.")
    _show(t1, T1_COLUMNS, "table1")
    d = t1.assign(diff=(t1.rel_pct_paper - t1.paper_rel_pct).abs())
    by_type = d.groupby("type", sort=False)["diff"].max()
    close = [t for t in by_type.index if t != "linear"]
    ui.paper_callout(
        f"With the paper's rounding our relative errors are within {by_type[close].max():.2g} points of the published "
        f"ones for {', '.join(close)}; linear differs by up to {by_type['linear']:.2g} points because its grid step is "
        f"the sample's absmax / 127, so its error follows the largest value drawn (the paper's 6.47 % on N(0,1) is what "
        f"a sample reaching 5.97 σ gives). The published MAEs do not fit their own relative errors (0.00004 on U(0,1) "
        f"is below what any 256-value grid can reach, about 0.001), so compare the relative errors.", "table1")
    dyn = t1[(t1.type == "dynamic_tree") & (t1.distribution == "N(0,1)")].iloc[0]
    lin = t1[(t1.type == "linear") & (t1.distribution == "N(0,1)")].iloc[0]
    ui.takeaway(f"On N(0,1) with the paper's rounding the dynamic tree's relative error is {dyn.rel_pct_paper:.2f} % "
                f"(paper {dyn.paper_rel_pct:.2f} %), {lin.rel_pct_paper / dyn.rel_pct_paper:.1f}x lower than linear's "
                f"{lin.rel_pct_paper:.2f} % (paper {lin.paper_rel_pct:.2f} %); exact rounding brings the tree to "
                f"{dyn.rel_pct_nearest:.2f} %.", key="takeaway-table1")
    with st.expander("Notes on the reproduction"):
        st.caption(TABLE1_NOTE)


def _num(v: float | None, digits: int = 6) -> str:
    return "—" if v is None else "∞" if v == float("inf") else "−∞" if v == float("-inf") else f"{v:.{digits}g}"


def _exact(v: float) -> str:
    """A code's value as the Value field shows it: the shortest decimal that reads back as that value."""
    return "nan" if math.isnan(v) else "inf" if v == math.inf else "-inf" if v == -math.inf else repr(float(v))


def _parse_value(raw: str) -> float:
    """The Value field's text as a float: any decimal, inf, -inf or nan (ValueError otherwise)."""
    try:
        return float(str(raw).strip().replace("−", "-").replace("∞", "inf").replace(" ", ""))
    except ValueError:
        raise ValueError(f"{str(raw)!r} is not a number") from None


#: what each kind of format stores of a value (the bit explorer's caption and table)
STORED_AS = {"float": "the value itself", "table": "the value / the tensor's absmax (or the value itself for an "
             "unscaled table)", "element": "the value / the block's shared scale"}
BX_COLUMNS = {  # compare_formats column -> (header, tooltip)
    "format": ("Format", "the explorer's formats: hardware floats, value tables, block-scaled elements"),
    "kind": ("Stores", "what the code holds: the value itself (hardware floats), the value / the tensor's absmax "
                       "(value tables; unscaled ones: the value) or the value / the block's shared scale (block-scaled "
                       "elements; scale 1 here)"),
    "bits": ("Bits", "bits per code"),
    "code_bits": ("Code (sign exponent mantissa)", "the code your value rounds to, its fields apart"),
    "stored": ("Stored value", "what that code decodes to"),
    "error": ("Error", "stored − your value, in the value's units"),
    "rel_error": ("Relative error (%)", "|stored − your value| / |your value|"),
    "spacing": ("Gap to the next value", "distance to the next representable value: the format's resolution here"),
}


def _fields(fmt: str) -> list[tuple[str, list[str]]]:
    """(field name, its bits' names) of a format's code, most significant first: '±', 'e3'…'e0', 'm2'…'m0' for
    a float, 'b7'…'b0' for a table index or an integer."""
    out, short = [], {"sign": None, "exponent": "e", "mantissa": "m"}
    for name, b in explore(fmt, 0).fields:
        w = len(b)
        out.append((name, ["±"] if name == "sign" else
                    [f"{short.get(name) or 'b'}{i}" for i in range(w - 1, -1, -1)]))
    return out


def _field_label(fmt: str, name: str, width: int) -> str:
    if name == "sign":
        return "Sign"
    if name == "exponent":
        bias = FLOATS[fmt].bias if fmt in FLOATS else element_format(fmt).bias
        return f"Exponent ({width} bits, bias {bias})"
    if name == "mantissa":
        return f"Mantissa ({width} bits)"
    if name == "two's complement":
        return f"Two's complement ({width} bits, 6 after the point)"
    return f"Index into the sorted table ({width} bits)"


def _pill_key(fmt: str, field: str) -> str:
    """Session key of one field's bit pills (widget-prefixed: arriving from another page drops it with the rest)."""
    return ui.widget_key(f"bx_{field.split()[0].replace(chr(39), '')}_{fmt}")


SHOWN = ui.widget_key("bx_shown")  # the format whose bits were last set up (absent: the session's first draw)


def _set_code(fmt: str, code: int) -> None:
    """Put `code`'s bits into the bit pills of `fmt` (before they are drawn, or from a callback)."""
    pos = code_bits(fmt)
    for name, bits in _fields(fmt):
        st.session_state[_pill_key(fmt, name)] = [b for i, b in enumerate(bits) if code >> (pos - 1 - i) & 1]
        pos -= len(bits)


def _code_of_pills(fmt: str) -> int:
    code, pos = 0, code_bits(fmt)
    for name, bits in _fields(fmt):
        lit = set(st.session_state.get(_pill_key(fmt, name)) or [])
        code |= sum(1 << (pos - 1 - i) for i, b in enumerate(bits) if b in lit)
        pos -= len(bits)
    return code


def _typed_changed() -> None:
    """The Value field changed: its code (round to nearest) lights the bit pills; a non-number leaves them."""
    fmt = st.session_state.get(ui.widget_key("bx_fmt"))
    try:
        _set_code(fmt, round_to_code(fmt, _parse_value(st.session_state.get(ui.widget_key("bx_x"), ""))))
    except ValueError:
        pass


def _shown_value(fmt: str, v: float) -> str:
    """What the Value field shows for a code's value: its exact decimal; empty for a code of a value table or
    block-scaled element that no rounding produces (no number rounds to it)."""
    return "" if math.isnan(v) and fmt not in FLOATS else _exact(v)


def _bit_flipped() -> None:
    """A bit was clicked: the Value field shows the new code's exact value."""
    fmt = st.session_state.get(ui.widget_key("bx_fmt"))
    st.session_state[ui.widget_key("bx_x")] = _shown_value(fmt, explore(fmt, _code_of_pills(fmt)).value)


def _bits_css() -> None:
    """Each field's bits in its colour (Float Toy's): the bit's digit big (outlined at 0, filled at 1), its name
    small under it."""
    rules = []
    for field, color in FIELD_COLORS.items():
        k = f".st-key-bx_field_{field.split()[0].replace(chr(39), '')}"
        pill, active = f"{k} button[aria-pressed='false']", f"{k} button[aria-pressed='true']"
        rules.append(f"{pill}, {active} {{ border: 2px solid {color} !important; flex-direction: column; "
                     "height: auto !important; min-height: 2.9rem; min-width: 2.3rem; border-radius: 0.5rem; "
                     "padding: 0.15rem 0.3rem; line-height: 1.1; gap: 0.05rem; }")
        rules.append(f"{pill} {{ color: {color} !important; background: white !important; }}")
        rules.append(f"{active} {{ color: white !important; background: {color} !important; }}")
        rules.append(f"{pill}::before, {active}::before {{ font: 700 1.1rem monospace; }}")
        rules.append(f"{pill}::before {{ content: '0'; }}")
        rules.append(f"{active}::before {{ content: '1'; }}")
        rules.append(f"{pill} p, {active} p {{ font-size: 0.7rem; line-height: 1; }}")
        rules.append(f"{k} [data-testid='stWidgetLabel'] p {{ color: {color}; font-weight: 600; }}")
    st.html("<style>" + "\n".join(rules) + "</style>")


def _float_toy(fmt: str, where) -> tuple[int, float | None]:
    """The value field and the coloured bit pills of `fmt`, kept in step: (the code shown, the typed value
    when it is a number, else None). Out-of-range link values are said beside their control."""
    nbits = code_bits(fmt)
    first = SHOWN not in st.session_state  # the session's first draw: the link's values apply
    url_code, refused = None, None
    if first and "bx_code" in st.query_params:
        refused = st.query_params.get("bx_code")
        try:
            url_code, refused = check_code(fmt, int(refused)), None
        except ValueError:
            pass
    if not first and st.session_state.get(SHOWN) != fmt and not str(st.session_state.get(ui.widget_key("bx_x"), "")):
        # another format after an empty Value (a code no rounding produces): start from 0.1, and say so in the field
        st.session_state[ui.widget_key("bx_x")] = "0.1"
    typed_default = _shown_value(fmt, explore(fmt, url_code).value) if url_code is not None else "0.1"
    c1 = where.container()
    raw = ui.text("Value", "bx_x", typed_default, where=c1, on_change=_typed_changed,
                  help="type any number (0.1, -2.5e-3, 65519, 1e-8, inf, nan): the bits below light up for the code "
                       "it rounds to in this format, and the table shows it in every format")
    typed, code_typed, bad = None, None, None
    try:
        if str(raw).strip():
            typed = _parse_value(raw)
            code_typed = round_to_code(fmt, typed)
    except ValueError as e:
        typed, code_typed, bad = None, None, e
    if st.session_state.get(SHOWN) != fmt:  # first draw, or another format: the bits follow the Value
        start = code_typed
        if first and "bx_x" not in st.query_params and url_code is not None:
            start = url_code  # a link with bits but no value: its bits
        if start is None:
            start = url_code if url_code is not None else round_to_code(fmt, 0.1)
        _set_code(fmt, start)
        st.session_state[SHOWN] = fmt
    if bad is not None:
        code = _code_of_pills(fmt)
        ui.complain(f"Value: {bad}; allowed: a number such as 0.1, -2.5e-3 or 1e-8, or inf, -inf, nan (the "
                    f"hardware floats only for these three). Showing code {code} "
                    f"({_num(explore(fmt, code).value)}).", c1)
    _bits_css()
    fields = _fields(fmt)
    bits_box = st.container()
    bits_box.markdown(f"**Bits** of {fmt}, which stores {STORED_AS[format_kind(fmt)]}; most significant first: "
                      "click one to flip it (filled = 1).")
    cols = st.columns([max(2, len(b)) for _, b in fields])
    for (name, bits), col in zip(fields, cols):
        with col, st.container(key=f"bx_field_{name.split()[0].replace(chr(39), '')}"):
            st.pills(_field_label(fmt, name, len(bits)), bits, selection_mode="multi", key=_pill_key(fmt, name),
                     on_change=_bit_flipped,
                     help="click a bit to flip it (filled = 1); the Value field then shows the new code's value")
    code = _code_of_pills(fmt)
    if refused is not None and first:
        ui.complain(f"Bits: code {refused!r} from the link (bx_code) is not allowed for {fmt}; allowed: a whole "
                    f"number 0..{(1 << nbits) - 1} ({nbits} bits). Showing code {code} "
                    f"({_num(explore(fmt, code).value)}).", bits_box)
    elif first and url_code is not None and "bx_x" in st.query_params and code_typed is not None \
            and code_typed != url_code:
        ui.complain(f"Bits: code {url_code} from the link (bx_code) is not the code of the link's Value {raw} in "
                    f"{fmt} ({code_typed}); showing the Value's code.", bits_box)
    ui.sync_url("bx_code", code)
    return code, typed if code_typed == code else None


#: Figure 1's fields in their colours: the paper types' bit patterns (sign, leading zeros, flag, tree, ...)
PAPER_COLORS = {"sign": FIELD_COLORS["sign"], "leading zeros": "#72b7b2", "exponent": FIELD_COLORS["exponent"],
                "flag": "#f58518", "tree": FIELD_COLORS["mantissa"], "mantissa": FIELD_COLORS["mantissa"],
                "integer": "#9467bd"}
#: §3.1's worked examples as presets: (button, format, value)
FIGURE1_PRESETS = (("0.2345678 in the dynamic tree", "dynamic_tree", "0.2345678"),
                   ("0.2345678 in the static tree", "static_tree", "0.2345678"),
                   ("0.2345678 in the mantissa type", "mantissa", "0.2345678"),
                   ("0.0000234 in the dynamic tree", "dynamic_tree", "0.0000234"),
                   ("2.2 in the mantissa type (the 22.5 % band)", "mantissa", "2.2"))


def _preset_value(fmt: str, raw: str):
    def go() -> None:
        ui.set_state(bx_fmt=fmt, bx_x=raw)
        _set_code(fmt, round_to_code(fmt, float(raw)))
        st.session_state[SHOWN] = fmt
    return go


def _figure1_presets() -> None:
    """§3.1's worked examples as one-click presets (format and value)."""
    st.markdown("**Dettmers 2016 §3.1's worked examples** (Figure 1's types): pick one, then read the paper's bit "
                "pattern field by field below the bits.")
    cols = st.columns(len(FIGURE1_PRESETS))
    for i, ((label, fmt, raw), col) in enumerate(zip(FIGURE1_PRESETS, cols)):
        col.button(label, key=f"bx_preset_{i}", on_click=_preset_value(fmt, raw), use_container_width=True,
                   help=f"Format {fmt}, Value {raw}")


def _paper_anatomy(fmt: str, code: int) -> None:
    """The paper's 8-bit pattern of the code's value, field by field in Figure 1's order and colours, with what
    each field contributes; the bisection path for the tree types."""
    patterns = paper_codes_of(fmt, code)
    pc = paper_code(fmt, patterns[0])
    boxes = []
    for f in pc.fields:
        color = PAPER_COLORS[f.role]
        boxes.append(f"<div style='border:2px solid {color};border-radius:0.5rem;padding:0.2rem 0.5rem;"
                     f"flex:{max(1, len(f.bits))} 1 6rem;min-width:5.5rem'>"
                     f"<div style='font:700 1.15rem monospace;letter-spacing:0.15em;color:{color}'>"
                     f"{f.bits or '—'}</div><div style='font-size:0.75rem;font-weight:600;color:{color}'>"
                     f"{f.role.capitalize()} ({len(f.bits)} bit{'s' if len(f.bits) != 1 else ''})</div>"
                     f"<div style='font-size:0.75rem'>{f.meaning}</div></div>")
    st.markdown(f"**The paper's bit pattern (Figure 1):** {fmt}'s value {pc.value:.6g} is the pattern "
                f"`{format(pc.pattern, '08b')}`; the lab's wire code {code} is its place in the sorted table.")
    st.html(f"<div class='paper-anatomy' style='display:flex;flex-wrap:wrap;gap:0.4rem'>{''.join(boxes)}</div>")
    if pc.path:
        steps = " → ".join(f"{bit}: ({lo:.6g}, {hi:.6g})" for bit, (lo, hi) in zip(pc.fields[-1].bits, pc.path))
        st.caption(f"Bisection path in ({pc.decade[0]:.6g}, {pc.decade[1]:.6g}), the first split at 4.5 × the "
                   f"decade's start: {steps}; the value is the last interval's midpoint, {pc.value:.6g}.")
    if len(patterns) > 1:
        st.caption(f"{len(patterns)} patterns code {pc.value:g} in {fmt}: "
                   + ", ".join(f"`{format(p, '08b')}`" for p in patterns[:8]) + (" …" if len(patterns) > 8 else "")
                   + (" (a sign on zero changes nothing)." if pc.value == 0 else
                      " (m·10^(offset − e) repeats across exponents: 227 distinct values of 256 patterns)."))


WORKED_COLUMNS = {
    "input": ui.Col("Input", help="§3.1's value", format="%.8g"),
    "type": ui.Col("Type", help="the paper's 8-bit type"),
    "paper": ui.Col("Paper", help="the approximation §3.1 prints", format="%.8g"),
    "ours": ui.Col("Here", help="the nearest value of the lab's table (no scaling: the input is already in range)",
                   format="%.6g"),
    "pattern": ui.Col("Pattern", help="the paper's bit pattern of the value here, sign first"),
    "paper_rel_error": ui.Col("Paper's error", "%", help="|paper − input| / input", scale=100, format="%.3g"),
    "ours_rel_error": ui.Col("Error here", "%", help="|here − input| / input", scale=100, format="%.3g"),
    "agree": ui.Col("Same", help="the value here, to the digits the paper prints, is the paper's"),
}


def _worked_examples() -> None:
    """§3.1's worked examples and the mantissa type's 22.5 % band, the paper beside the lab's tables."""
    ex = worked_examples()
    st.markdown("**§3.1's worked examples, the paper beside the lab's tables.**")
    ui.people_table(ex, "figure1_examples", WORKED_COLUMNS)
    band = mantissa_band()
    d = {r.type: r for r in ex[ex.input == ex.input.iloc[0]].itertuples()}
    off = ex[~ex.agree]
    why = "; ".join(f"{r.type}: {r.why}" for r in off.itertuples())
    mean = band.ours.iloc[0]
    ui.paper_callout(
        f"{int(ex.agree.sum())} of {len(ex)} worked examples give the paper's number here. " +
        (f"They differ for {', '.join(off.type)} ({why}). " if len(off) else "") +
        f"The mantissa type rounds 2–2.499 to {', '.join(f'{v:g}' for v in band.attrs['stored'])}: a mean relative "
        f"error of {100 * mean:.1f} % here against the paper's {100 * band.attrs['paper']:.1f} % "
        f"({band.attrs['why']}).", key="figure1")
    ui.people_table(band, "figure1_band", {"measure": ui.Col("Measure over 2–2.499", help="inputs uniform in the band"),
                                            "ours": ui.Col("Here", "%", scale=100, help="the lab's mantissa table"),
                                            "paper": ui.Col("Paper", "%", scale=100, help="§3.1's figure")})
    dt, stt, man = (d[t] for t in ("dynamic_tree", "static_tree", "mantissa"))
    ui.takeaway(f"For {dt.input:.8g} the dynamic tree's error is {100 * dt.ours_rel_error:.2f} %: "
                f"{stt.ours_rel_error / dt.ours_rel_error:.0f}× smaller than the static tree's "
                f"{100 * stt.ours_rel_error:.1f} % here ({100 * stt.paper_rel_error:.1f} % with the paper's "
                f"{stt.paper:g}) and {man.ours_rel_error / dt.ours_rel_error:.0f}× smaller than the mantissa type's "
                f"{100 * man.ours_rel_error:.1f} %: spending no bits on a large exponent leaves {_tree_bits(dt.pattern)} "
                "bits to the tree.", key="takeaway-figure1")


def _tree_bits(pattern: str) -> str:
    """How many tree bits a dynamic-tree pattern has (after its sign, leading zeros and flag)."""
    mag = pattern[1:]
    return str(len(mag) - (len(mag) - len(mag.lstrip("0"))) - 1)


@st.fragment
def bits_section(x, data_name: str | None, data_key=None) -> None:
    """The bit explorer as a Float Toy: type a value or flip bits of one code of a format (hardware floats, value
    tables, block-scaled elements); its value, neighbours and rounding interval on a number line; the typed value in
    every format; for a block-scaled format, one block of the data re-quantised under a shared scale the learner
    sets."""
    st.subheader("Bit explorer (Float Toy)")
    st.caption("Type a value or click bits to flip them. Sign, exponent and mantissa bits are coloured apart; a "
               "value-table code is one index into the sorted table of values. The number line shows the code's "
               "value, its neighbours and the inputs that round to it (round to nearest).")
    names = explorable()
    _figure1_presets()
    c1, c2 = st.columns([1, 1])
    with c1:
        fmt = ui.select("Format", names, "bx_fmt", "fp8_e4m3",
                        help="hardware floats (fp32, fp16, bf16, the 8-bit fp8 E4M3 and E5M2 as formats, without the "
                             "fp8 codecs' absmax scaling), the value-table codecs and the block-scaled element formats: "
                             + ", ".join(names))
    code, typed = _float_toy(fmt, c2)
    cv = explore(fmt, code)
    st.markdown(f"**Code {code}** = `{' '.join(b for _, b in cv.fields)}` "
                f"({', '.join(f'{n} {b}' for n, b in cv.fields)}): {cv.formula}.")
    if fmt in PAPER_TYPES and cv.used:
        _paper_anatomy(fmt, code)
    if not cv.used:
        st.info(f"Code {code} is never produced by rounding: {cv.formula}.")
    else:
        st.html("<style>.st-key-bx_metrics [data-testid='stMetricValue'] { font-size: 1.35rem; }</style>")
        k, d = st.container(key="bx_metrics").columns(4), format_digits(fmt)
        k[0].metric("Value", _num(cv.value, d), help="what this code decodes to (before any shared or absmax scale)")
        k[1].metric("Next below", _num(cv.below, d), help="the nearest smaller value on this format's grid")
        k[2].metric("Next above", _num(cv.above, d), help="the nearest larger value on this format's grid")
        k[3].metric("Rounds from", f"[{_num(cv.lo, d)}, {_num(cv.hi, d)}]",
                    help="inputs in this interval round to this code (halfway to each neighbour, a tie to the even "
                         "code); an end at ±∞ means larger inputs saturate to it")
        if typed is not None and math.isfinite(typed) and math.isfinite(cv.value) and typed != cv.value:
            err = cv.value - typed
            st.caption(f"You typed {_exact(typed)}: {fmt} stores {_exact(cv.value)}, an error of {err:+.3g}"
                       + (f" ({abs(err / typed):.3g} of your value)." if typed else "."))
        elif typed is not None and math.isfinite(typed) and not math.isfinite(cv.value):
            st.caption(f"You typed {_exact(typed)}: past {fmt}'s largest finite value it becomes {_num(cv.value)}.")
        gap = (cv.above - cv.value) if cv.above is not None else (cv.value - cv.below if cv.below is not None else 0)
        if math.isfinite(cv.value) and cv.value and gap:
            st.caption(f"The gap to the next value is {_num(gap)}, {abs(gap / cv.value):.3g} of the value: the "
                       "relative error a value here can suffer is up to half that.")
        if math.isfinite(cv.value):
            line = number_line(fmt, code, typed)
            ui.figure(plots.number_line_figure(line), line, "bit_explorer_line")
        else:
            st.caption(f"{_num(cv.value)} has no place on the number line: inputs beyond ±{abs(cv.lo if cv.value > 0 else cv.hi):.6g} round to it.")
    value = typed if typed is not None else cv.value
    if not math.isnan(value):
        st.markdown(f"**{value:.9g} in every format.** Hardware floats store the value itself; value tables store "
                    "it divided by the tensor's absmax (so read it as a fraction of the largest |x|); block-scaled "
                    "elements store it divided by the block's shared scale (scale 1 here).")
        cmp = compare_formats(value)
        shown = cmp[list(BX_COLUMNS)].rename(columns={c: h for c, (h, _) in BX_COLUMNS.items()})
        ui.table(shown, "bit_explorer_formats", help={h: t for h, t in BX_COLUMNS.values()},
                 formats={"Stored value": "%.9g", "Error": "%.3g", "Relative error (%)": "percent",
                          "Gap to the next value": "%.3g"})
        exact = cmp[cmp.error == 0].format.tolist()
        off = cmp[(cmp.error != 0) & cmp.error.notna()]
        off = off.assign(a=off.error.abs()).sort_values("a", kind="stable")

        def fate(rows: pd.DataFrame) -> str:
            return (", flushed to zero" if (rows.stored == 0).all() else
                    ", saturated at the largest value" if rows.saturated.all() else "")
        text = (f"{value:.9g} is exact in {', '.join(exact)}" if exact else f"No format stores {value:.9g} exactly")
        rest = "of the rest, " if exact else ""
        if len(off) and off.a.iloc[0] == off.a.iloc[-1]:
            text += (f"; {rest}{' and '.join(off.format)} {'stores' if len(off) == 1 else 'store'} "
                     f"{off.stored.iloc[0]:.9g}{fate(off)}.")
        elif len(off):
            b, far = off.iloc[0], off[off.a == off.a.iloc[-1]]
            text += (f"; {rest}{b.format} comes closest ({b.stored:.9g}, error {b.error:+.3g}) and "
                     f"{' and '.join(far.format)} {'is' if len(far) == 1 else 'are'} furthest "
                     f"({far.stored.iloc[0]:.9g}{fate(far)}).")
        else:
            text += "."
        ui.takeaway(text, key="takeaway-formats")
    if fmt in PAPER_TYPES:
        _worked_examples()
    if format_kind(fmt) != "element" or x is None:
        return
    import numpy as np

    values, _ = grid(fmt)
    st.markdown("**One block under a shared scale you set.** The format stores one scale per block; every element "
                "is the value / scale rounded to the grid above. Move the scale: too small and the large values "
                "saturate, too large and the small ones flush to zero.")
    try:
        view = _block(fmt, (data_key, fmt), BLOCK_PICKS[0], _x=x)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return
    auto = float(view.attrs["scale"])
    if fmt.startswith("mx"):  # E8M0: a power of two
        k0 = int(round(math.log2(auto)))
        k = ui.slider("Shared scale: 2^k, k =", "bx_scale_k", k0, k0 - 8, k0 + 8, step=1,
                      help=f"MX scales are E8M0, powers of two; the encoder chose 2^{k0} = {auto:.4g} for this block "
                           f"(its largest |x| over the element's largest power of two)")
        scale = 2.0 ** int(k)
    else:
        scale = ui.number("Shared scale (E4M3 × tensor scale)", "bx_scale", float(f"{auto:.4g}"), min_value=1e-30,
                          max_value=1e30, format="%.4g",
                          help=f"NVFP4's block scale (an E4M3 number times the tensor's fp32 scale); the encoder "
                               f"chose {auto:.4g} for this block")
    rq = requantize_block(view.value.to_numpy(), fmt, float(scale))
    counts = rq.fate.value_counts()
    err = float(np.abs(rq.decoded - rq.value).max())
    m = st.columns(4)
    m[0].metric("Scale", f"{scale:.4g}", delta=f"{scale / auto:.3g}× the encoder's" if scale != auto else None,
                delta_color="off", delta_arrow="off")
    m[1].metric("Saturated", f"{int(counts.get('saturated', 0))} of {len(rq)}",
                help=f"|x| / scale above the element's largest {float(np.nanmax(np.abs(values[np.isfinite(values)]))):g}")
    m[2].metric("Flushed to zero", f"{int(counts.get('flushed to zero', 0))} of {len(rq)}",
                help="non-zero values whose x / scale rounds to 0")
    m[3].metric("Largest |error|", f"{err:.3g}", help="max |decoded − value| in this block")
    ui.table(rq.round(6).rename(columns={"value": "Value", "value / scale": "Value / scale", "element": "Element",
                                         "decoded": "Decoded", "fate": "Fate"}), "bit_explorer_block",
             help={"Value": "your data's value", "Value / scale": "what the element must hold",
                   "Element": "the nearest element value (clipped to the largest)",
                   "Decoded": "element × scale: what comes back", "Fate": "exact, rounded, saturated or flushed to zero"})
    ui.takeaway(f"In block {view.attrs['block']} of {data_name} ({BLOCK_PICKS[0]}), {fmt} at scale {scale:.4g} "
                f"({scale / auto:.3g}× the encoder's {auto:.4g}) saturates {int(counts.get('saturated', 0))} and "
                f"flushes {int(counts.get('flushed to zero', 0))} of {len(rq)} values; its largest error is {err:.3g}.",
                key="takeaway-bits")


SPEED_COLUMNS = {  # codec_speed column -> (header, tooltip)
    "codec": ("Codec", "the codec and its options; 'torch fp8_e4m3 cast' is the baseline, timed in the same rounds"),
    "op": ("Operation", "encode (float32 → wire) or decode (wire → float32)"),
    "ns_per_value": ("ns per value (median)", "median time of the repeats / values timed"),
    "interval": ("95 % interval (ns)", "distribution-free 95 % interval of the median (order statistics)"),
    "range": ("min–max (ns)", "fastest and slowest repeat"),
    "repeats": ("Repeats", "timed calls, interleaved with the other codecs' (one round: every codec once)"),
    "vs_cast": ("vs torch's cast", "torch's fp8 cast time / this codec's (> 1: faster), medians; the range from "
                                   "the two intervals"),
}


def _speed_verdict(enc: pd.DataFrame) -> str:
    """The takeaway of a speed run: the fastest encoder, and whom it is within noise of (overlapping 95 %
    intervals), and how it compares with torch's cast, from the table's numbers."""
    codecs = enc[enc.codec != "torch fp8_e4m3 cast"].sort_values("ns_per_value")
    if codecs.empty:
        return "Only torch's cast was timed."
    top = codecs.iloc[0]
    ties = [r.codec for r in codecs.iloc[1:].itertuples() if not separable((top.ns_lo, top.ns_hi), (r.ns_lo, r.ns_hi))]
    text = (f"Here {top.codec} encodes fastest, {top.ns_per_value:.2g} ns per value (95 % interval "
            f"{top.ns_lo:.2g}–{top.ns_hi:.2g})")
    text += (f", within noise of {', '.join(ties)} (their intervals overlap: no ranking between them)" if ties else
             (f", ahead of {codecs.iloc[1].codec} beyond the noise" if len(codecs) > 1 else ""))
    lo, hi = top.vs_cast_lo, top.vs_cast_hi
    if lo <= 1 <= hi:
        text += f"; against torch's fp8 cast it is within noise ({lo:.2g}x–{hi:.2g}x)"
    else:
        text += f"; {top.speed_vs_fp8_cast:.2g}x torch's fp8 cast ({lo:.2g}x–{hi:.2g}x)"
    return text + "; the paper's GPU kernel took 1 ns."


@st.fragment
def speed_section(specs: tuple, layout_key, layout) -> None:
    st.subheader("Encode / decode speed on this device")
    st.caption(f"Device: {ui.device_name()}. Each codec is warmed up first (its first call compiles, untimed), then "
               "all are timed in interleaved rounds, torch's fp8 cast among them as the baseline: the median of the "
               "repeats with its 95 % interval and min–max. The paper's GTX Titan kernels: 1 ns per value to "
               "compress, 0.5 ns to decompress.")
    n_speed = ui.select_slider("Values timed", [1 << 16, 1 << 18, 1 << 20, 1 << 22], "speed_n", 1 << 18,
                               format_func=lambda v: f"{v:,}",
                               help="values per timed encode/decode: 65,536 to 4,194,304; larger is steadier and slower")
    if ui.run_button("Measure speed", "speed_run", [list(specs), layout_key, n_speed],
                     help="time encode and decode of each chosen codec here (a few seconds; torch.compile the first "
                          "time)"):
        try:
            cb = ui.progress()
            speed = ui.cached_run("codec_speed", [list(specs), layout_key, n_speed], lambda: codec_speed(
                [get_codec(s) for s in specs] + ([layout] if layout is not None else []), n_speed, repeats=5,
                budget_s=2.0, progress=cb))
            cb(1.0, "done")
        except ui.USER_ERRORS as e:
            st.error(str(e))
            return
        a = speed.attrs
        ui.load_warning((a["load_before"], a["cores"]), "These timings")
        if a["threads"] < a["threads_before"]:
            st.caption(f"Timed on {a['threads']} of torch's {a['threads_before']} CPU threads: the load average "
                       f"{a['load_before']:.1f} left only {a['threads']} of {a['cores']} cores free. On busier cores "
                       "than threads, a threaded pass waits at every step for a thread another process holds, and a "
                       "pass of a few ns per value takes hundreds.")
        else:
            st.caption(f"Timed on {a['threads']} CPU thread(s), {a['cores']} cores.")
        ui.figure(plots.codec_speed_figure(speed), speed, "codec_speed")
        shown = speed.assign(
            interval=[f"{lo:.3g}–{hi:.3g}" for lo, hi in zip(speed.ns_lo, speed.ns_hi)],
            range=[f"{lo:.3g}–{hi:.3g}" for lo, hi in zip(speed.ns_min, speed.ns_max)],
            vs_cast=["baseline" if c == "torch fp8_e4m3 cast" else f"{m:.2g}x ({lo:.2g}–{hi:.2g})" for c, m, lo, hi in
                     zip(speed.codec, speed.speed_vs_fp8_cast, speed.vs_cast_lo, speed.vs_cast_hi)])
        ui.table(shown[list(SPEED_COLUMNS)].rename(columns={c: h for c, (h, _) in SPEED_COLUMNS.items()}), "codec_speed",
                 help={h: t for h, t in SPEED_COLUMNS.values()}, formats={"ns per value (median)": "%.3g"})
        ui.takeaway(_speed_verdict(speed[speed.op == "encode"]), key="takeaway-speed")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    catalog = {c.name: c for c in codec_catalog()}  # read per run: a codec registered later shows too
    options = {name: {o.name: o for o in c.options} for name, c in catalog.items()}
    ABSMAX = [n for n, o in options.items() if "block_size" in o and o.get("scale") and o["scale"].default == "absmax"]
    st.title("Codecs")
    ui.lesson("How much error does squeezing a 32-bit number into 8 bits (or fewer) cost, and which way of spending "
              "the bits costs least?",
              "Look at the bars: the best bar is the codec that keeps your values closest by the measure you rank by "
              "(relative error for small gradients, SNR for the signal, largest error for outliers). "
              "The paper's dynamic tree spends its codes on small exponents, so it wins on bell-shaped data; then "
              "compare Table 1 with the paper, draw one block of an MX / NVFP4 format, and see where block scaling wins.")

    def preset_table1():
        ui.set_state(codecs=list(TABLE1_TYPES), rounding="paper", source="distribution", dist="normal",
                     **{"normal.mu": 0.0, "normal.sigma": 1.0}, block="tensor", layout_on=False)

    def preset_blocks():
        ui.set_state(codecs=["dynamic_tree", "mxfp8_e4m3", "mxint8", "mxfp4_e2m1", "nvfp4"], rounding="nearest",
                     source="distribution", dist="student_t", **{"student_t.df": 3.0})

    p1, p2 = st.columns(2)
    p1.button("Preset: the paper's 4 types", on_click=preset_table1,
              help="Table 1's conditions: dynamic tree, linear, mantissa, static tree; the kernel's rounding; N(0,1)")
    p2.button("Preset: MX and NVFP4", on_click=preset_blocks,
              help="dynamic tree vs MXFP8, MXINT8, MXFP4 and NVFP4 on heavy-tailed Student-t(3) data")

    left, right = st.columns([3, 2])
    with left:
        chosen = ui.multiselect("Codecs", list(catalog), "codecs", list(FIRST_CODECS),
                                help="the codecs to compare (any number): " +
                                     "; ".join(f"{k}: {catalog[k].summary}" for k in catalog))
        source = ui.radio("Data", ["distribution", "captured tensor", "upload"], "source", "distribution",
                          help="a seeded sample of a distribution, the paper's MLP's gradients/activations/weights "
                               "after one step on digits, or your own tensor file")
        dist, up, what = None, None, None
        if source == "distribution":
            d = st.columns(3)
            kind = ui.select("Distribution", list(DISTS), "dist", "normal", where=d[0],
                             help="normal, uniform, laplace, student_t (heavy tails), lognormal")
            params = [ui.number(p, f"{kind}.{p}", float(v), where=d[i + 1], format="%.4g", help=h)
                      for i, (p, v, h) in enumerate(DISTS[kind])]
            dist = f"{kind}({','.join(f'{v:g}' for v in params)})"
        elif source == "captured tensor":
            what = ui.select("Tensors of the paper's MLP after one step on digits", list(CAPTURE_KINDS), "capture",
                             "gradients", help="per-layer weight gradients, hidden activations or weights")
        else:
            up = st.file_uploader("A tensor file: .pt/.pth (torch.save of a tensor or a dict of tensors) or .npy "
                                  "(numpy.save of a numeric array)", type=["pt", "pth", "npy"],
                                  help="real, finite values; files holding other Python objects are refused unread")
    with right:
        rounding = ui.radio("Rounding of the paper's types", ["nearest", "paper"], "rounding", "nearest",
                            help="nearest: to the closest table value; paper: the original kernel's bisection "
                                 "(about a quarter of codes one step low, Table 1's figures)")
    with ui.more_settings():
        m1, m2, m3 = st.columns(3)
        block = ui.select(f"Absmax scale of {', '.join(ABSMAX)}", ["tensor", "4096", "256", "64"], "block", "tensor",
                          where=m1, help="one absmax per tensor (the paper's) or one per block of 4096, 256 or 64 values")
        samples = ui.select_slider("Samples", SAMPLES, "samples", 30_000, where=m2, format_func=lambda v: f"{v:,}",
                                   help="values drawn from the distribution: 10,000 to 1,000,000; above 32,768 the "
                                        "codecs are compiled (a few seconds the first time)")
        seed = ui.seed(where=m3)
        specs = {}
        for name in chosen:
            kw = {}
            skip = []
            if name in TABLE1_TYPES:
                kw["rounding"], skip = rounding, skip + ["rounding"]
            if name in ABSMAX:
                skip.append("block_size")
                if block != "tensor":
                    kw["block_size"] = int(block)
            if [o for o in options[name] if o not in skip]:
                st.markdown(f"**{name}** options")
            specs[name] = ui.codec_options(name, "codecs", skip=skip, **kw)

    layout, layout_key = _layout_designer(rounding)
    seed = int(seed)

    # --- the comparison (an error here is a message; the sections below still draw)
    x, data_name, data_key = None, None, None
    try:
        if not chosen and layout is None:
            raise ValueError("Pick at least one codec (or add your bit layout below).")
        if dist:
            parse_distribution(dist)
        capture = what if source == "captured tensor" else None
        upload, upload_key = None, None
        if source == "upload":
            if up is None:
                raise ValueError("Upload a tensor file: .pt/.pth (torch.save) or .npy (numpy.save) with real, "
                                 "finite numbers.")
            upload, upload_key = up.getvalue(), (up.name, up.size)
        df, hist = _errors(tuple(specs.values()), layout_key, dist if source == "distribution" else None, capture,
                           upload_key, samples, seed, _layout=layout, _upload=upload)
        tensors = _data(dist if source == "distribution" else None, capture, upload_key, samples, seed, _upload=upload)
        import torch
        x = torch.cat([t.reshape(-1) for t in tensors.values()])
        data_name = dist or (f"the captured {capture}" if capture else upload_key[0])
        data_key = (dist, capture, upload_key, samples, seed)
        _comparison(df, hist, chosen, specs, layout, data_name, rounding)
    except ui.USER_ERRORS as e:
        st.error(str(e))

    st.divider()
    section = ui.radio("Go further", list(SECTIONS), "section", next(iter(SECTIONS)),
                       help="one section at a time: " + "; ".join(f"{k}: {v}" for k, v in SECTIONS.items()))
    if section == "Table 1 beside the paper":
        table1_section(seed)
    elif section == "One MX / NVFP4 block":
        if x is None:
            st.info("Fix the data above to draw one of its blocks.")
        else:
            block_section(x, data_name, data_key)
    elif section == "Block scaling vs per tensor":
        lesson_section(seed)
    elif section == "Speed":
        speed_section(tuple(specs.values()), layout_key, layout)
    elif section == "Top-k of the mean":
        topk_assumption_section(seed)
    else:
        bits_section(x, data_name, data_key)


HIDDEN = ("the best and worst codec, the bars, the table and the error histograms show once you answer the question "
          "above, or skip it")

#: what the page can rank codecs by: column, higher is better, and what the measure means for gradients
RANK_BY = {
    "Mean relative error": ("mean_rel_error", False,
                            "relative error weighs every value alike, so it counts the small gradients, which are "
                            "most of them and which a coarse grid rounds to zero"),
    "Mean absolute error": ("mae", False,
                            "MAE is in the data's units, so the large values dominate it; small gradients lost to "
                            "zero barely move it"),
    "SNR": ("snr_db", True,
            "SNR (signal-to-noise ratio, dB) weighs errors by energy: how much of the gradient's signal survives "
            "the update, the measure for the direction SGD follows"),
    "Largest error": ("max_error", False,
                      "the largest |error| is what happens to outliers: a clipped or badly rounded large gradient, "
                      "the one value that can throw a step off"),
}


def _fmt(col: str, v: float) -> str:
    return _pct(v) if col == "mean_rel_error" else f"{v:.3g} dB" if col == "snr_db" else f"{v:.3g}"


def _same_grids(per_codec: pd.DataFrame) -> list[list[str]]:
    """Groups of codecs whose every error measure is identical here: the same grid of values
    (linear and int8 both round to absmax/127 steps)."""
    cols = ["mean_rel_error", "mae", "snr_db", "max_error"]
    groups: dict[tuple, list[str]] = {}
    for codec, row in per_codec[cols].iterrows():
        groups.setdefault(tuple(float(f"{v:.9g}") for v in row), []).append(codec.split("[")[0])
    return [g for g in groups.values() if len(g) > 1]


def _comparison(df: pd.DataFrame, hist: pd.DataFrame, chosen, specs, layout, data_name: str, rounding: str) -> None:
    per_codec = df.groupby("codec", sort=False)[["mean_rel_error", "mae", "snr_db", "max_error",
                                                  "bits_per_value"]].mean()
    rank_by = ui.radio("Rank by", list(RANK_BY), "rank_by", "Mean relative error",
                       help="which error decides Best and Worst: " + "; ".join(f"{k}: {v[2]}" for k, v in RANK_BY.items()))
    col, higher, meaning = RANK_BY[rank_by]
    order = per_codec[col].sort_values(ascending=not higher)
    best, worst = order.index[0], order.index[-1]
    what = rank_by.lower() if col != "snr_db" else "SNR"
    if len(order) > 1:
        shorts = [c.split("[")[0] for c in order.index]

        def reveal() -> tuple[str, str]:
            vals = ", ".join(f"{c.split('[')[0]} {_fmt(col, v)}" for c, v in order.items())
            tied = [c.split("[")[0] for c, v in order.items() if f"{v:.9g}" == f"{order.iloc[0]:.9g}"]
            said = st.session_state.get(ui.widget_key("guess"))
            right = said if said in tied else tied[0]
            tie = f" {' and '.join(tied)} tie: the same grid." if len(tied) > 1 else ""
            return right, f"By {what} on {data_name}: {vals}.{tie} {meaning[0].upper() + meaning[1:]}."
        ui.predict(f"Which codec has the {'highest' if higher else 'lowest'} {what} on {data_name}?",
                   sorted(dict.fromkeys(shorts)), reveal, key="guess")
        if not ui.revealed("guess"):  # the ranking, the bars and the table would answer it: they wait
            ui.withheld(HIDDEN, f"Which of {', '.join(dict.fromkeys(shorts))} keeps {data_name} closest by {what} "
                        "is the question above: answer it (or skip it) to see the ranking, the bars and the table. "
                        f"{meaning[0].upper() + meaning[1:]}.",
                        zip(st.columns(3), ("Best", "Worst", "Best's bits per value")))
            return
    m1, m2, m3 = st.columns(3)
    m1.metric(f"Best: {best.split('[')[0]}", _fmt(col, order.iloc[0]), help=f"best {rank_by.lower()}: {best}, "
              f"on {data_name}")
    m2.metric(f"Worst: {worst.split('[')[0]}", _fmt(col, order.iloc[-1]), help=f"worst {rank_by.lower()}: {worst}")
    m3.metric("Best's bits per value", f"{per_codec.bits_per_value[best]:.3g}", help="wire bits, scales included")
    short = best.split("[")[0]
    if len(order) > 1:
        second = order.index[1]
        if higher:
            gap = (f"{order.iloc[0] - order.iloc[1]:.3g} dB above {second.split('[')[0]}'s {_fmt(col, order.iloc[1])}"
                   + (f" and {order.iloc[0] - order.iloc[-1]:.3g} dB above {worst.split('[')[0]}'s "
                      f"{_fmt(col, order.iloc[-1])}" if len(order) > 2 else ""))
        else:
            gap = (f"{_ratio(order.iloc[1], order.iloc[0])} lower than {second.split('[')[0]}'s "
                   f"{_fmt(col, order.iloc[1])}"
                   + (f" and {_ratio(order.iloc[-1], order.iloc[0])} lower than {worst.split('[')[0]}'s "
                      f"{_fmt(col, order.iloc[-1])}" if len(order) > 2 else ""))
        text = (f"On {data_name}, {short} has the {'highest' if higher else 'lowest'} {what}, "
                f"{_fmt(col, order.iloc[0])}: {gap} ({rounding} rounding of the paper's types).")
        others = []
        for name, (c2, h2, _) in RANK_BY.items():
            if c2 != col:
                b2 = per_codec[c2].idxmax() if h2 else per_codec[c2].idxmin()
                if b2.split("[")[0] != short:
                    others.append(f"by {name.lower() if c2 != 'snr_db' else 'SNR'} {b2.split('[')[0]} leads")
        text += (" Another measure crowns another codec: " + "; ".join(others) + "." if others else
                 " It leads on every other measure too.")
    else:
        text = f"On {data_name}, {short}'s {what} is {_fmt(col, order.iloc[0])}."
    same = _same_grids(per_codec)
    if same:
        lin = any({"linear", "int8"} <= set(g) for g in same)
        text += " " + "; ".join(" and ".join(g) for g in same) + (
            " give identical numbers: the same grid of values" + (
                " (linear and int8 are both 255 evenly spaced steps of absmax / 127)" if lin else "")
            + ", so each group is one choice, not several.")
    ui.takeaway(text)
    st.caption(f"**Why {rank_by.lower()}?** {meaning[0].upper() + meaning[1:]}. Pick the measure that matches what "
               "you fear: small gradients vanishing (relative error), the update's direction (SNR), or one outlier "
               "(largest error).")
    _views(df, hist, tuple(chosen), specs, layout, col)


@st.fragment
def _views(df: pd.DataFrame, hist: pd.DataFrame, chosen: tuple, specs: dict, layout, col: str = "mean_rel_error") -> None:
    view = ui.radio("Show", VIEWS, "view", VIEWS[0], label_visibility="collapsed",
                    help="bars of the mean relative error and every error measure as a table; the distribution of "
                         "the relative error; the values each type can represent")
    if view == VIEWS[0]:
        ui.figure(plots.error_bar_figure(df, col), df, "codec_error_bars")
        _show(df, COLUMNS, "codec_errors", pct=("mean_rel_error",))
    elif view == VIEWS[1]:
        ui.figure(plots.error_histogram_figure(hist), hist, "codec_error_histograms")
    else:
        tables = [get_codec(specs.get(c, c)) for c in chosen] + ([layout] if layout is not None else [])
        tables = [c for c in tables if isinstance(c, TableCodec)]
        if tables:
            vals = pd.DataFrame([{"codec": c.describe(), "index": i, "value": float(v)}
                                 for c in tables for i, v in enumerate(c.values.tolist())])
            ui.figure(plots.value_table_figure(tables), vals, "codec_value_tables")
        else:
            st.caption("None of the chosen codecs is a value table (pick one of the paper's types or add a layout).")


def _layout_designer(rounding: str):
    """The bit-layout designer (Dettmers 2016 §3.1, Figure 1): (codec or None, its cache key)."""
    with ui.folded("Design your own bit layout (sign, exponent, offset, mantissa or tree, dynamic exponent)",
                   "designer", expanded=ui.from_url("layout_on", False, lambda s: s == "1")):
        def preset_fp6() -> None:
            ui.set_state(layout_on=True, lay_bits=6, lay_signed=True, lay_dynamic=False, lay_exp=3, lay_base=2,
                         lay_scale="absmax", lay_mantissa="float")

        t1, t2 = st.columns([2, 1])
        with t1:
            on = ui.checkbox("Add my layout to the comparison", "layout_on", False,
                             help="adds a codec built from the fields below to the chart and table above")
        t2.button("Preset: a 6-bit float (sign, 3 exponent, 2 mantissa bits)", on_click=preset_fp6, key="lay_fp6",
                  help="the grid of OCP MX's mxfp6_e3m2 elements: a float mantissa with its implicit leading 1")
        b1, b2, b3, b4 = st.columns(4)
        total_bits = ui.number("Total bits", "lay_bits", 8, where=b1, min_value=2, max_value=8, step=1,
                               help="bits per value, 2 to 8")
        signed = ui.checkbox("Sign bit", "lay_signed", True, where=b1, help="one bit for the sign (else values ≥ 0)")
        dynamic = ui.checkbox("Dynamic exponent", "lay_dynamic", True, where=b2,
                              help="the count of leading zeros is the exponent (the dynamic tree); off: a static "
                                   "exponent field of the width below")
        exponent_bits = ui.number("Static exponent bits", "lay_exp", 0, where=b2, min_value=0, max_value=8, step=1,
                                  help="width of a fixed exponent field, 0 to the magnitude bits (0 when dynamic)")
        base = ui.select("Exponent base", [10, 2], "lay_base", 10, where=b3, help="10: decades (the paper's); 2: binades")
        scale = ui.select("Scaling", ["absmax", "none"], "lay_scale", "absmax", where=b3,
                          help="absmax: divide by the tensor's largest |x| first (the offset then has no effect); "
                               "none: values as they are, the offset fixes the range (the paper's mantissa and "
                               "static tree use offset 1, i.e. up to 10¹)")
        offset = ui.number("Offset (exponent of the top)", "lay_offset", 0 if scale == "absmax" else 1, where=b4,
                           step=1, min_value=-38, max_value=38,
                           help="the top decade is base^offset, −38 to 38 (float32's range); it acts only with "
                                "scaling none (absmax rescales every layout to a top value of 1)")
        mantissa = ui.select("Mantissa", ["tree", "linear", "float"], "lay_mantissa", "tree", where=b4,
                             help="tree: bisection tree over each decade; linear: evenly spaced bins (with a static "
                                  "exponent: the integer m·base^−e, so values repeat across exponents); float: "
                                  "1.m × 2^e with the implicit leading 1, subnormals at the lowest exponent (static "
                                  "exponent, base 2; a normal binary float, as in fp8 and MX)")
        if not on:
            return None, None
        try:
            layout = get_codec("layout", total_bits=total_bits, signed=signed, exponent_bits=exponent_bits,
                               base=base, offset=offset if scale == "none" else 0, mantissa=mantissa, dynamic=dynamic,
                               rounding=rounding, scale=scale)
        except ui.USER_ERRORS as e:
            st.error(f"Impossible bit layout: {e}")
            return None, None
        v = layout.values
        pos = v[v > 0]
        unit = " × the tensor's absmax" if scale == "absmax" else ""
        codes = 2 ** int(total_bits)
        if not dynamic and mantissa == "linear" and exponent_bits > 0 and len(v) < codes - 1:
            st.warning(f"Only {len(v)} distinct values of {codes} codes: a static exponent with a linear mantissa "
                       f"stores the integer m and scales it by {base}^−e, so m·{base}^−e repeats across exponents "
                       f"(2 × {base}^−1 = 1 × {base}^0 …). A normal float has an implicit leading 1: value "
                       f"(1 + m/2^M) × 2^e, every code its own value. Choose Mantissa **float** (base 2, or the "
                       f"preset above); OCP MX's **mxfp6_e3m2** is that 6-bit float with one shared scale per 32 "
                       f"values.")
        st.caption(f"Valid layout {layout.describe()}: {len(v)} distinct values of {codes} codes, {len(pos)} "
                   f"positive. Representable range: "
                   f"smallest positive {float(pos.min()):.3g}{unit}, largest {float(v.abs().max()):.4g}{unit}"
                   + ("; larger values saturate to it, smaller ones round to 0 or the smallest." if scale == "none"
                      else "."))
        key = (total_bits, signed, exponent_bits, base, offset, mantissa, dynamic, scale, rounding)
        return layout, key
