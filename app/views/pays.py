"""Does compression pay? Every registered codec × allreduce algorithm on a two-level cluster
against the best bf16 step, codec time counted, with or without overlap; speedup against the NIC
bandwidth with each codec's break-even point; why NVLS busbw exceeds the ring's. A model (lab.plan.pays,
lab.comm.cluster), instant: no Run button."""
import re

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (DEVICES, INTER_LINKS, INTRA_LINKS, LINK_ALIASES, MODELS, PAPER_PAYS, ZERO_PP_SWITCHES,
                             does_compression_pay, nvls_table, pays_takeaway)
from lab.experiments.pays import NEVER, NOT_MEASURED, measured_words, ranked_summary

SHOWN = 6  # codecs drawn by default: the fastest ones at the chosen cluster
MEASURES = ["Time to accuracy", "Per step"]  # the page opens on time to accuracy: per-step speed alone hides a codec's extra steps
HIDDEN = ("the verdicts on this cluster (best codec, how many pay, the chart and the tables) show once you answer "
          "the question above, or skip it")
ASKED = "onebit"  # the codec the prediction asks about (1-bit SGD), else the first compressing codec

# Column -> (header with its unit, tooltip) of the page's tables (made `ui.Col`s below); the CSV downloads keep the
# exact names.
HEADERS = {
    "codec": ("Codec", "the gradient codec (bf16: the uncompressed baseline)"),
    "best_algorithm": ("Fastest allreduce", "the allreduce giving this codec its shortest step"),
    "algorithm": ("Allreduce", "flat ring, hierarchical (ring inside, ring across), ZeRO++'s all-to-all, in-network"),
    "mode": ("How the codec runs", "raw: bf16 as is; requantize: decode-add-encode at each hop; once: encode once"),
    "bits_per_value": ("Bits per value", "wire bits per gradient value, scales included"),
    "compute_ms": ("Compute (ms)", "forward + backward of one step"),
    "comm_ms": ("Communication (ms)", "the allreduce: transfer + codec + launches"),
    "transfer_ms": ("Transfer (ms)", "bytes on the wires"),
    "codec_ms": ("Codec (ms)", "encode + decode (memory roofline)"),
    "launch_ms": ("Launches (ms)", "fixed time per kernel launch"),
    "exposed_comm_ms": ("Exposed communication (ms)", "communication not hidden behind the backward pass"),
    "step_ms": ("Step (ms)", "compute + exposed communication"),
    "speedup_vs_bf16": ("Speedup vs bf16 (x)", "the best bf16 step / this step; above 1: pays"),
    "speedup_vs_bf16_same_algorithm": ("Speedup vs bf16, same allreduce (x)", "bf16 with this allreduce / this step"),
    "cross_node_MB": ("Across nodes (MB)", "bytes crossing the network between nodes per step"),
    "break_even_GBps": ("Break-even NIC (GB/s)", "below this NIC bandwidth the codec beats bf16"),
    "pays": ("Pays here", "reaches the target sooner than bf16 on this cluster where the steps penalty is measured; "
                          "faster per step where it is not"),
    "pays_per_step": ("Pays per step", "a step at least 1% faster than the best bf16 step"),
    "verdict": ("Verdict", "in time to accuracy, by the interval: pays where the whole 95% interval is at least 1% "
                           "faster than bf16, within noise where it straddles that, does not pay where none of it is "
                           "(per step, flagged, where the steps penalty is not measured)"),
    "time_to_accuracy_interval": ("Time to accuracy vs bf16 (x, 95% interval)",
                                  "speedup in time to the target: per-step speedup / steps penalty; in brackets the "
                                  "interval the penalty's 95% CI gives (its part below 1 counted as 1: no codec is "
                                  "credited with training faster than bf16 from noise)"),
    "steps_penalty_interval": ("Steps penalty (x, 95% CI)", "steps to the target / bf16's, mean over seeds and its "
                                                           "two-sided Student-t 95% interval; → the penalty time to "
                                                           "accuracy counts (below 1 within noise: 1)"),
    "steps_penalty_measured": ("Steps penalty, measured (x)", "the mean over seeds, before a penalty below 1 within "
                                                              "noise is counted as 1"),
    "steps_penalty": ("Steps penalty (x)", "steps to the target / bf16's, measured by paralab converge on the task "
                                           "closest to the model (blank: not measured, or never reached)"),
    "steps_penalty_ci_low": ("Penalty CI low (x)", "two-sided Student-t 95% interval over seeds"),
    "steps_penalty_ci_high": ("Penalty CI high (x)", "two-sided Student-t 95% interval over seeds"),
    "time_to_accuracy_speedup": ("Speedup in time to accuracy (x)", "per-step speedup / steps penalty; 0: never "
                                                                    "reaches the target"),
    "time_to_accuracy_speedup_ci_low": ("Time to accuracy CI low (x)", "from the penalty's interval"),
    "time_to_accuracy_speedup_ci_high": ("Time to accuracy CI high (x)", "from the penalty's interval"),
    "accuracy": ("Accuracy", "measured, never reaches the target, or not measured (no penalty is guessed)"),
    "break_even_tta_GBps": ("Break-even NIC, time to accuracy (GB/s)", "below this NIC bandwidth it reaches the "
                                                                       "target sooner than bf16"),
    "pays_below_tta": ("Pays below in time to accuracy (NIC)", "the break-even in words"),
    "pays_below": ("Pays below (NIC)", "the NIC bandwidth below which this codec pays"),
}
# FSDP / ZeRO++: the training strategy and the columns its rows add
STRATEGY_LABELS = {"DDP (allreduce the gradients)": "ddp", "FSDP / ZeRO-3 (shard the model)": "fsdp"}
FSDP_COLLECTIVE_LABELS = {"forward_all_gather": "Forward all-gather", "backward_all_gather": "Backward all-gather",
                          "reduce_scatter": "Reduce-scatter"}
