"""Transfer page: Dettmers 2016 Figure 2 — time and speedup of compressed point-to-point messages
against message size, modelled for a chosen link and codec kernel speed, and measured between two processes here."""
from __future__ import annotations

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from views import _transfer_text as words
from views._transfer_text import Models
from lab.experiments import (DEVICES, LINKS, PAPER_CODEC_NS, codec_catalog, custom_link, link_presets,
                             transfer_model, transfer_sweep, within_noise)

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


_n, _about = words.count, words.about


@st.cache_data(show_spinner="timing the codecs on this CPU…", max_entries=16)
def _measured(specs: tuple) -> dict:
    """Each codec's (encode, decode) ns per value timed here once per codec set ("median"), the medians'
    95 % intervals ((low, high), (low, high)) ("range"), the fewest timings of any ("repeats") and the load while
    timing ("load": load average, CPU count): every model, spread and callout of the page uses these same numbers
    (two timings disagree on a busy CPU)."""
    a = transfer_model([1024], list(specs), "pcie3", codec_ns="measured").attrs
    return {"median": dict(a["codec_ns"]), "range": dict(a["codec_ns_range"]), "repeats": a["repeats"],
            "load": a["load"]}


def _measured_ns(specs: tuple) -> dict:
    """The median (encode, decode) ns per value of each codec timed here (`_measured`)."""
    return _measured(specs)["median"]


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


def _models(sizes: tuple, specs: tuple, link, mode: str, ns) -> Models:
    """The page's model at `sizes`; with codec speeds measured here, also at every codec's fastest and slowest
    timing's 95 % interval (the spread each number carries)."""
    kernel = ns if mode == "kernel" else None
    if mode != "measured":
        return Models(_model(sizes, specs, link, PAPER_CODEC_NS if mode == "kernel" else ns, kernel))
    meas = _measured(specs)
    fast = {k: (e[0], d[0]) for k, (e, d) in meas["range"].items()}
    slow = {k: (e[1], d[1]) for k, (e, d) in meas["range"].items()}
    return Models(_model(sizes, specs, link, meas["median"], None), _model(sizes, specs, link, fast, None),
                  _model(sizes, specs, link, slow, None))


def _with_spread(m: Models) -> pd.DataFrame:
    """The chart's rows: the median model, plus the fastest and slowest timings' speedup and time as
    `<column>_lo` / `<column>_hi` (drawn as error bars: the ends of the codec timings' 95 % intervals) when the
    codec speeds were measured here."""
    df = m.mid.copy()
    if m.spread:
        idx = pd.MultiIndex.from_frame(df[["codec", "n_values"]])
        fast, slow = (x.set_index(["codec", "n_values"]).reindex(idx) for x in (m.fast, m.slow))
        df["speedup_vs_fp32_lo"] = slow.speedup_vs_fp32.to_numpy()
        df["speedup_vs_fp32_hi"] = fast.speedup_vs_fp32.to_numpy()
        df["seconds_lo"], df["seconds_hi"] = fast.seconds.to_numpy(), slow.seconds.to_numpy()
    return df


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    CODECS = [c.name for c in codec_catalog() if not c.work.raw]  # read per run: a codec registered later shows
    LINK_CHOICES = {**LINKS, **link_presets()}
    st.title("Transfer")
    ui.lesson("When does compressing a message before sending it make the transfer faster?",
              "Look at where each curve crosses the dotted 32-bit line: compression loses on small messages, where "
              "the codec's fixed kernel time dominates, and wins once the link time it saves is larger than its "
              "encode + decode time. The first preset is the paper's Figure 2; the paper's numbers show beside the "
              "chart once you have answered the question below.")

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
        ns = arg if mode in ("ns", "kernel") else None if mode == "measured" else (enc, dec)
        m = _models(tuple(sizes), tuple(specs), link, mode, ns)
    df = m.mid

    big = df[df.n_values == df.n_values.max()]
    ranked = big[big.codec != "fp32"].sort_values("speedup_vs_fp32", ascending=False)
    top = ranked.iloc[0]
    _predict(m, ranked)
    if not ui.revealed("guess"):  # the speedups, the crossovers and the chart would answer it: they wait
        ui.withheld(HIDDEN, f"Which is fastest at {_n(top.n_values)} values on {df.link.iloc[0]} is the question "
                    "above: answer it (or skip it) to see each codec's speedup, the message size from which it wins "
                    "and the chart. A codec wins when the link time it saves exceeds its encode + decode time.",
                    zip(st.columns(3), ("Fastest codec", "Its speedup, largest size", "Beats 32-bit from (values)")))
        measured_section(tuple(specs))
        return
    _metrics(m)
    link_label = df.link.iloc[0]
    kernel_note = {"kernel": f"{arg} kernels", "measured": "codec speeds measured here",
                   "ns": "the paper's average 1 / 0.5 ns per value"}.get(mode, "your codec speeds")
    ui.takeaway(words.takeaway(m, link_label, kernel_note))
    if mode == "measured":
        _speeds(m, tuple(specs))

    at250 = _models((250_000,), tuple(specs), link, mode, ns)  # the chart's own codec speeds
    ui.paper_callout(words.callout(m, at250, mode, arg, link_label), "figure2")

    st.subheader("Modelled on the chosen link")
    _model_view(_with_spread(m))

    measured_section(tuple(specs))


