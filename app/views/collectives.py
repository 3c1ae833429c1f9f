"""Collectives page: allreduce algorithms — modelled time and bus bandwidth against the lower bound
(Ben-Nun & Hoefler's cost model), the same algorithms measured on this machine against the model of
the link fitted to those measurements, and the error of compressed allreduce as P grows (SimComm)."""
import functools
import math

import streamlit as st

import _common as ui
import _runs as jobs
from lab import plots
from lab.experiments import (LINKS, algorithm_catalog, codec_catalog, collective_model, collective_sweep,
                             error_at_scale, op_catalog, op_model, op_names)
from lab.plots.collectives import measured_fit_figure
from lab.plots.units import bytes_label
from views._time_split import render as render_time_split

SIZES = [1 << k for k in range(3, 31)]  # 8 B .. 1 GB per rank
SCALE_PS = [8, 16, 32, 64, 128, 256]
CHEAP_SCALE = 130  # sum(P) x codecs x (values / 1024) up to which error at scale runs without a click (< ~1 s)

MEASURED_COLUMNS = {
    "algorithm": ("Algorithm", None),
    "nbytes": ("Message size per rank (bytes)", "m, bytes each rank contributes"),
    "time_us": ("Time (µs)", "median time of one allreduce, averaged over ranks"),
    "algbw_GBps": ("Algorithm bandwidth (GB/s)", "algbw = m / time (nccl-tests)"),
    "busbw_GBps": ("Bus bandwidth (GB/s)", "busbw = algbw · 2(P−1)/P (nccl-tests): comparable across P"),
    "model_us": ("Model on the fitted link (µs)", "Ben-Nun & Hoefler's formula with L and G fitted to these rows"),
    "model_error": ("Model error (%)", "(model − measured) / measured"),
}
SCALE_COLUMNS = {
    "codec": ("Codec", None),
    "P": ("Ranks P", None),
    "mode": ("Mode", "requantize: decoded, added and re-encoded at every hop; gather: every rank's message "
                     "decoded once"),
    "rel_error": ("Relative error (%)", "‖allreduce − exact sum‖₂ / ‖exact sum‖₂"),
    "ranks_agree": ("All ranks agree", "every rank holds bit-identical results"),
    "wire_bytes": ("On the wire, all ranks (B)", "bytes every rank sent, summed"),
}


def _plain(df, columns: dict):
    """The table with plain column names (units in the name, the paper's symbol in the tooltip)."""
    shown = df[[c for c in columns if c in df]].copy()
    for c in ("rel_error", "model_error"):
        if c in shown:
            shown[c] = shown[c] * 100
    shown = shown.round({"time_us": 1, "model_us": 1, "model_error": 1, "rel_error": 3, "algbw_GBps": 4,
                         "busbw_GBps": 4})
    shown = shown.rename(columns={c: columns[c][0] for c in shown.columns})
    return shown, {name: tip for name, tip in columns.values() if tip}


@st.cache_data(max_entries=64, show_spinner=False)
def _model(algorithms: tuple, P: int, link: str):
    return collective_model(list(algorithms), P, SIZES, link)


def _fmt_us(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} µs"


def _model_takeaway(mdf, algorithm: str, P: int, size: int, link: str) -> str:
    at = mdf[mdf.nbytes == size].set_index("algorithm")
    best = at.model_s.idxmin()
    mine = at.loc[algorithm]
    text = (f"At {bytes_label(size)} per rank on {P} GPUs over {link}, **{best}** is the fastest of those shown "
            f"({_fmt_us(at.loc[best].model_s * 1e6)}, {at.loc[best].lower_bound_s / at.loc[best].model_s:.0%} of "
            f"the lower bound's speed)")
    if best != algorithm:
        text += f"; {algorithm} takes {mine.model_s / at.loc[best].model_s:.3g}x as long"
    fastest = mdf.loc[mdf.groupby("nbytes").model_s.idxmin()]
    small, large = fastest.algorithm.iloc[0], fastest.algorithm.iloc[-1]
    if small != large:
        switch = fastest[fastest.algorithm == large].nbytes.min()
        text += (f"; {small} wins small messages (fewer latency terms) and {large} wins from about "
                 f"{bytes_label(switch)} (fewer bytes per rank)")
    return text + "."


