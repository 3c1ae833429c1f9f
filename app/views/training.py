"""Training page: simulated data- or model-parallel training with a codec per run, or the consistency
models side by side (Dettmers 2016 §3.4; Ben-Nun & Hoefler); live curves of test error, loss, bytes and
modelled time. Runs go in a background job (Train / Stop), so the page stays usable and a stopped run
keeps its curve."""
import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
from views import _curves as curve_view
from views import _race as race_view
from lab.experiments import (TABLE1_TYPES, CONSISTENCY_KINDS, DATASETS, LINKS, codec_catalog, codec_curves, codec_spec,
                             consistency_curves, consistency_names, dataset_info)
from lab.plots.units import seconds_label, si_bytes_label
from views import _fsdp_training as fsdp_view
from views import _parallel_training as parallel_view
from views import _consistency as consistency_view

Y = {"test error (%)": "test_error", "training loss": "train_loss", "test loss": "test_loss"}
X = {"epochs": "epoch", "updates": "step", "bytes sent (MB)": "bytes", "modelled time (s)": "time_s"}
VIEWS = ["Train and compare", "Race to the target"]
PAPER_TYPES = ["32-bit", *TABLE1_TYPES]  # Dettmers 2016 §3.4: 32-bit and the paper's four 8-bit types
PAPER = dict(experiment="codecs", parallel="data", workers=4, codecs=PAPER_TYPES, hidden=1024, epochs=1.0,
             lr=0.003, batch=128, dataset="auto")
# Dettmers 2016 §3.4 (MNIST, 784-1024-1024-10, ReLU, dropout 0.2/0.3/0.3, RMSProp lr 0.003): one-way ANOVA
# of the best test error across 32-bit and the four 8-bit types; the paper gives no per-type errors.
# one real step per run is measured as the settings change while it is cheap here (about 1 s at most on a 2-core
# CPU): its cost follows the values a ring allreduce moves, 2(K-1) x the parameters, and the K(K-1) simulated hops.
# Measured for three runs on digits: 4 workers x 1024 units (6.8 M values) 0.3-0.65 s, 16 x 256 units 0.54 s;
# 8 x 1024 units (15.8 M) 1.5 s, 16 x 512 units 3.8 s, 64 workers x 64 units 5.3 s (on demand there).
LIVE_WORKERS = 16
LIVE_VALUES = 12e6
PAPER_ANOVA = {"data": "F(4, 4) = 0.71, p = 0.59", "model": "F(4, 4) = 0.54, p = 0.71"}


@st.cache_data(max_entries=8, show_spinner=False)
def _data(dataset: str, seed: int) -> dict:
    return dataset_info(dataset, seed=seed)


@st.cache_data(max_entries=32, show_spinner=False)
def _one_step(experiment: str, runs: tuple, base_items: tuple) -> pd.DataFrame:
    """Each run's summary after one real training step on one batch (its bytes on the wire are exact; the
    modelled time is this step's measured compute plus the link's model): what the page shows before Train."""
    base = dict(base_items, epochs=1.0, evals_per_epoch=1)
    base.update(train_limit=base["batch"], test_limit=base["batch"])
    if experiment == "codecs":
        return codec_curves([None if r == "32-bit" else r for r in runs], **base)[1]
    return consistency_curves(list(runs), **base)[1]


def _wire_takeaway(experiment: str, one: pd.DataFrame, base: dict, arch: str, data: str) -> str:
    """The sentence the page opens with, from the one-step table: what each run puts on the wire."""
    first = one.iloc[0]
    K = base["workers"]
    if experiment == "codecs":
        what = "gradients" if base["parallel"] == "data" else "activations and deltas"
        head = (f"One real {base['parallel']}-parallel step of {arch} on {K} workers ({data}, a batch of "
                f"{base['batch']}) puts {si_bytes_label(first.bytes_per_step)} of {first.variant} {what} on the wire")
        if len(one) == 1:
            return head + "; add a codec to compare what it saves, then press Train to see what it costs."
        rest = [f"{r.variant} {si_bytes_label(r.bytes_per_step)} ({r.bytes_per_step / first.bytes_per_step:.1%})"
                for r in one.iloc[1:].itertuples()]
        return (head + "; " + ", ".join(rest) + ". Press Train to see whether the test-error curves still lie on "
                "top of each other.")
    parts = [f"{r.variant} {r.steps} update{'s' if r.steps != 1 else ''} of {si_bytes_label(r.bytes_per_step)}"
             for r in one.itertuples()]
    fewest = int(one.steps.min())
    more = one[one.steps > fewest]
    tail = (f"; {', '.join(more.variant)} update{'s' if len(more) == 1 else ''} without waiting for all {K} workers "
            f"({int(more.steps.max())} updates on this batch instead of {fewest}). Press Train to see what the staler "
            "gradients cost in test error." if len(more) else ". Press Train to compare their test-error curves.")
    return f"One batch of {base['batch']} samples on {K} workers ({arch}, {data}): " + ", ".join(parts) + tail


