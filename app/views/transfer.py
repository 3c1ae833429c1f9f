"""Transfer page: Dettmers 2016 Figure 2 — time and speedup of compressed point-to-point messages
against message size, modelled for a chosen link and codec kernel speed, and measured between two processes here."""
from __future__ import annotations

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (DEVICES, LINKS, PAPER_CODEC_NS, codec_catalog, custom_link, link_presets,
                             transfer_model, transfer_sweep)

PAPER_KERNEL = "gtx_titan"
# codec speed label -> ("kernel", GPU preset) | ("ns", (enc, dec)) | ("measured", None) | ("custom", None)
SPEEDS = {f"GPU: {name}" + (" (paper's)" if name == PAPER_KERNEL else ""): ("kernel", name)
          for name in DEVICES if name != "dettmers2016"}
SPEEDS.update({"paper's 1 + 0.5 ns/value": ("ns", PAPER_CODEC_NS), "measured here": ("measured", None),
               "custom ns/value": ("custom", None)})
FIG2_SPEED = next(k for k, v in SPEEDS.items() if v == ("kernel", PAPER_KERNEL))
FIG2 = {"codecs": ["dynamic_tree", "linear", "onebit"], "link": "pcie3", "speed": FIG2_SPEED, "range": (10, 24)}
HIDDEN = ("the fastest codec, its speedup, where each codec starts to win, the paper's comparison and the modelled "
          "chart show once you answer the question above, or skip it")


def _n(v: float) -> str:
    return f"{v / 1e6:.3g} million" if v >= 1e6 else f"{int(v):,}"


def _about(v: int) -> str:
    """A crossover size to two significant figures ('about 53,000')."""
    return "any size" if v <= 1 else f"about {_n(float(f'{v:.2g}'))}"


@st.cache_data(show_spinner="timing the codecs on this CPU…", max_entries=16)
def _measured_ns(specs: tuple) -> dict:
    """(encode, decode) ns per value of each codec, timed here once per codec set: every model and
    callout of the page uses these same numbers (two timings disagree on a busy CPU)."""
    return dict(transfer_model([1024], list(specs), "pcie3", codec_ns="measured").attrs["codec_ns"])


def _fit_link(meas: pd.DataFrame):
    """The link the measurement ran on (loopback between two processes), fitted from its 32-bit
    times: seconds = latency + 4·n / bandwidth (least squares over the measured sizes)."""
    import numpy as np

    fp = meas[meas.codec == "fp32"].sort_values("n_values")
    nbytes, t = 4.0 * fp.n_values.to_numpy(float), fp.seconds.to_numpy(float)
    slope, lat = np.polyfit(nbytes, t, 1) if len(fp) > 1 else (t[0] / nbytes[0], 0.0)
    slope = max(float(slope), 1e-13)
    return custom_link(max(float(lat), 0.0) * 1e6, 1e-9 / slope, name="loopback (fitted)")


def _link_text(link) -> str:
    """'1,810 µs latency, 2.5 GB/s' (a bandwidth beyond 1,000 GB/s: the sizes measured were latency-bound)."""
    lat = link.latency_s * 1e6
    bw = link.bandwidth_Bps / 1e9
    return (f"{lat:,.0f}" if lat >= 10 else f"{lat:.3g}") + " µs latency, " + (
        f"{bw:.3g} GB/s" if bw < 1000 else "no bandwidth term seen (the measured sizes were latency-bound)")