MODE_WORDS = {"requantize": "re-quantised at every hop", "gather": "gathered (decoded once)"}


def _scale_takeaway(edf) -> str:
    """Which error grows with P and which stays flat, from the measured rows (first and last P)."""
    parts = []
    for (codec, mode), g in edf.groupby(["codec", "mode"], sort=False):
        g = g.sort_values("P")
        if len(g) < 2:
            continue
        e0, e1 = g.rel_error.iloc[0], g.rel_error.iloc[-1]
        r = e1 / e0 if e0 > 0 else float("inf")
        how = f"grows {r:.2g}x" if r >= 1.3 else f"shrinks to {r:.2g}x" if r <= 1 / 1.3 else "stays flat"
        parts.append(f"{codec} {MODE_WORDS.get(mode, mode)} {how} ({e0 * 100:.3g} % → {e1 * 100:.3g} %, "
                     f"{bytes_label(float(g.wire_bytes.iloc[-1]))} on the wire at P = {int(g.P.iloc[-1])})")
    if not parts:
        return "Run at least two values of P to see how the error changes."
    return f"Measured from P = {int(edf.P.min())} to {int(edf.P.max())}, the error of the sum: " + "; ".join(parts) + "."


ASK_P, ASK_CODEC, ASK_N = 64, "dynamic_tree", 1024  # the prediction's setting (SimComm, seed 0)
PARTS = ["Every collective", "Measured here", "Error as P grows", "Where the time goes"]
GAPS = {"about 1x (the same)": 1.0, "about 2x": 2.0, "about 5x": 5.0, "about 10x": 10.0, "about 60x": 60.0}


@st.cache_data(max_entries=4, show_spinner=False)
def requant_gap(codec: str = ASK_CODEC, P: int = ASK_P, n: int = ASK_N) -> dict:
    """Relative error of the ring re-quantising at every hop and of qgZ's all-to-all (alltoall_quantized:
    each chunk quantised once, summed exactly) at P ranks, and their bytes on the wire (SimComm, ~20 s at
    P = 64 on 2 cores: Home's warm-up computes it when the server starts)."""
    df = error_at_scale([codec], ["ring", "alltoall_quantized"], [P], n=n, mode="requantize").set_index("algorithm")
    return {a: {"rel_error": float(df.loc[a, "rel_error"]), "wire_bytes": float(df.loc[a, "wire_bytes"])}
            for a in ("ring", "alltoall_quantized")}


def warm() -> None:
    """What this page needs after a click, computed when the server starts (app/warmup.py)."""
    requant_gap()