HEADERS.update({
    "strategy": ("Strategy", "ddp: allreduce the gradients; fsdp: ZeRO-3 / FSDP, weights all-gathered twice, "
                             "gradients reduce-scattered"),
    "zero_pp": ("ZeRO++", "the switches on: qwz (codec on the weights), qgz (one-shot all-to-all gradients), hpz "
                          "(backward all-gather inside the node)"),
    "weights_codec": ("Weights codec", "what the weights travel as on the all-gathers (bf16 without qwz)"),
    "grads_codec": ("Gradients codec", "what the gradients travel as on the reduce-scatter"),
    "speedup_vs_zero3": ("Speedup vs ZeRO-3 (x)", "plain bf16 ZeRO-3 (no ZeRO++ switch) / this step"),
    "intra_node_MB": ("Inside a node (MB)", "bytes a node's GPUs send each other per step"),
    "owned_GB": ("Model state per GPU (GB)", "16 bytes per owned parameter (mixed-precision Adam)"),
    "hpz_extra_GB": ("hpZ copy per GPU (GB)", "the secondary weight partition hpZ keeps inside the node"),
    **{f"{k}_{m}": (f"{v} {w}", t) for k, v in FSDP_COLLECTIVE_LABELS.items()
       for m, w, t in (("cross_node_MB", "across nodes (MB)", "bytes leaving one node per step"),
                       ("intra_node_MB", "inside a node (MB)", "bytes a node's GPUs send each other per step"),
                       ("ms", "(ms)", "seconds of this collective per step, over all layers"),
                       ("where", "runs", "which GPUs take part"),
                       ("algorithm", "algorithm", "the registered collective chosen per level (the fastest)"))},
})


def _col(header: str, tip: str) -> ui.Col:
    """'Step (ms)' and its tooltip as a Col: header 'Step', unit 'ms'."""
    m = re.fullmatch(r"(.*?) \(([^()]*)\)", header)
    return ui.Col(m.group(1), m.group(2), tip) if m else ui.Col(header, "", tip)


