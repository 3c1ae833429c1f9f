"""Parallelism planner page (Wu et al. 2015 §3.3, Figures 2-3; Dettmers 2016 §2.3.2): step-time breakdown,
speedup and efficiency against P, codec advice per layer; presets with the papers' numbers beside the
computed ones. Predictions of the cost model (docs/deep_image.md), not measurements."""
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (DEVICES, MODELS, STRATEGIES, algorithm_catalog, codec_names, crossover, custom_device,
                             custom_link, link_presets, paper_checks, planner_advice, planner_breakdown, planner_sweep)

GPUS = ["1", "2", "3", "4", "6", "8", "12", "16", "24", "32", "48", "64", "96", "128", "256", "512", "1024"]
CODECS = ["none"] + [c for c in codec_names() if c not in ("layout", "fp32")]
CHECKS = ["Dettmers §2.3.2 (AlexNet, 4 GPUs)", "Deep Image Figure 2 (data vs hybrid)",
          "Deep Image Figure 3 (speedup per mini-batch)"]


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Parallelism planner")
    st.caption("Deep Image §3.3's data vs hybrid parallelism on a cluster of K40m GPUs, and Dettmers 2016 §2.3.2 (why "
               "naive data parallelism of AlexNet on 4 GPUs is slower than one GPU) and his codec trade-off (§3.3, §5). "
               "Planner numbers are predictions of the cost model (docs/deep_image.md), not measurements.")
    st.caption("Predicted time of one training step on P GPUs: compute from the device's peak × 0.4, communication from "
               "the cost model of the chosen link and allreduce algorithm, with a codec's measured wire size. Data: "
               "allreduce of every layer's gradients; model: every layer split; hybrid: fully connected layers "
               "model-parallel (Krizhevsky); pipeline: GPipe stages.")


    def preset_dettmers():
        # the paper's assumptions: a one-GPU pass of the 128-image mini-batch in 100 ms, 7 GiB/s, 0.5 ms per message
        ui.set_state(net="alexnet", device="dettmers2016", plan_link="dettmers2016", algorithm="tree", strategies=["data"],
                     gpus=["1", "2", "4"], batch_mode="global", batch_size=128, grad_codec="none", act_codec="none",
                     overlap=False, detail_P="4", detail_strategy="data", check=CHECKS[0])


    def preset_figure2():
        ui.set_state(net="deep_image", device="k40m", plan_link="ib_fdr", algorithm="butterfly_sync",
                     strategies=["data", "hybrid"], gpus=["1", "2", "4", "8", "16", "32", "64", "128"],
                     batch_mode="per GPU", batch_size=64, grad_codec="none", act_codec="none", overlap=False,
                     detail_P="16", detail_strategy="data", check=CHECKS[1])


    def preset_figure3():
        ui.set_state(net="deep_image", device="k40m", plan_link="ib_fdr", algorithm="butterfly_sync", strategies=["data"],
                     gpus=["1", "2", "4", "8", "16", "32", "64"], batch_mode="global", batch_size=1024,
                     grad_codec="none", act_codec="none", overlap=False, detail_P="64", detail_strategy="data",
                     check=CHECKS[2])


    b1, b2, b3 = st.columns(3)
    b1.button("Preset: Dettmers §2.3.2", on_click=preset_dettmers, use_container_width=True,
              help="AlexNet on 1, 2 and 4 GPUs of the dettmers2016 preset (the paper's assumed 100 ms pass of 128 images; "
                   "the physical gtx_titan preset predicts 309 ms, and with it 4 GPUs come out faster, not slower), the "
                   "dettmers2016 link (7 GiB/s, 0.5 ms per message), tree allreduce, the mini-batch of 128 split over the "
                   "GPUs, no overlap")
    b2.button("Preset: Deep Image Fig. 2", on_click=preset_figure2, use_container_width=True,
              help="Table 2 network, K40m, FDR InfiniBand, butterfly sync, data vs hybrid, 64 images per GPU")
    b3.button("Preset: Deep Image Fig. 3", on_click=preset_figure3, use_container_width=True,
              help="Table 2 network, K40m, FDR InfiniBand, butterfly sync, the mini-batch of 1024 split over the GPUs")

    c1, c2, c3, c4 = st.columns(4)
    net = ui.select("Model", list(MODELS), "net", "alexnet", where=c1)
    device = ui.select("GPU", [*DEVICES, "custom"], "device", "v100", where=c2, help="; ".join(
        f"{k}: {d.source}" for k, d in DEVICES.items()))
    if device == "custom":
        tflops = ui.number("Achieved TFLOP/s", "tflops", 10.0, where=c2, format="%.4g",
                           help="what a training step gets (peak × efficiency)")
    link = ui.select("Link", [*link_presets(), "custom"], "plan_link", "pcie3", where=c3,
                     help="; ".join(f"{k}: {v.source}" for k, v in link_presets().items()))
    if link == "custom":
        lat = ui.number("Latency per message (µs)", "lat_us", 10.0, where=c3, format="%.4g")
        bw = ui.number("Bandwidth (GB/s)", "bw_gbps", 10.0, where=c3, format="%.4g")
    algorithm = ui.select("Allreduce", algorithm_catalog().name.tolist(), "algorithm", "ring", where=c4)
    d1, d2 = st.columns([1, 2])
    strategies = ui.multiselect("Strategies", list(STRATEGIES), "strategies", ["data", "hybrid"], where=d1)
    gpus = ui.multiselect("GPU counts P", GPUS, "gpus", ["1", "2", "4", "8", "16", "32", "64"], where=d2)
    e1, e2, e3, e4, e5 = st.columns([3, 2, 2, 2, 3])
    batch_mode = ui.radio("Mini-batch", ["per GPU", "global"], "batch_mode", "per GPU", where=e1,
                          help="per GPU: the mini-batch grows with P (Deep Image, weak scaling); global: a fixed "
                               "mini-batch split over the GPUs (Dettmers, strong scaling)")
    batch = ui.number("Images" + (" per GPU" if batch_mode == "per GPU" else " per step"), "batch_size", 128, where=e2,
                      step=1)
    grad_codec = ui.select("Gradient codec", CODECS, "grad_codec", "none", where=e3)
    act_codec = ui.select("Activation codec", CODECS, "act_codec", "none", where=e4,
                          help="for model-parallel and pipeline activations: 8- or 16-bit codecs only")
    overlap = ui.checkbox("Overlap (lazy update)", "overlap", False, where=e5,
                          help="Deep Image's lazy update: a layer's allreduce runs during the rest of the backward pass")

    Ps = sorted(int(g) for g in gpus)
    try:
        kw = dict(device=custom_device(tflops) if device == "custom" else device,
                  link=custom_link(lat, bw) if link == "custom" else link, algorithm=algorithm,
                  batch_per_gpu=int(batch) if batch_mode == "per GPU" else None,
                  global_batch=int(batch) if batch_mode == "global" else None)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        kw = None


    def keep_valid(key: str, options: list, default) -> None:
        """A choice that the other controls removed (a GPU count, a strategy) falls back to its default."""
        current = st.session_state.get(f"w_{key}", st.query_params.get(key))
        if current is not None and current not in options:
            ui.set_state(**{key: default})


    def planner():
        if kw is None:
            return
        if not strategies or not Ps:
            st.info("Pick at least one strategy and one GPU count.")
            return
        sweep = planner_sweep(net, Ps, strategies=strategies, codec=None if grad_codec == "none" else grad_codec,
                              activation_codec=None if act_codec == "none" else act_codec, overlap=overlap, **kw)
        ok = sweep[sweep["feasible"]]
        top = max(Ps)
        cols = st.columns(min(len(strategies), 4) + 1)
        for i, s in enumerate(strategies[:4]):
            row = ok[(ok["strategy"] == s) & (ok["P"] == top)]
            if row.empty:
                cols[i].metric(f"{s}: speedup on {top} GPUs", "infeasible",
                               help=str(sweep[(sweep["strategy"] == s) & (sweep["P"] == top)]["note"].iloc[0]))
            else:
                r = row.iloc[0]
                cols[i].metric(f"{s}: speedup on {top} GPUs", f"{r.speedup:.2f}x",
                               delta=f"{r.efficiency:.0%} efficiency, {r.step_ms:,.1f} ms per step", delta_color="off")
        if {"data", "hybrid"} <= set(strategies) and len(Ps) > 1:
            cross = crossover(sweep, "data", "hybrid")
            cols[-1].metric("Data beats hybrid from", "never here" if cross is None else f"P = {cross}",
                            help="the smallest P in the list from which data parallelism stays faster")
        if (~sweep["feasible"]).any():
            st.caption("Infeasible: " + "; ".join(f"{r.strategy} P={r.P}: {r.note}"
                                                  for r in sweep[~sweep["feasible"]].itertuples()))
        t1, t2, t3, t4 = st.tabs(["Step-time breakdown", "Speedup", "Scaling efficiency", "Table"])
        with t1:
            ui.figure(plots.plan_breakdown_figure(sweep), sweep, "plan_breakdown")
        with t2:
            ui.figure(plots.plan_speedup_figure(sweep, "speedup"), sweep, "plan_speedup")
        with t3:
            ui.figure(plots.plan_speedup_figure(sweep, "efficiency"), sweep, "plan_efficiency")
        with t4:
            ui.table(sweep, "plan_sweep")


    ui.shown(planner)


    def detail():
        if kw is None or not strategies or not Ps:
            return
        st.markdown("**One step, layer by layer; codec advice**")
        f1, f2, _ = st.columns([1, 1, 3])
        options, default = [str(p) for p in Ps], str(Ps[len(Ps) // 2])
        keep_valid("detail_P", options, default)
        keep_valid("detail_strategy", strategies, strategies[0])
        P = int(ui.select("At P", options, "detail_P", default, where=f1))
        strategy = ui.select("Strategy", strategies, "detail_strategy", strategies[0], where=f2)
        bd = planner_breakdown(net, P, strategy=strategy, codec=None if grad_codec == "none" else grad_codec,
                               activation_codec=None if act_codec == "none" else act_codec, overlap=overlap, **kw)
        s = bd.summary.iloc[0]
        g1, g2, g3, g4 = st.columns(4)
        g1.metric(f"Step at P = {P} ({strategy})", f"{1e3 * s.step_s:,.1f} ms")
        g2.metric("Compute", f"{1e3 * s.compute_s:,.1f} ms")
        g3.metric("Exposed communication", f"{1e3 * s.exposed_comm_s:,.1f} ms",
                  help=f"all transfers together: {1e3 * s.comm_s:,.1f} ms")
        g4.metric("Memory per GPU", f"{s.memory_GB:.2f} GB", delta="fits" if s.fits else "does not fit",
                  delta_color="normal" if s.fits else "inverse")
        st.caption(bd.model)
        t1, t2 = st.tabs(["Per layer", "Codec advice"])
        with t1:
            ui.figure(plots.plan_layers_figure(bd.layers), bd.layers, "plan_layers")
        with t2:
            if strategy == "pipeline":
                st.info("Codec advice covers data, model and hybrid parallelism.")
                return
            adv = planner_advice(net, P, strategy=strategy, **kw)
            st.metric("Best codec per layer saves", f"{adv['saving_ms'].sum():,.2f} ms per step",
                      help="sum over layers against uncompressed fp32 (the layers' transfers, not the exposed time)")
            ui.figure(plots.codec_advice_figure(adv), adv, "codec_advice")
            ui.table(adv, "codec_advice_table")


    ui.shown(detail)


    # -- the papers' numbers

    @st.cache_data(max_entries=4)
    def checks(overlap: bool):
        return paper_checks(overlap=overlap)


    def papers():
        st.subheader("The papers' numbers beside the model's")
        which = ui.radio("Check", CHECKS, "check", CHECKS[0])
        pc = checks(bool(overlap))
        if which == CHECKS[0]:
            d = pc.dettmers.set_index("quantity")
            four = d.loc["4 GPUs, naive data parallelism", "model"]
            h1, h2, h3 = st.columns(3)
            h1.metric("Full synchronisation (4 GPUs)", f"{d.loc['full synchronisation', 'model']:.1f} ms",
                      delta=f"paper {d.loc['full synchronisation', 'paper']:.0f} ms", delta_color="off")
            h2.metric("4 GPUs, one step", f"{four:.1f} ms", delta="vs 100 ms on one GPU", delta_color="off")
            h3.metric("Through the planner: speedup on 4 GPUs", f"{pc.dettmers_planner['speedup'].iloc[-1]:.2f}x",
                      help="AlexNet preset, a device whose one-GPU pass is 100 ms, Dettmers' 7 GiB/s link, tree")
            ui.table(pc.dettmers.assign(**{c: pc.dettmers[c].map(
                lambda v: "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v))
                                           for c in ("paper", "model")}), "dettmers_alexnet")
            ui.table(pc.dettmers_planner, "dettmers_planner")
        elif which == CHECKS[1]:
            st.metric("Figure 2: data beats hybrid from", "never here" if pc.crossover is None
                      else f"P = {pc.crossover}", delta=f"paper: beyond {pc.paper['crossover_gpus']}", delta_color="off",
                      help="GPU counts 1..128 in powers of two; docs/deep_image.md explains the difference")
            ui.figure(plots.plan_breakdown_figure(pc.figure2), pc.figure2, "deep_image_figure2")
        else:
            f3 = pc.figure3
            at = f3[(f3["P"] == 64) & (f3["batch"] == 1024)]["speedup"].iloc[0]
            st.metric("Speedup on 64 GPUs, mini-batch 1024", f"{at:.1f}x",
                      delta=f"paper {pc.paper['speedup_64_gpus_batch_1024']:g}x", delta_color="off")
            fig = plots.plan_speedup_figure(f3.assign(strategy=[f"mini-batch {b}" for b in f3["batch"]]))
            fig.update_layout(legend_title="mini-batch")
            ui.figure(fig, f3, "deep_image_figure3")


    ui.shown(papers)