def _run(experiment: str, runs: list, base: dict, job) -> tuple:
    if experiment == "codecs":
        return codec_curves([None if r == "32-bit" else r for r in runs], progress=job.progress,
                            on_point=job.on_row, side_by_side=True, **base)
    return consistency_curves(list(runs), progress=job.progress, on_point=job.on_row, side_by_side=True, **base)


def _summary_of(curves: pd.DataFrame) -> pd.DataFrame:
    """A stopped run's summary: each run's last evaluated point."""
    last = curves.groupby("variant", sort=False).tail(1)
    return pd.DataFrame({"variant": last.variant, "final_test_error": last.test_error, "bytes": last["bytes"],
                         "modelled_time_s": last.time_s, "epochs done": last.epoch}).reset_index(drop=True)


def error_noise(p_pct: float, n_test: int) -> float:
    """Two standard errors (points) of a difference between two test errors near p_pct on n_test images
    (binomial, independent): below it a difference is within noise, before counting seed-to-seed noise."""
    p = min(max(p_pct / 100, 1 / n_test), 1 - 1 / n_test)
    return 200 * (2 * p * (1 - p) / n_test) ** 0.5


def _takeaway(experiment: str, summary: pd.DataFrame, data: str, n_test: int = 0) -> str:
    first = summary.iloc[0]
    one = 100 / n_test if n_test else float("nan")
    if len(summary) == 1:
        return (f"On {data}, {first.variant} ends at {first.final_test_error:.1f} % test error; add runs to compare "
                "against it.")
    seed = (f" One seed and {n_test:,} test images: one image is {one:.2g} points, and differences under "
            f"{error_noise(first.final_test_error, n_test):.1f} points (two standard errors) are within noise; run "
            "other seeds (More settings) to see the spread." if n_test else "")
    if experiment == "codecs":
        parts = []
        for _, r in summary.iloc[1:].iterrows():
            d = r.final_test_error - first.final_test_error
            noise = error_noise((r.final_test_error + first.final_test_error) / 2, n_test) if n_test else 0.05
            images = f", {abs(d) / one:.0f} test image{'s' if round(abs(d) / one) != 1 else ''}" if n_test else ""
            how = ("the same" if abs(d) < 0.05 else
                   f"{abs(d):.2f} points {'worse' if d > 0 else 'better'}{images}"
                   + (", within noise" if abs(d) < noise else ""))
            share = r["bytes"] / first["bytes"] if first["bytes"] else float("nan")
            parts.append(f"{r.variant} ends {how} ({r.final_test_error:.1f} %) sending {share:.0%} of the bytes")
        return (f"On {data}, against {first.variant}'s {first.final_test_error:.1f} % test error: "
                + "; ".join(parts) + "." + seed)
    fast = summary.loc[summary.modelled_time_s.idxmin()]
    best = summary.loc[summary.final_test_error.idxmin()]
    if fast.variant == best.variant:
        return (f"On {data}, {fast.variant} both finishes first ({fast.modelled_time_s:.3g} s modelled) and ends "
                f"with the lowest test error ({fast.final_test_error:.1f} %)." + seed)
    return (f"On {data}, {fast.variant} finishes first ({fast.modelled_time_s:.3g} s modelled, "
            f"{fast.final_test_error:.1f} % test error) and {best.variant} ends with the lowest test error "
            f"({best.final_test_error:.1f} %, {best.modelled_time_s:.3g} s): less waiting for the slowest worker "
            "trades against staler gradients." + seed)


