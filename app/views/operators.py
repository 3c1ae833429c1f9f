"""Operators page (Ben-Nun & Hoefler 2018's operator level, "Computing fully connected / convolutional layers"):
the work W, depth D and average parallelism W/D of one layer from the survey's FC and convolution tables, beside
the threads this device runs at once; the four ways to compute a convolution (direct, im2col, FFT, Winograd
F(2x2, 3x3)), each checked against F.conv2d and timed here with its spread; µ-cuDNN's micro-batching as "split the
batch into k"."""
import streamlit as st

import _common as ui
from lab.plots import operators_figure
from lab.experiments.operators import (BASELINE, METHOD_LABELS, conv_work_depth_table, depth_growth,
                                       fc_work_depth_table, fewest_multiplications, microbatch_choice,
                                       operator_device, operator_layer,
                                       operators_takeaway, people_number, threads, time_conv_methods)

QUESTION = "For a 3×3 kernel, which method does the fewest multiplications?"
ANSWERS = [METHOD_LABELS[m] for m in ("direct", "im2col", "fft", "winograd")]
TIME_LIMIT = 3e9  # direct's multiplications above which a timing run would take minutes on a CPU: not offered
HIDDEN = "the survey's W, D and W/D per method and the multiplications each performs show once you answer the " \
         "question above, or skip it"

WD_COLUMNS = {
    "label": ui.Col("Method"),
    "work": ui.Col("Work W", "operations", "the survey's W (its convolution table) for this layer", 1.0, "%.3g"),
    "depth": ui.Col("Depth D", "steps", "the survey's D: the longest chain of dependent operations", 1.0, "%.0f"),
    "parallelism": ui.Col("W / D", "", "average parallelism: operations that can run at once on average", 1.0,
                          "%.3g"),
    "multiplications": ui.Col("Multiplications here", "", "real multiplications the implementation here performs "
                              "(FFT's transforms a radix-2 estimate)", 1.0, "%.3g"),
    "mults_vs_direct": ui.Col("Against direct", "x", "multiplications against direct's", 1.0, "%.2f"),
    "not_possible": ui.Col("Not possible because", "", "the method's constraint this layer breaks"),
}
FC_COLUMNS = {
    "operator": ui.Col("Operator"),
    "work": ui.Col("Work W", "multiply-adds", "C_out·C_in·N for each (the survey's FC table)", 1.0, "%.3g"),
    "depth": ui.Col("Depth D", "steps", "⌈log2⌉ of the dimension it sums over", 1.0, "%.0f"),
    "parallelism": ui.Col("W / D", "", "average parallelism", 1.0, "%.3g"),
}
TIME_COLUMNS = {
    "label": ui.Col("Method"),
    "splits": ui.Col("Micro-batches k", "", "the batch split into k, run one after the other (µ-cuDNN)", 1.0, "%.0f"),
    "median_ms": ui.Col("Time", "ms", "median over the repeats", 1.0, "%.3g"),
    "low_ms": ui.Col("Low", "ms", "the median's interval, low end (coverage in the CSV)", 1.0, "%.3g"),
    "high_ms": ui.Col("High", "ms", "the median's interval, high end", 1.0, "%.3g"),
    "vs_conv2d": ui.Col("Against F.conv2d", "x", "time against F.conv2d's, same run", 1.0, "%.2f"),
    "workspace_bytes": ui.Col("Workspace", ui.BYTES, "bytes of the intermediates the method holds at its peak "
                              "(the largest micro-batch's)"),
    "max_rel_error": ui.Col("Error vs F.conv2d", "", "largest |difference| / largest |F.conv2d output|", 1.0,
                            "%.1e"),
    "matches_conv2d": ui.Col("Matches", "", "error within the stated tolerance"),
}
GROWTH_COLUMNS = {"c_in": ui.Col("Input channels", "", "C_in, doubled row by row", 1.0, "%.0f"),
                  "work": ui.Col("Work W", "", "direct convolution", 1.0, "%.3g"),
                  "depth": ui.Col("Depth D", "steps", "", 1.0, "%.0f"),
                  "parallelism": ui.Col("W / D", "", "", 1.0, "%.3g")}


def _predict(shape) -> None:
    """Which method multiplies least, revealed from this layer with a 3×3 kernel."""
    three = operator_layer(shape.n, shape.c_in, shape.c_out, max(shape.h, 3), max(shape.w, 3), 3, 1,
                           min(shape.padding, 2))
    wd = conv_work_depth_table(three)

    def reveal():
        best = fewest_multiplications(wd)
        per = ", ".join(f"{r.label} {people_number(r.multiplications)}" for r in wd.itertuples())
        by = dict(zip(wd["method"], wd["mults_vs_direct"]))
        why = {"winograd": f"Winograd's F(2×2, 3×3) computes each 2×2 output tile with 16 products instead of 36, "
                           f"its input and output transforms only add: {by['winograd']:.2f}x direct's; FFT's "
                           f"transforms cost more than its pointwise products save on this layer ({by['fft']:.2f}x).",
               "fft": f"FFT's pointwise products (about 2 real multiplications per output and channel pair, against "
                      f"Winograd's 4 and direct's 9) outweigh its transforms on a layer this wide: {by['fft']:.2f}x "
                      f"direct's, Winograd {by['winograd']:.2f}x.",
               "direct": "On a layer this small the transforms of FFT and Winograd cost more than they save; im2col "
                         "does exactly direct's multiplications (it only rearranges the input)."}
        return best, f"This layer with a 3×3 kernel (stride 1): {per} multiplications. " + why[
            wd.loc[wd["label"] == best, "method"].iloc[0]]
    ui.predict(QUESTION, ANSWERS, reveal, key="guess")


