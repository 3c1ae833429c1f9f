"""The Dropout page's batch-size sweep on the LSTM (Song et al. 2019 §IV-C, Fig. 6b: a bigger batch gives more
speedup but higher perplexity, because one pattern serves the whole batch). The runs take turns like the page's
training (progress with the time left; Stop keeps the curves and the finished epochs), small enough for a CPU."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import _common as ui
import _runs as jobs
import chart
from lab import plots
from lab.experiments.dropout_batch import FIG6B_BATCHES, lstm_batch_sweep

BATCHES = ["5", "10", "20", "40", "80"]
TREND_ANSWERS = ["it grows", "it stays about the same", "it shrinks"]
SWEEP_COLUMNS = {
    "batch": ("Batch", "sequences"), "pattern": ("Pattern",),
    "test_ppl": ("Test perplexity", "", "", 1.0, "%.1f"),
    "ppl_change": ("Perplexity change", "", "against conventional dropout at the same batch", 1.0, "%+.1f"),
    "epoch_s": ("Epoch", "s", "median training-step time of an epoch", 1.0, "%.3g"),
    "speedup": ("Speedup vs conventional", "x", "at the same batch", 1.0, "%.2f"),
    "speedup_lo": ("Speedup, low end", "x", "slowest epoch against conventional's fastest", 1.0, "%.2f"),
    "speedup_hi": ("Speedup, high end", "x", "fastest epoch against conventional's slowest", 1.0, "%.2f"),
}


def _trend(a: float, b: float) -> str:
    """How a speedup moved from a to b, in TREND_ANSWERS' words (5 % either way is 'about the same')."""
    return TREND_ANSWERS[0 if b > 1.05 * a else 2 if b < a / 1.05 else 1]


def sweep_figure(t: pd.DataFrame) -> go.Figure:
    """Speedup against conventional dropout (left axis) and the perplexity change (right axis) per batch size."""
    pat = t[t.kind != "bernoulli"].sort_values("batch")
    fig = go.Figure()
    for kind, part in pat.groupby("kind", sort=False):
        name = part.pattern.iloc[0]
        err = None
        if "speedup_lo" in part:
            err = dict(type="data", array=(part.speedup_hi - part.speedup).tolist(),
                       arrayminus=(part.speedup - part.speedup_lo).tolist())
        fig.add_trace(go.Scatter(x=part.batch, y=part.speedup, mode="lines+markers", name=f"{name}: speedup",
                                 error_y=err))
        fig.add_trace(go.Scatter(x=part.batch, y=part.ppl_change, mode="lines+markers", yaxis="y2",
                                 name=f"{name}: perplexity change", line={"dash": "dot"}))
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.update_layout(xaxis={"title": "batch (sequences)", "type": "log", "tickvals": sorted(t.batch.unique())},
                      yaxis={"title": "speedup vs conventional (x)"},
                      yaxis2={"title": "perplexity change", "overlaying": "y", "side": "right", "tickformat": "+.1f"},
                      height=380, margin={"t": 30})
    return fig


def _partial(rows: list) -> tuple[str, pd.DataFrame]:
    """A stopped sweep: how far each run got, and per batch the epochs both runs finished (time and perplexity)."""
    df = pd.DataFrame(rows)
    reached = df.groupby("run", sort=False).epoch.max()
    said = "Partial curves of the stopped sweep: " + ", ".join(f"{r} to epoch {e:.2g}" for r, e in reached.items())
    ends = df.dropna(subset=["valid_ppl"]) if "valid_ppl" in df else df.iloc[0:0]
    if ends.empty:
        return said + "; no epoch finished yet.", ends
    per = ends.groupby(["batch", "kind"]).agg(epoch_time_s=("epoch_time_s", "median"), valid_ppl=("valid_ppl", "last"))
    return said + ".", per.reset_index()


