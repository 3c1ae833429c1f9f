"""Codecs page: value tables, error histograms and error table of chosen codecs (and your own bit
layout) on a distribution or captured tensors; Table 1 preset; encode/decode speed here."""
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (CAPTURE_KINDS, TABLE1_NOTE, TABLE1_TYPES, TableCodec, capture_tensors, codec_catalog,
                             codec_speed, error_histogram, error_table, get_codec, load_tensor, parse_distribution,
                             table1)

DISTS = {"normal": ("mu", 0.0, "sigma", 1.0), "uniform": ("a", 0.0, "b", 1.0), "laplace": ("mu", 0.0, "b", 1.0),
         "student_t": ("df", 3.0, None, None), "lognormal": ("mu", 0.0, "sigma", 1.0)}


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    catalog = {c.name: c for c in codec_catalog()}  # read per run: a codec registered later shows too
    options = {name: {o.name: o for o in c.options} for name, c in catalog.items()}
    ABSMAX = [n for n, o in options.items() if "block_size" in o and o.get("scale") and o["scale"].default == "absmax"]
    PICKABLE = list(catalog)
    TABLE_TYPES = TABLE1_TYPES
    st.title("Codecs")
    st.caption("Dettmers 2016 §3.1 (the 8-bit data types, Figure 1), Table 1 (errors), §3.2 (speed). "
               "Relative error leaves out exact zeros.")


    def preset_table1():
        ui.set_state(codecs=list(TABLE_TYPES), rounding="paper", source="distribution", dist="normal", p1=0.0, p2=1.0,
                     block="tensor", layout_on=False)


    def preset_hardware():
        ui.set_state(codecs=["dynamic_tree", "bnb_dynamic", "fp8_e4m3", "fp8_e5m2", "int8", "bf16"], rounding="nearest")


    c1, c2, c3 = st.columns([1, 1, 2])
    c1.button("Preset: Table 1 types", on_click=preset_table1, help="the four 8-bit types, the kernel's rounding, N(0,1)")
    c2.button("Preset: vs hardware formats", on_click=preset_hardware)

    def _page_options(name: str) -> dict:
        """The options this page's Table 1 controls set (rounding, absmax block) for codec `name`."""
        kw = {}
        if name in TABLE_TYPES:
            kw["rounding"] = rounding
        if name in ABSMAX and block != "tensor":
            kw["block_size"] = int(block)
        return kw

    left, right = st.columns([3, 2])
    with left:
        chosen = ui.multiselect("Codecs", PICKABLE, "codecs", ["dynamic_tree", "linear", "fp8_e4m3", "int8"],
                                help="; ".join(f"{k}: {catalog[k].summary}" for k in PICKABLE))
        source = ui.radio("Data", ["distribution", "captured tensor", "upload"], "source", "distribution")
        tensors, dist = None, None
        if source == "distribution":
            d1, d2, d3 = st.columns(3)
            kind = ui.select("Distribution", list(DISTS), "dist", "normal", where=d1)
            n1, v1, n2, v2 = DISTS[kind]
            p1 = ui.number(n1, "p1", float(v1), where=d2, format="%.4g")
            p2 = ui.number(n2, "p2", float(v2), where=d3, format="%.4g") if n2 else None
            dist = f"{kind}({p1:g}" + (f",{p2:g})" if n2 else ")")
        elif source == "captured tensor":
            what = ui.select("Tensors of the paper's MLP after one step on digits", list(CAPTURE_KINDS), "capture",
                             "gradients")
        else:
            up = st.file_uploader("A tensor file (.pt or .npy)", type=["pt", "pth", "npy"])
    with right:
        rounding = ui.radio("Rounding of the 8-bit types", ["nearest", "paper"], "rounding", "nearest",
                            help="paper = the original kernel's bisection (about a quarter of codes one step low)")
        block = ui.select(f"Absmax scale ({', '.join(ABSMAX)})", ["tensor", "4096", "256", "64"], "block",
                          "tensor")
        samples = ui.select_slider("Samples", [10_000, 30_000, 100_000, 1_000_000], "samples", 30_000,
                                    help="below 32k values the codecs run eagerly; above, torch.compile kicks in "
                                         "(a few seconds the first time)")
        seed = ui.seed()

    # each chosen codec's own options (the registry's OptionSpecs); rounding and block are set above
    specs = dict(zip(chosen, ui.codec_option_specs(
        chosen, "codecs", skip=lambda n: [o for o, on in (("rounding", n in TABLE_TYPES), ("block_size", n in ABSMAX)) if on],
        fixed=_page_options)))

    with st.expander("Bit-layout designer (sign, exponent bits and base, offset, mantissa or tree bits, dynamic "
                     "exponent)", expanded=ui._from_url("layout_on", False, lambda s: s == "1")):
        on = ui.checkbox("Add my layout to the comparison", "layout_on", False)
        b1, b2, b3, b4 = st.columns(4)
        total_bits = ui.number("Total bits", "lay_bits", 8, where=b1, min_value=2, max_value=8, step=1)
        signed = ui.checkbox("Sign bit", "lay_signed", True, where=b1)
        dynamic = ui.checkbox("Dynamic exponent (leading zeros)", "lay_dynamic", True, where=b2)
        exponent_bits = ui.number("Static exponent bits", "lay_exp", 0, where=b2, min_value=0, max_value=8, step=1)
        base = ui.select("Exponent base", [10, 2], "lay_base", 10, where=b3)
        offset = ui.number("Offset (top decade's exponent)", "lay_offset", 0, where=b3, step=1)
        mantissa = ui.select("Mantissa", ["tree", "linear"], "lay_mantissa", "tree", where=b4,
                             help="tree: bisection tree over each decade; linear: evenly spaced bins")
        layout = None
        if on:
            try:
                layout = get_codec("layout", total_bits=total_bits, signed=signed, exponent_bits=exponent_bits,
                                   base=base, offset=offset, mantissa=mantissa, dynamic=dynamic,
                                   rounding="nearest" if rounding == "nearest" else "paper")
                n_pos = int((layout.values > 0).sum())
                st.caption(f"Valid layout: {len(layout.values)} values, {n_pos} positive, "
                           f"largest {float(layout.values.max()):.4g}, smallest positive "
                           f"{float(layout.values[layout.values > 0].min()):.3g}.")
            except ui.USER_ERRORS as e:
                st.error(f"Impossible bit layout: {e}")
                layout = None


    def build(name: str):
        return get_codec(specs.get(name, name))


    @st.cache_data(show_spinner="measuring…", max_entries=32)
    def run(chosen: tuple, layout_key, dist, capture, upload_key, samples: int, seed: int, _layout=None, _upload=None):
        codecs = [get_codec(c) for c in chosen] + ([_layout] if _layout is not None else [])
        if capture:
            tensors = capture_tensors(capture, seed=seed)
        elif _upload is not None:
            tensors = {upload_key[0]: load_tensor(_upload, upload_key[0])}
        else:
            tensors = None
        df = error_table(codecs, [dist] if dist else [], tensors=tensors, samples=samples, seed=seed)
        if tensors:
            import torch
            flat = torch.cat([t.reshape(-1) for t in tensors.values()])
            hist = error_histogram(codecs, tensor=flat)
        else:
            hist = error_histogram(codecs, dist, samples=samples, seed=seed)
        return df, hist


    @st.cache_data(show_spinner="timing…", max_entries=8)
    def speed_run(specs, layout_key, n, _codecs):
        return codec_speed(_codecs, n, repeats=3)


    with ui.guard():
        if dist:
            parse_distribution(dist)
        if not chosen and layout is None:
            st.info("Pick at least one codec (or add your layout).")
            st.stop()
        capture = what if source == "captured tensor" else None
        upload, upload_key = None, None
        if source == "upload":
            if up is None:
                st.info("Upload a tensor saved with torch.save (.pt) or numpy.save (.npy).")
                st.stop()
            upload, upload_key = up.getvalue(), (up.name, up.size)
        layout_key = (total_bits, signed, exponent_bits, base, offset, mantissa, dynamic) if layout is not None else None
        df, hist = run(tuple(specs.values()), layout_key, dist if source == "distribution" else None, capture, upload_key,
                       samples, int(seed), _layout=layout, _upload=upload)

    per_codec = df.groupby("codec", sort=False)[["mean_rel_error", "mae", "bits_per_value"]].mean()
    best = per_codec.mean_rel_error.idxmin()
    m1, m2, m3 = st.columns(3)
    m1.metric("Lowest mean relative error", f"{100 * per_codec.mean_rel_error[best]:.3f} %", help=best)
    m2.metric("Best codec", best.split("[")[0])
    m3.metric("Its bits per value", f"{per_codec.bits_per_value[best]:.3g}")

    st.subheader("Error table")
    ui.table(df, "codec_errors")
    tabs = st.tabs(["Error bars", "Error histograms", "Value tables"])
    with tabs[0]:
        ui.figure(plots.error_bar_figure(df), df, "codec_error_bars")
    with tabs[1]:
        ui.figure(plots.error_histogram_figure(hist), hist, "codec_error_histograms")
    with tabs[2]:
        tables = [build(c) for c in chosen] + ([layout] if layout is not None else [])
        tables = [c for c in tables if isinstance(c, TableCodec)]
        if tables:
            fig = plots.value_table_figure(tables)
            import pandas as pd
            vals = pd.DataFrame([{"codec": c.describe(), "index": i, "value": float(v)}
                                 for c in tables for i, v in enumerate(c.values.tolist())])
            ui.figure(fig, vals, "codec_value_tables")
        else:
            st.caption("None of the chosen codecs is a value table (pick an 8-bit type or add a layout).")

    st.subheader("Encode / decode speed on this device")
    st.caption(f"Device: {ui.device_name()}. Median of 3 after warm-up; baseline: torch's fp8 cast, same run. "
               "The paper's GTX Titan kernels: 1 ns per value to compress, 0.5 ns to decompress.")
    n_speed = ui.select_slider("Values timed", [1 << 16, 1 << 18, 1 << 20, 1 << 22], "speed_n", 1 << 18)
    if ui.run_button("Measure speed", "speed_run", [list(specs.values()), layout_key, n_speed]):
        with ui.guard():
            speed = speed_run(tuple(specs.values()), layout_key, n_speed,
                              [build(c) for c in chosen] + ([layout] if layout is not None else []))
        ui.figure(plots.codec_speed_figure(speed), speed, "codec_speed")

    st.subheader("Table 1 (paper vs nearest rounding)")
    t1_samples = ui.select_slider("Samples per distribution (paper: 25 M)", [100_000, 1_000_000], "t1_samples", 1_000_000)
    if ui.run_button("Reproduce Table 1", "t1_run", [t1_samples, seed]):
        cb = ui.progress()
        t1 = ui.cached_run("table1", [t1_samples, seed], lambda: table1(samples=t1_samples, seed=int(seed), progress=cb))
        cb(1.0, "done")
        ui.table(t1, "table1")
        st.caption(TABLE1_NOTE)