@st.cache_data(show_spinner="modelling…", max_entries=64)
def _model(sizes: tuple, codecs: tuple, link, codec_ns, kernel):
    return transfer_model(list(sizes), list(codecs), link, codec_ns=codec_ns, kernel=kernel)


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    CODECS = [c.name for c in codec_catalog() if not c.work.raw]  # read per run: a codec registered later shows
    LINK_CHOICES = {**LINKS, **link_presets()}
    st.title("Transfer")
    ui.lesson("When does compressing a message before sending it make the transfer faster?",
              "Look at where each curve crosses the dotted 32-bit line: compression loses on small messages, where "
              "the codec's fixed kernel time dominates, and wins once the link time it saves is larger. The paper "
              "(Figure 2): 8-bit is slower below about 50,000 values and 2x faster above 250,000.")

    def preset_figure2():
        ui.set_state(**FIG2)

    def preset_slow():
        ui.set_state(codecs=["dynamic_tree", "linear", "onebit"], link="eth1g", speed="measured here",
                     range=(10, 24))

    c1, c2 = st.columns(2)
    c1.button("Preset: the paper's Figure 2", on_click=preset_figure2,
              help="PCIe 3 (7 GB/s) and the paper's GPU, a GTX Titan: memory-bound codec kernels, 7 µs per launch")
    c2.button("Preset: CPU on 1 Gbit/s", on_click=preset_slow,
              help="codec speeds measured here, on a 0.125 GB/s link")

    left, right = st.columns([3, 2])
    with left:
        chosen = ui.multiselect("Codecs (32-bit is always the baseline)", CODECS, "codecs", FIG2["codecs"],
                                help="codecs to compare against sending float32: " + ", ".join(CODECS))
        lo, hi = ui.range_slider("Message size (log2 of the number of float32 values)", "range", FIG2["range"], 4, 30,
                                 help="from 2^4 = 16 to 2^30 ≈ 1 billion values; 10..24 = 1,024 to 16.8 million")
    with right:
        link_name = ui.select("Link", [*LINK_CHOICES, "custom"], "link", FIG2["link"],
                              help="latency and bandwidth of the wire; " +
                                   "; ".join(f"{k}: {v.source}" for k, v in LINK_CHOICES.items()))
        speed = ui.select("Codec speed", list(SPEEDS), "speed", FIG2_SPEED,
                          help="how long encode and decode take. GPU: that GPU's kernels modelled as memory-bound "
                               "plus a fixed launch time per kernel (how the paper's curve arises; gtx_titan is the "
                               "paper's GPU); the paper's average ns per value; measured on this device; or your own")
    mode, arg = SPEEDS[speed]
    if link_name == "custom" or mode == "custom":
        with st.container(border=True):
            k = st.columns(4)
            if link_name == "custom":
                lat = ui.number("Latency (µs)", "lat_us", 10.0, where=k[0], min_value=0.0, max_value=1e6,
                                help="time per message, 0 to 1,000,000 µs")
                bw = ui.number("Bandwidth (GB/s)", "bw_gbps", 1.0, where=k[1], min_value=1e-6, max_value=1e4,
                               help="bytes per second one way, 0.000001 to 10,000 GB/s")
            if mode == "custom":
                enc = ui.number("Encode (ns/value)", "enc_ns", PAPER_CODEC_NS[0], where=k[2], min_value=0.0,
                                max_value=1e6, help="encode time per value, 0 to 1,000,000 ns")
                dec = ui.number("Decode (ns/value)", "dec_ns", PAPER_CODEC_NS[1], where=k[3], min_value=0.0,
                                max_value=1e6, help="decode time per value, 0 to 1,000,000 ns")
    specs = chosen
    with ui.more_settings():
        if chosen:
            specs = ui.codec_option_specs(chosen, "codecs")
    if not chosen:
        st.info("Pick at least one codec to compare with 32-bit.")
        return

    sizes = [1 << k for k in range(lo, hi + 1, 2 if hi - lo > 12 else 1)]
    with ui.guard():
        link = custom_link(lat, bw) if link_name == "custom" else link_name
        ns = ({"ns": arg, "kernel": PAPER_CODEC_NS}.get(mode) or (enc, dec) if mode != "measured"
              else _measured_ns(tuple(specs)))
        df = _model(tuple(sizes), tuple(specs), link, ns, arg if mode == "kernel" else None)

    big = df[df.n_values == df.n_values.max()]
    ranked = big[big.codec != "fp32"].sort_values("speedup_vs_fp32", ascending=False)
    top = ranked.iloc[0]
    even = df.attrs["breakeven"]
    _predict(df, ranked)
    if not ui.revealed("guess"):  # the speedups, the crossovers and the chart would answer it: they wait
        ui.withheld(HIDDEN, f"Which is fastest at {_n(top.n_values)} values on {df.link.iloc[0]} is the question "
                    "above: answer it (or skip it) to see each codec's speedup, the message size from which it wins "
                    "and the chart. A codec wins when the link time it saves exceeds its encode + decode time.",
                    zip(st.columns(3), ("Fastest codec", "Its speedup, largest size", "Beats 32-bit from (values)")))
        measured_section(tuple(specs))
        return
    m1, m2, m3 = st.columns(3)
    m1.metric("Fastest codec", top.codec.split("[")[0], help=f"{top.codec}, at {_n(top.n_values)} values")
    m2.metric("Its speedup, largest size", f"{top.speedup_vs_fp32:.2f}x",
              help=f"32-bit time / its time at {_n(top.n_values)} values")
    be = even.get(top.codec)
    m3.metric("Beats 32-bit from (values)", "never" if be is None else "any size" if be <= 1 else
              _about(be).replace("about ", "~"), help="the message size where its modelled time equals 32-bit's")
    link_label = df.link.iloc[0]
    kernel_note = {"kernel": f"{arg} kernels", "measured": "codec speeds measured here",
                   "ns": "the paper's average 1 / 0.5 ns per value"}.get(mode, "your codec speeds")
    wins = []
    for codec, b in even.items():
        short = codec.split("[")[0]
        wins.append(f"{short} {'never wins' if b is None else 'wins from ' + _about(b) + ' values'}")
    ui.takeaway(f"On {link_label} with {kernel_note}, {top.codec.split('[')[0]} is the fastest at {_n(top.n_values)} "
                f"values, " + (f"{top.speedup_vs_fp32:.2f}x faster than 32-bit; " if top.speedup_vs_fp32 >= 1 else
                               f"yet slower than 32-bit ({top.speedup_vs_fp32:.2f}x its speed); ")
                + "; ".join(wins) + ".")
    if mode == "measured":
        st.caption("Codec speeds measured here (ns/value, encode / decode): " + ", ".join(
            f"{k} {v[0]:.2f} / {v[1]:.2f}" for k, v in df.attrs["codec_ns"].items()))

    _figure2_callout(df, mode, arg, link_label, link, ns, tuple(specs))

    st.subheader("Modelled on the chosen link")
    _model_view(df)

    measured_section(tuple(specs))


