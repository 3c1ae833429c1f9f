"""The Training page's consistency-models view (paper 001's "Parameter consistency" slide; EASGD, Zhang et al.
2015; gossip, Jin et al. 2016): each model's knobs, the predict-first question, the curves against modelled time
and against updates, and the takeaway from them: statistical efficiency (updates to a target test error) against
hardware efficiency (modelled time per update)."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import CONSISTENCY_GRAPHS

QUESTION = ("Waiting for every worker wastes the fast ones' time; not waiting feeds the model stale gradients. "
            "Which consistency model reaches a test-error target first in modelled time?")


def knobs(kinds: list[str], workers: int) -> dict:
    """The knobs of the models picked (URL-keyed, in an expander open by default), as TrainConfig settings."""
    with ui.folded("Each model's knobs: stragglers, SSP's bound, async delay, EASGD, gossip", "knobs",
                   expanded=True):
        return _knobs(kinds, workers)


def _knobs(kinds: list[str], workers: int) -> dict:
    st.caption("The slowest worker sets the pace where workers wait; σ spreads every worker step's compute time "
               "(log-normal).")
    a, b, c = st.columns(3)
    out: dict = {}
    out["straggler"] = float(ui.number("Straggler σ", "straggler", 0.2, where=a, min_value=0.0, max_value=3.0,
                                       step=0.1, format="%.2g",
                                       help="sigma of the log-normal factor on every worker step's compute time "
                                            "(0..3; 0 = every worker equally fast); all models"))
    if "ssp" in kinds:
        out["staleness"] = int(ui.number("SSP staleness bound s", "staleness", 2, where=b, min_value=0,
                                         max_value=64,
                                         help="ssp: a worker may run at most s clocks ahead of the slowest "
                                              "(0..64; 0 = bulk-synchronous)"))
    if "async" in kinds:
        out["delay_s"] = float(ui.number("Async delay (ms)", "delay_ms", 0.0, where=c, min_value=0.0,
                                         max_value=10_000.0, step=1.0, format="%.4g",
                                         help="async: mean of an exponential network delay on every push "
                                              "(0..10000 ms)")) / 1e3
    d, e, f, g = st.columns(4)
    if "easgd" in kinds:
        beta = float(ui.number("EASGD β", "beta", 0.9, where=d, min_value=0.01, max_value=1.0, step=0.05,
                               format="%.3g", help="easgd: how far the centre moves towards the workers per "
                                                   "exchange (0.01..1)"))
        alpha = float(ui.number("EASGD α", "alpha", 0.0, where=e, min_value=0.0, max_value=1.0, step=0.05,
                                format="%.3g", help=f"easgd: elastic pull of each worker towards the centre "
                                                    f"(0..1; 0 = β/K = {beta / max(workers, 1):.3g})"))
        out.update(beta=beta, alpha=alpha or None)
        out["period"] = int(ui.number("EASGD period", "period", 1, where=f, min_value=1, max_value=100,
                                      help="easgd: steps between elastic exchanges (1..100)"))
    if "gossip" in kinds:
        out["graph"] = ui.select("Gossip graph", list(CONSISTENCY_GRAPHS), "graph", "ring", where=g,
                                 help="gossip: whom each worker averages with: its two ring neighbours, or a "
                                      "random connected graph (seeded)")
    return out


def efficiency(curves: pd.DataFrame, batch: int) -> tuple[float, pd.DataFrame]:
    """The target (the highest of the runs' best test errors, so every run reaches it) and, per run, the batches
    of gradient (samples / batch: a parameter-server update carries one worker's 1/K of a batch) and modelled
    time at its first evaluation at or below it, and its modelled time per batch."""
    best = curves.groupby("variant", sort=False).test_error.min()
    target = float(best.max())
    rows = []
    for name, c in curves.groupby("variant", sort=False):
        hit = c[c.test_error <= target + 1e-9].iloc[0]
        batches = float(hit.samples) / batch
        rows.append(dict(variant=name, updates=batches, time_s=float(hit.time_s),
                         per_update_s=float(hit.time_s) / batches if batches else math.nan))
    return target, pd.DataFrame(rows)


def question(runs: list[str], job, batch: int) -> None:
    """Predict first: which run reaches the target first (revealed once a finished run is there)."""
    def reveal():
        if job is None or job.state != "done":
            return None
        target, eff = efficiency(job.result[0], batch)
        fast = eff.loc[eff.time_s.idxmin()]
        return fast.variant, f"Measured on the curves below: {_sentence(target, eff)}"

    ui.predict("With these settings, which run reaches the test-error target (the worst run's best) first in "
               "modelled time?", runs, reveal, key=KEY)


def _sentence(target: float, eff: pd.DataFrame) -> str:
    few = eff.loc[eff.updates.idxmin()]
    fast = eff.loc[eff.time_s.idxmin()]
    cheap = eff.loc[eff.per_update_s.idxmin()]
    parts = "; ".join(f"{r.variant} {r.updates:.3g} batches × {_ms(r.per_update_s)} = {_ms(r.time_s)}"
                      for r in eff.itertuples())
    head = (f"to reach {target:.1f} % test error (the worst run's best), counting a batch's worth of gradient as "
            f"one update: {parts}. {few.variant} needs the fewest (statistical efficiency) and {cheap.variant} the "
            "least modelled time per batch (hardware efficiency); ")
    if fast.variant == few.variant == cheap.variant:
        return head + f"{fast.variant} wins on both and gets there first."
    if fast.variant == few.variant:
        return head + f"{fast.variant} gets there first: here needing fewer batches wins."
    return (head + f"{fast.variant} gets there first, as its cheaper batches outweigh the "
            f"{fast.updates - few.updates:.3g} more it needs than {few.variant}."
            if fast.updates > few.updates else head + f"{fast.variant} gets there first.")


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


HIDDEN = "the curves against modelled time and against updates show once you answer the question above (or skip it)"
KEY = "guess_consistency"


def figures(curves: pd.DataFrame, y: str) -> None:
    """The curves against modelled time and against updates, side by side, once the question is answered."""
    if not ui.revealed(KEY):
        st.caption(HIDDEN[0].upper() + HIDDEN[1:] + ".")
        return
    left, right = st.columns(2)
    with left:
        ui.figure(plots.training_curve_figure(curves, "time_s", y), curves, "consistency_time")
    with right:
        ui.figure(plots.training_curve_figure(curves, "step", y), None, "consistency_updates")


def takeaway(curves: pd.DataFrame, data: str, batch: int) -> str:
    """The takeaway from the curves on screen."""
    target, eff = efficiency(curves, batch)
    if not len(eff) or eff.per_update_s.isna().any():
        return ""
    if not ui.revealed(KEY):
        return (f"Every run got to {target:.1f} % test error (the worst run's best); which one got there first in "
                "modelled time is the question above: answer it (or skip it) to see the batches each needed and "
                "the modelled time each batch cost.")
    return f"On {data}, " + _sentence(target, eff)
