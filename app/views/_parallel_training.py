"""The Training page's real-rank view of the parallelisms beyond data parallelism (every registered strategy:
pipeline, tensor, hybrid, expert, ...): the strategy's own settings drawn from its settings class, a codec on
what its ranks send each other, fp32 and the codec trained on real Gloo processes through the front door
(`lab.experiments.parallel_training`), curves, bytes per step counted on the wire, step time and a takeaway
from the numbers on screen. Called by app/views/training.py when its "Compare" choice is this view; keys start
with par_."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
from views import _curves as curve_view
from lab.experiments import (DATASETS, codec_catalog, dataset_info, parallel_settings, parallel_training,
                             schedule_names, strategy_catalog)
from lab.experiments import parallelism as par
from lab.plots.units import si_bytes_label

MODE = "beyond data parallel: real ranks"
X = {"epochs": "epoch", "updates": "step", "bytes sent (MB)": "bytes", "measured wall-clock (s)": "wall_s"}
Y = {"test error (%)": "test_error", "training loss": "train_loss", "test loss": "test_loss"}
FP32 = "fp32"
AUTO = "auto"
LINKS_HERE = ["loopback", "10gbit", "1gbit", "100mbit"]


def _codecs() -> list[str]:
    """fp32 and the registered codecs that can carry activations (not the gradient compressors)."""
    return [FP32, *(c.name for c in codec_catalog() if not (c.gradient_only or c.phased))]


def _choices(name: str) -> list[str] | None:
    """The values a settings field takes where a registry lists them: the pipeline's schedules (torch's), an
    allreduce algorithm, a gradient codec; None: the field is typed in."""
    if name == "schedule":
        return list(schedule_names())
    if name == "algorithm":
        from lab.experiments import ALGORITHMS

        return ["native", *ALGORITHMS]
    if name.endswith("_codec"):
        names = [c.name for c in codec_catalog()]
        return [FP32, *names, *(f"ef:{n}" for n in names)]
    return None


def _field_widgets(mode: str, where) -> dict[str, Any]:
    """One widget per field of strategy `mode`'s settings (typed by its annotation, its default the class's),
    three to a row; URL keys `<mode>.<field>`. Returns {field: value} (None where 'auto' / fp32)."""
    cls = par.get_strategy(mode).settings
    fields = list(dataclasses.fields(cls))
    values: dict[str, Any] = {}
    if not fields:
        return values
    cols = where.columns(3)
    for i, f in enumerate(fields):
        col, key, label = cols[i % 3], f"{mode}.{f.name}", f.name.replace("_", " ")
        kind = (f.type.__name__ if isinstance(f.type, type) else str(f.type)).replace(" ", "")  # "int|None", ...
        default = f.default
        tip = f.metadata.get("help") if f.metadata else None
        tip = tip or f"--{f.name.replace('_', '-')} of --mode {mode} (default {default})"
        optional = "None" in kind
        choices = (f.metadata.get("choices") if f.metadata else None) or _choices(f.name)
        if callable(choices):
            choices = list(choices())
        if kind.startswith("bool"):
            values[f.name] = ui.checkbox(label, key, bool(default), where=col, help=tip)
        elif choices:
            opts = [str(c) for c in choices]
            start = FP32 if default is None and FP32 in opts else str(default)
            v = ui.select(label, opts, key, start if start in opts else opts[0], where=col, help=tip)
            values[f.name] = None if (optional and v == FP32) else v
        elif kind.startswith("int") and optional:
            opts = [AUTO, *(str(k) for k in range(1, 9))]
            v = ui.select(label, opts, key, AUTO if default is None else str(default), where=col, help=tip)
            values[f.name] = None if v == AUTO else int(v)
        elif kind.startswith("int"):
            values[f.name] = int(ui.number(label, key, int(default), where=col, min_value=1, max_value=65536,
                                           step=1, help=tip + " (1..65536)"))
        elif kind.startswith("float"):
            values[f.name] = float(ui.number(label, key, float(default), where=col, min_value=0.01, max_value=100.0,
                                             format="%.4g", help=tip + " (0.01..100)"))
        else:
            v = ui.text(label, key, "" if default is None else str(default), where=col, help=tip)
            values[f.name] = None if (optional and v.strip() in ("", FP32)) else v.strip()
    return values


def render() -> None:
    """The view: strategy, processes, codec and its settings; predict; Train; then curves and the takeaway."""
    st.markdown("**What does each kind of parallelism send, and what does a codec on it save and cost?** Beyond "
                "data parallelism the ranks split the model itself: stages of layers (pipeline), each layer's "
                "weights (tensor), the dense layers only (hybrid) or the experts of a mixture (expert). Here each "
                "trains for real, in processes on this machine over Gloo, fp32 beside the codec you pick.")
    catalog = strategy_catalog().set_index("name")  # read per run: a strategy registered later shows too
    names = list(catalog.index)
    c1, c2, c3 = st.columns(3)
    mode = ui.select("Parallelism", names, "par_mode", names[0], where=c1,
                     help="; ".join(f"{n}: {catalog.loc[n, 'description']}" for n in names))
    info = catalog.loc[mode]
    lo = int(info.min_procs)
    procs = int(ui.number("Processes", "par_procs", max(2, lo), where=c2, min_value=lo, max_value=8, step=1,
                          help=f"real rank processes on this machine ({lo}..8)"))
    codec = ui.select("Codec on the sends", _codecs(), "par_codec", "dynamic_tree" if "dynamic_tree" in _codecs()
                      else FP32, where=c3, help=f"what {mode}'s ranks send each other: {info.carries}; fp32 "
                                                "trains alone")
    st.caption(f"**{mode}**: {info.description}. Papers: {info.paper}.")
    settings = _field_widgets(mode, st)
    models = [m.strip() for m in str(info.models).split(",")]
    with ui.more_settings(key="par_more"):
        m1, m2, m3, m4 = st.columns(4)
        model = ui.select("Model", models, "par_model", models[0], where=m1,
                          help=f"the models {mode} trains: {', '.join(models)}")
        hidden = ui.select_slider("Hidden units", [16, 32, 64, 128, 256, 512], "par_hidden", 64, where=m2,
                                  help="width of the MLP's hidden layers")
        layers = ui.number("Hidden layers", "par_layers", 2, where=m3, min_value=1, max_value=16, step=1,
                           help="the MLP's hidden layers (1..16): a pipeline needs a layer per stage")
        epochs = ui.number("Epochs", "par_epochs", 1.0, where=m4, min_value=0.25, max_value=20.0, step=0.25,
                           help="passes over the training set (0.25..20), per run")
        s1, s2, s3, s4 = st.columns(4)
        dataset = ui.select("Data set", list(DATASETS), "par_dataset", "digits", where=s1,
                            help="digits ships with scikit-learn; MNIST when installed")
        batch = ui.number("Batch", "par_batch", 128, where=s2, min_value=2, max_value=4096, step=1,
                          help="samples per step, over all ranks (2..4096)")
        link = ui.select("Link between ranks", LINKS_HERE, "par_link", LINKS_HERE[0], where=s3,
                         help="loopback: this machine's; a rate shapes a link between the ranks (network "
                              "namespaces: needs root)")
        seed = ui.number("Seed", "par_seed", 0, where=s4, min_value=0, max_value=2**31 - 1, step=1,
                         help="the same seed drives both runs: same initial weights and batches")
    k = int(layers)
    cfg = dict(dataset=dataset, model=model, hidden=(int(hidden),) * k, dropout=(0.0,) * (k + 1), epochs=float(epochs),
               batch=int(batch), evals_per_epoch=4, seed=int(seed), codec=None)
    try:
        for c in (cfg, dict(cfg, codec=None if codec == FP32 else codec)):
            parallel_settings(mode, c, procs, settings)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return
    params = ["parallel", mode, procs, codec, settings, cfg, link]
    job = jobs.current("par_run")
    done = job is not None and job.state == "done" and job.token == jobs.token(params)
    if codec != FP32:
        _predict(job.result if done else None, codec)
    job = jobs.controls("Train", "par_run", params, lambda j: _run(mode, procs, codec, settings, cfg, link, j),
                        help="train fp32, then the codec, each on fresh rank processes (tens of seconds to "
                             "minutes); Stop keeps the curves so far")
    try:
        _results(job, params, mode, cfg)
    finally:
        jobs.release("par_run")


def _run(mode: str, procs: int, codec: str, settings: dict, cfg: dict, link: str, job) -> dict:
    """fp32, then the codec (when one is picked), each a real run; {label: ParallelResult} in that order."""
    runs = [None] + ([] if codec == FP32 else [codec])
    out = {}
    for i, c in enumerate(runs):
        label = "fp32" if c is None else c

        def progress(f: float, msg: str, i=i, label=label) -> None:
            job.progress((i + f) / len(runs), f"{label}: {msg}")

        out[label] = parallel_training(mode, dict(cfg, codec=c), procs, settings,
                                       link_rate=None if link == "loopback" else link, progress=progress,
                                       on_point=lambda row, label=label: job.on_row(dict(row, variant=label)))
    return out


def _predict(results: dict | None, codec: str) -> None:
    """Predict, then reveal: the codec run's bytes per step as a share of fp32's (counted on the wire)."""
    def reveal():
        if not results or codec not in results or FP32 not in results:
            return None
        a, b = results[FP32].summary, results[codec].summary
        per = lambda s: s["bytes"] / max(int(s["steps"]), 1)  # noqa: E731
        share = 100 * per(b) / per(a) if per(a) else float("nan")
        return round(share, 2), (f"Counted on the wire: {codec} sent {si_bytes_label(per(b))} per step, fp32 "
                                 f"{si_bytes_label(per(a))}: {share:.3g} %. Bits per value over 32 gives most of "
                                 "it; block scales, and what stays fp32 (losses, evaluations, data-parallel "
                                 "sums), the rest.")
    ui.predict(f"What share (%) of fp32's bytes per step will {codec} send?", None, reveal, key="par_guess",
               unit="%", tolerance=0.25, lo=0, hi=1000)


def _results(job, params, mode: str, cfg: dict) -> None:
    got = curve_view.settled(job, "Pick the parallelism and press Train: fp32 and the codec run as real processes, "
                             "one after the other; curves draw as they come.", X, Y, "par")
    if got is None:
        return
    results, curves = got
    if job.token != jobs.token(params):
        st.caption("These results are from an earlier Train; press Train to run the current settings.")
    rows = []
    for label, res in results.items():
        s = res.summary
        steps = max(int(s["steps"]), 1)
        rows.append(dict(run=label, final_test_error=s.get("final_test_error", float("nan")),
                         final_train_loss=s.get("final_train_loss", float("nan")), bytes_per_step=s["bytes"] / steps,
                         step_ms=1e3 * float(s["step_s"]), steps=steps))
    table = pd.DataFrame(rows)
    base = table.iloc[0]
    m = st.columns(min(len(table), 2) * 2)
    for i, r in enumerate(table.itertuples()):
        m[2 * i].metric(f"{r.run}: test error", f"{r.final_test_error:.2f} %",
                        delta=None if i == 0 else f"{r.final_test_error - base.final_test_error:+.2f} points",
                        delta_color="inverse", help="test error at the last evaluation")
        share = r.bytes_per_step / base.bytes_per_step if base.bytes_per_step else float("nan")
        m[2 * i + 1].metric(f"{r.run}: bytes per step", si_bytes_label(r.bytes_per_step),
                            delta=None if i == 0 or math.isnan(share) else f"{share - 1:+.0%} vs fp32",
                            delta_color="inverse", help="every rank's sends per step, counted on the wire")
    points = pd.concat([res.curve.assign(variant=label) for label, res in results.items()], ignore_index=True)
    ui.figure(curves.figure(points), points, "par_curves")
    shown = table.round({"final_test_error": 2, "final_train_loss": 4, "step_ms": 2}).astype(
        {"bytes_per_step": int}).rename(
        columns={"run": "Run", "final_test_error": "Final test error (%)", "final_train_loss": "Final training loss",
                 "bytes_per_step": "Bytes per step (B)", "step_ms": "Step (ms)", "steps": "Steps"})
    ui.table(shown, "par_runs")
    if job.token == jobs.token(params):
        n_test = int(dataset_info(cfg["dataset"], seed=int(cfg["seed"]))["test"])
        ui.takeaway(parallel_takeaway(mode, table, int(cfg["batch"]), n_test), key="par_takeaway")


def parallel_takeaway(mode: str, table: pd.DataFrame, batch: int, n_test: int) -> str:
    """The sentence from the numbers on screen: fp32's run, and what the codec saved and cost against it (a test
    error difference under two standard errors on `n_test` images is called within noise)."""
    from views.training import error_noise

    base = table.iloc[0]
    head = (f"{mode} on real ranks, fp32: {base.final_test_error:.2f} % test error after {int(base.steps)} steps of "
            f"{batch} samples, {si_bytes_label(base.bytes_per_step)} on the wire per step, {base.step_ms:.3g} ms a "
            "step")
    if len(table) == 1:
        return head + "."
    r = table.iloc[1]
    d = r.final_test_error - base.final_test_error
    share = r.bytes_per_step / base.bytes_per_step if base.bytes_per_step else float("nan")
    speed = base.step_ms / r.step_ms if r.step_ms else float("nan")
    noise = error_noise((r.final_test_error + base.final_test_error) / 2, n_test)
    how = ("the same test error" if abs(d) < 0.005 else
           f"{abs(d):.2f} points {'more' if d > 0 else 'less'} test error"
           + (f", within noise (two standard errors on {n_test:,} test images: {noise:.1f} points)"
              if abs(d) < noise else ""))
    return (head + f"; {r.run} sent {share:.1%} of those bytes, ran at {speed:.2f}x fp32's speed per step on this "
            f"machine ({r.step_ms:.3g} ms) and ended with {how} ({r.final_test_error:.2f} %, one seed).")


__all__ = ["MODE", "render", "parallel_takeaway"]