def _predict(m: Models, ranked: pd.DataFrame) -> None:
    """Predict, then reveal: which is fastest at the largest size on this link, 32-bit included."""
    df = m.mid
    n, link = _n(ranked.n_values.iloc[0]), df.link.iloc[0]
    top = ranked.iloc[0]
    choices = ["32-bit", *dict.fromkeys(c.split("[")[0] for c in ranked.codec)]

    def reveal() -> tuple[str, str]:
        right = top.codec.split("[")[0] if top.speedup_vs_fp32 > 1 else "32-bit"
        sp = ", ".join(f"{words.short(c)} {words.times(words.speedup(m, c))}" for c in ranked.codec)
        t32 = float(df[(df.codec == "fp32") & (df.n_values == ranked.n_values.iloc[0])].seconds.iloc[0])
        _, tied, straddles = words.ranking(m)
        noise = (" " + words.short(top.codec) + " is within noise of " + ", ".join(words.short(c) for c in tied)
                 + " (their spreads overlap)." if tied else "") + (
            " Whether it beats 32-bit is within noise (its spread spans 1x)." if straddles else "")
        spread = " (in brackets: at the two ends of the codec timings' 95 % intervals)" if m.spread else ""
        return right, (f"At {n} values on {link}, 32-bit takes {t32 * 1e3:.3g} ms; speedups over it{spread}: {sp}. "
                       "A codec wins when the link time it saves (fewer bytes / bandwidth) exceeds its encode + decode "
                       "time." + noise)
    ui.predict(f"On {link} at {n} values, which is fastest: sending 32-bit, or one of the codecs?", choices, reveal,
               key="guess")


def _metrics(m: Models) -> None:
    """The fastest codec at the largest size, its speedup (with its spread) and the size it wins from."""
    top, tied, _ = words.ranking(m)
    n = _n(m.mid.n_values.max())
    m1, m2, m3 = st.columns(3)
    m1.metric("Fastest codec", words.short(top) + (f" ≈ {words.short(tied[0])}" if len(tied) == 1 else
                                                   f" ≈ {len(tied)} others" if tied else ""),
              help=f"{top}, at {n} values" + (" (≈: within noise of " + ", ".join(words.short(c) for c in tied)
                                              + ": their speedups' spreads overlap)" if tied else ""))
    m2.metric("Its speedup, largest size", words.times(words.speedup(m, top)),
              help=f"32-bit time / its time at {n} values" + (
                  "; in brackets: at the two ends of its timing's 95 % interval" if m.spread else ""))
    be, v = m.mid.attrs["breakeven"].get(top), words.verdict(m, top)
    m3.metric("Beats 32-bit from (values)", "within noise" if v.startswith("within noise") else "never" if be is None
              else "any size" if be <= 1 else _about(be).replace("about ", "~"),
              help="the message size where its modelled time equals 32-bit's" + (f"; {v}" if m.spread else ""))