def _predict(df: pd.DataFrame, ranked: pd.DataFrame) -> None:
    """Predict, then reveal: which is fastest at the largest size on this link, 32-bit included."""
    n, link = _n(ranked.n_values.iloc[0]), df.link.iloc[0]
    top = ranked.iloc[0]
    choices = ["32-bit", *dict.fromkeys(c.split("[")[0] for c in ranked.codec)]

    def reveal() -> tuple[str, str]:
        right = top.codec.split("[")[0] if top.speedup_vs_fp32 > 1 else "32-bit"
        sp = ", ".join(f"{c.split('[')[0]} {v:.2f}x" for c, v in zip(ranked.codec, ranked.speedup_vs_fp32))
        t32 = float(df[(df.codec == "fp32") & (df.n_values == ranked.n_values.iloc[0])].seconds.iloc[0])
        return right, (f"At {n} values on {link}, 32-bit takes {t32 * 1e3:.3g} ms; speedups over it: {sp}. A codec "
                       "wins when the link time it saves (fewer bytes / bandwidth) exceeds its encode + decode time.")
    ui.predict(f"On {link} at {n} values, which is fastest: sending 32-bit, or one of the codecs?", choices, reveal,
               key="guess")


def _figure2_callout(df: pd.DataFrame, mode: str, arg, link_label: str, link, ns, specs: tuple) -> None:
    """Paper vs here for Figure 2: the paper's claims beside this model's numbers, and what changes them."""
    even = df.attrs["breakeven"]
    eight = next((c for c in even if c.startswith("dynamic_tree") or c.startswith("linear")), None)
    one = next((c for c in even if c.startswith("onebit")), None)
    here = []
    if eight is not None:
        b = even[eight]
        s250 = _model((250_000,), specs, link, ns, arg if mode == "kernel" else None)  # ns: the chart's own
        sp = float(s250[s250.codec == eight].speedup_vs_fp32.iloc[0])
        here.append(f"8-bit beats 32-bit {'never' if b is None else 'from ' + _about(b) + ' values'} and is "
                    f"{sp:.2f}x at 250,000")
    if eight is not None and one is not None:
        big = df[df.n_values == df.n_values.max()].set_index("codec").speedup_vs_fp32
        here.append(f"1-bit is {big[one] / big[eight]:.2f}x 8-bit at {_n(df.n_values.max())} values")
    ours = "; ".join(here) if here else "pick dynamic_tree and onebit to compare with the paper's curves"
    if mode == "kernel" and arg == PAPER_KERNEL and link_label == "pcie3":
        why = ("This is the paper's link (PCIe 3, 7 GB/s) and GPU (GTX Titan), its codec kernels modelled as "
               "memory-bound (5 bytes read and written per value at 288 GB/s: 0.02 ns) plus ~7 µs per kernel launch, "
               "3 launches (an assumption of lab.plan's gtx_titan preset: the paper gives no launch time). That fixed "
               "~21 µs is what only messages above ~50,000 values repay. Our 1-bit keeps gaining with size because "
               "its kernels are modelled memory-bound too; the paper measured it only 10-20 % faster than 8-bit, so "
               "its 1-bit kernels were slower than that.")
    elif mode == "ns" or (mode == "custom"):
        why = ("With a cost per value and no fixed kernel time, compression wins at every size or at none: the "
               "paper's average 1 + 0.5 ns per value is more than the 0.57 ns 32-bit needs per value at 7 GB/s, so "
               "on PCIe 8-bit never wins. The paper's curve needs fast kernels with a fixed launch "
               "cost: choose 'GPU kernels: gtx_titan' (the Figure 2 preset).")
    elif mode == "measured":
        why = ("Here the codec runs on this device's CPU at several ns per value, slower than a PCIe link moves "
               "32-bit values (0.57 ns each at 7 GB/s), so on fast links it never wins; on slow links (1 Gbit/s "
               "Ethernet: 32 ns per value) it does. The paper's GPU kernels cost ~0.02 ns per value plus launches.")
    else:
        why = (f"The same model with {arg}'s kernels on {link_label}: a faster GPU shortens the codec's time and "
               "a faster link shrinks what compression saves; the crossover moves with their ratio.")
    ui.paper_callout(f"Paper (Figure 2, two GTX Titans on PCIe 3): 8-bit is slower below ~50,000 values, about 2x "
                     f"faster above 250,000; 1-bit 10-20 % faster than 8-bit above 300,000. Here: {ours}. {why}",
                     "figure2")


