"""Training's "race to the target" view (time to accuracy): every codec's validation-loss curve against steps and
against modelled time on a chosen cluster, fp32's target line, each codec's arrival marked, and the lesson
each view teaches computed from the numbers shown. The curves come from a committed `paralab converge`
result (mlp, cnn, gpt) or from a small live race run in the background (Run / Stop keeps the finished
runs); the seeds are in the URL. Rendered by the Training page with one call (`render`)."""
import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
from lab import plots
from lab.experiments import (CONVERGE_TASKS, INTER_LINKS, INTRA_LINKS, MODELS, RACE_COMMITTED_DEFAULT, RACE_LIVE_DEFAULT,
                             committed_race_data, converge, converge_task_descriptions, race, race_live_specs)
from lab.experiments.race import duration_text

SOURCES = ["committed result", "live race (small)"]
KEY = "race_run"
CLUSTERS = ["1x8", "2x8", "4x8", "8x8", "16x8", "32x8", "64x8", "128x8", "256x8"]


@st.cache_data(max_entries=4, show_spinner=False)
def _committed(task: str) -> dict | None:
    return committed_race_data(task)


@st.cache_data(max_entries=16, show_spinner=False)
def _race(runs: pd.DataFrame, curves: pd.DataFrame, **kw):
    return race(runs, curves, **kw)


def _live(specs: list, seeds: int, first: int, job) -> object:
    """The live race: the --smoke preset (the MLP on 1,000 digits, 2 workers) for the chosen specs and seeds;
    every finished run and evaluation streams to the job (Stop keeps them)."""
    return converge(smoke=True, task="mlp", specs=["fp32", *specs], seeds=seeds, first_seed=first,
                    progress=job.progress, on_run=lambda r: job.on_row({**r, "_kind": "run"}),
                    on_eval=lambda r: job.on_row({**r, "_kind": "point"}))