def _time(seconds: float) -> str:
    """A time in words, 3 significant digits: '1.92 s', '25 ms' (never '1.92e+03 ms')."""
    return seconds_label(float(f"{seconds * 1e6:.3g}"))


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    catalog = codec_catalog()  # read per run: a codec registered later shows too
    CODECS = ["32-bit", *(c.name for c in catalog if not c.work.raw),
              *(codec_spec(c.name, error_feedback=True) for c in catalog if c.gather_only and c.gradient_only)]
    st.title("Training")
    tabs, view = ui.tabs(VIEWS, "view")  # the race: every codec's steps and modelled time to fp32's quality
    if view != VIEWS[0]:
        with tabs[1]:
            return race_view.render()
    ui.lesson("Does sending gradients (or activations) in 8 bits — or 1 bit — change how well a network learns?",
              "First, what one real step of each run puts on the wire (what a codec saves). Then press Train and "
              "look at the test-error curves: runs that lie on top of each other lost nothing to their codec; "
              "switch the x axis to bytes sent to see what each one saved. K simulated workers train "
              "one MLP with the codec on the wire; time is modelled from measured compute and the chosen link.")

    def preset_paper():
        ui.set_state(**PAPER)

    def preset_consistency():
        ui.set_state(experiment="consistency models", workers=4, kinds=list(CONSISTENCY_KINDS), hidden=64, epochs=2.0)

    b1, b2, _ = st.columns([1, 1, 1])
    b1.button("Preset: paper §3.4", on_click=preset_paper, width="stretch",
              help="Dettmers 2016 §3.4, data parallel (slow on CPU): 32-bit and the paper's four 8-bit types, 4 "
                   "workers, 1024-unit MLP, RMSProp lr 0.003, batch 128, "
                   "MNIST when installed (else digits)")
    b2.button("Preset: consistency", on_click=preset_consistency, width="stretch",
              help="sync, stale-synchronous, asynchronous, EASGD and gossip side by side on 4 workers")

    experiment = ui.radio("Compare", ["codecs", "consistency models", fsdp_view.MODE, parallel_view.MODE],
                          "experiment", "codecs",
                          help="codecs: one run per codec on the wire; consistency models: one run per way of "
                               "keeping the workers' parameters in step; sharded: real FSDP2 processes with "
                               "codecs on its all-gather and reduce-scatter, beside fp32 FSDP2 and DDP; beyond "
                               "data parallel: pipeline, tensor, hybrid and expert parallelism (every registered "
                               "strategy) on real processes, fp32 beside a codec on what the ranks send")
    if experiment == fsdp_view.MODE:
        return fsdp_view.render()
    if experiment == parallel_view.MODE:
        return parallel_view.render()
    c1 = st.container()
    c2, c3, c4 = st.columns(3)
    with ui.more_settings():
        m1, m2, m3, m4 = st.columns(4)
        hidden = ui.select_slider("Hidden units (2 layers)", [32, 64, 128, 256, 512, 1024], "hidden", 64, where=m1,
                                  help="width of both hidden layers (32..1024; the paper's MLP has 1024)")
        lr = ui.number("Learning rate", "lr", 0.003, where=m2, min_value=1e-5, max_value=1.0, format="%.4g",
                       help="RMSProp step size (0.00001..1; the paper uses 0.003)")
        batch = ui.number("Batch", "batch", 64, where=m3, min_value=1, max_value=4096, step=1,
                          help="samples per update, split over the K workers (1..4096)")
        link = ui.select("Link (for modelled time)", list(LINKS), "link", "eth10g", where=m4,
                         help="the network the modelled time assumes; "
                              + "; ".join(f"{k}: {v.source}" for k, v in LINKS.items()))
        s1, s2, _ = st.columns([1, 1, 2])
        seed = ui.seed(where=s1)
        if experiment == "codecs":
            parallel = ui.select("Parallelism", ["data", "model"], "parallel", "data", where=s2,
                                 help="data: gradients cross the wire (§3.4 data parallel); model: each layer's "
                                      "activations and deltas do (§3.4 model parallel)")
        else:
            parallel = "data"
    if experiment == "codecs":
        runs = ui.multiselect("Codec per run (overlaid)", CODECS, "codecs", ["32-bit", "dynamic_tree", "onebit"],
                              where=c1, help="one training run per codec on the wire; 32-bit is the baseline; "
                                             "ef:… adds error feedback")
        runs = ui.codec_option_specs(runs, "codecs")
    else:
        runs = ui.multiselect("Consistency models (overlaid)", list(CONSISTENCY_KINDS), "kinds",
                              list(CONSISTENCY_KINDS), where=c1,
                              help="sync: every step waits for all; ssp: up to s steps stale; async: parameter "
                                   "server, no waiting; easgd: elastic averaging; gossip: each worker averages "
                                   "with its neighbours only")
        codec = ui.select("Codec on the wire", CODECS[:8], "codec", "32-bit", where=s2,
                          help="the one codec every consistency run sends its gradients with")
        codec = ui.codec_option_specs([codec], "codec")[0]
    workers = ui.number("Workers K", "workers", 4, where=c2, min_value=1, max_value=64, step=1,
                        help="simulated workers sharing each batch (1..64)")
    dataset = ui.select("Data set", list(DATASETS), "dataset", "digits", where=c3,
                        help="auto: MNIST, else Fashion-MNIST, else digits; digits (8×8, 64 inputs) ships with "
                             "scikit-learn; MNIST / Fashion-MNIST (28×28 = 784 inputs) are read from disk")
    epochs = ui.number("Epochs", "epochs", 3.0, where=c4, min_value=0.25, max_value=50.0, step=0.25,
                       help="passes over the training set (0.25..50)")
    knobs = {}
    if experiment == "consistency models":
        st.markdown(f"**{consistency_view.QUESTION}**")
        knobs = consistency_view.knobs(list(runs), int(workers))

    with ui.guard():
        info = _data(dataset, int(seed))
    arch = "MLP " + "-".join(str(k) for k in (info["inputs"], hidden, hidden, info["classes"]))
    h, w = info["image_shape"]
    data_line = (f"**Runs on {info['name']}** ({h}×{w} images = {info['inputs']} inputs, {info['classes']} classes, "
                 f"{info['train']:,} training / {info['test']:,} test samples) with **{arch}**, {int(workers)} "
                 f"workers, {parallel} parallel.")
    if info["fell_back"]:
        st.warning(data_line + " MNIST and Fashion-MNIST were not found on this machine (put their IDX files in $PARALAB_DATA "
                   "or ~/.cache/paralab/mnist), so 'auto' uses scikit-learn's digits: 64 inputs, not the paper's 784.")
    else:
        st.markdown(data_line)

    base = dict(dataset=dataset, hidden=(hidden, hidden), epochs=float(epochs), lr=float(lr), batch=int(batch),
                workers=int(workers), link=link, parallel=parallel, seed=int(seed), evals_per_epoch=4)
    if experiment == "consistency models":
        base["codec"] = None if codec == "32-bit" else codec
        base.update(knobs)
    paper_view = experiment == "codecs" and int(hidden) == 1024 and set(PAPER_TYPES) <= set(runs)

    if not runs:
        st.info("Pick at least one run.")
        return
    wire = _wire_section(experiment, list(runs), base, info, arch)
    st.fragment(_results)(experiment, list(runs), base, info, arch, paper_view, wire)