def section(p: float, corpus: str, ptb_path: str, tile: tuple, seed: int) -> None:
    st.subheader("Does a bigger batch buy more speed? (Fig. 6b, the LSTM)")
    st.caption("One pattern serves a whole batch: a bigger batch makes the GEMMs the pattern shrinks larger (more "
               "speedup, Fig. 6b), but trains fewer sub-networks per sample (higher perplexity, the paper says). "
               "Each batch size trains a small 3-layer LSTM (the paper's PTB depth) with conventional dropout and "
               f"RDP at p = {p:g} in every layer, taking turns.")
    with ui.more_settings("Batch sweep settings", key="more_batch"):
        b1, b2, b3 = st.columns(3)
        batches = ui.multiselect("Batch sizes", BATCHES, "sweep_batches", [str(b) for b in FIG6B_BATCHES], where=b1,
                                 help="sequences per step to sweep, 5–80 (the paper: 20 to 40); each adds two runs")
        hidden = ui.select_slider("LSTM units", [64, 128, 256], "sweep_hidden", 128, where=b2,
                                  help="units per LSTM layer, 64–256 (the paper: 1500; small here to fit a CPU)")
        epochs = ui.number("Sweep epochs", "sweep_epochs", 2, where=b3, min_value=1, max_value=5, step=1,
                           help="passes over 10,000 training tokens, 1–5; the speedup's spread needs 2 or more")
    if len(batches) < 2:
        st.info("Pick at least two batch sizes (under 'Batch sweep settings').")
        return
    batches = sorted(int(b) for b in batches)
    lo, hi = batches[0], batches[-1]
    params = dict(batches=batches, p=p, hidden=int(hidden), epochs=int(epochs), corpus=corpus, ptb_path=ptb_path,
                  tile=list(tile), seed=seed)

    def go_(job: jobs.Job):
        return lstm_batch_sweep(corpus, ptb_path or None, batches=batches, p=p, hidden=int(hidden),
                                epochs=int(epochs), max_train_tokens=10_000, vocab_size=2000, tile=tuple(tile),
                                seed=seed, progress=job.progress, on_point=job.on_row)

    done = jobs.last_result("batch_run")
    fresh = done is not None and done.token == ui.params_token(params)

    def reveal():
        if not fresh:
            return None
        t = done.result.table
        pat = t[t.kind == "row"].set_index("batch").speedup
        return _trend(pat[lo], pat[hi]), (f"RDP ran {pat[lo]:.2f}x as fast as conventional dropout at batch {lo} "
                                           f"and {pat[hi]:.2f}x at batch {hi} (the paper: the speedup grows "
                                           "with the batch).")

    ui.predict(f"When the batch grows from {lo} to {hi}, how does RDP's speedup over conventional dropout change?",
               TREND_ANSWERS, reveal, key="guess_batch")
    job = jobs.controls("Sweep batch sizes", "batch_run", params, go_,
                        help=f"trains conventional dropout and RDP at each batch size ({2 * len(batches)} runs, "
                             "taking turns a quarter epoch each): Stop keeps the curves and the finished epochs; "
                             "the progress bar estimates the time left")

    def live(j: jobs.Job) -> None:
        chart.plotly(plots.dropout_curve_figure(pd.DataFrame(j.curve()), "epoch", "train_ppl"), key="batch_live")

    jobs.watch("batch_run", live)
    if job is not None and job.error:
        st.error(job.error)
    if job is not None and job.stopped and job.rows:
        said, per = _partial(job.curve())
        st.caption(said)
        chart.plotly(plots.dropout_curve_figure(pd.DataFrame(job.curve()), "epoch", "train_ppl"), key="batch_partial")
        if len(per):
            with st.expander("Finished epochs of the stopped sweep"):
                ui.people_table(per, "dropout_batch_partial", {
                    "batch": ("Batch", "sequences"), "kind": ("Kind",),
                    "epoch_time_s": ("Epoch", "s", "median of the finished epochs", 1.0, "%.3g"),
                    "valid_ppl": ("Validation perplexity", "", "after the last finished epoch", 1.0, "%.1f")})
    if done is None:
        if job is None:
            st.caption(f"Nothing swept yet: press **Sweep batch sizes** ({2 * len(batches)} runs of a {hidden}-unit "
                       f"3-layer LSTM, {epochs} epoch(s) each; the progress bar estimates the time left).")
        return
    t = done.result.table
    if not fresh:
        st.caption(f"These results are for batches {', '.join(map(str, done.params['batches']))} at p = "
                   f"{done.params['p']:g}; press **Sweep batch sizes** for the current settings.")
    ui.figure(sweep_figure(t), t, "dropout_batch_sweep")
    with st.expander("Table of the sweep"):
        ui.people_table(t, "dropout_batch", SWEEP_COLUMNS, ["batch", "pattern", "test_ppl", "ppl_change", "epoch_s",
                                                            "speedup"])
    if fresh:
        ui.takeaway(takeaway(t), key="takeaway_batch")


def takeaway(t: pd.DataFrame) -> str:
    """The sweep's sentence from its numbers: the speedup's and the perplexity change's trend, noise named."""
    pat = t[t.kind == "row"].sort_values("batch")
    a, b = pat.iloc[0], pat.iloc[-1]
    trend = _trend(a.speedup, b.speedup)
    noisy = "speedup_lo" in pat and any(r.speedup_lo <= 1 <= r.speedup_hi for r in pat.itertuples())
    ppl = ("rises" if b.ppl_change > a.ppl_change + 1 else "falls" if b.ppl_change < a.ppl_change - 1
           else "stays about the same")
    grows = trend.removeprefix("it ")
    text = (f"From batch {int(a.batch)} to {int(b.batch)}, RDP's speedup over conventional dropout {grows}"
            f" ({a.speedup:.2f}x → {b.speedup:.2f}x) and its perplexity against conventional {ppl} "
            f"({a.ppl_change:+.1f} → {b.ppl_change:+.1f})")
    text += "; the paper: more speedup and higher perplexity with a bigger batch"
    if noisy:
        text += (" — some speedups' spread over the epochs includes 1x, so at this size they are within noise on this "
                 "machine")
    return text + "."