def _speeds(m: Models, specs: tuple) -> None:
    """The codec speeds measured here: each median with its 95 % interval, beside the link time each saves; which
    are within noise of each other; a warning when the machine was busy while timing."""
    meas = _measured(specs)
    ui.load_warning(tuple(meas["load"]), "The codec timings")
    ui.table(words.speed_table(m, meas["median"], meas["range"]), "transfer_codec_speeds",
             help={"Encode (ns/value)": f"median of {meas['repeats']}+ timings on 2^18 values; its 95 % interval in "
                                        "brackets",
                   "Decode (ns/value)": f"median of {meas['repeats']}+ timings on 2^18 values; its 95 % interval in "
                                        "brackets",
                   "Both (ns/value)": "encode + decode: the codec's cost per value; 95 % interval in brackets",
                   "Saved on link (ns/value)": "32-bit's wire time per value minus the codec's, on the chosen link",
                   "Large messages": "wins: its encode + decode is below the link time it saves; within noise: "
                                     "the saving lies inside its interval; loses: above it"})
    st.caption(f"Codec speeds timed on this device, round-robin ({meas['repeats']} or more timings each; the median, "
               f"its 95 % interval in brackets). {words.noise_words(m)}")


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
    st.caption("Starts two worker processes (a few seconds) and times a round trip per size and codec, at least 5 "
               "times. Solid lines are measured, their error bars each median's 95 % interval; the dashed line of "
               "the same colour is that codec's model of the same link: loopback's latency and bandwidth fitted "
               "from the measured 32-bit times, with the codec speeds timed on this CPU, so model and measurement "
               "share one network.")
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

            def sweep():
                before = ui.machine_load()
                meas, cross = transfer_sweep(msizes, list(specs), target_s=0.02, progress=cb)
                after = ui.machine_load()
                return meas, cross, (max(before[0], after[0]), after[1])
            meas, cross, load = ui.cached_run("transfer", [msizes, list(specs)], sweep)
            slot.empty()
            loop = _fit_link(meas)
            model = _model(tuple(msizes), specs, loop, _measured_ns(specs), None)
        both = pd.concat([meas.assign(source="measured"), model], ignore_index=True)
        fig = plots.transfer_figure(both, "speedup_vs_fp32")
        fig.update_layout(title={"text": f"Measured and modelled on one link: {loop.name}, {_link_text(loop)}",
                                 "font": {"size": 13}},
                          margin={"t": 50})
        ui.load_warning(load, "These transfers")
        ui.figure(fig, both, "transfer_measured")
        even = model.attrs["breakeven"]

        noise = within_noise(meas)

        def said(k, v) -> str:
            tied = noise.get(k, [])
            return ("never" if not v else "from " + _n(v) + " values") + (
                ", within noise of 32-bit at " + words.counts(tied) + " values" if tied else "")
        ui.takeaway(f"On loopback here (fitted: {_link_text(loop)}), measured, compression beats 32-bit beyond the noise "
                    "(error bars: each median's 95 % interval over its calls) " + "; ".join(
                        f"{k.split('[')[0]}: {said(k, v)}" for k, v in cross.items())
                    + ". The model of this same link says " + "; ".join(
                        f"{k.split('[')[0]}: {'never' if v is None else 'from ' + _about(v) + ' values'}"
                        for k, v in even.items())
                    + ". The chart above models the link you chose; this one, the link the processes used.",
                    key="takeaway-measured")
