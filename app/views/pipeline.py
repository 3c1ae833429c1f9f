"""Pipeline page ("Where does a pipeline sit idle?"): the schedules torch ships (GPipe, 1F1B, interleaved 1F1B,
looped BFS, the zero-bubble ones, DualPipeV) as planned timelines per rank with their published bubble formulas;
predict which idles least at P = 4, M = 4; then train on real Gloo ranks with a codec on the stages' sends and
see the measured timeline beside the formula, and the activations each stage holds."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
import chart
from views import _pipeline_plot as pplot
from lab.experiments import (DATASETS, bubble_formula, bubble_of, check_link_rate, codec_catalog, dataset_info,
                             parallel_settings, parallel_training, pipeline_fit, planned_timeline, schedule_names)
from lab.plots.units import si_bytes_label

ASK_P, ASK_M = 4, 4  # the prediction's pipeline: 4 ranks, 4 micro-batches (each schedule's default stages per rank)
AUTO = "auto"
STAGES = [AUTO, "1", "2", "3", "4"]
FP32 = "fp32"
UNIT = "F times"  # the planned timeline's clock: one forward of one micro-batch through one stage is 1
LINKS_HERE = ["loopback", "10gbit", "1gbit", "100mbit"]


def _stages(v: str) -> int | None:
    return None if v == AUTO else int(v)


@st.cache_data(max_entries=64, show_spinner=False)
def _plan(schedule: str, P: int, M: int, V: int | None) -> tuple[pd.DataFrame | None, str]:
    """The schedule's planned timeline (the lab's layout of torch's action order, unit times F = 1, B = 2), or why
    it cannot run (kept too: finding the micro-batch counts it allows takes seconds)."""
    try:
        return planned_timeline(schedule, P, M, V), ""
    except ui.USER_ERRORS as e:
        return None, str(e)


def _planned(schedule: str, P: int, M: int, V: int | None) -> pd.DataFrame:
    """The planned timeline; ValueError saying why the schedule cannot run."""
    plan, why = _plan(schedule, P, M, V)
    if plan is None:
        raise ValueError(why)
    return plan


@st.cache_data(max_entries=64, show_spinner=False)
def _formula(schedule: str, P: int, M: int, V: int | None) -> float:
    return float(bubble_formula(schedule, P, M, V))


@st.cache_data(max_entries=8, show_spinner=False)
def _data(dataset: str, seed: int) -> dict:
    return dataset_info(dataset, seed=seed)


@st.cache_data(max_entries=8, show_spinner=False)
def _every_schedule(P: int, M: int) -> tuple[pd.DataFrame, dict]:
    """Each schedule at P ranks and M micro-batches (its default stages per rank): bubble by the formula and
    by the planned timeline, or why it cannot run there; and the planned timelines."""
    rows, planned = [], {}
    for s in schedule_names():
        try:
            d = _planned(s, P, M, None)
            planned[s] = d
            rows.append(dict(schedule=s, formula=_formula(s, P, M, None), planned=bubble_of(d), why=""))
        except ValueError:
            fit = pipeline_fit(s, P, M, None)
            v = int(fit["stages_per_rank"])
            why = (f"on {P} ranks × {v} stage{'s' if v > 1 else ''} per rank it runs {_spans(fit['allowed'])} "
                   f"micro-batches, not {M}" if fit["setting"] == "microbatches" else
                   f"it cannot run {P} ranks × {v} stages per rank")
            rows.append(dict(schedule=s, formula=float("nan"), planned=float("nan"), why=why))
    return pd.DataFrame(rows), planned


def warm() -> None:
    """What the prediction's answer needs (every schedule at P = 4, M = 4), computed when the server starts
    (app/warmup.py)."""
    _every_schedule(ASK_P, ASK_M)


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f} %"


def _predict() -> None:
    """Predict, then reveal: which schedule idles least at P = 4, M = 4; the answer draws every schedule."""
    names = schedule_names()

    def reveal() -> tuple[str, str]:
        table, planned = _every_schedule(ASK_P, ASK_M)
        ok = table.dropna(subset=["planned"]).sort_values("planned", kind="stable")
        low = float(ok.planned.min())
        best = list(ok[ok.planned <= low + 1e-9].schedule)
        answer = st.session_state.get(ui.widget_key("guess"))
        right = answer if answer in best else best[0]  # a tie: either is right
        why = (f"Laid out from torch's own order with F = 1, B = 2 (I = W = 1) time units, the ranks idle: "
               + ", ".join(f"{r.schedule} {_pct(r.planned)}" for r in ok.itertuples()) + ".")
        if len(best) > 1:
            why += f" {' and '.join(best)} tie."
        off = [r for r in ok.itertuples() if abs(r.formula - r.planned) > 0.005]
        if off:
            why += " " + "; ".join(f"{r.schedule}'s published formula says {_pct(r.formula)}" for r in off) + "."
        cannot = list(table[table.planned.isna()].schedule)
        if cannot:
            why += f" {', '.join(cannot)} cannot run at M = {ASK_M} (below the charts: why)."
        if set(planned[best[0]].kind) & {"I", "W"}:
            why += (" The winner splits each backward into I (the input's gradient, which the previous stage waits "
                    "for) and W (the weights', which nobody waits for) and fills its waits with W blocks.")
        return right, why

    ui.predict(f"Which schedule leaves its ranks idle the least at P = {ASK_P} ranks and M = {ASK_M} micro-batches "
               "(each with its default stages per rank)?", names, reveal, key="guess")
    if not ui.revealed("guess"):
        return
    table, planned = _every_schedule(ASK_P, ASK_M)
    ok = table.dropna(subset=["planned"])
    st.markdown(f"**Every schedule at P = {ASK_P}, M = {ASK_M}**: the bubble by its published formula and by its "
                "planned timeline (the same unit times: F = 1, B = 2, I = W = 1).")
    chart.plotly(pplot.bubble_figure(table), key="pipe_bubbles")
    for r in table[table.planned.isna()].itertuples():
        st.caption(f"{r.schedule}: {r.why}")
    st.markdown("Their planned timelines on one time axis (lighter: a rank's second stage):")
    chart.plotly(pplot.schedules_figure({s: planned[s] for s in ok.schedule},
                                        dict(zip(ok.schedule, ok.planned))), key="pipe_every")


def _codecs() -> list[str]:
    """The codecs that can carry activations and their gradients (not the gradient compressors)."""
    return [FP32, *(c.name for c in codec_catalog() if not (c.gradient_only or c.phased))]


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Pipeline")
    ui.lesson("Where does a pipeline of stages sit idle, and which schedule fills the bubble?",
              "Each rank holds one or more stages of the model; a batch is cut into M micro-batches that flow "
              "forward through the stages and back. The timeline shows when each rank computes a forward (F), a "
              "backward (B, or its two halves: I for the input, W for the weights) and when it waits: the blank is "
              "the bubble. Pick a schedule, compare its planned timeline with the formula, then press Run to train "
              "for real on Gloo ranks and see the measured timeline.")
    _predict()

    st.subheader("Your pipeline")
    names = schedule_names()
    c1, c2, c3 = st.columns(3)
    schedule = ui.select("Schedule", names, "schedule", "1f1b" if "1f1b" in names else names[0], where=c1,
                         help="the order in which each rank runs its forwards and backwards (torch's schedules)")
    P = int(ui.number("Ranks P", "P", 4, where=c2, min_value=2, max_value=4, step=1,
                      help="pipeline ranks, one process each (2..4)"))
    M = int(ui.number("Micro-batches M", "M", 4, where=c3, min_value=1, max_value=32, step=1,
                      help="pieces each batch is cut into (1..32); more fill the pipeline better"))
    m_note = c3.empty()  # a micro-batch count the schedule cannot run is said here, under its control
    c4, c5, _ = st.columns(3)
    V = _stages(ui.select("Stages per rank", STAGES, "V", AUTO, where=c4,
                          help="model stages each rank holds: auto is 1 for the single-stage schedules (GPipe, "
                               "1F1B), 2 for the multi-stage ones (interleaved, looped BFS, zero bubble, DualPipeV)"))
    fit = _fit(schedule, P, M, V)
    unfit = _unfit_words(schedule, P, M, V, fit)
    if unfit:
        ui.complain(unfit, where=m_note if fit["setting"] == "microbatches" else c4)
    used = int(fit["stages_per_rank"])
    codec = ui.select("Codec on the sends", _codecs(), "codec", FP32, where=c5,
                      help="what the stages' activations and their gradients cross the wire in (fp32: none)")
    with ui.more_settings():
        m1, m2, m3, m4 = st.columns(4)
        hidden = ui.select_slider("Hidden units", [16, 32, 64, 128, 256, 512, 1024], "hidden", 256, where=m1,
                                  help="width of every hidden layer of the MLP the stages split")
        layers = ui.select("Hidden layers", [AUTO, *(str(k) for k in range(1, 17))], "layers", AUTO, where=m2,
                           help="the MLP's hidden layers; auto: one layer a stage (P × stages per rank − 1)")
        steps = ui.number("Steps", "steps", 6, where=m3, min_value=2, max_value=200, step=1,
                          help="training steps of the run (2..200); steps 3 to 5 are timed block by block")
        batch = ui.number("Batch", "batch", 256, where=m4, min_value=1, max_value=1024, step=1,
                          help="samples per step, cut into M micro-batches (1..1024)")
        s1, s2, s3, _ = st.columns(4)
        dataset = ui.select("Data set", list(DATASETS), "dataset", "digits", where=s1,
                            help="digits ships with scikit-learn; MNIST when installed")
        link = ui.select("Link between ranks", LINKS_HERE, "link", LINKS_HERE[0], where=s2,
                         help="loopback: this machine's; a rate shapes a link between the ranks (network "
                              "namespaces: needs root)")
        seed = ui.seed(where=s3)
        runnable = _check_run_settings(P, M, used, layers, int(batch), m2, m4)
    if unfit:
        return
    try:
        planned = _planned(schedule, P, M, V)
        formula = _formula(schedule, P, M, V)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return
    stages = int(planned.groupby("rank").stage.nunique().max())
    idle = bubble_of(planned)
    span = float(planned.end.max())
    m = st.columns(3)
    m[0].metric("Bubble, formula", _pct(formula), help="the schedule's published bubble fraction at these P, M and "
                                                       "stages per rank, F = 1 and B = 2")
    m[1].metric("Bubble, planned", _pct(idle), help="idle share of the planned timeline below: its length less each "
                                                    "rank's compute, over its length")
    m[2].metric("Planned step", f"{span:g} F", help="the planned timeline's length in forward times F (one "
                                                    "micro-batch through one stage); B = 2 F, I = W = F")
    st.markdown(f"**{schedule}, planned** on {P} ranks, {M} micro-batches, {stages} stage{'s' if stages > 1 else ''} "
                "per rank (each block's number is its micro-batch"
                + ("; lighter blocks: a rank's second stage" if stages > 1 else "")
                + "; hover for its stage and time):")
    chart.plotly(pplot.timeline_figure(planned, UNIT), key="pipe_planned")
    slot = st.container()  # one takeaway: the planned timeline's here, or the run's under its measurements
    text = _planned_takeaway(schedule, P, M, V, stages, idle, formula)
    depth = P * stages - 1 if layers == AUTO else int(layers)
    try:
        ran = _run_section(schedule, P, M, V, codec, int(hidden), max(depth, 1), int(steps), int(batch), dataset,
                           link, int(seed)) if runnable else _not_runnable()
    finally:
        jobs.release("pipe_run")
    if ran:
        ui.takeaway(ran)
    else:
        with slot:
            ui.takeaway(text)


@st.cache_data(max_entries=64, show_spinner=False)
def _fit(schedule: str, P: int, M: int, V: int | None) -> dict:
    return pipeline_fit(schedule, P, M, V)


def _spans(values: list[int]) -> str:
    """Whole numbers in runs: [1, 2, 3, 4, 6, 8] -> '1..4, 6, 8'."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _unfit_words(schedule: str, P: int, M: int, V: int | None, fit: dict) -> str:
    """The message, in the control's own name, for a micro-batch count or stages per rank the schedule cannot run
    with the other settings ('' when it runs)."""
    used = int(fit["stages_per_rank"])
    each = f"{used} stage{'s' if used > 1 else ''} per rank"
    if fit["setting"] == "microbatches":
        return (f"Micro-batches M = {M}: {schedule} on {P} ranks × {each} cannot run it; allowed with these: "
                f"{_spans(fit['allowed'])}.")
    if fit["setting"] == "stages_per_rank":
        given = AUTO if V is None else str(V)
        ok = [AUTO, *(str(v) for v in fit["allowed"] if v != used and str(v) in STAGES)]
        rule = ("runs one stage per rank" if fit["allowed"] == [1] else "runs several stages per rank"
                if used < 2 and 1 not in fit["allowed"] else f"cannot run {P} ranks × {each} at any micro-batch count")
        return f"Stages per rank = {given}: {schedule} {rule}; allowed with it: {', '.join(ok)}."
    return ""


