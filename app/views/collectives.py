"""Collectives page: allreduce algorithms — modelled vs measured time, bus bandwidth against the
lower bound, a step-by-step view of one algorithm's messages, and the error of compressed
allreduce at scale on the simulator."""
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (LINKS, algorithm_catalog, allreduce_trace, codec_catalog, collective_model, collective_sweep,
                             error_at_scale)

SIZES = [1 << k for k in range(3, 31)]  # 8 B .. 1 GB per rank


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    ALGORITHMS = algorithm_catalog().name.tolist()  # read per run: a plugin registered later shows too
    CODECS = [c.name for c in codec_catalog() if not c.work.raw]
    def fmt_bytes(b: int) -> str:
        for unit, f in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
            if b >= f:
                return f"{b / f:g} {unit}"
        return f"{b} B"


    st.title("Collectives")
    st.caption("Allreduce algorithms of Ben-Nun & Hoefler (tree, recursive doubling, ring, Rabenseifner; "
               "paper 001's cost formulas), Deep Image's butterfly sync and a parameter server. "
               "busbw follows nccl-tests: algbw · 2(P−1)/P.")


    def preset_ring_vs_tree():
        ui.set_state(algorithm="ring", P=64, size=1 << 26, link="ib_fdr", compare=["ring", "tree", "rabenseifner"])


    st.button("Preset: ring vs tree at 64 GPUs on InfiniBand FDR", on_click=preset_ring_vs_tree)
    c1, c2, c3, c4 = st.columns(4)
    algorithm = ui.select("Algorithm", list(ALGORITHMS), "algorithm", "ring", where=c1)
    P = ui.number("GPUs / processes P", "P", 8, where=c2, min_value=1, max_value=1024, step=1)
    size = ui.select_slider("Message size per rank", SIZES, "size", 1 << 20, where=c3, format_func=fmt_bytes)
    link = ui.select("Link", list(LINKS), "link", "ib_fdr", where=c4,
                     help="; ".join(f"{k}: {v.source}" for k, v in LINKS.items()))
    compare = ui.multiselect("Compare with", list(ALGORITHMS), "compare", ["tree", "rabenseifner"])


    @st.cache_data(max_entries=64)
    def model(algorithms: tuple, P: int, link: str):
        return collective_model(list(algorithms), P, SIZES, link)


    algs = [algorithm] + [a for a in compare if a != algorithm]
    with ui.guard():
        mdf = model(tuple(algs), int(P), link)

    row = mdf[(mdf.algorithm == algorithm) & (mdf.nbytes == size)].iloc[0]
    m1, m2, m3 = st.columns(3)
    m1.metric(f"{algorithm} time (model)", f"{row.model_s * 1e6:,.1f} µs")
    m2.metric("Bus bandwidth (model)", f"{row.busbw_GBps:.3g} GB/s")
    m3.metric("Lower bound / model", f"{row.lower_bound_s / row.model_s:.0%}",
              help="L·log2P + 2mG(P−1)/P over the algorithm's time: 100% is optimal")

    t1, t2 = st.tabs(["Time", "Bus bandwidth"])
    with t1:
        ui.figure(plots.collective_time_figure(mdf), mdf, "collective_model_time")
    with t2:
        ui.figure(plots.busbw_figure(mdf), mdf, "collective_model_busbw")

    st.subheader("Measured here: real processes (Gloo over loopback)")
    st.caption("Runs the chosen algorithm and the backend's own all_reduce on P local processes, sizes from 1 kB "
               "up to the chosen size, and fits this machine's link (shared-medium form).")
    msizes = sorted({1 << 10, min(size, 1 << 24)} | {1 << k for k in range(10, min(size, 1 << 24).bit_length(), 4)})


    if ui.run_button("Measure", "meas_run", [P, algorithm, msizes]):
        with ui.guard():
            cb = ui.progress()
            meas, _ = ui.cached_run("collectives", [P, algorithm, msizes], lambda: collective_sweep(
                int(P), [algorithm, "native"], msizes, target_s=0.02, progress=cb))
            cb(1.0, "done")
        st.metric("Measured busbw at the largest size", f"{meas[meas.algorithm == algorithm].busbw_GBps.iloc[-1]:.3g} GB/s")
        fig = plots.collective_time_figure(model(tuple(algs), int(P), link).query("nbytes in @msizes"), meas)
        ui.figure(fig, meas, "collective_measured")
        ui.table(meas, "collective_measured_table")

    st.subheader(f"Step by step: {algorithm} on a few ranks")
    sp1, sp2 = st.columns(2)
    P_step = ui.slider("Ranks for the step view", "P_step", min(max(int(P), 2), 8), 2, 16, where=sp1)
    n_step = ui.select_slider("Values per rank", [4, 16, 64, 256], "n_step", 16, where=sp2)


    @st.cache_data(max_entries=64)
    def trace(algorithm: str, P: int, n: int):
        return allreduce_trace(algorithm, P, n)


    with ui.guard():
        tr = trace(algorithm, int(P_step), int(n_step))
    rounds = int(tr.attrs["steps"])
    upto = ui.slider("Show rounds up to", "round", rounds - 1, 0, max(rounds - 1, 1)) if rounds > 1 else 0
    s1, s2, s3 = st.columns(3)
    s1.metric("Rounds", rounds)
    s2.metric("Messages", len(tr))
    s3.metric("Bytes moved (all ranks)", f"{int(tr.bytes.sum()):,} B")
    ui.figure(plots.allreduce_trace_figure(tr, upto), tr, "allreduce_steps")
    with st.expander(f"Messages of round {upto}"):
        st.dataframe(tr[tr.step == upto], hide_index=True)

    st.subheader("Error of compressed allreduce at scale (simulator)")
    e1, e2 = st.columns([3, 1])
    codecs = ui.multiselect("Codecs on the wire", CODECS, "err_codecs", ["dynamic_tree", "linear"], where=e1)
    specs = ui.codec_option_specs(codecs, "err_codecs")
    maxP = ui.select_slider("Up to P ranks", [8, 16, 32, 64, 128, 256], "err_maxP", 32, where=e2)


    @st.cache_data(show_spinner="simulating…", max_entries=16)
    def scale(codecs: tuple, algorithm: str, maxP: int):
        ranks = [1 << k for k in range(1, maxP.bit_length())]
        return error_at_scale(list(codecs), [algorithm], ranks, n=1024)


    if codecs:
        with ui.guard():
            edf = scale(tuple(specs), algorithm, int(maxP))
        last = edf[edf.P == edf.P.max()].sort_values("rel_error").iloc[0]
        st.metric(f"Smallest error at P = {int(last.P)}", f"{last.rel_error:.2e}", help=last.codec)
        ui.figure(plots.error_at_scale_figure(edf), edf, "error_at_scale")