def _predict_gap() -> None:
    """At P = 64, how much more does ring re-quantisation lose than qgZ? Revealed from a SimComm run."""
    def reveal():
        with st.spinner(f"Simulating {ASK_P} ranks (about 20 s the first time on a server)…"):
            g = requant_gap()
        ring, qgz = g["ring"]["rel_error"], g["alltoall_quantized"]["rel_error"]
        ratio = ring / qgz
        nearest = min(GAPS, key=lambda k: abs(math.log(GAPS[k] / ratio)))
        return nearest, (
            f"With {ASK_CODEC} on {ASK_N:,} normal values per rank: the ring decodes, adds and re-encodes the partial "
            f"sum at each of its {ASK_P - 1} reduce-scatter hops, so rounding errors pile up: {ring * 100:.2f} % "
            f"relative error. qgZ's all-to-all quantises each rank's chunk once and sums in full precision: "
            f"{qgz * 100:.2f} %. Ratio {ratio:.2f}x, for the same {bytes_label(g['ring']['wire_bytes'])} on the "
            f"wire. Far less than {ASK_P - 1}x: the hops' rounding errors have random signs and partly cancel.")
    ui.predict(f"At P = {ASK_P} ranks with {ASK_CODEC}, how many times larger is the error of the ring that "
               "re-quantises at every hop than that of ZeRO++'s qgZ (all-to-all, quantised once)?",
               list(GAPS), reveal, key="guess")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    ALGORITHMS = algorithm_catalog().name.tolist()  # read per run: a plugin registered later shows too
    CODECS = [c.name for c in codec_catalog() if not c.work.raw]

    st.title("Collectives")
    ui.lesson("Which allreduce algorithm is fastest for your message size and GPU count, and how close does it "
              "come to the best any algorithm can do?",
              "Look at the gap between each dashed line (an algorithm's modelled time) and the black line (the "
              "lower bound): small messages are ruled by latency (rounds), large ones by bytes per rank. In the tabs "
              "below: every other collective, the same algorithms measured here, how a codec's error grows with "
              "the number of ranks, and where a measured allreduce spends its time.")

    def preset_ring_vs_tree():
        ui.set_state(algorithm="ring", P=64, size=1 << 26, link="ib_fdr", compare=["ring", "tree", "rabenseifner"])

    c1, c2, c3, c4 = st.columns(4)
    algorithm = ui.select("Algorithm", list(ALGORITHMS), "algorithm", "ring", where=c1,
                          help="the allreduce whose numbers the metrics show; "
                               + "; ".join(f"{r.name}: {r.summary}" for r in algorithm_catalog().itertuples()))
    P = ui.number("GPUs / processes P", "P", 8, where=c2, min_value=1, max_value=1024, step=1,
                  help="number of ranks taking part (1..1024; the measurement below starts P processes here)")
    size = ui.select_slider("Message size per rank", SIZES, "size", 1 << 20, where=c3, format_func=bytes_label,
                            help="bytes each rank contributes, m in the cost model (8 B .. 1 GB)")
    link = ui.select("Link", list(LINKS), "link", "ib_fdr", where=c4,
                     help="latency L and bandwidth 1/G of the modelled network; "
                          + "; ".join(f"{k}: {v.source}" for k, v in LINKS.items()))
    k1, k2 = st.columns([2, 1])
    compare = ui.multiselect("Compare with", list(ALGORITHMS), "compare", ["tree", "rabenseifner"], where=k1,
                             help="algorithms drawn beside the chosen one (any of the registered algorithms)")
    k2.button("Preset: ring vs tree", on_click=preset_ring_vs_tree, width="stretch",
              help="64 GPUs, 64 MB per rank on InfiniBand FDR: where the ring's bandwidth term wins")

    algs = [algorithm] + [a for a in compare if a != algorithm]
    P = int(P)
    if P == 1:
        st.info("With P = 1 there is nothing to reduce: one rank's allreduce moves no bytes and takes no time, so "
                "time and bus bandwidth are not defined. Choose P ≥ 2 (up to 1024) to compare algorithms.")
        ui.takeaway("An allreduce needs at least two ranks; at P = 1 every algorithm costs nothing.")
    else:
        with ui.guard():
            mdf = _model(tuple(algs), P, link)
        row = mdf[(mdf.algorithm == algorithm) & (mdf.nbytes == size)].iloc[0]
        m1, m2, m3 = st.columns(3)
        m1.metric(f"{algorithm} time (model)", _fmt_us(row.model_s * 1e6),
                  help="Ben-Nun & Hoefler's cost model: α·L + β·m·G with the algorithm's own coefficients")
        m2.metric("Bus bandwidth (model)", f"{row.busbw_GBps:.3g} GB/s",
                  help="busbw = algbw · 2(P−1)/P with algbw = m / time (nccl-tests): the link speed an optimal "
                       "algorithm would need; comparable across P")
        m3.metric("Speed vs lower bound", f"{row.lower_bound_s / row.model_s:.0%}",
                  help="lower bound time L·log2P + 2mG(P−1)/P ÷ this algorithm's time: 100 % is optimal")
        ui.takeaway(_model_takeaway(mdf, algorithm, P, size, link))
        view = ui.radio("Chart", ["time", "bus bandwidth"], "view", "time",
                        help="time: modelled allreduce time against message size; bus bandwidth: nccl-tests' busbw "
                             "= algbw · 2(P−1)/P, which an optimal algorithm keeps at the link's speed")
        if view == "time":
            ui.figure(plots.collective_time_figure(mdf), mdf, "collective_model_time")
        else:
            ui.figure(plots.busbw_figure(mdf), mdf, "collective_model_busbw")

    st.markdown(f"To watch each message of {algorithm} move between ranks, round by round: "
                "[Step through an allreduce](./step_through).")

    _predict_gap()
    # The rest of the page in tabs, only the open one drawn: all four at once made a first visit ~0.6 s slower
    # in the browser (2.2 s against the 2 s target for a default view, bench/app_browser.py)
    boxes, part = ui.tabs(PARTS, "part")
    with boxes[PARTS.index(part)]:
        if part in PARTS[:2] and P == 1:
            st.info(f"{part}: needs P ≥ 2 ranks (up to 1024); with P = 1 no collective moves a byte.")
        elif part == "Every collective":
            _ops_section(P, size, link)
        elif part == "Measured here":
            st.fragment(_released(_measured_section, "meas_run"))(algorithm, P, size, link)
        elif part == "Error as P grows":
            st.fragment(_released(_scale_section, "err_run"))(algorithm, CODECS)
        else:  # "Where did the time go?" (views/_time_split.py)
            st.fragment(_released(render_time_split, "split_run"))()