def _check_run_settings(P: int, M: int, stages: int, layers: str, batch: int, layers_at, batch_at) -> bool:
    """Whether the run's settings fit the pipeline: one hidden layer at least per stage but the last (whose layer is
    the output) and a batch of at least one sample per rank and per micro-batch; a message under the control that
    does not fit (under 'More settings' while it is closed). True when they fit."""
    ok = True
    need = P * stages - 1
    if layers != AUTO and int(layers) < need:
        ui.complain(f"Hidden layers = {layers}: {P} ranks × {stages} stage{'s' if stages > 1 else ''} per rank are "
                    f"{P * stages} stages, one layer each at least (the last is the output layer); allowed with these: "
                    f"{AUTO} or {need}..16.", where=layers_at)
        ok = False
    least = max(P, M)
    if batch < least:
        ui.complain(f"Batch = {batch}: cut into {M} micro-batches on {P} ranks it needs at least one sample for each; "
                    f"allowed with these: {least}..1024.", where=batch_at)
        ok = False
    return ok


def _not_runnable() -> None:
    st.subheader("Measured on real ranks")
    st.info("Run needs the settings marked in red above.")
    return None


def _planned_takeaway(schedule: str, P: int, M: int, V: int | None, stages: int, idle: float, formula: float) -> str:
    """The planned view's sentence: this schedule's bubble, and what twice the micro-batches would make it."""
    text = (f"Planned, {schedule} on {P} ranks with {M} micro-batches ({stages} stage{'s' if stages > 1 else ''} per "
            f"rank) leaves the ranks idle {_pct(idle)} of the step; its formula says {_pct(formula)}.")
    if 2 * M <= 32:
        try:
            more = bubble_of(_planned(schedule, P, 2 * M, V))
            text += f" With {2 * M} micro-batches the planned bubble would be {_pct(more)}."
        except ui.USER_ERRORS:
            pass
    return text