HEADERS = {c: _col(*h) for c, h in HEADERS.items()}
LONG_TEXT = ["codec_time", "penalty_source"]  # said once in the captions (codec time, the penalties' file)
# The columns each table shows by default (at most MAX_COLUMNS); "All columns" shows every one.
MAX_COLUMNS = 10
DEFAULT_COLUMNS = {
    ("summary", "ddp", True): ["codec", "verdict", "time_to_accuracy_interval", "steps_penalty_interval",
                               "speedup_vs_bf16", "best_algorithm", "bits_per_value", "step_ms", "pays_below_tta"],
    ("summary", "fsdp", True): ["codec", "weights_codec", "verdict", "time_to_accuracy_interval",
                                "steps_penalty_interval", "speedup_vs_bf16", "speedup_vs_zero3", "step_ms",
                                "cross_node_MB", "pays_below_tta"],
    ("summary", "ddp", False): ["codec", "best_algorithm", "bits_per_value", "step_ms", "speedup_vs_bf16",
                                "pays_per_step", "pays_below", "accuracy"],
    ("summary", "fsdp", False): ["codec", "weights_codec", "best_algorithm", "step_ms", "speedup_vs_bf16",
                                 "speedup_vs_zero3", "pays_per_step", "cross_node_MB", "pays_below"],
    ("rows", "ddp"): ["codec", "algorithm", "mode", "bits_per_value", "comm_ms", "exposed_comm_ms", "step_ms",
                      "speedup_vs_bf16", "cross_node_MB", "pays_below"],
    ("rows", "fsdp"): ["codec", "algorithm", "weights_codec", "comm_ms", "exposed_comm_ms", "step_ms",
                       "speedup_vs_bf16", "speedup_vs_zero3", "cross_node_MB", "intra_node_MB"],
}


def with_intervals(df):
    """`df` (a `pays` summary or rows) with the time to accuracy and the steps penalty as text beside their
    intervals: '2.64 (2.02–2.64)', '0.97 (0.63–1.31) → 1', 'never', 'not measured'."""
    def tta(r) -> str:
        if r["accuracy"] in ("baseline", NOT_MEASURED):
            return "1" if r["accuracy"] == "baseline" else NOT_MEASURED
        if r["accuracy"] == NEVER:
            return "never"
        lo, hi = r["time_to_accuracy_speedup_ci_low"], r["time_to_accuracy_speedup_ci_high"]
        return f"{r['time_to_accuracy_speedup']:.2f}" + (f" ({lo:.2f}–{hi:.2f})" if lo == lo and hi == hi else "")

    def penalty(r) -> str:
        if r["accuracy"] in ("baseline", NOT_MEASURED, NEVER):
            return {"baseline": "1", NEVER: "never reaches the target"}.get(r["accuracy"], NOT_MEASURED)
        m = r.get("steps_penalty_measured", r["steps_penalty"])
        lo, hi = r["steps_penalty_ci_low"], r["steps_penalty_ci_high"]
        counted = f" → {r['steps_penalty']:.2f}" if f"{m:.2f}" != f"{r['steps_penalty']:.2f}" else ""
        return f"{m:.2f}" + (f" ({lo:.2f}–{hi:.2f})" if lo == lo and hi == hi else "") + counted

    recs = df.to_dict(orient="records")
    return df.assign(time_to_accuracy_interval=[tta(r) for r in recs],
                     steps_penalty_interval=[penalty(r) for r in recs])


def _header(c: str) -> str:
    """Column `c`'s header as its tables show it: 'Break-even NIC (GB/s)'."""
    h = HEADERS[c]
    return f"{h.header} ({h.unit})" if h.unit else h.header


def in_words(text: str) -> str:
    """A note of the model with its column names (the names with "_") replaced by the tables' headers ("break_even_GBps" ->
    "Break-even NIC (GB/s)"), longest names first so no name is half-replaced."""
    for c in sorted((c for c in HEADERS if "_" in c), key=len, reverse=True):  # identifiers, not words
        text = re.sub(rf"(?<![\w.]){re.escape(c)}(?![\w])", f"*{_header(c)}*", text)
    return text


def _table(df, name: str, default: list[str], every: bool) -> None:
    """A result table for people (`ui.people_table`): the `default` columns (at most MAX_COLUMNS) headed by
    HEADERS, with `every` (the page's one "All columns" tick) every other column but the long texts."""
    ui.people_table(df.drop(columns=[c for c in LONG_TEXT if c in df.columns]), name, HEADERS,
                    default=default[:MAX_COLUMNS], every=every)


def _best_measured(where, lesson: dict) -> None:
    """The best measured codec as its interval supports it: its speedup where no other measured codec's interval
    overlaps its own; a tie, named, where some do; none where no measured codec pays beyond the noise."""
    name, x = lesson["best_measured_here"]
    tied = lesson.get("tied_here") or []
    said = measured_words(lesson, "here")
    if name is None:
        noise = lesson.get("noise_here") or []
        where.metric("Best measured codec here", "none", delta=f"{len(noise)} within noise", delta_color="off",
                     help="no measured codec's whole time-to-accuracy interval is at least 1% faster than bf16")
        return
    lo, hi = lesson["best_measured_ci_here"]
    if tied:
        where.metric("Best measured codec here", f"{len(tied) + 1}-way tie",
                     delta=f"{name} leads", delta_color="off",
                     help=f"{said[0].upper()}{said[1:]}: the seeds' spread does not separate them.")
    else:
        where.metric("Best measured codec here", f"{x:.2f}x", delta=f"{name}, {lo:.2f}–{hi:.2f}x",
                     delta_color="off", help=f"{said[0].upper()}{said[1:]}.")


