"""Parallelism planner page (Wu et al. 2015 §3.3, Figures 2-3; Dettmers 2016 §2.3.2): how many GPUs pay off and
which way of splitting the work is fastest — speedup against P, the step-time breakdown, one step layer by layer,
codec advice, and the papers' numbers beside the model's; on one link or on a two-level cluster (nodes x GPUs per
node, a link inside a node and one between nodes) where flat and hierarchical allreduces part ways.
Predictions of the cost model (docs/deep_image.md, lab.comm.cluster), not measurements."""
import pandas as pd
import streamlit as st

import _common as ui
from views._factors import factors_section
import static_table
from lab import plots
from lab.experiments import (DEVICES, INTER_LINKS, INTRA_LINKS, MODELS, STRATEGIES, algorithm_catalog, codec_names,
                             crossover, custom_device, custom_link, deep_image_figure2, link_presets, paper_checks,
                             planner_advice, planner_breakdown, planner_sweep)
from lab.experiments.plan import cluster_algorithms, planner_cluster
from lab.experiments import ZERO_PP_SWITCHES
from lab.plots.plan import plan_comm_figure

GPUS = ["1", "2", "3", "4", "6", "8", "12", "16", "24", "32", "48", "64", "96", "128", "256", "512", "1024"]
CHECKS = ["Dettmers §2.3.2 (AlexNet, 4 GPUs)", "Deep Image Figure 2 (data vs hybrid)",
          "Deep Image Figure 3 (speedup per mini-batch)"]
MACHINES = ["one link", "a cluster of nodes"]
NICS = ["one per GPU", "1", "2", "4", "8", "16"]
HIDDEN = ("each strategy's speedup on the most GPUs, the crossover and the chart of them all show once you answer "
          "the question above, or skip it")
SHOW = ["Speedup", "Step-time breakdown", "Scaling efficiency", "One step, layer by layer", "Codec advice", "Table"]
SWEEP_COLUMNS = {  # the sweep's table for people; the columns after `batch_per_gpu` .. `memory_GB` behind "All columns"
    "strategy": ("Strategy",), "P": ("GPUs P",), "batch_per_gpu": ("Batch per GPU",),
    "compute_ms": ("Compute", "ms", "one step's forward and backward on one GPU", 1.0, "%.2f"),
    "exposed_comm_ms": ("Exposed communication", "ms", "communication not hidden behind compute", 1.0, "%.2f"),
    "step_ms": ("Step", "ms", "", 1.0, "%.2f"),
    "images_per_s": ("Throughput", "images/s", "", 1.0, "%.0f"),
    "speedup": ("Speedup vs one GPU", "x", "", 1.0, "%.2f"),
    "efficiency": ("Scaling efficiency", "", "speedup / P", 1.0, "percent"),
    "memory_GB": ("Memory per GPU", "GB", "", 1.0, "%.2f"),
    "global_batch": ("Global batch",), "comm_ms": ("All communication", "ms", "", 1.0, "%.2f"),
    "idle_ms": ("Idle", "ms", "pipeline bubble", 1.0, "%.2f"), "fits": ("Fits in memory",),
    "feasible": ("Feasible",), "note": ("Note",),
}
SWEEP_DEFAULT = list(SWEEP_COLUMNS)[:10]
ADVICE_COLUMNS = {"layer": ("Layer",), "kind": ("Kind",), "role": ("Role",), "sends": ("Sends",),
                  "values": ("Values sent",), "none_ms": ("Time with uncompressed fp32", "ms", "", 1.0, "%.3g"),
                  "best": ("Fastest codec", "", "skips a codec whose measured steps penalty never reaches the target"),
                  "saving_ms": ("Saving", "ms", "against uncompressed fp32", 1.0, "%.3g"),
                  "saving_pct": ("Saving", "%", "against uncompressed fp32", 1.0, "%.1f"),
                  "best_per_step": ("Fastest per step", "", "the fastest codec, whatever its accuracy")}


def _advice_columns(adv: pd.DataFrame) -> dict:
    """ADVICE_COLUMNS and each candidate codec's time and payload ('Time with dynamic_tree (ms)', 'Payload with
    dynamic_tree (MB)'; 'none' is uncompressed fp32)."""
    name = lambda c: "uncompressed fp32" if c[:-3] == "none" else c[:-3]  # noqa: E731
    per = {c: (f"Time with {name(c)}", "ms", "", 1.0, "%.3g") for c in adv.columns
           if c.endswith("_ms") and c not in ADVICE_COLUMNS}
    per |= {c: (f"Payload with {name(c)}", "MB", "one rank's gradient payload", 1.0, "%.3g")
            for c in adv.columns if c.endswith("_MB")}
    return {**ADVICE_COLUMNS, **per}