def _layer():
    """The layer's controls (URL-keyed) and the checked shape."""
    c = st.columns(6)
    n = ui.number("Batch N", "n", 8, where=c[0], min_value=1, max_value=64, help="samples in the batch, 1–64")
    c_in = ui.number("Channels in C_in", "c_in", 32, where=c[1], min_value=1, max_value=512,
                     help="input channels, 1–512")
    c_out = ui.number("Channels out C_out", "c_out", 32, where=c[2], min_value=1, max_value=512,
                      help="output channels (the survey's K), 1–512")
    h = ui.number("Height H", "h", 32, where=c[3], min_value=3, max_value=256, help="input height, 3–256 px")
    w = ui.number("Width W", "w", 32, where=c[4], min_value=3, max_value=256, help="input width, 3–256 px")
    k = ui.number("Kernel k", "k", 3, where=c[5], min_value=1, max_value=min(11, h, w),
                  help=f"k×k kernel, 1–{min(11, h, w)} (at most the input's smaller side and 11); Winograd "
                       "F(2×2, 3×3) needs 3")
    with ui.more_settings():
        m = st.columns(4)
        stride = ui.number("Stride", "stride", 1, where=m[0], min_value=1, max_value=4,
                           help="1–4; FFT and Winograd compute stride 1 only")
        padding = ui.number("Padding", "padding", min(1, k - 1), where=m[1], min_value=0, max_value=k - 1,
                            help=f"zeros on each side, 0–{k - 1} (below the kernel k)")
        fc_in = ui.number("FC inputs C_in", "fc_in", 1024, where=m[2], min_value=1, max_value=65536,
                          help="the fully connected layer's input features, 1–65536 (its batch is Batch N)")
        fc_out = ui.number("FC outputs C_out", "fc_out", 1024, where=m[3], min_value=1, max_value=65536,
                           help="the fully connected layer's output features, 1–65536")
    return operator_layer(n, c_in, c_out, h, w, k, stride, padding), fc_in, fc_out


