"""The Training page's sharded view: real PyTorch FSDP2 processes with a codec on the weights'
all-gather and the gradients' reduce-scatter, beside fp32 FSDP2 and DDP on the same data and seeds; bytes
per step per collective (counted on the wire), curves, and a takeaway from the numbers on screen.
Called by app/views/training.py when its "Compare" choice is the sharded one; keys start with fsdp_."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
from views import _curves as curve_view
from lab import plots
from lab.experiments import DATASETS, TrainConfig, fsdp_run_codecs, fsdp_settings, fsdp_training
from lab.plots.units import si_bytes_label

MODE = "sharded: FSDP2 vs DDP"
X = {"epochs": "epoch", "updates": "step", "measured wall-clock (s)": "wall_s"}
Y = {"test error (%)": "test_error", "training loss": "train_loss", "test loss": "test_loss"}
NONE = "32-bit"
RUN_COLUMNS = {  # the run table for people: the columns shown by default, then the rest behind "All columns"
    "variant": ("Run",),
    "steps": ("Steps", "", "optimizer steps of each run (the same data and seeds)"),
    "step_s": ("Step", "ms", "median wall time of a step, the slowest rank's, measured here", 1e3, "%.1f"),
    "bytes_per_step": ("Sent per step", ui.BYTES, "all ranks' payload bytes for other ranks, every collective"),
    "cross_node_per_step": ("Sent across nodes per step", ui.BYTES, "the part for ranks of the other node"),
    "final_train_loss": ("Final training loss", "", "", 1.0, "%.4f"),
    "final_test_error": ("Final test error", "%", "", 1.0, "%.2f"),
    "step_cpu_s": ("CPU per step", "ms", "median CPU time of a step, mean over ranks", 1e3, "%.1f"),
    "final_test_loss": ("Final test loss", "", "", 1.0, "%.4f"),
    "late_train_loss": ("Late training loss", "", "mean over the second half of the evaluations", 1.0, "%.4f"),
    "late_test_loss": ("Late test loss", "", "mean over the second half of the evaluations", 1.0, "%.4f"),
    "best_test_error": ("Best test error", "%", "", 1.0, "%.2f"),
    "parameters": ("Parameters", "", "the model's parameters (all shards together)"),
}
RUN_DEFAULT = ["variant", "steps", "step_s", "bytes_per_step", "cross_node_per_step", "final_train_loss",
               "final_test_error"]


def render() -> None:
    """The sharded view: settings, predict, Train, then curves, bytes per collective and the takeaway."""
    st.markdown("**What does FSDP send, and what does a codec on its collectives save and cost?** FSDP2 keeps "
                "each layer's weights sharded: it all-gathers them before the layer's forward and again before "
                "its backward, and reduce-scatters the gradients. Here that runs for real, in processes on this "
                "machine over Gloo, with any codec on those collectives, beside fp32 FSDP2 and DDP.")
    c1, c2, c3, c4 = st.columns(4)
    w_codecs = [NONE, *(c for c in fsdp_run_codecs("all_gather") if c != "fp32")]
    g_codecs = [NONE, *(c for c in fsdp_run_codecs("reduce_scatter") if c != "fp32")]
    weights = ui.select("Weights codec (all-gather)", w_codecs, "fsdp_weights", "mxfp8_e4m3", where=c1,
                        help="qwZ: each rank encodes its shard once, every rank decodes every shard; gradient "
                             "compressors (top-k, PowerSGD, ...) cannot carry weights")
    grads = ui.select("Gradients codec (reduce-scatter)", g_codecs, "fsdp_grads", "mxfp8_e4m3", where=c2,
                      help="qgZ's one-shot form: each rank encodes the P chunks of its gradient, one all-to-all, "
                           "each rank decodes and sums its chunk; PowerSGD needs an all-reduce, not offered")
    procs = ui.select("Processes", [2, 4], "fsdp_procs", 2, where=c3,
                      help="real rank processes on this machine (4: two nodes of two ranks for hpZ)")
    hpz = ui.checkbox("hpZ (2 ranks per node)", "fsdp_hpz", False, where=c4, disabled=int(procs) < 4,
                      help="ZeRO++'s secondary partition: after forward each node keeps its own shard, so the "
                           "backward all-gather stays inside the node (needs 4 processes)")
    with ui.more_settings(key="fsdp_more"):
        m1, m2, m3, m4 = st.columns(4)
        hidden = ui.select_slider("Hidden units (2 layers)", [32, 64, 128, 256, 512, 1024], "fsdp_hidden", 256,
                                  where=m1, help="width of both hidden layers (32..1024)")
        epochs = ui.number("Epochs", "fsdp_epochs", 1.0, where=m2, min_value=0.25, max_value=20.0, step=0.25,
                           help="passes over the training set (0.25..20), per run")
        dataset = ui.select("Data set", list(DATASETS), "fsdp_dataset", "digits", where=m3,
                            help="digits ships with scikit-learn; MNIST when installed")
        seed = ui.number("Seed", "fsdp_seed", 0, where=m4, min_value=0, max_value=2**31 - 1, step=1,
                         help="the same seed drives every run: same initial weights, batches and dropout")
    spec = lambda c: None if c == NONE else c  # noqa: E731
    kw = dict(weights_codec=spec(weights), grads_codec=spec(grads), hpz=2 if hpz and int(procs) == 4 else None)
    try:
        fsdp_settings(procs=int(procs), **kw)
        cfg = TrainConfig(dataset=dataset, hidden=(int(hidden), int(hidden)), epochs=float(epochs), batch=128,
                          evals_per_epoch=4, seed=int(seed), workers=int(procs))
        cfg.check()
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return
    params = ["fsdp", int(procs), kw, int(hidden), float(epochs), dataset, int(seed)]
    compressed = kw["weights_codec"] is not None or kw["grads_codec"] is not None

    def run(job):
        return fsdp_training(cfg, int(procs), progress=job.progress, on_point=job.on_row, **kw)

    job = jobs.current("fsdp_run")
    done = job is not None and job.state == "done" and job.token == jobs.token(params)
    if compressed:
        _predict(job.result if done else None)
    job = jobs.controls("Train", "fsdp_run", params, run,
                        help="start the runs one after another in the same processes (the codec run, fp32 FSDP2, "
                             "DDP): tens of seconds to minutes; Stop keeps the curves so far")
    try:
        _results(job, params)
    finally:
        jobs.release("fsdp_run")


def _predict(res) -> None:
    """Predict, then reveal: the codec run's bytes per step as a share of fp32 FSDP2's."""
    def reveal():
        if res is None or "bytes_ratio" not in res.summary:
            return None
        s = res.summary
        share = 100 * s["bytes_ratio"]
        return round(share, 2), (f"Counted on the wire: {s['label']} sent {si_bytes_label(s['bytes_per_step'])} per "
                                 f"step, fp32 FSDP2 {si_bytes_label(s['fp32_bytes_per_step'])}: {share:.3g} %. Bits "
                                 "per value over 32 gives most of it; block scales add the rest.")
    ui.predict("What share (%) of fp32 FSDP2's bytes per step will the codec run send?", None, reveal,
               key="fsdp_guess", unit="%", tolerance=0.25, lo=0, hi=1000)


def _results(job, params) -> None:
    got = curve_view.settled(job, "Pick the codecs and press Train: the runs start as real processes; curves draw "
                             "as they come.", X, Y, "fsdp")
    if got is None:
        return
    res, curves = got
    if job.token != jobs.token(params):
        st.caption("These results are from an earlier Train; press Train to run the current settings.")
    s = res.summary
    m = st.columns(4)
    m[0].metric(f"Bytes per step ({s['label']})", si_bytes_label(s["bytes_per_step"]),
                delta=(f"{s['bytes_ratio'] - 1:+.0%} vs FSDP2 fp32" if "bytes_ratio" in s else None),
                delta_color="inverse", help="all ranks' payload bytes for other ranks, every collective, per step")
    if "speedup" in s:
        m[1].metric("Step time vs FSDP2 fp32", f"{s['speedup']:.2f}x speed",
                    help="median step time of fp32 FSDP2 over the codec run's, measured here in the same processes "
                         "(a shared CPU: the codec's work is on the same cores as the compute)")
        m[2].metric("Final training loss vs fp32", f"{s['train_loss_ratio']:.4f}x",
                    help="the codec run's training loss at the last evaluation over fp32 FSDP2's (same steps)")
    if s.get("hpz"):
        m[3].metric("Cross-node bytes per step", si_bytes_label(s["cross_node_per_step"]),
                    delta=(f"{s['cross_node_ratio'] - 1:+.0%} vs FSDP2 fp32" if "cross_node_ratio" in s else None),
                    delta_color="inverse", help="the part for ranks of the other node (nodes of 2 ranks)")
    st.markdown("**Bytes per step on each collective** (counted from the payloads each rank passed to the process "
                "group):")
    ui.figure(plots.fsdp_run_bytes_figure(res.collectives), res.collectives, "fsdp_bytes")
    ui.figure(curves.figure(res.curve), res.curve, "fsdp_curves")
    runs = res.runs.dropna(axis=1, how="all")
    ui.people_table(runs, "fsdp_runs", RUN_COLUMNS, [c for c in RUN_DEFAULT if c in runs and (  # nodes: with hpZ
        c != "cross_node_per_step" or s.get("hpz"))])
    ui.takeaway(fsdp_takeaway(s, res.runs, res.collectives), key="fsdp_takeaway")


def fsdp_takeaway(summary: dict, runs: pd.DataFrame, collectives: pd.DataFrame) -> str:
    """The sentence from the numbers on screen: FSDP's volume against DDP's, what the codec saved and cost."""
    per = runs.set_index("variant").bytes_per_step
    parts = []
    if "FSDP2 fp32" in per and "DDP fp32" in per and per["DDP fp32"]:
        parts.append(f"fp32 FSDP2 sent {per['FSDP2 fp32'] / per['DDP fp32']:.2f}x DDP's bytes per step (two "
                     "all-gathers of the weights and a reduce-scatter, against one all-reduce: 3 against 2 "
                     "volumes of the model)")
    if "bytes_ratio" in summary:
        loss = summary["train_loss_ratio"]
        off = abs(loss - 1)
        how = "the same" if off < 0.005 else f"{off:.1%} {'higher' if loss > 1 else 'lower'}"
        speed = summary["speedup"]
        parts.append(f"{summary['label']} sent {summary['bytes_ratio']:.1%} of fp32 FSDP2's bytes, ran "
                     f"{speed:.2f}x its speed per step on this machine "
                     f"({'faster' if speed > 1 else 'slower'}: the codec's work shares the cores with the compute) "
                     f"and ended with a training loss {how} after {summary['steps']} steps")
        if summary.get("hpz") and "cross_node_ratio" in summary and not math.isnan(summary["cross_node_ratio"]):
            back = collectives[(collectives.variant == summary["label"])
                               & (collectives.collective == "all_gather_backward")]
            inside = not len(back) or float(back.cross_node_per_step.iloc[0]) == 0
            parts.append(f"with hpZ, {summary['cross_node_ratio']:.1%} of fp32's bytes crossed nodes"
                         + (" (its backward all-gather stayed inside each node)" if inside else ""))
    if not parts:
        return f"{summary['label']}: {si_bytes_label(summary['bytes_per_step'])} per step on the wire."
    return "On the same data and seeds, " + "; ".join(parts) + "."