def codec_choices() -> list[str]:
    """The codecs offered, read from the registry on every run (a plugin registered later shows too)."""
    return ["none"] + [c for c in codec_names() if c not in ("layout", "fp32")]


def flat_algorithms() -> list[str]:
    """The registered allreduce algorithms that run on one link (the two-level ones need a cluster)."""
    two_level = cluster_algorithms()
    return [a for a in algorithm_catalog().name if a not in two_level]


@st.cache_data(max_entries=4, show_spinner=False)
def _checks(overlap: bool):
    return paper_checks(overlap=overlap)


@st.cache_data(max_entries=4, show_spinner=False)
def _figure2(overlap: bool):
    return deep_image_figure2(overlap=overlap)


@st.cache_data(max_entries=64, show_spinner=False)
def _sweep(net, Ps, strategies, grad_codec, act_codec, overlap, kw):
    return planner_sweep(net, list(Ps), strategies=list(strategies), codec=grad_codec, activation_codec=act_codec,
                         overlap=overlap, **dict(kw))


def preset_dettmers():
    # the paper's assumptions: a one-GPU pass of the 128-image mini-batch in 100 ms, 7 GiB/s, 0.5 ms per message
    ui.set_state(check=CHECKS[0], machine=MACHINES[0], net="alexnet", device="dettmers2016", plan_link="dettmers2016",
                 algorithm="tree", strategies=["data"], gpus=["1", "2", "4"], batch_mode="global", batch_size=128,
                 grad_codec="none", act_codec="none", overlap=False, detail_P="4", detail_strategy="data", plan_show="One step, layer by layer")


def preset_figure2():
    ui.set_state(check=CHECKS[1], machine=MACHINES[0], net="deep_image", device="k40m", plan_link="ib_fdr",
                 algorithm="butterfly_sync",
                 strategies=["data", "hybrid"], gpus=["1", "2", "4", "8", "16", "32", "64", "128"],
                 batch_mode="per GPU", batch_size=64, grad_codec="none", act_codec="none", overlap=False,
                 detail_P="16", detail_strategy="data", plan_show="Step-time breakdown")