def _timing(shape, wd, n_threads: int, takeaway_slot) -> None:
    """Time each method (behind a button), the batch split into k; the check against F.conv2d; the takeaway
    (in `takeaway_slot`) from the counts and, after a run, the times."""
    st.subheader("Each method here: time, workspace and the check against F.conv2d")
    c = st.columns(3)
    splits = ui.number("Split the batch into k micro-batches (µ-cuDNN)", "splits", 1, where=c[0], min_value=1,
                       max_value=shape.n, help=f"1–{shape.n} (the batch N): each method also runs on the batch "
                                               "split into k parts one after the other, its workspace that of one "
                                               "part")
    repeats = ui.number("Repeats", "repeats", 5, where=c[1], min_value=3, max_value=30,
                        help="timed runs per method, 3–30 (the median and its interval)")
    limit_kb = ui.number("Workspace limit (kB)", "limit_kb", 256, where=c[2], min_value=1, max_value=10_000_000,
                         help="µ-cuDNN's budget: the fastest method and split whose workspace fits, 1–10⁷ kB")
    direct = float(wd.loc[wd["method"] == "direct", "multiplications"].iloc[0])
    device = operator_device()
    if device == "cpu" and direct > TIME_LIMIT:
        st.caption(f"This layer's {direct:.3g} multiplications per method would take minutes on this CPU: lower "
                   "Batch N, the channels or the image size to time it.")
        with takeaway_slot:
            ui.takeaway(operators_takeaway(wd, n_threads))
        return
    ks = sorted({1, int(splits)})
    params = [shape.n, shape.c_in, shape.c_out, shape.h, shape.w, shape.k, shape.stride, shape.padding, ks,
              int(repeats), device]
    if not ui.run_button("Time the methods", "time_run", params,
                         help="runs each method and F.conv2d, interleaved, after one warm-up"):
        with takeaway_slot:
            ui.takeaway(operators_takeaway(wd, n_threads))
        st.caption("Press **Time the methods** to run each one here, check it against F.conv2d and compare times.")
        return
    with ui.guard():
        t = ui.cached_run("operators", params, lambda: time_conv_methods(shape, splits=ks, repeats=int(repeats),
                                                                          device=device, progress=ui.progress()))
    with takeaway_slot:
        ui.takeaway(operators_takeaway(wd, n_threads, t))
    ui.load_warning()
    tb = t.table
    bad = tb[~tb["matches_conv2d"]]
    if bad.empty:
        st.success(f"Every method equals F.conv2d within {t.info['tolerance']:g} of its largest output "
                   f"(largest error here {tb['max_rel_error'].max():.1e}).", icon=":material/check_circle:")
    else:
        st.error("Off against F.conv2d: " + ", ".join(bad["label"]))
    pick = microbatch_choice(t, limit_kb * 1e3)
    if pick is None:
        st.markdown(f"**µ-cuDNN's choice under {limit_kb:g} kB:** nothing measured fits; split the batch into "
                    "more micro-batches or raise the limit.")
    else:
        whole = tb[(tb["method"] != BASELINE) & (tb["splits"] == 1)]
        fastest = whole.loc[whole["median_ms"].idxmin()]
        cost = pick["median_ms"] / fastest["median_ms"]
        st.markdown(f"**µ-cuDNN's choice under {limit_kb:g} kB:** {pick['label']} with the batch in "
                    f"{pick['splits']} micro-batch{'es' if pick['splits'] > 1 else ''} "
                    f"({pick['workspace_bytes'] / 1e3:,.0f} kB, {pick['median_ms']:.3g} ms), {cost:.2f}x the time of "
                    f"the fastest whole-batch run ({fastest['label']}, {fastest['workspace_bytes'] / 1e3:,.0f} kB).")
    ui.people_table(tb, "operators_times", TIME_COLUMNS)
    skipped = wd[wd["not_possible"] != ""]
    if not skipped.empty:
        st.caption("Not timed: " + "; ".join(skipped["not_possible"]) + ".")
    st.caption(f"{t.info['device']} ({t.info['isa']}), {t.info['repeats']} runs each; the interval is the "
               f"median's (coverage {tb['coverage'].iloc[0]:.0%}: fewer than 6 runs reach 95 % only as min–max). "
               f"{BASELINE} is PyTorch's own convolution, the baseline of the same run.")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Operators")
    ui.lesson("Inside one layer, how many operations could run at once — and which way of computing a "
              "convolution does the least work?",
              "Pick a layer. The survey counts each method's work W and depth D (the longest chain of operations "
              "that must wait for each other); W/D is how many can run at once on average. Compare it with the "
              "threads this device runs, then time the four methods here.")
    with ui.guard():
        shape, fc_in, fc_out = _layer()
        wd = conv_work_depth_table(shape)
        fc = fc_work_depth_table(shape.n, fc_in, fc_out)
    device = operator_device()
    n_threads, how = threads(device)
    _predict(shape)
    cols = st.columns(3)
    cols[0].metric("Threads at once here", f"{n_threads:,}", help=how)
    ok = wd.dropna(subset=["parallelism"])
    if not ui.revealed("guess"):
        ui.withheld(HIDDEN, "Which method multiplies least is the question above: answer it (or skip it) to see "
                            "the survey's counts for this layer.",
                    [(cols[1], "Least W/D of the methods"), (cols[2], "Fewest multiplications, this layer")])
    else:
        cols[1].metric("Least W/D of the methods", people_number(ok["parallelism"].min()),
                       help="the smallest average parallelism of the methods that can compute this layer")
        cols[2].metric("Fewest multiplications, this layer", fewest_multiplications(wd),
                       help=f"with the {shape.k}×{shape.k} kernel set above")
        takeaway_slot = st.container()
        st.subheader(f"Convolution: N={shape.n}, {shape.c_in}→{shape.c_out} channels, {shape.h}×{shape.w}, "
                     f"{shape.k}×{shape.k} kernel, output {shape.h_out}×{shape.w_out}")
        ui.people_table(wd, "operators_conv", WD_COLUMNS,
                        [c for c in WD_COLUMNS if c != "not_possible" or wd["not_possible"].any()])
        st.caption("W and D from Ben-Nun & Hoefler 2018's convolution table (FFT's constant c = 1; Winograd with m = 4 "
                   "input tiles, α = m − r + 1 as printed there).")
        g = depth_growth(shape)
        st.markdown(f"**W grows linearly, D logarithmically:** doubling C_in from {g['c_in'].iloc[0]} to "
                    f"{g['c_in'].iloc[-1]} multiplies direct's W by {g['work'].iloc[-1] / g['work'].iloc[0]:.0f} "
                    f"and adds {g['depth'].iloc[-1] - g['depth'].iloc[0]:.0f} steps to D.")
        ui.people_table(g, "operators_growth", GROWTH_COLUMNS)
        ui.figure(operators_figure(wd, g, n_threads), g, "operators_work")
        _timing(shape, wd, n_threads, takeaway_slot)
    st.subheader(f"Fully connected: {fc_in}→{fc_out} features, batch {shape.n}")
    ui.people_table(fc, "operators_fc", FC_COLUMNS)
    st.caption("The survey's FC table: the three products have the same work; their depths differ by the dimension "
               "each sums over (C_in forward, the batch N for ∇w, C_out for ∇o), so a small batch leaves ∇w the "
               "shortest chain.")