def _split(rows: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = pd.DataFrame(rows)
    if not len(df):
        return df, df
    runs = df[df["_kind"] == "run"].drop(columns="_kind").dropna(axis=1, how="all")
    pts = df[df["_kind"] == "point"][["spec", "seed", "step", "val_loss", "quality", "train_s"]]
    return runs.reset_index(drop=True), pts.reset_index(drop=True)


def render() -> None:
    """The race view (the Training page's second view)."""
    ui.lesson("Which codec gets the model trained first: in steps, and in time on a real cluster?",
              "Every line is one codec's validation loss; the dashed line is the target (the loss fp32 reaches at "
              "its last step, plus the tolerance); a star marks where a codec first reaches it. Left: against "
              "training steps (what compression costs in accuracy). Right: against time on the cluster you pick "
              "(steps x the modelled step time of 'Does compression pay?'): what it is worth.")
    c1, c2, c4 = st.columns([2, 1, 2])
    source = ui.radio("Curves from", SOURCES, "race_source", SOURCES[0], where=c1,
                      help="committed result: a full `paralab converge` run in bench/results (3 seeds); live race: "
                           "the --smoke preset trained here now (seconds to minutes)")
    cluster = ui.select("Cluster (nodes x GPUs)", CLUSTERS, "race_cluster", "8x8", where=c2,
                        help="the modelled cluster: nodes x GPUs per node, one NIC per GPU")
    inter = ui.select("Between nodes (one NIC)", list(INTER_LINKS), "race_inter", "eth10g", where=c4,
                      help="the network the modelled time assumes (eth10g: 1.25 GB/s; ib_ndr: 50 GB/s)")
    with ui.more_settings(key="race_more"):
        m1, m2, m3 = st.columns(3)
        intra = ui.select("Inside a node", list(INTRA_LINKS), "race_intra", "nvlink4", where=m1,
                          help="the link between the GPUs of one machine")
        model_choice = ui.select("Priced model", ["the task's", *MODELS], "race_model", "the task's", where=m2,
                                 help="whose step time prices the curves (the task's: the model `pays` matches to "
                                      "the task: mlp -> alexnet, cnn -> resnet50, gpt -> gpt2-small)")
        log_y = ui.checkbox("Log loss axis", "race_log", True, where=m3, help="validation loss on a log scale")
    price = dict(cluster=cluster, inter=inter, intra=intra, log_y=bool(log_y),
                 model=None if model_choice == "the task's" else model_choice)

    if source == SOURCES[0]:
        d1, d2, d3 = st.columns([1, 4, 1])
        task = ui.select("Task", list(CONVERGE_TASKS), "race_task", "mlp", where=d1,
                         help="; ".join(f"{name}: {what}" for name, what in converge_task_descriptions().items()))
        data = _committed(task)
        if data is None:
            st.info(f"No committed result for {task}: run `paralab converge --task {task} --codecs all`.")
            return
        specs_all = [s for s in dict.fromkeys(data["runs"]["spec"]) if s != "fp32"]
        default = [s for s in RACE_COMMITTED_DEFAULT if s in specs_all] or specs_all[:8]
        shown = ui.multiselect("Codecs in the race (fp32 always)", specs_all, "race_specs", default, where=d2,
                               help="every spec the result measured; error feedback pairs and PowerSGD's ranks "
                                    "carry the lessons")
        seeds = sorted(int(s) for s in data["runs"]["seed"].unique())
        seed = ui.select("Seed shown", seeds, "race_seed", seeds[0], where=d3,
                         help="the curves are one seed's (its own target); penalties and CIs are over all seeds")
        cfg = data["config"]
        st.caption(f"{data['path']}: {data['task'].get('description', task)} on {data['data']}; {cfg['seeds']} "
                   f"seeds, {cfg['workers']} simulated workers, {cfg['optimizer']} lr {cfg['lr']}, fp32 for "
                   f"{cfg['steps']} steps, codecs up to {cfg['budget']}x that."
                   + (f" {data['wall_s']:.0f} s to measure." if data.get("wall_s") else ""))
        runs = data["runs"][data["runs"]["spec"].isin(["fp32", *shown])]
        _show(runs, data["curves"], task=task, seed=int(seed), optimizer=cfg["optimizer"], seeds_asked=cfg["seeds"],
              specs=["fp32", *shown], partial=False, **price)
        return

    specs = ui.multiselect("Codecs in the race (fp32 always)", race_live_specs(), "race_live_specs", RACE_LIVE_DEFAULT,
                           help="trained now: the MLP on 1,000 digits, 2 simulated workers, 60 fp32 steps")
    s1, s2, _ = st.columns([1, 1, 2])
    n_seeds = ui.number("Seeds", "race_seeds", 2, where=s1, min_value=1, max_value=5, step=1,
                        help="seeds per codec (1..5; confidence intervals need 2)")
    first = ui.number("First seed", "race_first_seed", 0, where=s2, min_value=0, max_value=10_000, step=1,
                      help="the seeds run are first, first + 1, ...")
    params = dict(specs=list(specs), seeds=int(n_seeds), first=int(first))
    try:
        job = jobs.controls("Race", KEY, params, lambda j: _live(params["specs"], params["seeds"], params["first"], j),
                            help="train fp32 and every chosen codec to the target (the --smoke preset); Stop keeps "
                                 "the finished runs")
        _live_body(job, params, price)
    finally:
        jobs.release(KEY)


def _live_body(job, params: dict, price: dict) -> None:
    if job is None:
        st.info("Pick the codecs and seeds and press Race: fp32 runs first and sets the target, then each codec "
                "trains until it reaches it.")
        return
    if job.state == "failed":
        st.error(job.error)
        return
    if job.running:
        def draw(j) -> None:
            runs, pts = _split(j.curve())
            if len(pts):
                ui.figure(plots.race_figure(pts[pts.seed == pts.seed.iloc[0]], pd.DataFrame(
                    columns=["spec", "arrival_step", "arrival_modelled_s", "arrival_val_loss"]),
                    float("nan") if not len(runs) else float(runs.target.iloc[0])), None, "race_live",
                    key=f"race_live_{len(pts)}")
        jobs.watch(KEY, draw)
        return
    runs, pts = _split(job.curve())
    if job.state == "stopped":
        st.warning(f"Stopped: the race below keeps the {len(runs)} finished run(s); unfinished codecs are marked "
                   "not measured.")
    if not len(runs) or not (runs["spec"] == "fp32").any():
        st.info("No fp32 run finished: there is no target yet. Press Race again.")
        return
    if job.token != jobs.token(params):
        st.caption("This race is from earlier settings; press Race to run the current ones.")
    seeds = sorted(int(s) for s in runs[runs.spec == "fp32"]["seed"].unique())
    seed = seeds[0] if params["first"] not in seeds else params["first"]
    _show(runs, pts, task="mlp", seed=seed, optimizer="sgd", seeds_asked=job.params["seeds"],
          specs=["fp32", *job.params["specs"]], partial=job.state == "stopped", **price)


def _show(runs: pd.DataFrame, curves: pd.DataFrame, *, partial: bool, log_y: bool = True, **kw) -> None:
    """The two views (steps, modelled time) in one figure with one legend below, each view's lessons under it,
    and the arrivals table, best first by what the intervals support."""
    with ui.guard():
        res = _race(runs, curves, **kw)
    head = next((t for t in res.lessons["time"] if "reaches the target first" in t), None)
    if head:
        ui.takeaway(head, key="race_takeaway")
    ui.figure(plots.race_pair_figure(res.curves, res.arrivals, res.target, log_y), res.curves, "race",
              key="race_views")
    v1, v2 = st.columns(2)
    with v1:
        st.markdown(f"**Against steps** (seed {res.seed}; target {res.target:.4g})")
        for text in res.lessons["steps"] or ["Add a codec and its error-feedback twin, or an 8-bit type, to see "
                                             "what it costs in steps."]:
            st.markdown(f"- {text}")
    with v2:
        st.markdown(f"**Against modelled time** ({res.cluster})")
        for text in [t for t in res.lessons["time"] if t != head] or (
                [] if head else ["No codec with a modelled step time reached the target."]):
            st.markdown(f"- {text}")
    ui.table(arrivals_table(res.arrivals), "race_arrivals")
    st.caption("Best first by the upper end of each codec's 95% interval of modelled time to the target (over "
               "seeds): a codec ranks above another only as far as the seeds' spread supports it.")
    if partial or res.partial:
        st.caption("Partial: some codecs have fewer finished seeds than asked (or none: not measured).")
    for n in res.notes:
        st.caption(f"Not priced: {n}")


def _with_ci(v: float, lo, hi, fmt) -> str:
    """'v (lo–hi)'; 'v' without a CI."""
    return fmt(v) + ("" if lo is None or hi is None or pd.isna(lo) or pd.isna(hi) else f" ({fmt(lo)}–{fmt(hi)})")


def arrivals_table(arr: pd.DataFrame) -> pd.DataFrame:
    """The race's arrivals for people (as ranked by `lab.experiments.race`): each mean with its 95% CI over
    seeds, the verdict against fp32, human headers with units."""
    rows = []
    for r in arr.to_dict(orient="records"):
        never, priced = bool(r["never_reached"]), bool(r["priced"]) and r["seeds"] > 0
        t = r["modelled_time_to_target_s"]
        rows.append({
            "Codec": r["spec"], "Reached (seeds)": f"{r['reached']} of {r['seeds']}",
            "Steps penalty (x, 95% CI)": "never" if never else "not measured" if pd.isna(r["penalty"]) else
            _with_ci(r["penalty"], r["penalty_ci_low"], r["penalty_ci_high"], "{:.2f}".format),
            "Bits per value": f"{r['bits_per_value']:.3g}" if pd.notna(r["bits_per_value"]) else "",
            "Step (ms, modelled)": f"{r['step_ms']:.3g}" if pd.notna(r["step_ms"]) else "not priced",
            "Modelled time to target (95% CI)": "never" if never else "not priced" if not priced or pd.isna(t) else
            _with_ci(t, r["time_to_target_ci_low"], r["time_to_target_ci_high"], duration_text),
            "Speedup vs fp32 in time to target (x, 95% CI)": "never" if never else "" if not priced or pd.isna(t) else
            _with_ci(r["time_to_accuracy_speedup"], r["speedup_ci_low"], r["speedup_ci_high"], "{:.2f}".format),
            "Verdict": r["verdict"]})
    return pd.DataFrame(rows)