def preset_figure3():
    ui.set_state(check=CHECKS[2], machine=MACHINES[0], net="deep_image", device="k40m", plan_link="ib_fdr",
                 algorithm="butterfly_sync",
                 strategies=["data"],
                 gpus=["1", "2", "4", "8", "16", "32", "64"], batch_mode="global", batch_size=1024,
                 grad_codec="none", act_codec="none", overlap=False, detail_P="64", detail_strategy="data",
                 plan_show="Speedup")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Parallelism planner")
    lesson_slot = st.container()  # filled once the machine is known: a cluster's lesson names its two levels
    c1, c2, c3 = st.columns([2, 2, 2])
    net = ui.select("Model", list(MODELS), "net", "alexnet", where=c1,
                    help="the network as layers (parameters, FLOPs, activations): " + ", ".join(MODELS))
    machine = ui.radio("Machine", MACHINES, "machine", MACHINES[0], where=c2,
                       help="one link: every GPU pair talks over the same link; a cluster: nodes of GPUs on a fast "
                            "link inside a node and a slower network between nodes (two levels)")
    show = ui.select("Show", SHOW, "plan_show", SHOW[0], where=c3,
                     help="speedup vs one GPU; step time split into compute and communication; speedup / P; one "
                          "step's layers; the fastest codec per layer; the numbers as a table")
    two_level = machine == MACHINES[1]
    presets = link_presets()
    link = nodes = gpn = intra = inter = None
    if two_level:
        k1, k2, k3, k4 = st.columns(4)
        nodes = ui.number("Nodes", "nodes", 8, where=k1, min_value=1, max_value=1024, step=1,
                          help="machines in the cluster, 1–1024 (the network model says how many its switches "
                               "connect)")
        gpn = ui.number("GPUs per node", "gpus_per_node", 8, where=k2, min_value=1, max_value=72, step=1,
                        help="GPUs inside one node, 1–72 (the intra-node link says how many it connects: 8 for "
                             "NVLink 4, 72 for NVLink 5)")
        intra = ui.select("Link inside a node", list(INTRA_LINKS), "intra", "nvlink4", where=k3,
                          help="joins a node's GPUs: " + "; ".join(f"{k}: {presets[k].source}" for k in INTRA_LINKS
                                                                   if k in presets))
        inter = ui.select("Link between nodes", list(INTER_LINKS), "inter", "ib_ndr", where=k4,
                          help="one network card (NIC) between nodes: " + "; ".join(
                              f"{k}: {presets[k].source}" for k in INTER_LINKS if k in presets))
        d2, d3 = st.columns([3, 4])
    else:
        d1, d2, d3 = st.columns([2, 3, 4])
        link = ui.select("Link between GPUs", [*presets, "custom"], "plan_link", "pcie3", where=d1,
                         help="latency and bandwidth of the allreduce's messages: " +
                              "; ".join(f"{k}: {v.source}" for k, v in presets.items()))
    strategies = ui.multiselect("Strategies", list(STRATEGIES), "strategies", ["data", "hybrid"], where=d2,
                                help="data: every GPU a replica, gradients allreduced; model: every layer split; "
                                     "hybrid: convolutions data-, dense layers model-parallel (Krizhevsky); "
                                     "pipeline: GPipe stages; fsdp: ZeRO-3 / FSDP, each GPU holds 1/P of every layer")
    gpus = ui.multiselect("GPU counts P", GPUS, "gpus", ["1", "2", "4", "8", "16", "32", "64"], where=d3,
                          help="the GPU counts to predict, 1–1024" + ("; on a cluster, P up to one node's GPUs or "
                                                                      "whole nodes" if two_level else ""))
    with ui.more_settings():
        e1, e2, e3, e4 = st.columns(4)
        device = ui.select("GPU", [*DEVICES, "custom"], "device", "v100", where=e1, help="compute speed from the "
                           "data sheet: " + "; ".join(f"{k}: {d.source}" for k, d in DEVICES.items()))
        algorithms = [*flat_algorithms(), *(cluster_algorithms() if two_level else ())]
        _keep_valid("algorithm", algorithms, "ring")
        algorithm = ui.select("Allreduce", algorithms, "algorithm", "ring", where=e1,
                              help="the allreduce algorithm for gradients (cost model of Ben-Nun & Hoefler)" +
                                   ("; on a cluster also hierarchical (reduce-scatter inside the node, allreduce "
                                    "across, allgather inside), alltoall_quantized (ZeRO++ qgZ: each value encoded "
                                    "twice) and in_network (NVLink SHARP / InfiniBand SHARP switches sum)"
                                    if two_level else "; a cluster (Machine) adds the two-level algorithms"))
        batch_mode = ui.radio("Mini-batch", ["per GPU", "global"], "batch_mode", "per GPU", where=e2,
                              help="per GPU: the mini-batch grows with P (Deep Image, weak scaling); global: a fixed "
                                   "mini-batch split over the GPUs (Dettmers, strong scaling)")
        batch = ui.number("Images" + (" per GPU" if batch_mode == "per GPU" else " per step"), "batch_size", 128,
                          where=e2, min_value=1, step=1, help="images per GPU or per step, ≥ 1")
        grad_codec = ui.select("Gradient codec", codec_choices(), "grad_codec", "none", where=e3,
                               help="compresses the gradients' allreduce (its measured wire size); none = fp32")
        act_codec = ui.select("Activation codec", codec_choices(), "act_codec", "none", where=e3,
                              help="for model-parallel and pipeline activations: 8- or 16-bit codecs only")
        zero_pp = _zero_pp(strategies, e3)
        overlap = ui.checkbox("Overlap (lazy update)", "overlap", False, where=e4,
                              help="Deep Image's lazy update: a layer's allreduce runs during the rest of the "
                                   "backward pass")
        tflops = lat = bw = None
        nics = NICS[0]
        if two_level:
            nics = ui.select("NICs per node", NICS, "nics", NICS[0], where=e4,
                             help="network cards per node; one GPU's share of the network is NIC bandwidth × NICs / "
                                  "GPUs per node (DGX H100: 8 NDR400 NICs, one per GPU)")
        if device == "custom":
            tflops = ui.number("Achieved TFLOP/s", "tflops", 10.0, where=e4, min_value=1e-6, max_value=1e6,
                               format="%.4g",
                               help="what a training step gets (peak × efficiency), > 0")
        if link == "custom":
            lat = ui.number("Latency per message (µs)", "lat_us", 10.0, where=e4, min_value=0.0, max_value=1e6,
                            format="%.4g",
                            help="time to start one message, ≥ 0 µs")
            bw = ui.number("Bandwidth (GB/s)", "bw_gbps", 10.0, where=e4, min_value=1e-6, max_value=1e4,
                           format="%.4g",
                           help="bytes per second on the link, > 0")

    Ps = tuple(sorted(int(g) for g in gpus))
    try:
        kw = dict(device=custom_device(tflops) if device == "custom" else device, algorithm=algorithm,
                  batch_per_gpu=int(batch) if batch_mode == "per GPU" else None,
                  global_batch=int(batch) if batch_mode == "global" else None)
        if zero_pp:
            kw["zero_pp"] = zero_pp
        if two_level:
            kw.update(cluster=f"{int(nodes)}x{int(gpn)}", intra=intra, inter=inter,
                      nics_per_node=None if nics == NICS[0] else int(nics))
            planner_cluster(kw["cluster"], intra, inter, kw["nics_per_node"])  # a bad machine: its message here
        else:
            kw.update(link=custom_link(lat, bw) if link == "custom" else link)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        kw = None
    where = (f"{int(nodes)} nodes × {int(gpn)} GPUs ({intra} inside a node, {inter} between nodes)" if two_level
             else str(link))
    codecs = (None if grad_codec == "none" else grad_codec, None if act_codec == "none" else act_codec)
    lesson = {}
    ui.shown(lambda: lesson.update(_planner(net, Ps, strategies, codecs, bool(overlap), kw, show, device, where)))
    with lesson_slot:
        ui.lesson("How many GPUs pay off, and which way of splitting a network over them is fastest?",
                  "Look at the speedup against the GPU count P: a curve that bends away from the dotted ideal is "
                  "communication outgrowing compute. " +
                  (lesson["two_level"] + " " if lesson.get("two_level") else "") +
                  "Below, the papers' own numbers beside the model's. All numbers are predictions of the cost model "
                  "(compute at 40 % of the GPU's peak, the links' latency and bandwidth), not measurements.")
    st.subheader("The papers' numbers beside the model's")
    ui.shown(lambda: _papers(bool(overlap)))


