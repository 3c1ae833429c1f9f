"""Transfer page: Dettmers 2016 Figure 2 — time and speedup of compressed point-to-point messages
against message size, modelled for a chosen link and measured between two processes here."""
import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import LINKS, PAPER_CODEC_NS, codec_catalog, custom_link, transfer_model, transfer_sweep

SPEEDS = {"paper's GPU kernels (1 / 0.5 ns)": "paper", "measured on this device": "measured", "custom": "custom"}


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    CODECS = [c.name for c in codec_catalog() if not c.work.raw]  # read per run: a codec registered later shows
    st.title("Transfer")
    st.caption("Dettmers 2016 §3.3, Figure 2: one message of n float32 values, encode + send + decode against "
               "sending 32 bits. Compression pays once the link time it saves exceeds the codec's time.")


    def preset_figure2():
        ui.set_state(codecs=["dynamic_tree", "onebit"], link="pcie3", speed=list(SPEEDS)[0], range=(10, 26))


    def preset_slow():
        ui.set_state(codecs=["dynamic_tree", "linear", "onebit"], link="eth1g", speed=list(SPEEDS)[1], range=(10, 24))


    c1, c2, _ = st.columns([2, 2, 1])
    c1.button("Preset: Figure 2 (PCIe 3, paper's kernels)", on_click=preset_figure2)
    c2.button("Preset: this CPU on 1 Gbit/s Ethernet", on_click=preset_slow)

    left, right = st.columns([3, 2])
    with left:
        chosen = ui.multiselect("Codecs (32-bit is always the baseline)", CODECS, "codecs",
                                ["dynamic_tree", "linear", "onebit"])
        specs = ui.codec_option_specs(chosen, "codecs")
        lo, hi = ui.range_slider("Message size range (log2 of float32 values)", "range", (10, 26), 4, 30)
    with right:
        link_name = ui.select("Link", [*LINKS, "custom"], "link", "eth10g",
                              help="; ".join(f"{k}: {v.source}" for k, v in LINKS.items()))
        if link_name == "custom":
            l1, l2 = st.columns(2)
            lat = ui.number("Latency (µs)", "lat_us", 10.0, where=l1)
            bw = ui.number("Bandwidth (GB/s)", "bw_gbps", 1.0, where=l2)
        speed = ui.select("Codec speed", list(SPEEDS), "speed", list(SPEEDS)[0])
        if SPEEDS[speed] == "custom":
            s1, s2 = st.columns(2)
            enc = ui.number("Encode (ns/value)", "enc_ns", PAPER_CODEC_NS[0], where=s1, min_value=0.0)
            dec = ui.number("Decode (ns/value)", "dec_ns", PAPER_CODEC_NS[1], where=s2, min_value=0.0)

    sizes = [1 << k for k in range(lo, hi + 1, 2 if hi - lo > 12 else 1)]


    @st.cache_data(show_spinner="modelling…", max_entries=32)
    def model(sizes: tuple, codecs: tuple, link, codec_ns):
        return transfer_model(list(sizes), list(codecs), link, codec_ns=codec_ns)


    with ui.guard():
        link = custom_link(lat, bw) if link_name == "custom" else link_name
        ns = {"paper": PAPER_CODEC_NS, "measured": "measured"}.get(SPEEDS[speed]) or (enc, dec)
        df = model(tuple(sizes), tuple(specs), link, ns)

    big = df[df.n_values == df.n_values.max()]
    best = big[big.codec != "fp32"].sort_values("speedup_vs_fp32", ascending=False)
    m1, m2, m3 = st.columns(3)
    if len(best):
        top = best.iloc[0]
        m1.metric(f"Speedup at {int(top.n_values):,} values (model)", f"{top.speedup_vs_fp32:.2f}x", help=top.codec)
        cross = df.attrs["crossover"].get(top.codec)
        m2.metric("Its crossover size", "never" if cross is None else f"{cross:,} values")
    m3.metric("32-bit time at the largest size", f"{big[big.codec == 'fp32'].seconds.iloc[0] * 1e3:.3g} ms")
    if SPEEDS[speed] == "measured":
        st.caption("Codec speeds measured here (ns/value, encode / decode): " + ", ".join(
            f"{k} {v[0]:.2f} / {v[1]:.2f}" for k, v in df.attrs["codec_ns"].items()))

    st.subheader("Modelled on the chosen link")
    t1, t2 = st.tabs(["Time", "Speedup"])
    with t1:
        ui.figure(plots.transfer_figure(df, "seconds"), df, "transfer_model_time")
    with t2:
        ui.figure(plots.transfer_figure(df, "speedup_vs_fp32"), df, "transfer_model_speedup")

    st.subheader("Measured here: two processes over loopback")
    st.caption("Starts two worker processes (a few seconds) and times a round trip per size and codec.")
    mhi = ui.select_slider("Largest measured size (values)", [1 << 12, 1 << 16, 1 << 20, 1 << 22], "meas_max", 1 << 16)
    msizes = [1 << k for k in range(8, mhi.bit_length(), 4)]


    if ui.run_button("Measure", "meas_run", [msizes, specs]):
        with ui.guard():
            cb = ui.progress()
            meas, cross = ui.cached_run("transfer", [msizes, specs], lambda: transfer_sweep(
                msizes, specs, target_s=0.02, progress=cb))
            cb(1.0, "done")
        both = pd.concat([meas.assign(source="measured"), model(tuple(msizes), tuple(specs), link, ns)],
                         ignore_index=True)
        ui.figure(plots.transfer_figure(both, "speedup_vs_fp32"), both, "transfer_measured")
        st.caption("Crossover sizes measured here: " + ", ".join(f"{k}: {v if v else 'never'}" for k, v in cross.items()))