def _predict(comp, lesson: dict, inter: str) -> None:
    """Does 1-bit SGD pay on this network? Revealed from the summary table's numbers."""
    codec = ASKED if ASKED in set(comp["codec"]) else comp["codec"].iloc[0]
    row = comp.set_index("codec").loc[codec]
    name = "1-bit SGD (onebit)" if codec == "onebit" else codec

    def reveal():
        yes = bool(row["speedup_vs_bf16"] > 1)
        be = row["break_even_GBps"]
        why = (f"Its best step ({row['best_algorithm']}) takes {row['step_ms']:.2f} ms against bf16's "
               f"{lesson['baseline_step_ms']:.2f} ms ({lesson['baseline_algorithm']}): {row['speedup_vs_bf16']:.2f}x. "
               + (f"It pays below {be:.3g} GB/s per NIC; {inter} gives {lesson['nic_GBps']:.3g} GB/s."
                  if be == be and be is not None else "It does not pay at any NIC bandwidth on this cluster."))
        return ("yes, faster than bf16" if yes else "no, slower than bf16"), why
    ui.predict(f"Does {name} make a training step faster than bf16 across {inter} "
               f"({lesson['nic_GBps']:.3g} GB/s per NIC)?", ["yes, faster than bf16", "no, slower than bf16"],
               reveal, key="guess")


def _fsdp_settings() -> tuple[str, str]:
    """The training strategy (DDP or FSDP) and, for FSDP, ZeRO++'s switches: ('ddp' | 'fsdp', 'qwz,qgz,hpz')."""
    f1, f2 = st.columns([2, 3])
    label = ui.radio("Training", list(STRATEGY_LABELS), "strategy", next(iter(STRATEGY_LABELS)), where=f1,
                     help="DDP allreduces the gradients; FSDP / ZeRO-3 keeps 1/P of the model per "
                                           "GPU, all-gathers the weights before forward and backward and "
                                           "reduce-scatters the gradients (docs/sharded.md)")
    strategy = STRATEGY_LABELS[label]
    if strategy != "fsdp":
        return strategy, "none"
    on = ui.multiselect("ZeRO++ switches", list(ZERO_PP_SWITCHES), "zero_pp", list(ZERO_PP_SWITCHES), where=f2,
                        help="qwz: the codec on the weights' all-gathers; qgz: gradients through a one-shot "
                             "all-to-all; hpz: a weight copy inside each node so the backward all-gather stays "
                             "there. The bf16 baseline keeps hpz as chosen.")
    return strategy, ",".join(on) or "none"


def _fsdp_tab(res, shown: list) -> None:
    """FSDP's bytes per collective per step for one codec's best row, beside bf16's."""
    summary = res.summary.set_index("codec")
    codecs = ["bf16", *[c for c in shown if c in summary.index and c != "bf16"]]
    pick = ui.select("Codec", codecs, "fsdp_codec", codecs[1] if len(codecs) > 1 else "bf16",
                     help="its fastest algorithm's row; bf16 is the baseline")
    row = summary.loc[pick].to_dict()
    frame = plots.fsdp_row_frame(row)
    ui.figure(plots.fsdp_bytes_figure(frame, f"{pick}, ZeRO++ {row['zero_pp']}: bytes per collective per step"),
              frame, "fsdp_bytes")
    base = summary.loc["bf16"]
    st.markdown(f"Across each node boundary per step: **{row['cross_node_MB']:.4g} MB** with {pick} against "
                f"{base['cross_node_MB']:.4g} MB for bf16 ({row['zero_pp']}); the step is "
                f"{row['speedup_vs_zero3']:.2f}x plain ZeRO-3's and {row['speedup_vs_bf16']:.2f}x bf16 FSDP's.")