def _zero_pp(strategies, where) -> str:
    """ZeRO++'s switches for the fsdp strategy ('qwz,hpz'; '' when fsdp is not chosen or none is on)."""
    if "fsdp" not in strategies:
        return ""
    on = ui.multiselect("ZeRO++ (fsdp)", list(ZERO_PP_SWITCHES), "zero_pp", [], where=where,
                        help="fsdp all-gathers the weights before forward and backward and reduce-scatters the "
                             "gradients; qwz: the gradient codec on the weights too; qgz: gradients through a "
                             "one-shot all-to-all; hpz: the backward all-gather inside the node (docs/sharded.md)")
    return ",".join(on)


def _two_level(net, Ps, codecs, overlap, kw) -> tuple[pd.DataFrame, str, str] | None:
    """Data parallelism's gradient allreduce on the cluster, flat ring against hierarchical (and the chosen
    algorithm): one row per algorithm and P (the planner's own sweep), the lesson's sentence and the
    takeaway's. None when no P leaves one node or nothing is feasible."""
    chosen = kw["algorithm"]
    algs = list(dict.fromkeys(["ring", "hierarchical", chosen]))
    rows, errors = [], {}
    for a in algs:
        try:
            s = _sweep(net, Ps, ("data",), *codecs, overlap, tuple(sorted({**kw, "algorithm": a}.items())))
        except ui.USER_ERRORS as e:
            errors[a] = str(e)
            continue
        rows.append(s[s["feasible"]].assign(algorithm=a))
    if not rows or "ring" in errors or "hierarchical" in errors:
        return None
    df = pd.concat(rows, ignore_index=True)[["algorithm", "P", "comm_ms", "step_ms", "speedup"]]
    g = int(kw["cluster"].split("x")[1])
    flat = df[df.algorithm == "ring"].set_index("P")
    hier = df[df.algorithm == "hierarchical"].set_index("P")
    both = sorted(set(flat.index) & set(hier.index))
    if not both:
        return None
    top = both[-1]
    f, h = flat.loc[top], hier.loc[top]
    inside = [p for p in both if p <= g]
    outside = [p for p in both if p > g]
    lesson = ""
    if inside and outside:
        p0, p1 = inside[-1], outside[0]
        lesson = (f"On this cluster, watch P leave one node ({g} GPUs): the flat ring's gradient allreduce goes from "
                  f"{flat.comm_ms[p0]:.2f} ms at P = {p0} to {flat.comm_ms[p1]:.2f} ms at P = {p1} "
                  f"({flat.comm_ms[p1] / flat.comm_ms[p0]:.1f}x) because every hop now runs at the network's "
                  f"speed; hierarchical crosses the network once per shard ({hier.comm_ms[p1]:.2f} ms at P = {p1}).")
    if top <= g:
        take = (f" All {top} GPUs sit in one node here, so the two-level effect does not show: flat ring and "
                f"hierarchical both spend {f.comm_ms:.2f} ms on the gradients.")
    else:
        ratio = f.comm_ms / h.comm_ms if h.comm_ms else float("inf")
        take = (f" Two levels: at P = {top} the hierarchical allreduce takes {h.comm_ms:.2f} ms against the flat "
                f"ring's {f.comm_ms:.2f} ms ({ratio:.1f}x faster; data-parallel speedup {h.speedup:.1f}x vs "
                f"{f.speedup:.1f}x), because only one shard per GPU crosses the slow network.")
    for a, e in errors.items():
        take += f" ({a}: {e})"
    return df, lesson, take