def _wire_section(experiment: str, runs: list, base: dict, info: dict, arch: str) -> str | None:
    """What one real step of each run puts on the wire (cheap: one batch, cached): metrics and the sentence
    the page opens with before anything is trained."""
    st.subheader("What one step puts on the wire")
    params = (experiment, tuple(runs), tuple(sorted((k, v) for k, v in base.items()
                                                    if k not in ("epochs", "evals_per_epoch"))))
    measured = st.session_state.setdefault("_wire_measured", set())
    K = base["workers"]
    h = max(base["hidden"])
    values = 2 * (K - 1) * (info["inputs"] * h + h * h + h * info["classes"])  # what the ring moves, about
    if (K > LIVE_WORKERS or values > LIVE_VALUES) and params not in measured:  # seconds here: on demand
        c1, c2 = st.columns([1, 3], vertical_alignment="center")
        c2.caption(f"With {K} simulated workers of {h}-unit layers one real step runs every hop of the allreduce "
                   "on this CPU and takes seconds; smaller settings are measured as you change them.")
        if not c1.button("Measure one step", key="wire_measure",
                         help="one real training step per run on one batch: its exact bytes on the wire"):
            return (f"With {K} workers of {h}-unit layers, press **Measure one step** to see what one real step of "
                    "each run puts on the wire, or **Train** for the test-error curves.")
        measured.add(params)
    try:
        with st.spinner("one real step per run…"):
            one = _one_step(*params)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return None
    first = one.iloc[0]
    per = "step" if experiment == "codecs" else "update"
    asked = experiment == "codecs" and len(one) > 1 and bool(first.bytes_per_step)
    if asked:
        _predict_share(one, base)
    hide = asked and not ui.revealed("guess")  # the codecs' bytes would answer it: they wait for an answer or skip
    cols = st.columns(min(len(one), 5))
    for i, r in enumerate(one.itertuples()):
        if hide and i > 0:
            cols[i % len(cols)].metric(f"{r.variant}: bytes per {per}", "?", help="shows once you answer the "
                                       "question above, or skip it")
            continue
        share = r.bytes_per_step / first.bytes_per_step if first.bytes_per_step else float("nan")
        cols[i % len(cols)].metric(
            f"{r.variant}: bytes per {per}", si_bytes_label(r.bytes_per_step),
            delta=None if i == 0 or abs(share - 1) < 0.0005 else f"{share - 1:+.1%} vs {first.variant}",
            delta_color="inverse",
            help=f"measured: all {base['workers']} workers' bytes in one real {per} on one batch of {base['batch']} "
                 f"({r.steps} {per}{'s' if r.steps != 1 else ''} on it); modelled time of a {per} on "
                 f"{base['link']}: {_time(r.modelled_time_s / max(r.steps, 1))} (this step's measured "
                 "compute plus the link's model)")
    if hide:
        return (f"One real {base['parallel']}-parallel step of {arch} on {base['workers']} workers puts "
                f"{si_bytes_label(first.bytes_per_step)} of {first.variant} gradients on the wire; what each codec "
                "puts there is the question above: answer it (or skip it).")
    return _wire_takeaway(experiment, one, base, arch, f"{info['name']}")