@st.fragment
def _model_view(df: pd.DataFrame) -> None:
    y = ui.radio("Show", ["Speedup over 32-bit", "One-way time"], "tview", "Speedup over 32-bit",
                 label_visibility="collapsed", help="speedup: 32-bit time / the codec's time (above 1: faster); "
                                                   "time: encode + send + decode, in ms")
    if y.startswith("Speedup"):
        ui.figure(plots.transfer_figure(df, "speedup_vs_fp32"), df, "transfer_model_speedup")
    else:
        ui.figure(plots.transfer_figure(df, "seconds"), df, "transfer_model_time")


@st.fragment
def measured_section(specs: tuple) -> None:
    st.subheader("Measured here: two processes over loopback")
    st.caption("Starts two worker processes (a few seconds) and times a round trip per size and codec. The dashed "
               "lines are the model of the same link: loopback's latency and bandwidth fitted from the measured "
               "32-bit times, with the codec speeds timed on this CPU, so model and measurement share one network.")
    mhi = ui.select_slider("Largest measured size (values)", [1 << 12, 1 << 16, 1 << 20, 1 << 22], "meas_max", 1 << 16,
                           format_func=lambda v: f"{v:,}",
                           help="measured sizes go from 256 values up to this, ×16 per step: 4,096 to 4,194,304")
    msizes = [1 << k for k in range(8, mhi.bit_length(), 4)]
    if ui.run_button("Measure", "meas_run", [msizes, list(specs)],
                     help="time the transfer between two local processes (a few seconds to a minute)"):
        with ui.guard():
            slot = st.empty()  # the progress bar lives only while measuring
            with slot:
                cb = ui.progress()
            meas, cross = ui.cached_run("transfer", [msizes, list(specs)], lambda: transfer_sweep(
                msizes, list(specs), target_s=0.02, progress=cb))
            slot.empty()
            loop = _fit_link(meas)
            model = _model(tuple(msizes), specs, loop, _measured_ns(specs), None)
        both = pd.concat([meas.assign(source="measured"), model], ignore_index=True)
        fig = plots.transfer_figure(both, "speedup_vs_fp32")
        fig.update_layout(title={"text": f"Measured and modelled on one link: {loop.name}, {_link_text(loop)}",
                                 "font": {"size": 13}},
                          margin={"t": 50})
        ui.figure(fig, both, "transfer_measured")
        even = model.attrs["breakeven"]

        def said(v) -> str:
            return "never" if not v else "from " + _n(v) + " values"
        ui.takeaway(f"On loopback here (fitted: {_link_text(loop)}), measured, compression beats 32-bit " + "; ".join(
                        f"{k.split('[')[0]}: {said(v)}" for k, v in cross.items())
                    + ". The model of this same link says " + "; ".join(
                        f"{k.split('[')[0]}: {'never' if v is None else 'from ' + _about(v) + ' values'}"
                        for k, v in even.items())
                    + ". The chart above models the link you chose; this one, the link the processes used.",
                    key="takeaway-measured")