def _predict_fastest(at_top: pd.DataFrame, strategies: list, top: int, net: str) -> None:
    """Which of the chosen strategies is fastest on the most GPUs? Revealed from the sweep's rows at that P."""
    def reveal():
        b = at_top.iloc[-1]
        parts = [f"{r.strategy} {r.speedup:.2f}x one GPU ({r.step_ms:,.1f} ms a step, {r.exposed_comm_ms:,.1f} ms of "
                 f"it communication nobody hides)" for r in at_top.iloc[::-1].itertuples()]
        left = [s for s in strategies if s not in set(at_top.strategy)]
        return b.strategy, (f"On {top} GPUs: " + "; ".join(parts) + "."
                            + (f" Not feasible there: {', '.join(left)}." if left else ""))
    ui.predict(f"On {top} GPUs, which of the strategies you chose trains {net} fastest?", list(strategies), reveal,
               key="guess")


def _planner(net, Ps, strategies, codecs, overlap, kw, show, device, where) -> dict:
    out: dict = {}
    if kw is None:
        return out
    if not strategies or not Ps:
        st.info("Pick at least one strategy and one GPU count.")
        return out
    cacheable = all(isinstance(v, (str, int, type(None))) for v in kw.values())
    sweep = (_sweep(net, Ps, tuple(strategies), *codecs, overlap, tuple(sorted(kw.items()))) if cacheable else
             planner_sweep(net, list(Ps), strategies=strategies, codec=codecs[0], activation_codec=codecs[1],
                           overlap=overlap, **kw))
    two = _two_level(net, Ps, codecs, overlap, kw) if "cluster" in kw else None
    ok = sweep[sweep["feasible"]]
    top = max(Ps)
    at_top = ok[ok["P"] == top].sort_values("speedup")
    asked = len(strategies) >= 2 and not at_top.empty
    if asked:
        _predict_fastest(at_top, strategies, top, net)
    hide = asked and not ui.revealed("guess")  # what would answer the question waits for the answer or a skip
    cols = st.columns(min(len(strategies), 4) + 1)
    for i, s in enumerate(strategies[:4]):
        if hide:
            cols[i].metric(f"{s}: speedup on {top} GPUs", "?", help=HIDDEN)
            continue
        row = ok[(ok["strategy"] == s) & (ok["P"] == top)]
        if row.empty:
            cols[i].metric(f"{s}: speedup on {top} GPUs", "infeasible",
                           help=str(sweep[(sweep["strategy"] == s) & (sweep["P"] == top)]["note"].iloc[0]))
        else:
            r = row.iloc[0]
            cols[i].metric(f"{s}: speedup on {top} GPUs", f"{r.speedup:.2f}x",
                           delta=f"{r.efficiency:.0%} efficiency, {r.step_ms:,.1f} ms per step", delta_color="off", delta_arrow="off")
    cross = None
    if {"data", "hybrid"} <= set(strategies) and len(Ps) > 1 and not hide:
        cross = crossover(sweep, "data", "hybrid")
        cols[-1].metric("Data beats hybrid from", "never here" if cross is None else f"P = {cross}",
                        help="the smallest P in the list from which data parallelism stays faster")
    two_take = ""
    if two is not None:
        df, out["two_level"], two_take = two
    if hide:
        ui.withheld(HIDDEN, f"Which of {', '.join(strategies)} is fastest on {top} GPUs is the question above: "
                    "answer it (or skip it) to see each one's speedup and the curves." + two_take)
    elif at_top.empty:
        ui.takeaway(f"None of the chosen strategies fits {net} on {top} GPUs here; see the notes below." + two_take)
    else:
        b = at_top.iloc[-1]
        comm = b.exposed_comm_ms / b.step_ms if b.step_ms else 0.0
        ui.takeaway(f"On {top} {device} GPUs over {where}, {b.strategy} parallelism is fastest for {net}: "
                    f"{b.speedup:.1f}x one GPU ({b.efficiency:.0%} of ideal), with communication "
                    f"{comm:.0%} of its step" + (" — adding GPUs still pays." if b.efficiency >= 0.7 else
                                                 " — communication eats most of what extra GPUs add.") + two_take)
    if two is not None:
        _two_level_metrics(two[0], kw["algorithm"])
    if hide and show in ("Speedup", "Step-time breakdown", "Scaling efficiency", "Table"):
        return out
    if (~sweep["feasible"]).any():
        st.caption("Infeasible: " + "; ".join(f"{r.strategy} P={r.P}: {r.note}"
                                              for r in sweep[~sweep["feasible"]].itertuples()))
    if show == "Speedup":
        ui.figure(plots.plan_speedup_figure(sweep, "speedup"), sweep, "plan_speedup")
    elif show == "Step-time breakdown":
        ui.figure(plots.plan_breakdown_figure(sweep), sweep, "plan_breakdown")
    elif show == "Scaling efficiency":
        ui.figure(plots.plan_speedup_figure(sweep, "efficiency"), sweep, "plan_efficiency")
    elif show == "Table":
        ui.people_table(sweep, "plan_sweep", SWEEP_COLUMNS, SWEEP_DEFAULT)
    else:
        _detail(net, Ps, strategies, codecs, overlap, kw, show)
    return out