def _run_section(schedule: str, P: int, M: int, V: int | None, codec: str, hidden: int, layers: int, steps: int,
                 batch: int, dataset: str, link: str, seed: int) -> str | None:
    """Run on real ranks: the measured timeline beside the formula, memory per stage; the run's takeaway."""
    st.subheader("Measured on real ranks")
    try:
        train = int(_data(dataset, seed)["train"])
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return None
    cfg = dict(dataset=dataset, model="mlp", hidden=(hidden,) * layers, dropout=(0.0,) * (layers + 1), batch=batch,
               epochs=steps * batch / train, test_limit=512, evals_per_epoch=1, seed=seed,
               codec=None if codec == FP32 else codec)  # `steps` batches: the loop stops after steps x batch samples
    settings = dict(schedule=schedule, microbatches=M, stages_per_rank=V)
    rate = None if link == LINKS_HERE[0] else link
    try:
        parallel_settings("pipeline", cfg, P, settings)
        check_link_rate(rate)
    except ui.USER_ERRORS as e:
        st.error(str(e))
        return None
    params = ["pipeline", P, cfg, settings, rate]

    def run(job):
        return parallel_training("pipeline", cfg, P, settings, link_rate=rate, progress=job.progress,
                                 on_point=job.on_row)

    job = jobs.controls("Run", "pipe_run", params, run,
                        help=f"train an MLP of {layers} hidden layers for {steps} steps on {P} Gloo processes under "
                             f"{schedule}, timing every block of every rank (seconds on this machine)")
    if job is None:
        st.info(f"Press Run to train on {P} real ranks: each rank's forwards, backwards, sends and receives are timed "
                "and drawn here beside the formula, with the activations each stage holds.")
        return None
    if job.state == "failed":
        st.error(job.error)
        return None
    if job.running:
        jobs.watch("pipe_run", lambda j: st.caption(f"{len(j.curve())} evaluations so far"))
        return None
    if job.state != "done":
        st.warning("Stopped before the run finished: nothing measured to show (press Run again).")
        return None
    current = job.token == jobs.token(params)
    if not current:
        st.caption("These measurements are from an earlier Run; press Run to measure the current settings.")
    return _measured(job.result, current)