def _released(section, key: str):
    """`section`, then let the run it started begin (the page has drawn: its timing is not disturbed)."""
    @functools.wraps(section)
    def body(*args) -> None:
        try:
            section(*args)
        finally:
            jobs.release(key)
    return body


def _measured_rows(rows: list, P: int, key: str) -> None:
    """The raw rows a Measure run streamed (rank 0's finished sizes): time per call and bus bandwidth."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if not len(df):
        return
    shown = pd.DataFrame({"Algorithm": df["algorithm"], "Message per rank (B)": df["nbytes"],
                          "Time (µs)": (df["seconds"] * 1e6).round(1),
                          "Bus bandwidth (GB/s)": df["nbytes"] / df["seconds"] * 2 * (P - 1) / P / 1e9})
    ui.table(shown, key, formats={"Bus bandwidth (GB/s)": "%.3g"}, download=False)  # rows of an unfinished run


def _measured_section(algorithm: str, P: int, size: int, link: str) -> None:
    st.subheader("Measured here: real processes (Gloo over loopback)")
    st.caption(f"Runs {algorithm} and the backend's own all_reduce on P = {P} local processes, from 1 kB up to "
               f"the chosen size, then fits this machine's link (latency L, bandwidth 1/G; shared-medium form) by "
               f"least squares and draws the model on that fitted link beside the measurements. The {link} "
               "preset above describes another network, so it is not drawn here.")
    top = min(size, 1 << 24)
    msizes = sorted({1 << 10, top} | {1 << k for k in range(10, top.bit_length(), 2)})  # x4: enough sizes to fit
    if len(msizes) < 2:
        msizes = [1 << 10, 1 << 14]
    job = jobs.controls("Measure", "meas_run", [P, algorithm, msizes], lambda j: collective_sweep(
        P, [algorithm, "native"], msizes, target_s=0.02, progress=j.progress, on_row=j.on_row)[0],
        help=f"start {P} processes and time each size (seconds to a minute); other settings stay usable meanwhile")
    if job is None:
        return
    if job.running:
        jobs.watch("meas_run", lambda j: _measured_rows(j.curve(), P, key=f"meas_live_{len(j.rows)}"))
        return
    if job.state == "failed":
        st.error(job.error)
        return
    if job.state == "stopped":
        st.warning(f"Stopped before the measurement finished: the processes were ended; the {len(job.rows)} "
                   "sizes finished before Stop are below (no link is fitted to a partial sweep). Press Measure "
                   "to run it again.")
        if job.rows:
            _measured_rows(job.curve(), P, key="meas_stopped")
        return
    meas = job.result
    fit = meas.attrs.get("fit", {})
    mine = meas[meas.algorithm == algorithm]
    f1, f2, f3 = st.columns(3)
    if fit:
        f1.metric("Fitted latency L", f"{fit['latency_us']:.3g} µs",
                  help="per-message cost of this machine's loopback link, fitted to the measured times")
        f2.metric("Fitted bandwidth 1/G", f"{fit['bandwidth_GBps']:.3g} GB/s",
                  help="bytes per second of the fitted link (shared medium: all ranks' bytes count)")
        f3.metric("Model error (median)", f"{fit['median_rel_error']:.0%}",
                  help=f"median |model − measured| / measured over the {fit['rows']} rows used for the fit "
                       f"(worst {fit['max_rel_error']:.0%})"
                       + (f"; {fit['left_out']} rows the machine's load stalled (over 2x the fit) left out"
                          if fit.get("left_out") else ""))
    else:
        st.warning("No link could be fitted to these rows (too few sizes at 64 kB or more): only the measurements "
                   "are drawn.")
    big = mine.iloc[-1]
    nat = meas[(meas.algorithm == "native") & (meas.nbytes == big["nbytes"])]
    if len(nat):
        ratio = float(nat.time_us.iloc[0] / big.time_us)
        ui.takeaway(f"Measured at {bytes_label(big['nbytes'])} per rank on {P} processes, {algorithm} runs at "
                    f"{big.busbw_GBps:.3g} GB/s bus bandwidth, {ratio:.2g}x the speed of the backend's own "
                    f"all_reduce" + (f"; the model on the fitted link ({fit['latency_us']:.3g} µs, "
                                     f"{fit['bandwidth_GBps']:.3g} GB/s) is off by {fit['median_rel_error']:.0%} "
                                     "(median)." if fit else "."), key="takeaway-measured")
    ui.figure(measured_fit_figure(meas), meas, "collective_measured")
    shown, config = _plain(meas, MEASURED_COLUMNS)
    ui.table(shown, "collective_measured_table", help=config)


def _scale_section(algorithm: str, CODECS: list) -> None:
    st.subheader("Error of compressed allreduce as P grows (simulator)")
    st.caption(f"Each of P simulated ranks holds n normal values (n under More settings); the {algorithm} "
               "allreduce sends them through the codec, and the result is compared with the exact sum.")
    e1, e2 = st.columns([3, 1])
    codecs = ui.multiselect("Codecs on the wire", CODECS, "err_codecs", ["dynamic_tree"], where=e1,
                            help="each codec is one curve (any registered lossy codec)")
    maxP = ui.select_slider("Up to P ranks", SCALE_PS, "err_maxP", 32, where=e2,
                            help="P = 2, 4, 8, … up to this (8..256); above 32 the run takes seconds to minutes")
    modes = ui.multiselect("Wire mode", ["requantize", "gather"], "err_modes", ["requantize", "gather"],
                           help="requantize: each hop decodes, adds and re-encodes the partial sum (error can "
                                "pile up with every hop); gather: every rank's own message is decoded once. "
                                "Sign and sparse codecs (onebit, topk, randomk) run gather only")
    with ui.more_settings():
        specs = ui.codec_option_specs(codecs, "err_codecs")
        m1, m2 = st.columns(2)
        n = ui.select_slider("Values per rank", [256, 1024, 4096, 16384, 65536], "err_n", 1024, where=m1,
                             help="n, the length of each rank's vector (256..65,536); more values, steadier error")
        seed = ui.number("Seed", "err_seed", 0, where=m2, min_value=0, max_value=2**31 - 1, step=1,
                         help="seeds every rank's random vector (0..2³¹−1)")
    if not codecs or not modes:
        st.info("Pick at least one codec and one wire mode.")
        return
    ranks = [1 << k for k in range(1, int(maxP).bit_length())]
    cheap = sum(ranks) * len(specs) * len(modes) * max(1.0, n / 1024) <= CHEAP_SCALE
    params = [specs, algorithm, ranks, modes, int(n), int(seed)]
    job = jobs.controls("Run", "err_run", params, lambda j: error_at_scale(
        list(specs), [algorithm], ranks, mode=list(modes), n=int(n), seed=int(seed), progress=j.progress,
        on_row=j.on_row),
        help="simulate every P (the largest runs take up to minutes; other settings stay usable meanwhile)",
        auto=cheap, wait_s=3.0)
    if job is None:
        st.info(f"Press Run: {len(specs)} codec(s) up to P = {maxP} take from seconds to minutes here.")
        return

    def draw(j) -> None:
        import pandas as pd

        edf = j.result if j.state == "done" else pd.DataFrame(j.curve())
        if not len(edf):
            return
        edf = edf.assign(codec=edf["spec"]) if "spec" in edf else edf  # the names the user picked
        if j.state == "done":
            ui.takeaway(_scale_takeaway(edf), key="takeaway-scale")
            for note in edf.attrs.get("skipped", []):
                st.caption(f"Not run: {note}")
        elif j.state == "stopped":
            st.warning(f"Stopped at P = {int(edf.P.max())}: each curve below ends at the last P it finished.")
        ui.figure(plots.error_at_scale_figure(edf), edf if j.state != "running" else None, "error_at_scale",
                  key=f"scale_{j.state}_{len(edf)}")
        if j.state != "running":
            shown, config = _plain(edf, SCALE_COLUMNS)
            ui.table(shown, "error_at_scale_table", help=config)

    if job.running:
        jobs.watch("err_run", draw)
    elif job.state == "failed":
        st.error(job.error)
    else:
        draw(job)
    prev = jobs.last_result("err_run", other_than=job) if job.state != "done" else None
    if prev is not None:
        with st.expander("Last finished result (earlier settings)"):
            pdf = prev.result.assign(codec=prev.result["spec"]) if "spec" in prev.result else prev.result
            st.markdown(_scale_takeaway(pdf))
            ui.figure(plots.error_at_scale_figure(pdf), pdf, "error_at_scale_last", key="scale_last")


@st.cache_data(max_entries=32, show_spinner=False)
def _op_model(op: str, algorithms: tuple, P: int, link: str):
    return op_model(op, list(algorithms), P, SIZES, link)


def _ops_section(P: int, size: int, link: str) -> None:
    """Every nccl-tests collective: pick an op, see its algorithms' modelled busbw and time
    against the op's lower bound, on the page's P, size and link."""
    st.subheader("Every collective: all-gather, reduce-scatter, all-to-all, broadcast, reduce, sendrecv")
    ops = [o for o in op_names() if o != "all_reduce"]
    o1, o2 = st.columns([1, 2])
    op = ui.select("Collective", ops, "op", "all_gather", where=o1,
                   help="nccl-tests' collectives besides allreduce (sharded training all-gathers weights and "
                        "reduce-scatters gradients; expert parallelism moves tokens with all-to-all)")
    catalog = op_catalog(op)
    algs = catalog.name.tolist()
    chart = ui.radio("Chart", ["bus bandwidth", "time"], "op_view", "bus bandwidth", where=o2,
                     help="busbw = algbw × the op's nccl-tests factor; time = the α-β model of each algorithm")
    factor, what = catalog.busbw.iloc[0], catalog["size"].iloc[0]
    st.caption(f"**{op}**: size = {what}; busbw = algbw × {factor} (nccl-tests doc/PERFORMANCE.md). "
               + "; ".join(f"{r.name}: {r.summary}" for r in catalog.itertuples()))
    with ui.guard():
        mdf = _op_model(op, tuple(algs), P, link)
    at = mdf[mdf.nbytes == size]
    best = at.loc[at.model_s.idxmin()]
    small, big = mdf[mdf.nbytes == mdf.nbytes.min()], mdf[mdf.nbytes == mdf.nbytes.max()]
    win_small, win_big = small.loc[small.model_s.idxmin()].algorithm, big.loc[big.model_s.idxmin()].algorithm
    cols = st.columns(min(len(at), 4))
    for i, r in enumerate(at.itertuples()):
        cols[i % len(cols)].metric(f"{r.algorithm}", _fmt_us(r.model_s * 1e6),
                                   help=f"modelled {op} of {bytes_label(size)} on {P} ranks over {link}: "
                                        f"{r.busbw_GBps:.3g} GB/s busbw, {r.bytes_per_rank:,.0f} B sent per rank")
    ui.takeaway(f"{op} of {bytes_label(size)} on {P} ranks over {link}: {best.algorithm} is fastest "
                f"({_fmt_us(best.model_s * 1e6)}, {best.lower_bound_s / best.model_s:.0%} of the lower bound's "
                f"speed); at {bytes_label(int(mdf.nbytes.min()))} {win_small} wins, at "
                f"{bytes_label(int(mdf.nbytes.max()))} {win_big}.", key="takeaway-ops")
    ui.figure(plots.op_model_figure(mdf, "busbw" if chart == "bus bandwidth" else "time"), mdf, "collective_op_model")
    st.markdown(f"Each message of {op}, step by step: [Step through](./step_through?op={op}).")