def _two_level_metrics(df: pd.DataFrame, chosen: str) -> None:
    """The gradient allreduce at the largest P both flat ring and hierarchical reach, per algorithm."""
    top = int(df[df.algorithm == "hierarchical"].P.max())
    at = df[df.P == top].set_index("algorithm")
    ring = float(at.comm_ms["ring"])
    shown = list(at.index)
    cols = st.columns(len(shown))
    for col, a in zip(cols, shown):
        ms = float(at.comm_ms[a])
        col.metric(f"Gradient allreduce at P = {top}: {'flat ring' if a == 'ring' else a}", f"{ms:,.2f} ms",
                   delta=None if a == "ring" else "same as flat ring" if abs(ms / ring - 1) < 0.005 else
                   (f"{ms / ring - 1:+.0%} time: {ring / ms:.1f}x faster than flat ring" if ms < ring else
                    f"{ms / ring - 1:+.0%} time: {ms / ring:.1f}x slower than flat ring"),
                   delta_color="off" if a == "ring" or abs(ms / ring - 1) < 0.005 else "inverse",
                   delta_arrow="off" if abs(ms / ring - 1) < 0.005 else "auto",
                   help="data parallelism's gradient allreduce per step on the cluster (the planner's sweep with "
                        "this algorithm)" + (" — the one chosen under More settings" if a == chosen else ""))
    table = df.pivot(index="P", columns="algorithm", values="comm_ms")[shown].reset_index()
    table.columns = ["GPUs P", *(f"{'Flat ring' if a == 'ring' else a.replace('_', ' ').capitalize()} (ms)"
                                 for a in shown)]
    with st.expander("Gradient allreduce per step against P, per algorithm (the lesson's numbers)"):
        st.markdown(_markdown_table(table.assign(**{c: table[c].map(lambda v: f"{v:,.2f}")
                                                    for c in table.columns[1:]})))


def _keep_valid(key: str, options: list, default) -> None:
    """A choice that the other controls removed (a GPU count, a strategy) falls back to its default (a link's
    value the control cannot take is the control's to say, in its name: ui.select)."""
    current = st.session_state.get(f"w_{key}")
    if current is not None and current not in options:
        ui.set_state(**{key: default})