def _fsdp_volume(res) -> str:
    """The paper callout's volume sentence for FSDP rows: cross-node MB of the best compressed codec vs bf16."""
    s = res.summary.set_index("codec")
    comp = s.drop(index="bf16")
    if not len(comp) or s.loc["bf16", "cross_node_MB"] <= 0:
        return "pick a cluster of more than one node to compare the cross-node volume"
    c = comp["cross_node_MB"].idxmin()
    return (f"here {c} with ZeRO++ {s.loc[c, 'zero_pp']} sends {s.loc['bf16', 'cross_node_MB'] / s.loc[c, 'cross_node_MB']:.2f}x "
            f"fewer bytes across nodes per step than bf16 FSDP ({s.loc['bf16', 'zero_pp']}); docs/sharded.md "
            "reproduces the 3M → 0.75M table")


def _before_answer(lesson: dict, nodes: int) -> str:
    """The takeaway while the prediction is open: only what does not give it away (inside one node)."""
    if nodes == 1:  # the cluster is one node: its verdict is the answer
        return "One node: every codec's verdict here is the answer to the question above."
    return (f"Inside one node ({lesson['inside_node']}), {lesson['pay_inside_node']} of {lesson['codecs']} codecs "
            "are at least 1% faster than bf16: the link inside a node is fast enough that shrinking the gradients "
            "saves less than the codec costs. Across the network between nodes? Answer above.")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Does compression pay?")
    ui.lesson("Does compressing the gradients get a model trained sooner than plain bf16, and on which network?",
              "Each line is one codec's speedup against the best bf16 allreduce, as the network between nodes gets "
              "faster to the right: in time to accuracy (its step time x the steps it needs to reach fp32's target, "
              "measured by paralab converge) or per step. A codec pays left of its ×, where its line is above 1x; "
              "the dashed line is the cluster you picked. A codec that never reaches the target never pays.")

    c1, c2, c3, c4, c5, c6 = st.columns([1, 1, 2, 2, 2, 2])
    nodes = ui.number("Nodes", "nodes", 8, where=c1, min_value=1, max_value=4096, step=1,
                      help="machines; each has the GPUs below and one NIC per GPU")
    gpus = ui.number("GPUs per node", "gpus", 8, where=c2, min_value=1, max_value=72, step=1,
                     help="GPUs joined by the link inside a node (8 on an HGX board, 72 on a GB200 NVL72)")
    intra = ui.select("Inside a node", list(INTRA_LINKS), "intra", "nvlink4", where=c3,
                      help="nvlink4: H100 SXM, 450 GB/s per direction; nvlink5: 900 GB/s; pcie4_x16 / pcie5_x16: "
                           "31.5 / 63 GB/s (lab.comm.cost's presets, data-sheet line rates)")
    inter = ui.select("Between nodes (one NIC)", list(INTER_LINKS), "inter", "ib_ndr", where=c4,
                      help="ib_ndr: InfiniBand NDR400, 50 GB/s; ib_hdr: 25 GB/s; eth100g: 12.5 GB/s; "
                           "eth10g: 1.25 GB/s. Aliases on the CLI: "
                           + ", ".join(f"{a}={v}" for a, v in LINK_ALIASES.items()))
    model = ui.select("Model", list(MODELS), "model", "gpt2_small", where=c5,
                      help="the planner's layer lists: each layer's gradient is one allreduce bucket")
    overlap = ui.checkbox("Overlap", "overlap", False, where=c6,
                          help="overlap with the backward pass: each layer's allreduce starts when its backward is done (DDP's buckets) and runs "
                               "while the rest of the backward computes")
    with ui.more_settings():
        m1, m2, m3 = st.columns(3)
        gpu = ui.select("GPU", [d for d in DEVICES if d != "dettmers2016"], "gpu", "h100", where=m1,
                        help="compute (peak × 0.4) and memory bandwidth, for the codec's roofline time")
        batch = ui.number("Samples per GPU", "batch", 8, where=m2, min_value=1, max_value=4096, step=1,
                          help="per step; gpt2_small's sample is a 1024-token sequence")
        nics = ui.number("NICs per node", "nics", 0, where=m3, min_value=0, max_value=72, step=1,
                         help="0: one per GPU (DGX H100: 8x NDR400); fewer NICs share the node's network")

    strategy, zero_pp = _fsdp_settings()
    params = dict(model=model, cluster=f"{int(nodes)}x{int(gpus)}", gpu=gpu, intra=intra, inter=inter,
                  nics_per_node=int(nics) or None, batch_per_gpu=int(batch), overlap=bool(overlap))
    if strategy == "fsdp":
        params.update(strategy="fsdp", zero_pp=zero_pp)
    with ui.guard():
        res = ui.cached_run("pays", params, lambda: does_compression_pay(**params))
    summary = res.summary
    lesson = res.lesson
    comp = summary[summary["codec"] != "bf16"]
    ranked = ranked_summary(summary)  # best first by the low end of its time-to-accuracy interval
    measured = ranked[ranked["accuracy"] == "measured"]
    fastest = comp.sort_values("speedup_vs_bf16", ascending=False)
    default_shown = (measured["codec"].tolist() + [c for c in fastest["codec"] if c not in set(measured["codec"])])
    measure = ui.radio("Speedup", MEASURES, "measure", MEASURES[0],
                       help="time to accuracy: step time x the steps to the target paralab converge measured; "
                            "per step: the step time alone")
    tta = measure == MEASURES[0]
    with ui.more_settings("Codecs on the chart", key="more_codecs"):
        shown = ui.multiselect("Codecs", comp["codec"].tolist(), "codecs", default_shown[:SHOWN],
                               help="every registered codec that compresses is computed; the six fastest here are "
                                    "drawn unless you pick others")

    _predict(comp, lesson, inter)
    shown_answer = ui.revealed("guess")  # the verdicts on this cluster wait for the prediction (or its skip)
    k1, k2, k3, k4 = st.columns(4)
    k1.metric("Best bf16 step", f"{lesson['baseline_step_ms']:.2f} ms", delta=lesson["baseline_algorithm"],
              delta_color="off", help="the baseline: bf16 gradients with the fastest allreduce on this cluster")
    if not shown_answer:
        k2.metric("Best codec here", "?", help=HIDDEN)
    elif tta and len(measured):
        _best_measured(k2, lesson)
    else:
        best = fastest.iloc[0]
        k2.metric("Best codec here", f"{best['speedup_vs_bf16']:.2f}x", delta=f"{best['codec']}, {best['best_algorithm']}"
                  + ("" if best["accuracy"] == "measured" else f"; accuracy {best['accuracy']}"),
                  delta_color="off", help="step-time speedup against the best bf16 step (below 1x: slower)")
    k3.metric("Codecs that pay inside one node", f"{lesson['pay_inside_node']} of {lesson['codecs']}",
              help=f"{lesson['inside_node']}: the same step without a network")
    if shown_answer:
        noise = lesson.get("noise_here") or []
        k4.metric("Codecs that pay here", f"{lesson['pay_here']} of {lesson['codecs']}",
                  delta=f"+{len(noise)} within noise" if noise and tta else
                  f"{lesson['pay_slow']} of {lesson['codecs']} on 10 Gb/s Ethernet", delta_color="off",
                  help="pays: the whole 95% interval of its time to accuracy is at least 1% faster than bf16; within "
                       "noise: the interval straddles that. On 10 Gb/s Ethernet: "
                       f"{lesson['pay_slow']} of {lesson['codecs']} pay")
        ui.takeaway(pays_takeaway(res))
    else:
        ui.withheld(HIDDEN, _before_answer(lesson, int(nodes)), [(k4, "Codecs that pay here")])

    if shown_answer and tta:
        off = {c: a for c, a in zip(comp["codec"], comp["accuracy"]) if c in shown and a != "measured"}
        if not len(measured):
            st.info(f"No steps penalty is measured for this model: {res.accuracy}. Choose Per step above, or a "
                    "model whose task has a result (alexnet: the mlp task).")
        elif off:
            st.caption("Not drawn in time to accuracy: " + "; ".join(f"{c} ({a})" for c, a in off.items())
                       + ". Per step shows them.")
    if shown_answer:
        fig = plots.pays_sweep_figure(res.sweep, summary, lesson["nic_GBps"], codecs=shown, time_to_accuracy=tta)
        ui.figure(fig, res.sweep[res.sweep["codec"].isin(["bf16", *shown])], "pays_sweep")
    st.caption(f"Codec time: {res.codec_time}. {res.accuracy[0].upper()}{res.accuracy[1:]}. "
               + " ".join(f"{n[0].upper()}{n[1:]}." for n in map(in_words, res.notes)))

    all_columns = ui.checkbox("All columns", "all_columns", False,
                              help=f"the tables show at most {MAX_COLUMNS} main columns; tick for every column the "
                                   "model computes (the CSV downloads always hold them all)")
    t1, t2, t3, *t4 = st.tabs(["Per codec", "Every codec × algorithm", "Why NVLS busbw beats the ring's",
                               *(["What FSDP sends"] if strategy == "fsdp" else [])])
    if t4:
        with t4[0]:
            if shown_answer:
                _fsdp_tab(res, shown)
            else:
                ui.withheld(HIDDEN)
    with t1:
        if shown_answer:
            order = ranked if tta else pd.concat([summary[summary["codec"] == "bf16"], fastest])
            _table(with_intervals(order.drop(columns=["break_even_GBps"])), "pays_summary",
                   DEFAULT_COLUMNS["summary", strategy, tta], all_columns)
            if tta:
                st.caption("Best first by the low end of the time-to-accuracy interval: a codec ranks above another "
                           "only as far as the seeds' spread supports it.")
        else:
            ui.withheld(HIDDEN)
    with t2:
        if shown_answer:
            rows = res.rows[res.rows["codec"].isin(["bf16", *shown])]
            ui.figure(plots.pays_bars_figure(rows), rows, "pays_bars")
            _table(with_intervals(res.rows), "pays_rows", DEFAULT_COLUMNS["rows", strategy], all_columns)
        else:
            ui.withheld(HIDDEN)
    with t3:
        nv = nvls_table()
        ui.table(nv.rename(columns={"quantity": "Quantity", "ring": "Ring", "nvls": "NVLS", "how": "How"}), "nvls")
        r = nv.set_index("quantity")  # the exact names, for the sentence below
        st.markdown(
            f"NVLS (NVLink SHARP) sums inside the NVSwitch: each GPU moves {r.loc[r.index[0], 'nvls']:.3f} bytes per "
            f"byte of the vector instead of the ring's {r.loc[r.index[0], 'ring']:.3f}. nccl-tests applies the ring's "
            f"busbw convention to both, so at the same wire speed NVLS would report "
            f"{r.loc[r.index[2], 'nvls']:.3f}x the ring's busbw; the measured 480 vs 370 GB/s means NVLS runs its "
            f"wire at {r.loc[r.index[4], 'nvls']:.0f} GB/s ({r.loc[r.index[5], 'nvls']:.0%} of the line rate) "
            f"against the ring's {r.loc[r.index[4], 'ring']:.0f} GB/s ({r.loc[r.index[5], 'ring']:.0%}).")

    zero = res.rows[res.rows["algorithm"].isin(["hierarchical", "alltoall_quantized"])]
    b16 = zero[(zero["codec"] == "bf16") & (zero["algorithm"] == "hierarchical")]["cross_node_MB"]
    q4 = zero[(zero["codec"] == "mxfp4_e2m1") & (zero["algorithm"] == "alltoall_quantized")]["cross_node_MB"]
    ratio = (float(b16.iloc[0]) / float(q4.iloc[0])) if len(b16) and len(q4) and float(q4.iloc[0]) > 0 else None
    vol = (f"our alltoall_quantized with mxfp4_e2m1 (4.25 bits with its scales) sends {ratio:.2f}x fewer bytes "
           "across nodes than the bf16 hierarchical allreduce" if ratio
           else "pick a cluster of more than one node to compare the cross-node volume")
    if strategy == "fsdp":
        vol = _fsdp_volume(res)
    ui.paper_callout(
        f"ZeRO++'s qgZ sends INT4 instead of FP16 gradients: {PAPER_PAYS['zeropp_volume_reduction']:g}x less volume "
        f"(ZeRO-3's cross-node {PAPER_PAYS['zeropp_cross_node_before_M']:g}M → "
        f"{PAPER_PAYS['zeropp_cross_node_after_M']:g}M with qwZ and hpZ); {vol} — the block scales cost the rest. "
        f"Agarwal et al. (MLSys 2022) found compression beating a tuned 16-bit baseline in about "
        f"{PAPER_PAYS['agarwal_winning_settings']} of 200+ settings; here "
        + (f"{lesson['pay_here']} of {lesson['codecs']} codecs pay on this cluster and " if shown_answer
           else "(on this cluster: once you answer above) ")
        + f"{lesson['pay_inside_node']} inside one node. Where we find more wins, the "
        "model is kinder than their measurements: codec time is a memory roofline, codec kernels do not slow the "
        "backward pass here, and where paralab converge measured no steps penalty for the model's task it counts "
        "time per step, not time to the same accuracy (docs/pays.md).", "pays")
