"""Stochastic rounding page (Gupta et al. 2015 §3; Ben-Nun & Hoefler, "Communication optimizations": "the main
trick is stochastic rounding"): on any grid the lab has (fp16, bf16, fp8, the value tables), a weight under many
updates smaller than half a gap, the bias E[Q(x)] − x across x, and a short training run with the weights stored
on the grid — rounded to nearest against stochastically."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import bias_sweep, low_precision_training, rounding_formats, tiny_updates

ANSWERS = ["where it started: every update is lost", "part of the way to the exact sum", "at the exact sum",
           "beyond the exact sum"]
HIDDEN = "the weight's path, each rounding's final value and the takeaway show once you answer the question above, " \
         "or skip it"


def formats() -> list[str]:
    """The grids offered: the hardware floats and the value tables that need no options."""
    return [f for f in rounding_formats() if f != "layout"]


@st.cache_data(show_spinner="adding the updates…", max_entries=16)
def _updates(fmt: str, start: float, update: float, steps: int, seeds: int, seed: int) -> pd.DataFrame:
    return tiny_updates(fmt, start=start, update=update, steps=steps, seeds=seeds, seed=seed)


@st.cache_data(show_spinner="drawing…", max_entries=16)
def _bias(fmt: str, start: float, draws: int, seed: int) -> pd.DataFrame:
    return bias_sweep(fmt, start=start, draws=draws, seed=seed)


def _where(final: float, w0: float, exact: float, gap: float) -> str:
    """Which answer a final weight is: at the start, within a gap of the exact sum, short of it or past it."""
    if final == w0:
        return ANSWERS[0]
    if abs(final - exact) <= max(gap, abs(exact - w0) * 0.02):
        return ANSWERS[2]
    return ANSWERS[3] if (final - exact) * (exact - w0) > 0 else ANSWERS[1]


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Stochastic rounding")
    ui.lesson("Why does a weight stored in few bits stop learning when each update is rounded to nearest, and how "
              "does rounding at random keep it moving?",
              "Predict where a weight ends after many tiny updates, then compare rounding to nearest with stochastic "
              "rounding: the weight's path, the bias E[Q(x)] − x across x, and a short training run with its weights "
              "stored in the format. Stochastic rounding rounds x up with probability (x − lo) / (hi − lo), so "
              "E[Q(x)] = x (Gupta et al. 2015).")
    c1, c2, c3, c4 = st.columns(4)
    fmts = formats()
    fmt = ui.select("Format", fmts, "fmt", "bf16", where=c1,
                    help="the grid the weight is stored on: hardware floats (fp16, bf16, fp8 E4M3 / E5M2 as formats, "
                         "saturating at their largest value) or a value table (in its own units, values / absmax for "
                         "the scaled ones): " + ", ".join(fmts))
    start = ui.number("Start weight", "start", 1.0, where=c2, min_value=-1e4, max_value=1e4, format="%.6g",
                      help="the weight's value before the updates, -10000..10000 (rounded onto the grid first)")
    update = ui.number("Update per step", "update", 1e-4, where=c3, min_value=-10.0, max_value=10.0, format="%.3g",
                       help="added at every step, -10..10 and not 0; smaller than half the grid gap, rounding to "
                            "nearest throws it away")
    steps = ui.number("Updates", "steps", 10_000, where=c4, min_value=1, max_value=100_000, step=1000,
                      help="how many updates, 1..100000")
    with ui.more_settings():
        m1, m2, m3 = st.columns(3)
        seeds = ui.number("Stochastic runs", "seeds", 8, where=m1, min_value=1, max_value=64, step=1,
                          help="independent stochastic runs of the updates (their range is shaded), 1..64")
        draws = ui.number("Draws per x", "draws", 4000, where=m2, min_value=10, max_value=100_000, step=1000,
                          help="stochastic roundings averaged per x in the bias chart, 10..100000")
        seed = ui.seed(where=m3)
    if update == 0:
        st.error("Update per step = 0 makes nothing move; allowed: a number in -10..10 other than 0. "
                 "Computing with 0.0001.")
        update = 1e-4
    try:
        res = _updates(fmt, float(start), float(update), int(steps), int(seeds), int(seed))
    except ui.USER_ERRORS as e:
        st.error(f"Start weight: {e}")
        return
    a = res.attrs
    exact, near, sto = a["final_exact"], a["final_nearest"], a["final_stochastic"]
    mean_sto = sum(sto) / len(sto)
    sd = (sum((v - mean_sto) ** 2 for v in sto) / max(1, len(sto) - 1)) ** 0.5

    def reveal():
        right = _where(near, a["w0"], exact, a["gap"])
        return right, (f"Rounding to nearest ends at **{near:.6g}** (exact sum {exact:.6g}). The gap between "
                       f"{fmt} values at {a['w0']:.6g} is {a['gap']:.3g}, so an update of {a['update']:.3g} is "
                       f"{abs(a['update']) / a['gap']:.3g} of a gap: "
                       + ("below half a gap, w + update rounds back to w every time."
                          if near == a["w0"] and abs(a["update"]) < a["gap"] / 2 else
                          "the weight is held at the grid's end." if near == a["w0"] else
                          "rounding moves the weight by whole gaps, not by the update."))
    ui.predict(f"A weight in {fmt} at {a['w0']:.6g} gets {int(steps):,} updates of {a['update']:+.3g} "
               f"(the exact sum ends at {exact:.6g}). Where does it end with rounding to nearest?", ANSWERS, reveal,
               key="guess")
    if not ui.revealed("guess"):
        k = st.columns(3)
        ui.withheld(HIDDEN, "Where the weight ends is the question above: answer it (or skip it) to see both "
                            "roundings.", zip(k, ["Round to nearest ends at", "Stochastic ends at (mean)",
                                                  "Exact sum"]))
    else:
        k = st.columns(3)
        k[0].metric("Round to nearest ends at", f"{near:.6g}",
                    delta=f"{near - exact:+.3g} vs exact", delta_color="off")
        k[1].metric("Stochastic ends at (mean)", f"{mean_sto:.6g}", delta=f"± {sd:.2g} (sd of {len(sto)} runs)",
                    delta_color="off")
        k[2].metric("Exact sum", f"{exact:.6g}")
        ui.figure(plots.tiny_updates_figure(res), res, "tiny_updates")
        lost = abs(exact - near) / abs(exact - a["w0"]) if exact != a["w0"] else 0.0
        inside = abs(mean_sto - exact) <= 1.96 * sd / math.sqrt(len(sto)) + 1e-12
        if not a["smallest"] <= exact <= a["largest"]:
            end = a["largest"] if exact > a["largest"] else a["smallest"]
            ui.takeaway(f"The exact sum {exact:.6g} is past {fmt}'s {'largest' if end == a['largest'] else 'smallest'}"
                        f" value {end:.6g}: both roundings saturate there (nearest ends at {near:.6g}, stochastic at "
                        f"{mean_sto:.6g}). Pick a start and an update that stay inside the grid to compare them.",
                        key="takeaway-updates")
            return _rest(fmt, float(start), int(draws), int(seed))
        ui.takeaway(f"In {fmt}, {int(steps):,} updates of {a['update']:+.3g} from {a['w0']:.6g} should reach "
                    f"{exact:.6g}: rounding to nearest ends at {near:.6g} ({100 * lost:.0f} % of the way lost), "
                    f"stochastic rounding at {mean_sto:.6g} ± {sd:.2g} over {len(sto)} runs, "
                    + ("its mean within the 95 % interval of the exact sum: unbiased, each run off by noise, not "
                       "by a drift." if inside else
                       f"its mean {abs(mean_sto - exact):.3g} from the exact sum (more runs narrow the interval)."),
                    key="takeaway-updates")
    _rest(fmt, float(start), int(draws), int(seed))


def _rest(fmt: str, start: float, draws: int, seed: int) -> None:
    _bias_section(fmt, start, draws, seed)
    _training_section(fmt, seed)


def _bias_section(fmt: str, start: float, draws: int, seed: int) -> None:
    st.subheader("The bias E[Q(x)] − x across x")
    st.caption("x swept across three grid gaps from the start weight; each x rounded once to nearest and "
               f"{draws:,} times stochastically (the mean, its 95 % interval shaded). In grid gaps: 0.5 is half a gap.")
    try:
        df = _bias(fmt, start, draws, seed)
    except ui.USER_ERRORS as e:
        st.error(f"Start weight: {e}")
        return
    ui.figure(plots.bias_figure(df), df, "rounding_bias")
    near, sto = df[df.rounding == "nearest"], df[df.rounding == "stochastic"]
    inside = int(((sto.lo95 <= 0) & (sto.hi95 >= 0)).sum())
    summary = pd.DataFrame([
        dict(rounding="to nearest", mean_abs=float(near.bias_in_gaps.abs().mean()),
             largest=float(near.bias_in_gaps.abs().max()), zero_in_ci=f"{int((near.bias == 0).sum())} exact"),
        dict(rounding="stochastic", mean_abs=float(sto.bias_in_gaps.abs().mean()),
             largest=float(sto.bias_in_gaps.abs().max()), zero_in_ci=f"{inside} of {len(sto)}")])
    ui.people_table(summary, "rounding_bias_table", {
        "rounding": ui.Col("Rounding"),
        "mean_abs": ui.Col("Mean |bias|", "gaps", "mean over x of |E[Q(x)] − x| / gap", 1.0, "%.3f"),
        "largest": ui.Col("Largest |bias|", "gaps", "largest |E[Q(x)] − x| / gap over x", 1.0, "%.3f"),
        "zero_in_ci": ui.Col("Points with no bias", help="nearest: x on the grid; stochastic: x whose 95 % interval of "
                                                    "the mean holds 0")})
    ui.takeaway(f"Rounding to nearest is off by up to {float(near.bias_in_gaps.abs().max()):.2f} of a gap (a "
                f"mean of {float(near.bias_in_gaps.abs().mean()):.2f}), always towards the nearer value; stochastic "
                f"rounding's mean is within its 95 % interval of x at {inside} of {len(sto)} points (about 95 % are "
                f"expected for an unbiased rounding), its largest mean error {float(sto.bias_in_gaps.abs().max()):.3f} "
                f"of a gap after {draws:,} draws.", key="takeaway-bias")


TRAIN_HELP = ("trains the digits MLP (64 → 64 → 10, plain SGD, batches of 32) three ways from the same start and "
              "batches: float32 weights, and weights stored in the format with each update rounded to nearest or "
              "stochastically (a few seconds)")


def _training_section(fmt: str, seed: int) -> None:
    st.subheader("Training with the weights stored in the format")
    t1, t2, _ = st.columns([1, 1, 2])
    lr = ui.number("Learning rate", "lr", 0.01, where=t1, min_value=1e-5, max_value=10.0, format="%.4g",
                   help="plain SGD's step, 0.00001..10: smaller updates fall below half a gap more often")
    train_steps = ui.number("SGD steps", "train_steps", 300, where=t2, min_value=10, max_value=5000, step=50,
                            help="steps of the three runs, 10..5000")
    params = dict(fmt=fmt, lr=float(lr), steps=int(train_steps), seed=seed)
    if not ui.run_button("Train", "train_run", params, help=TRAIN_HELP):
        st.caption("Press **Train**: " + TRAIN_HELP + ".")
        return
    bar = ui.progress()
    df = ui.cached_run("low_precision", params, lambda: low_precision_training(
        fmt, steps=int(train_steps), lr=float(lr), seed=seed, progress=bar))
    ui.figure(plots.low_precision_figure(df), df, "low_precision_training")
    last = df[df.step == df.step.max()].set_index("weights")
    ui.people_table(last.reset_index(), "low_precision_table", {
        "weights": ui.Col("Weights"), "test_accuracy": ui.Col("Test accuracy", "%", scale=100.0, format="%.1f"),
        "train_loss": ui.Col("Training loss (last steps)", format="%.3f"),
        "frozen": ui.Col("Weights the last step left unchanged", "%", "weights with a non-zero gradient whose rounded "
                         "update left them where they were (stochastic: kept on average, not lost)",
                         100.0, "%.0f")})
    f32, n, s = (float(last.test_accuracy[w]) for w in ("float32", "nearest", "stochastic"))
    gap = s - n
    noise = 2.5 / df.attrs["test"]  # fewer than 2.5 test images apart: one seed's luck
    verdict = ("stochastic rounding ahead" if gap > noise else "round to nearest ahead" if gap < -noise
               else "within a few test images of each other")
    ui.takeaway(f"After {int(train_steps)} steps at learning rate {lr:g}: float32 weights {100 * f32:.1f} %, {fmt} "
                f"weights rounded to nearest {100 * n:.1f} % (its last step left "
                f"{100 * float(last.frozen['nearest']):.0f} % of the weights where they were: those updates are lost), "
                f"stochastically {100 * s:.1f} %: {verdict} ({100 * gap:+.1f} points, "
                f"{abs(gap) * df.attrs['test']:.0f} of {df.attrs['test']} test images).",
                key="takeaway-training")