def _detail(net, Ps, strategies, codecs, overlap, kw, show) -> None:
    f1, f2, _ = st.columns([1, 1, 3])
    options, default = [str(p) for p in Ps], str(Ps[len(Ps) // 2])
    _keep_valid("detail_P", options, default)
    _keep_valid("detail_strategy", strategies, strategies[0])
    P = int(ui.select("At P", options, "detail_P", default, where=f1, help="the GPU count of the step shown"))
    strategy = ui.select("Strategy", strategies, "detail_strategy", strategies[0], where=f2,
                         help="the strategy of the step shown")
    if show == "Codec advice":
        if "cluster" in kw:
            st.info("Codec advice times each codec on one link: choose Machine = one link (or see the "
                    "'Does compression pay?' page for codecs on a cluster).")
            return
        if strategy in ("pipeline", "fsdp"):
            st.info("Codec advice covers data, model and hybrid parallelism.")
            return
        adv = planner_advice(net, P, strategy=strategy, **kw)
        st.metric("Best codec per layer saves", f"{adv['saving_ms'].sum():,.2f} ms per step",
                  help="sum over layers against uncompressed fp32 (the layers' transfers, not the exposed time)")
        ui.figure(plots.codec_advice_figure(adv), adv, "codec_advice")
        ui.people_table(adv, "codec_advice_table", _advice_columns(adv), list(ADVICE_COLUMNS)[:9])
        factors_section(net, kw.get("batch_per_gpu") or -(-kw["global_batch"] // P), P)
        return
    bd = planner_breakdown(net, P, strategy=strategy, codec=codecs[0], activation_codec=codecs[1], overlap=overlap,
                           **kw)
    s = bd.summary.iloc[0]
    g1, g2, g3, g4 = st.columns(4)
    g1.metric(f"Step at P = {P} ({strategy})", f"{1e3 * s.step_s:,.1f} ms")
    g2.metric("Compute", f"{1e3 * s.compute_s:,.1f} ms")
    g3.metric("Exposed communication", f"{1e3 * s.exposed_comm_s:,.1f} ms",
              help=f"all transfers together: {1e3 * s.comm_s:,.1f} ms")
    g4.metric("Memory per GPU", f"{s.memory_GB:.2f} GB", delta="fits" if s.fits else "does not fit",
              delta_color="normal" if s.fits else "inverse")
    st.caption(bd.model)
    ui.figure(plots.plan_layers_figure(bd.layers), bd.layers, "plan_layers")


def _plain_number(v) -> str:
    """A table cell in words: 60,000,000 rather than 6e+07; 4 significant digits below 100,000."""
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.4g}"
    return str(v)


def _markdown_table(df) -> str:
    """A small table as markdown (drawn as static HTML, far cheaper in the browser than a data grid)."""
    cols = list(df.columns)
    rows = [" | ".join(str(v).replace("|", "/") for v in r) for r in df.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols), *("| " + r + " |" for r in rows)])


@st.fragment
def _papers(overlap: bool) -> None:
    b1, b2, b3 = st.columns(3)
    pressed = b1.button("Preset: Dettmers §2.3.2", on_click=preset_dettmers, use_container_width=True,
              help="load into the planner above: AlexNet on 1, 2 and 4 GPUs of the dettmers2016 preset (the paper's "
                   "assumed 100 ms pass of 128 images), 7 GiB/s with 0.5 ms per message, tree allreduce, the "
                   "mini-batch of 128 split over the GPUs, no overlap")
    pressed |= b2.button("Preset: Deep Image Fig. 2", on_click=preset_figure2, use_container_width=True,
              help="load into the planner above: Table 2 network, K40m, FDR InfiniBand, butterfly sync, data vs "
                   "hybrid, 64 images per GPU")
    pressed |= b3.button("Preset: Deep Image Fig. 3", on_click=preset_figure3, use_container_width=True,
              help="load into the planner above: Table 2 network, K40m, FDR InfiniBand, butterfly sync, the "
                   "mini-batch of 1024 split over the GPUs")
    if pressed:  # a preset loads the planner above too: a button in a fragment reruns only the fragment
        st.rerun(scope="app")
    # one tab per paper check, in the URL as `check`; only the open tab is computed and drawn
    tabs, which = ui.tabs(CHECKS, "check", CHECKS[0])
    with tabs[CHECKS.index(which)]:
        _check(which, overlap)


def _check(which: str, overlap: bool) -> None:
    pc = _checks(overlap)
    if which == CHECKS[0]:
        d = pc.dettmers.set_index("quantity")
        four = d.loc["4 GPUs, naive data parallelism", "model"]
        sync, sync_paper = d.loc["full synchronisation", "model"], d.loc["full synchronisation", "paper"]
        h1, h2, h3 = st.columns(3)
        h1.metric("Full synchronisation (4 GPUs)", f"{sync:.1f} ms", delta=f"paper {sync_paper:.0f} ms",
                  delta_color="off", delta_arrow="off")
        h2.metric("4 GPUs, one step", f"{four:.1f} ms", delta="vs 100 ms on one GPU", delta_color="off", delta_arrow="off")
        h3.metric("Through the planner: speedup on 4 GPUs", f"{pc.dettmers_planner['speedup'].iloc[-1]:.2f}x",
                  help="AlexNet preset, a device whose one-GPU pass is 100 ms, Dettmers' 7 GiB/s link, tree")
        ui.paper_callout(f"Dettmers: 0.223 GB of gradients, 32 ms per transfer, 128 ms per full synchronisation, "
                         f"about 150 ms with latency, so 4 GPUs are slower than one's sub-100-ms pass. Here: "
                         f"{sync:.1f} ms and a {four:.0f} ms step on 4 GPUs — the same conclusion. The paper's "
                         "\"GB\" is GiB (7 GiB/s link); with SI units the steps give 137 ms, conclusion unchanged.",
                         "dettmers")
        shown = pc.dettmers.assign(**{c: pc.dettmers[c].map(_plain_number) for c in ("paper", "model")})
        st.markdown(static_table.html(shown.rename(columns={"quantity": "Step", "paper": "Paper", "model": "Here",
                                                            "unit": "Unit", "how": "How"})), unsafe_allow_html=True)
        st.download_button("⬇ table (CSV)", pc.dettmers.to_csv(index=False), "dettmers_alexnet.csv", "text/csv",
                           key="tcsv_dettmers_alexnet", on_click="ignore")
    elif which == CHECKS[1]:
        f2 = _figure2(overlap)
        st.metric("Figure 2: data beats hybrid from", "never here" if f2.crossover is None else f"P = {f2.crossover}",
                  delta=f"paper: beyond {f2.paper_crossover}", delta_color="off", delta_arrow="off",
                  help="every P from 1 to 128; the model's communication time, the compute both share left out")
        s = f2.sweep
        d128 = float(s[(s.strategy == "data") & (s.P == s.P.max())].comm_ms.iloc[0])
        h128 = float(s[(s.strategy == "hybrid") & (s.P == s.P.max())].comm_ms.iloc[0])
        if overlap:
            why = (f"With the lazy update on, {f2.compute_ms / 1e3:.1f} s of K40m compute per step hides data "
                   "parallelism's allreduce completely, so data wins from P = "
                   f"{f2.crossover} — turn Overlap off to compare with Figure 2.")
        else:
            why = (f"Data parallelism's allreduce is almost flat in P ({d128:,.0f} ms at 128 GPUs) while the hybrid's "
                   f"activations grow with P ({h128:,.0f} ms at 128): the shape of Figure 2. The crossover is later "
                   f"than the paper's {f2.paper_crossover} because the Table 2 network moves about 19 MB per extra "
                   "GPU against a constant 2 × 851 MB of gradients; the paper's scaling test used an undescribed "
                   "\"8 conv + 3 FC\" network. " + (f"At {f2.batch_for_paper} images per GPU instead of "
                                                    f"{f2.batch_per_gpu}, the model's crossover is the paper's "
                                                    f"{f2.paper_crossover}." if f2.batch_for_paper else ""))
        ui.paper_callout(f"Paper: data parallelism is faster beyond {f2.paper_crossover} GPUs. Model: from "
                         f"{'never' if f2.crossover is None else f'P = {f2.crossover}'}. " + why, "figure2")
        ui.figure(plan_comm_figure(s, f2.crossover, f2.paper_crossover), s, "deep_image_figure2")
        st.caption(f"Communication only: both strategies compute the same {f2.compute_ms / 1e3:.2f} s per step on a "
                   "K40m, which would hide the difference in a plot of total step time.")
    else:
        f3 = pc.figure3
        at = f3[(f3["P"] == 64) & (f3["batch"] == 1024)]["speedup"].iloc[0]
        paper = pc.paper["speedup_64_gpus_batch_1024"]
        st.metric("Speedup on 64 GPUs, mini-batch 1024", f"{at:.1f}x", delta=f"paper {paper:g}x", delta_color="off", delta_arrow="off")
        by_b = {int(b): float(f3[(f3["P"] == 64) & (f3["batch"] == b)]["speedup"].iloc[0]) for b in f3["batch"].unique()}
        ui.paper_callout(f"Paper: {paper:g}x on 64 GPUs with a mini-batch of 1024, and larger mini-batches scale "
                         f"better. Model: {at:.1f}x ({at / paper - 1:+.0%}); "
                         + ", ".join(f"{v:.1f}x at {b}" for b, v in sorted(by_b.items())) +
                         " — the same order. The model has no per-step overheads beyond the allreduce (data loading, "
                         "synchronisation jitter), so it lands slightly above the measured 47x.", "figure3")
        fig = plots.plan_speedup_figure(f3.assign(strategy=[f"mini-batch {b}" for b in f3["batch"]]))
        fig.update_layout(legend_title="mini-batch")
        ui.figure(fig, f3, "deep_image_figure3")