def _measured(res, current: bool) -> str | None:
    """The run's numbers, measured timeline and memory per stage; its takeaway (None for an earlier run's)."""
    s = res.summary
    tl = res.tables["timeline"]
    mem = res.tables.get("memory")
    measured, formula, planned = (float(s["bubble_measured"]), float(s["bubble_formula"]),
                                  float(s.get("bubble_planned", float("nan"))))
    times = ", ".join(f"{k} {1e3 * float(s[f't_{k.lower()}_s']):.2g} ms" for k in pplot.COMPUTE
                      if f"t_{k.lower()}_s" in s)
    r1, r2 = st.columns(2), st.columns(2)
    r1[0].metric("Bubble, measured", _pct(measured), delta=f"{100 * (measured - formula):+.1f} points",
                 delta_color="inverse", help=f"the ranks' idle share of the median step (step "
                                             f"{s.get('timeline_step')}): its length less each rank's compute, over "
                                             "its length; the change is against the formula")
    r1[1].metric("Formula at measured times", _pct(formula),
                 help=f"the published formula with the measured block times ({times})")
    r2[0].metric("Step time", f"{1e3 * float(s['step_s']):.3g} ms",
                 help="median seconds of a step after warm-up, the slowest rank")
    ratio = float(s.get("bytes_ratio", float("nan")))
    per = float(s["bytes"]) / max(int(s["steps"]), 1)
    r2[1].metric("Bytes per step", si_bytes_label(per),
                 delta=None if math.isnan(ratio) or abs(ratio - 1) < 5e-4 else f"{ratio - 1:+.0%} vs fp32",
                 delta_color="inverse", help="every rank's sends per step (activations, gradients, the loss), counted "
                                         "on the wire")
    steps = sorted(int(x) for x in tl.step.unique())
    default = int(s.get("timeline_step", steps[-1]))
    default = default if default in steps else steps[-1]
    if st.session_state.get(ui.widget_key("pipe_step"), default) not in steps:  # a run with other timed steps
        st.session_state[ui.widget_key("pipe_step")] = default
    shown = int(ui.select("Step shown", steps, "pipe_step", default,
                          help="which timed step the timeline draws (the bubble above is the median step's)"))
    each = {k: bubble_of(tl[tl.step == k], "start_s", "end_s") for k in steps}
    one = tl[tl.step == shown].rename(columns={"start_s": "start", "end_s": "end"})
    spread = (f" (the {len(steps)} timed steps: {_pct(min(each.values()))} to {_pct(max(each.values()))})"
              if len(steps) > 1 else "")
    st.markdown(f"**Measured step {shown}** ({times} per block, median): ranks idle {_pct(each[shown])} of it"
                f"{spread}; the formula at these times says {_pct(formula)}, torch's order laid out with them "
                f"{_pct(planned)}.")
    chart.plotly(pplot.timeline_figure(one, "ms", 1e3), key="pipe_measured")
    held = ""
    if mem is not None and len(mem):
        st.markdown("**Activations each stage holds for its backward** (the peak, and how many micro-batches' "
                    "worth at once):")
        chart.plotly(pplot.memory_figure(mem), key="pipe_memory")
        top = mem.loc[mem.peak_activation_bytes.idxmax()]
        low = mem.loc[mem.peak_activation_bytes.idxmin()]
        held = (f" Stage {int(top.stage)} on rank {int(top['rank'])} held the most activations: "
                f"{int(top.microbatches_held)} micro-batches' worth, {si_bytes_label(float(top.peak_activation_bytes))}"
                f"; stage {int(low.stage)} on rank {int(low['rank'])} {int(low.microbatches_held)}, "
                f"{si_bytes_label(float(low.peak_activation_bytes))}.")
    if not current:
        return None
    off = abs(measured - formula) / formula if formula > 0 else float("nan")
    if math.isnan(off):
        close = ""
    elif off <= 0.15:
        close = f" ({off:.0%} off it: within 15 %)"
    elif measured > formula:
        close = f" ({measured / formula:.2g}x it: the formula takes the sends between stages to cost no time)"
    else:
        close = f" ({off:.0%} below it)"
    wire = (f" Its sends weighed {ratio:.0%} of what fp32 would have sent." if not math.isnan(ratio)
            and abs(ratio - 1) >= 5e-4 else "")
    return (f"Measured on {int(s['procs'])} Gloo ranks, {s['schedule']} with {int(s['microbatches'])} micro-batches "
            f"idled {_pct(measured)} of its median step against the formula's {_pct(formula)} at the measured "
            f"block times{close}." + wire + held)