def _predict_share(one: pd.DataFrame, base: dict) -> None:
    """Predict, then reveal: the last run's bytes per step as a share of the first's (32-bit)."""
    first, last = one.iloc[0], one.iloc[-1]

    def reveal() -> tuple[float, str]:
        share = 100 * last.bytes_per_step / first.bytes_per_step
        return round(share, 2), (
            f"One real {base['parallel']}-parallel step on {base['workers']} workers: {last.variant} puts "
            f"{last.bytes_per_step:,.0f} B on the wire, {first.variant} {first.bytes_per_step:,.0f} B: "
            f"{last.bytes_per_step:,.0f} / {first.bytes_per_step:,.0f} = {share:.3g} %. Bits per value over 32 "
            "gives most of it; scales and indices add the rest.")
    ui.predict(f"What share of {first.variant}'s bytes per step does {last.variant} put on the wire?", None, reveal,
               key="guess", unit="%", tolerance=0.25, lo=0, hi=1000)


def _results(experiment: str, runs: list, base: dict, info: dict, arch: str, paper_view: bool,
             wire: str | None = None) -> None:
    slot = st.container()  # one takeaway: the curves' once a run has finished, else what the wire carries
    try:
        curves = _results_body(experiment, runs, base, info, arch, paper_view)
    finally:
        jobs.release("train_run")  # the section has drawn: a run started by this pass may begin
    with slot:
        if curves:
            ui.takeaway(curves)
        elif wire:
            ui.takeaway(wire)


def _results_body(experiment: str, runs: list, base: dict, info: dict, arch: str, paper_view: bool) -> str | None:
    """The Train section; returns the curves' takeaway once a result (finished or stopped) is shown."""
    job = jobs.controls("Train", "train_run", [experiment, runs, base], lambda j: _run(experiment, runs, base, j),
                        help="start the runs, side by side (they take turns, a quarter epoch each: seconds to "
                             "minutes); the page stays usable, and Stop keeps every run's curve so far")
    data = f"{info['name']} ({info['inputs']} inputs, {arch})"
    if experiment == "consistency models":
        consistency_view.question(consistency_names(runs, **base), job, base["batch"])
    if job is None:
        if paper_view:
            ui.paper_callout(_paper_text(base["parallel"], None, info), key="s34")
        st.info("Set the runs and press Train: each run is one simulated training job; curves draw as they come.")
        return
    if job.state == "failed":
        st.error(job.error)
        return
    picked = curve_view.pick(X, Y, ("x", "y"), "test error (%)", "training_live", "live")

    prev = jobs.last_result("train_run", other_than=job) if job.state != "done" else None
    if prev is not None:
        with st.expander("Last finished result (earlier settings)"):
            st.markdown(_takeaway(experiment, prev.result[1], data, int(info["test"])))
            ui.figure(picked.figure(prev.result[0]), prev.result[0],
                      "training_curves_last", key="train_last")
    if job.running:
        jobs.watch("train_run", picked.draw)
        return
    if job.state == "done":
        curves, summary = job.result
    else:
        curves = pd.DataFrame(job.curve())
        if not len(curves):
            st.warning("Stopped before the first evaluation: nothing to show.")
            return
        summary = _summary_of(curves)
        st.warning(f"Stopped: the curves below end where each run was ({len(curves)} evaluations).")
    stale = job.token != jobs.token([experiment, runs, base])
    if stale:
        st.caption("These curves are from an earlier Train; press Train to run the current settings.")
    first = summary.iloc[0]
    st.caption(f"Final test error per run (the change is against {first.variant}; lower is better; one seed on "
               f"{int(info['test']):,} test images, so one image is {100 / int(info['test']):.2g} points):")
    m = st.columns(min(len(summary), 4))
    for i, (_, r) in enumerate(summary.head(4).iterrows()):
        m[i].metric(str(r.variant), f"{r.final_test_error:.2f} %",
                    delta=None if i == 0 else f"{r.final_test_error - first.final_test_error:+.2f} points",
                    delta_color="inverse", help="test error at the last evaluation; the change is against the "
                                                "first run (lower is better)")
    last = summary.iloc[-1]
    n1, n2 = st.columns(2)
    share = last['bytes'] / first['bytes'] if first['bytes'] else None
    n1.metric(f"Bytes sent ({last.variant})", f"{int(last['bytes']):,}",
              delta=None if share is None or len(summary) == 1 or abs(share - 1) < 0.005 else
              f"{share - 1:+.0%} vs {first.variant} ({share:.0%} of it)", delta_color="inverse",
              help="all workers' bytes on the wire over the whole run; fewer is better")
    n2.metric(f"Modelled time ({last.variant})", _time(last.modelled_time_s),
              help="measured compute per step plus the link's communication time, summed over the run")
    if paper_view:
        ui.paper_callout(_paper_text(base["parallel"], summary, info), key="s34")
    if experiment == "consistency models":
        consistency_view.figures(curves, picked.y)
    else:
        ui.figure(picked.figure(curves), curves, "training_curves")
    shown = summary.rename(columns={"variant": "Run", "final_test_error": "Final test error (%)",
                                    "best_test_error": "Best test error (%)", "bytes": "Bytes sent (B)",
                                    "modelled_time_s": "Modelled time (s)", "wall_s": "Wall time here (s)",
                                    "parameters": "Parameters", "dataset": "Data set", "architecture": "Model",
                                    "epochs done": "Epochs done"})
    keep = [c for c in ("Run", "Final test error (%)", "Bytes sent (B)", "Modelled time (s)", "Wall time here (s)",
                        "Epochs done") if c in shown]
    ui.table(shown[keep].round({"Final test error (%)": 2, "Modelled time (s)": 4, "Wall time here (s)": 1}),
             "training_summary")
    # the takeaway speaks of the settings on screen: earlier settings' curves are shown, labelled, not summed up
    if stale:
        return None
    if experiment == "consistency models":
        return consistency_view.takeaway(curves, data, base["batch"]) or _takeaway(experiment, summary, data,
                                                                                 int(info["test"]))
    return _takeaway(experiment, summary, data, int(info["test"]))


def _paper_text(parallel: str, summary: pd.DataFrame | None, info: dict) -> str:
    paper = (f"Dettmers 2016 §3.4 trains 784-1024-1024-10 on MNIST and finds the four 8-bit types' test error no "
             f"different from 32-bit ({parallel} parallel: {PAPER_ANOVA[parallel]}, one-way ANOVA over seeds; the "
             "paper lists no per-type errors).")
    if summary is None:
        here = " Press Train to put this machine's numbers beside it."
    else:
        errs = summary.set_index("variant").final_test_error
        here = (f" Here, one seed on {info['name']} ({info['inputs']} inputs): final test errors span "
                f"{errs.min():.2f}–{errs.max():.2f} % ({errs.max() - errs.min():.2f} points).")
    if info["fell_back"] or info["inputs"] != 784:
        here += (f" {info['name']} is not MNIST (64 inputs instead of 784, {info['train']:,} training samples "
                 "instead of 60,000), so errors are higher and noisier; install MNIST to match the paper's "
                 "conditions. `paralab train --reproduce mnist-dp` runs the seeds and the ANOVA.")
    return paper + here
