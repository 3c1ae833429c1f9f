"""Dropout page: Approximate Random Dropout (Song et al., DATE 2019). One lesson: dropping whole rows (RDP) or
tiles (TDP) in a pattern drawn per step trains about as well as conventional dropout and runs faster, because
the GEMMs shrink. Training runs (Table I / II beside), what a step keeps, Algorithm 1 and Eq. 2, and the layer
speedup against the 1/(1−p) ceiling: where skipping pays on this machine and where it does not."""
import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
import chart
from views import _dropout_batch, _dropout_rates, _dropout_submodels, _dropout_warps
from lab import plots
from lab.experiments import (DATASETS, KIND_LABELS, LAYER_KINDS, drop_frequency, layer_speedup, lstm_corpora,
                             lstm_table, mlp_table, pattern_masks, search_trace)
from lab.plots.dropout import DROPOUT_LABELS, dropout_paper_figure

PATTERNS = list(LAYER_KINDS)
WIDTHS = [64, 128, 256, 512, 1024, 2048]
LAYER_WIDTHS = ["128", "256", "512", "1024", "2048", "4096"]
TILES = ["8×8", "16×16", "32×32", "64×64"]  # square tiles (samples × units); the paper's is 32×32
RUN_COLUMNS = {  # the runs' table for people (MLP or LSTM columns, whichever ran); the rest behind "All columns"
    "pattern": ("Pattern",), "hidden": ("Hidden units",), "rates": ("Dropout rates",),
    "test_acc": ("Test accuracy", "%", "", 1.0, "%.2f"),
    "acc_change": ("Accuracy change", "points", "against conventional dropout", 1.0, "%+.2f"),
    "test_ppl": ("Test perplexity", "", "", 1.0, "%.1f"),
    "ppl_change": ("Perplexity change", "", "against conventional dropout", 1.0, "%+.1f"),
    "epoch_s": ("Epoch", "s", "median training-step time of an epoch", 1.0, "%.3g"),
    "speedup": ("Speedup vs conventional", "x", "", 1.0, "%.2f"),
    "paper_acc": ("Paper's accuracy", "%"), "paper_speedup": ("Paper's speedup", "x"),
    "epoch_s_lo": ("Fastest epoch", "s", "", 1.0, "%.3g"), "epoch_s_hi": ("Slowest epoch", "s", "", 1.0, "%.3g"),
    "speedup_lo": ("Speedup, low end", "x", "slowest epoch against conventional's fastest", 1.0, "%.2f"),
    "speedup_hi": ("Speedup, high end", "x", "fastest epoch against conventional's slowest", 1.0, "%.2f"),
    "paper_acc_change": ("Paper's accuracy change", "points"), "valid_ppl": ("Validation perplexity", "", "", 1.0,
                                                                            "%.1f"),
    "kind": ("Kind",), "dataset": ("Data set",), "corpus": ("Corpus",), "corpus_source": ("Corpus source",),
    "epochs": ("Epochs",), "train_samples": ("Training images",), "test_samples": ("Test images",),
    "vocab": ("Vocabulary",), "train_tokens": ("Training tokens",),
}
RUN_DEFAULT = ["pattern", "hidden", "rates", "test_acc", "acc_change", "test_ppl", "ppl_change", "epoch_s", "speedup",
               "paper_acc", "paper_speedup"]
# Table I's hidden sizes the page can train (the paper's 784-input MLP; the rows merge when p = 0.7)
PAPER_T1 = "Song et al. 2019 Table I (MNIST, 784-h-h-10, p = 0.7, GTX 1080 Ti)"


@st.cache_data(max_entries=64, show_spinner=False)
def _patterns(p: float, kinds: tuple, seed: int, tile: tuple = (32, 32)) -> pd.DataFrame:
    return pattern_masks(p, list(kinds), samples=2, batch=32, units=128, tile=tile, seed=seed)  # 1 x 4 tiles of 32x32


@st.cache_data(max_entries=64, show_spinner=False)
def _frequency(p: float, kinds: tuple, seed: int) -> pd.DataFrame:
    return drop_frequency(p, list(kinds), iterations=300, batch=8, units=128, seed=seed)


@st.cache_data(max_entries=64, show_spinner=False)
def _search(p: float, seed: int):
    return search_trace(p, seed=seed)


def _fmt_rates(dp: dict) -> str:
    p1, p2 = (dp.get("rates") or [(dp["p"], dp["p"])])[0]
    return f"({p1:g},{p2:g})"


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Dropout")
    ui.lesson("Can a network drop whole rows or tiles of a layer, instead of random units, learn as well and "
              "train faster?",
              "Press **Train**: each pattern's test accuracy against conventional dropout's, and how much faster an "
              "epoch runs (the patterns train taking turns, a quarter epoch each). Below: what one step keeps, how "
              "often each unit ends up dropped (Algorithm 1), and the layer widths where skipping pays on this "
              "machine.")

    def preset_table1():
        ui.set_state(p=0.7, net="MLP", net_hidden=1024, net_epochs=8, rate_mode=_dropout_rates.MODES[0])

    def preset_fig4():
        ui.set_state(net="MLP", net_hidden=512, net_epochs=4, rate_mode=_dropout_rates.MODES[2])

    c1, c2, c3 = st.columns([2, 3, 2])
    p = ui.slider("Dropout rate p", "p", 0.7, 0.0, 0.95, where=c1, step=0.05,
                  help="fraction of a layer's units dropped per step, 0–0.95 (the paper: 0.3–0.7; Table I uses 0.7)")
    kinds = ui.multiselect("Patterns", PATTERNS, "kinds", PATTERNS, where=c2, format_func=KIND_LABELS.get,
                           help="conventional: random units per sample (Bernoulli); RDP (row): every dp-th unit kept "
                                "for the whole batch; TDP (tile): 32×32 tiles of the weight kept in the same way")
    net = ui.radio("Network", ["MLP", "LSTM"], "net", "MLP", where=c3,
                   help="MLP: two hidden layers on images (§IV-A/B, Table I); LSTM: a 2-layer word-level language "
                        "model (§IV-C, Table II)")
    d1, d2, d3 = st.columns([2, 2, 3])
    mlp = net == "MLP"  # the LSTM has its own (smaller) defaults: a 1024-unit LSTM epoch takes minutes here
    hidden = ui.select_slider("Hidden units per layer", WIDTHS, "net_hidden" if mlp else "lstm_hidden",
                              1024 if mlp else 256, where=d1,
                              help="width of each hidden layer, 64–2048: wider layers spend more time in the GEMMs "
                                   "the patterns shrink, so the speedup grows (Table I), and take longer to train "
                                   "(the progress bar estimates the time left)")
    epochs = ui.number("Epochs", "net_epochs" if mlp else "lstm_epochs", 8 if mlp else 3, where=d2, min_value=1,
                       max_value=50, step=1,
                       help="passes over the training set, 1–50: the time grows with the epochs and the width; "
                            "while it trains, the progress bar estimates the time left from the progress so far")
    presets = d3.container(horizontal=True)
    presets.button("Preset: Table I setting", on_click=preset_table1,
                   help="p = 0.7 and a 1024×1024 MLP, the paper's Table I column 1024×1024")
    presets.button("Preset: Fig. 4 rate sweep", on_click=preset_fig4,
                   help="trains the MLP at rates (0.3,0.3), (0.5,0.5) and (0.7,0.7) (§IV-A, Fig. 4; the paper's "
                        "2048×2048 is 512×512 here, 4 epochs, to fit a CPU)")
    with ui.more_settings():
        m1, m2, m3, m4 = st.columns(4)
        seed = int(ui.number("Seed", "seed", 0, where=m1, min_value=0, step=1,
                            help="seeds the patterns, the weights and the data order, ≥ 0: the same seed gives the same run"))
        lr = ui.number("Learning rate", "mlp_lr" if net == "MLP" else "lstm_lr", 0.01 if net == "MLP" else 1.0, where=m2, min_value=1e-5,
                       max_value=20.0, format="%.4g",
                       help="SGD step size, 1e-5–20 (MLP: 0.01 with momentum 0.9; LSTM: 1.0, the paper's base rate)")
        batch = ui.number("Batch", "mlp_batch" if net == "MLP" else "lstm_batch", 32 if net == "MLP" else 20, where=m3, min_value=1, max_value=1024,
                          step=1, help="samples per step, 1–1024; one pattern serves the whole batch, so a larger "
                                       "batch is faster but samples fewer sub-networks (paper Fig. 6b)")
        dataset, corpus, ptb_path = "digits", "auto", ""
        if net == "MLP":
            dataset = ui.select("Data set", list(DATASETS), "net_data", "digits", where=m4,
                                help="digits: scikit-learn's 8×8 digits (always here, 1,348 training images); mnist "
                                     "/ fashion-mnist: IDX files if installed; auto: the first found")
        else:
            corpora = lstm_corpora()
            usable = corpora[corpora.available | corpora.needs_path]
            corpus = ui.select("Corpus", list(usable.corpus), "corpus", "auto", where=m4,
                               format_func=lambda c, d=dict(zip(usable.corpus, usable.description)): d.get(c, c),
                               help="the LSTM's text; auto picks Penn Treebank at the path, else an installed one, "
                                    "else Python's own documentation (always here)")
            if corpus == "ptb":
                ptb_path = ui.text("Penn Treebank directory (ptb.train.txt, ptb.valid.txt, ptb.test.txt)", "ptb_path",
                                   "", help="a directory holding the three PTB files")
        m5, m6, m7 = st.columns([1, 2, 1])
        tile_name = ui.select("Tile size", TILES, "tile", "32×32", where=m5,
                              help="TDP's tile, samples × units (§III-B; the paper's 32×32): smaller tiles give more "
                                   "patterns but finer, less regular access; used by the training, the pictures and "
                                   "the counts below")
        rate_mode, p2 = _dropout_rates.controls(float(p), m6, m7)
    tile = tuple(int(x) for x in tile_name.split("×"))
    rates = _dropout_rates.rates(rate_mode, float(p), p2)
    if not kinds:
        st.info("Pick at least one pattern.")
        st.stop()
    takeaway_slot = st.container()
    takeaway = _train_section(net, int(hidden), int(epochs), float(p), list(kinds), seed, float(lr), int(batch),
                              dataset, corpus, ptb_path, rates, tile)
    st.subheader("What one step keeps")
    ui.shown(lambda: _patterns_section(float(p), tuple(kinds), seed, tile))
    ui.shown(lambda: _dropout_warps.section(float(p), tuple(kinds), int(batch), int(hidden), tile, seed))
    st.subheader("How often is each unit dropped?")
    stats = {}
    ui.shown(lambda: stats.update(_search_section(float(p), tuple(kinds), seed)))
    ui.shown(lambda: _dropout_submodels.section(float(p), int(hidden), int(batch), tile, seed))
    st.subheader("Where skipping pays: one layer pair on this machine")
    ui.shown(lambda: _layer_section(float(p), seed, tile))
    ui.shown(lambda: _dropout_batch.section(float(p), corpus, ptb_path, tile, seed))
    with takeaway_slot:
        if takeaway is None and not stats and p > 0:
            takeaway = (f"At p = {p:g}, each RDP/TDP step computes only the kept rows of a layer — press **Train** "
                        "to see what that buys in speed and costs in accuracy; how often each unit ends up dropped "
                        "is the question below.")
        if takeaway is None and stats:
            takeaway = (f"At p = {p:g}, Algorithm 1's pattern mix drops every unit {stats['rate']:.3f} of the time "
                        f"(target {p:g}) while each RDP/TDP step computes only the kept rows — press **Train** to "
                        f"see what that buys in speed and costs in accuracy.")
        if takeaway:
            ui.takeaway(takeaway)
    jobs.release()  # the page has drawn: a run started by this rerun may begin (its timing is not disturbed)


def _train_section(net: str, hidden: int, epochs: int, p: float, kinds: list, seed: int, lr: float, batch: int,
                   dataset: str, corpus: str, ptb_path: str, rates: list = None, tile: tuple = (32, 32)) -> str | None:
    """Train button, live curve, result beside Table I / II. Returns the takeaway sentence, if a result shows."""
    st.subheader("Train: accuracy and speed against conventional dropout")
    rates = rates or [(p, p)]
    params = dict(net=net, hidden=hidden, epochs=epochs, p=p, kinds=kinds, seed=seed, lr=lr, batch=batch)
    if rates != [(p, p)] or tuple(tile) != (32, 32):  # the defaults keep the links they had
        params.update(rates=[list(r) for r in rates], tile=list(tile))
    params.update(dataset=dataset) if net == "MLP" else params.update(corpus=corpus, ptb_path=ptb_path)
    y = "train_loss" if net == "MLP" else "train_ppl"  # streamed several times per epoch

    def go(job: jobs.Job):
        if net == "MLP":
            return mlp_table(dataset, hidden=((hidden, hidden),), rates=rates, kinds=kinds, epochs=epochs,
                             batch=batch, lr=lr, tile=tile, seed=seed, progress=job.progress, on_point=job.on_row,
                             side_by_side=True)
        return lstm_table(corpus, ptb_path or None, hidden=hidden, rates=rates, kinds=kinds, epochs=epochs,
                          batch=batch, lr=lr, max_train_tokens=20_000, vocab_size=2000, tile=tile, seed=seed,
                          progress=job.progress, on_point=job.on_row, side_by_side=True)

    job = jobs.controls("Train", "net_run", params, go,
                        help=f"trains one {net} per pattern with these settings, the patterns taking turns a quarter "
                             "epoch each: Stop keeps every pattern's curve so far; the progress bar estimates the "
                             "time left")

    def live(j: jobs.Job) -> None:
        chart.plotly(plots.dropout_curve_figure(pd.DataFrame(j.curve()), "epoch", y), key="dropout_live")

    jobs.watch("net_run", live)
    if job is not None and job.error:
        st.error(job.error)
    if job is not None and job.stopped and job.rows:
        st.caption(_partial_caption(job.curve()))
        chart.plotly(plots.dropout_curve_figure(pd.DataFrame(job.curve()), "epoch", y), key="dropout_partial")
    done = jobs.last_result("net_run")
    if done is None:
        if job is None:
            st.caption("Nothing trained yet in this session: press **Train** (the defaults train three "
                       "64-1024-1024-10 MLPs on digits for 8 epochs, taking turns; the progress bar estimates the time "
                       "left as they go).")
        return None
    stale = done.token != ui.params_token(params)
    if stale:
        st.caption("These results are from the last run (" + ui.described(done.params, KIND_LABELS)
                   + "); press **Train** for the current settings.")
    res, dp = done.result, done.params
    t = res.table
    is_mlp = dp["net"] == "MLP"
    metric = "test_acc"
    if not is_mlp:
        st.caption(f"Corpus that ran: **{t.corpus.iloc[0]}** — {t.corpus_source.iloc[0]}, "
                   f"{t.train_tokens.iloc[0]:,} training tokens, vocabulary {t.vocab.iloc[0]:,}.")
    else:
        st.caption(f"Data that ran: **{t.dataset.iloc[0]}**, {t.train_samples.iloc[0]:,} training and "
                   f"{t.test_samples.iloc[0]:,} test images; time per epoch is the median of the epochs' "
                   "training-step time (same process, the patterns taking turns a quarter epoch each).")
    if t.rates.nunique() > 1:  # the Fig. 4 sweep: one figure across the rate pairs
        said = _dropout_rates.sweep_view(t, res.curves, is_mlp)
        return None if stale else said
    st.markdown("**Test accuracy after training**, and the change against conventional dropout:")
    cols = st.columns(len(t))
    for i, r in enumerate(t.itertuples()):
        base = r.kind == "bernoulli"
        same = base or pd.isna(r.acc_change) or abs(r.acc_change) < 0.05
        cols[i].metric(r.pattern, f"{r.test_acc:.1f} %",
                       delta=None if base or pd.isna(r.acc_change) else "no change" if same
                       else f"{r.acc_change:+.1f} points", delta_color="off" if same else "normal",
                       delta_arrow="off" if same else "auto",
                       help=f"{r.epoch_s:.3f} s per epoch" + ("" if base else f", {_speed(r)} conventional"))
    ui.paper_callout(_paper_text(t, dp), "dropout-table")
    ui.figure(dropout_paper_figure(t, "speedup"), t, "dropout_speedup_vs_paper")
    ui.figure(plots.dropout_curve_figure(res.curves, "epoch", "test_acc" if is_mlp else "valid_ppl"), res.curves,
              "dropout_curves")
    _speed_caption(t)
    with st.expander("Table of the runs"):
        shown = [c for c in RUN_DEFAULT if c in t][:10]
        ui.people_table(t, "dropout_runs", RUN_COLUMNS, shown)
    # the takeaway speaks of the settings on screen: a result of other settings is shown, labelled, not summed up
    return None if stale else _takeaway(t, dp)


def _partial_caption(rows: list) -> str:
    """What a stopped run kept: how far each pattern got (the patterns take turns, so every one has a curve)."""
    df = pd.DataFrame(rows)
    reached = df.groupby("kind", sort=False).epoch.max()
    return (f"Partial curves of the stopped run ({len(df)} points): " + ", ".join(
        f"{KIND_LABELS.get(k, k)} to epoch {e:.2g}" for k, e in reached.items()) + ".")


def _noisy(r) -> bool:
    """True when a pattern's speedup range over the epochs includes 1x: no faster or slower beyond noise."""
    return "speedup_lo" in r and not pd.isna(r["speedup_lo"]) and r["speedup_lo"] <= 1 <= r["speedup_hi"]


def _speed(r) -> str:
    """A speedup with its spread over the epochs ('1.4x (1.1–1.8x over the epochs)', 'within noise')."""
    r = r._asdict() if hasattr(r, "_asdict") else r
    if "speedup_lo" not in r or pd.isna(r["speedup_lo"]):
        return f"{r['speedup']:.2f}x"
    return (f"{r['speedup']:.2f}x ({r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}x over the epochs"
            + (", within noise)" if _noisy(r) else ")"))


def _speed_caption(t: pd.DataFrame) -> None:
    rows = [r for _, r in t[t.kind != "bernoulli"].iterrows()]
    if rows:
        st.caption("**Speed against conventional dropout**, median epoch with the range over the epochs (slowest vs "
                   "fastest both ways; one run each, so noise from other work on this machine shows here): "
                   + "; ".join(f"{r.pattern} {_speed(r)}" for r in rows) + ".")


def _takeaway(t: pd.DataFrame, dp: dict) -> str:
    what = t.dataset.iloc[0] if "dataset" in t else t.corpus.iloc[0]
    base = t[t.kind == "bernoulli"]
    others = t[t.kind != "bernoulli"]
    if others.empty:
        r = t.iloc[0]
        return f"Conventional dropout at {_at(dp)} reaches {r.test_acc:.1f} % on {what}; add RDP or TDP to compare."
    best = others.sort_values("speedup").iloc[-1]
    acc = f"{best.test_acc:.1f} %"
    if not base.empty:
        acc += f" ({best.acc_change:+.1f} points vs conventional's {base.test_acc.iloc[0]:.1f} %"
        n = int(t.test_samples.iloc[0]) if "test_samples" in t else 0
        if n:  # two standard errors of a difference of two accuracies on n test images, one seed each
            q = min(max(base.test_acc.iloc[0] / 100, 1 / n), 1 - 1 / n)
            noise = 200 * (2 * q * (1 - q) / n) ** 0.5
            acc += f", within noise: ±{noise:.1f} points on {n:,} test images)" if abs(best.acc_change) < noise \
                else f"; noise ±{noise:.1f} points)"
        else:
            acc += ")"
    if _noisy(best):
        return (f"At {_at(dp)} with {dp['hidden']}-unit layers on {what}, {best.pattern} reaches {acc}; its "
                f"speed against conventional dropout, {_speed(best)}, is within noise: the epochs' spread includes "
                "1x, so this run shows no speedup either way. Press Train again, or use wider layers (the layer "
                "section below) to see where skipping pays.")
    verdict = "faster" if best.speedup > 1.05 else "no faster" if best.speedup > 0.95 else "slower"
    # the MLP's hidden-to-hidden GEMM loses units on both sides: it can shrink up to 1/(1-p)^2
    p1, p2 = (dp.get("rates") or [(dp["p"], dp["p"])])[0]
    ceiling = 1 / ((1 - p1) * (1 - p2))
    if best.speedup > 1.3 * ceiling:
        return (f"At {_at(dp)} on {what}, {best.pattern} reaches {acc}; its measured {best.speedup:.1f}x is "
                f"above what skipping can give ({_ceiling_words(dp)} = {ceiling:.1f}x), so other work on this "
                "machine slowed the "
                "conventional run — press Train again for a clean timing.")
    return (f"At {_at(dp)} with {dp['hidden']}-unit layers on {what}, {best.pattern} reaches {acc} and runs "
            f"an epoch {_speed(best)} as fast as conventional dropout — {verdict}"
            + (" here." if verdict != "faster" else
               f" (a GEMM that loses units on both sides can shrink up to {_ceiling_words(dp)} = {ceiling:.1f}x)."))


def _ceiling_words(dp: dict) -> str:
    """The hidden-to-hidden GEMM's ceiling as a formula: 1/(1−p)², or 1/((1−p₁)(1−p₂)) for two rates."""
    p1, p2 = (dp.get("rates") or [(dp["p"], dp["p"])])[0]
    return "1/(1−p)²" if p1 == p2 else "1/((1−p₁)(1−p₂))"


def _at(dp: dict) -> str:
    """'p = 0.7', or 'rates (0.3,0.7)' when the two layers' rates differ."""
    p1, p2 = (dp.get("rates") or [(dp["p"], dp["p"])])[0]
    return f"p = {p1:g}" if p1 == p2 else f"rates ({p1:g},{p2:g})"


def _paper_text(t: pd.DataFrame, dp: dict) -> str:
    """Table I (MLP) / Table II (LSTM) beside our run, and why they differ."""
    others = t[t.kind != "bernoulli"]
    if "dataset" in t:
        paper = t.dropna(subset=["paper_acc"]) if "paper_acc" in t else t.iloc[0:0]
        if paper.empty:
            head = (f"Table I is at p = 0.7 for hidden sizes 1024×64 … 4096×4096 on MNIST (speedup 1.19–2.16x, "
                    f"accuracy within 0.5 points); this run ({_fmt_rates(dp)}, {dp['hidden']}×{dp['hidden']}) "
                    "has no paper row — the preset sets Table I's 1024×1024 column. ")
        else:
            head = "Table I: " + "; ".join(f"{r.pattern} {r.paper_acc:.2f} % at {r.paper_speedup:.2f}x (here "
                                           f"{r.test_acc:.1f} % at {r.speedup:.2f}x)" for r in paper.itertuples()) + ". "
        why = []
        if not others.empty and others.speedup.max() > 1.6 and dp["hidden"] <= 1024:
            why.append("Our speedup is larger than the paper's at this size: on this CPU the GEMMs are nearly all of a "
                       "step and the hidden-to-hidden GEMM shrinks on both sides (up to 1/(1−p)²), while the paper's "
                       "Caffe on a GTX 1080 Ti kept fixed per-layer costs that do not shrink; timings here also move "
                       "with other work on the machine")
        if not others.empty and others.speedup.max() < 1.05:
            why.append("No speedup here: at this width the pattern bookkeeping costs as much as the skipped GEMM "
                       "work (see the layer section below: skipping pays from about 256 units on this CPU)")
        if not others.empty and "acc_change" in others and others.acc_change.min() < -1.0:
            why.append("The accuracy gap is wider than the paper's 0.5 points: digits gives only "
                       f"{t.train_samples.iloc[0] // dp['batch']} steps per epoch and one pattern serves a whole "
                       "batch, so a short run samples few sub-networks; more epochs or a smaller learning rate close it")
        if t.dataset.iloc[0] != "mnist":
            why.append(f"the data is {t.dataset.iloc[0]}, not the paper's MNIST, so accuracies differ in level")
        return head + (". ".join(w[0].upper() + w[1:] for w in why) + "." if why else "")
    rows = t.dropna(subset=["paper_acc"]) if "paper_acc" in t else t.iloc[0:0]
    head = ("Table II (2-layer LSTM, 1500 units, PTB-like 8800-word vocabulary, 50 epochs): " +
            "; ".join(f"{r.pattern} {r.paper_acc:.1f} % next-word accuracy at {r.paper_speedup:.2f}x (here "
                      f"{r.test_acc:.1f} % at {r.speedup:.2f}x)" for r in rows.itertuples()) + ". ") if not rows.empty \
        else "Table II is at rates (0.3,0.3), (0.5,0.5), (0.7,0.7); this run has no paper row. "
    return head + (f"Here the corpus is {t.corpus.iloc[0]} with {t.train_tokens.iloc[0]:,} training tokens and a "
                   f"{t.vocab.iloc[0]:,}-word vocabulary, {dp['hidden']} units and {dp['epochs']} epoch(s): accuracy "
                   "levels differ with the text and the run length; the speedup follows the hidden width as in "
                   "Table I.")


@st.fragment
def _patterns_section(p: float, kinds: tuple, seed: int, tile: tuple = (32, 32)) -> None:
    masks = _patterns(p, kinds, seed, tuple(tile))
    st.caption("A 32-sample batch × 128 units, two draws per pattern. Conventional dropout scatters dropped units "
               "(grey) differently for each sample, so the GEMM still computes all of them; RDP keeps every dp-th "
               "unit for the whole batch and TDP whole "
               f"{tile[0]}×{tile[1]} tiles, so the kept part is a smaller dense GEMM.")
    fig = plots.dropout_pattern_figure(masks)
    ui.figure(fig, masks, "dropout_patterns")


def _search_section(p: float, kinds: tuple, seed: int) -> dict:
    """Algorithm 1's numbers (for the takeaway) and its views (a fragment: the view switch redraws only it)."""
    if p == 0:
        st.caption("p = 0 drops nothing: no search.")
        return {"rate": 0.0}
    tr = _search(p, seed)
    if _predict_rate(p, kinds, seed) and not ui.revealed("guess"):  # the rates would answer it: they wait
        st.caption("The searched pattern mix and each unit's measured drop rate show once you answer the question "
                   "above, or skip it.")
        return {}
    _search_views(p, kinds, seed)
    return {"rate": tr.rate}


DROP_ANSWERS = ["about p, like conventional dropout", "far less than p: units next to kept rows are never dropped",
                "far more than p: a pattern drops whole rows at once"]


def _predict_rate(p: float, kinds: tuple, seed: int) -> bool:
    """Is every unit still dropped at rate p when whole rows go at once? Revealed from 300 sampled steps.
    True if the question is asked (a row or tile pattern is chosen)."""
    patterns = [k for k in kinds if k in ("row", "tile")]
    if not patterns:
        return False

    def reveal():
        g = _frequency(p, kinds, seed).groupby("kind").drop_freq
        lo, hi, mean = g.min(), g.max(), g.mean()
        off = [mean[k] - p for k in patterns]  # the patterns' average drop rate against p
        right = (DROP_ANSWERS[0] if max(map(abs, off)) < 0.05 else DROP_ANSWERS[1] if min(off) < 0 else
                 DROP_ANSWERS[2])
        return right, ("Over 300 sampled steps, " + "; ".join(
            f"{KIND_LABELS.get(k, k)} drops each unit {mean[k]:.1%} of the time on average (every unit between "
            f"{lo[k]:.1%} and {hi[k]:.1%})" for k in g.groups) + f", against p = {p:.0%}: Algorithm 1 mixes "
            "patterns with different strides dp and offsets, so each unit is dropped as often as under conventional "
            "dropout, only in step with its neighbours.")
    ui.predict(f"A row pattern (RDP) drops whole rows of units together. At p = {p:g}, how often is each single "
               "unit dropped over many steps?", DROP_ANSWERS, reveal, key="guess")
    return True


@st.fragment
def _search_views(p: float, kinds: tuple, seed: int) -> None:
    tr = _search(p, seed)
    freq = _frequency(p, kinds, seed)
    spread = freq.groupby("kind").drop_freq.std().max()
    st.caption(f"A pattern that keeps 1 unit in dp drops (dp−1)/dp of them; Algorithm 1 (SGD) finds how often to "
               f"use each dp so the mix drops p on average (Eq. 2). Here it converged in {tr.steps:,} steps to "
               f"{tr.rate:.4f}; over 300 sampled steps each unit's drop rate stays within {spread:.3f} (standard "
               "deviation) of p.")
    view = ui.radio("Show", ["Distribution over dp", "Per-unit drop rate", "Search trace"], "search_view",
                    "Distribution over dp", help="the searched mix of patterns; each unit's measured drop rate "
                                                 "against p; the search's loss per SGD step")
    if view == "Distribution over dp":
        ui.figure(plots.search_distribution_figure(tr.final), tr.final, "search_distribution")
    elif view == "Per-unit drop rate":
        ui.figure(plots.drop_frequency_figure(freq), freq, "drop_frequency")
    else:
        ui.figure(plots.search_trace_figure(tr.trace), tr.trace, "search_trace")


@st.fragment
def _layer_section(p: float, seed: int, tile: tuple = (32, 32)) -> None:
    st.caption("Forward + backward of Linear(w, w) → ReLU → dropout → Linear(w, w), batch 64: conventional "
               "dropout with full GEMMs against RDP and TDP computing only the kept part (same run, interleaved, "
               "medians). The black tick is the 1/(1−p) ceiling.")
    # the page keeps about six controls in view, so the lesson stays in sight
    with ui.more_settings("Widths and rates to time", key="more_widths"):
        l1, l2 = st.columns([3, 2])
        widths = ui.multiselect("Widths w", LAYER_WIDTHS, "widths", ["128", "512", "1024"], where=l1,
                                help="layer widths to time, 128–4096; on this CPU skipping does not pay at 128 and "
                                     "pays more the wider the layer (4096 takes longest)")
        rates = ui.multiselect("Rates p", ["0.3", "0.5", "0.7", "0.9"], "rates", [f"{p:g}"] if f"{p:g}" in
                               ("0.3", "0.5", "0.7", "0.9") else ["0.5"], where=l2,
                               help="dropout rates to time; the ceiling is 1/(1−p): 1.43x at 0.3, 2x at 0.5, 3.3x "
                                    "at 0.7")
    if not widths or not rates:
        st.info("Pick at least one width and one rate (under 'Widths and rates to time').")
        return
    st.caption(f"**Time layers** times widths {', '.join(widths)} at p = {', '.join(rates)}.")
    params = dict(widths=widths, rates=rates, seed=seed)
    if tuple(tile) != (32, 32):
        params["tile"] = list(tile)

    def go(job: jobs.Job):
        return layer_speedup([int(w) for w in widths], [float(r) for r in rates], batch=64, steps=4, repeats=3,
                             tile=tuple(tile), seed=seed, progress=job.progress)

    job = jobs.controls("Time layers", "speed_run", params, go,
                        help="times each width and rate (wider layers take longer: the progress bar estimates the "
                             "time left)")
    jobs.watch("speed_run", lambda j: None)
    jobs.release("speed_run")  # the end of this fragment (the figure below is drawn from a finished run)
    if job is not None and job.error:
        st.error(job.error)
    done = jobs.last_result("speed_run")
    if done is None:
        return
    sp = done.result
    if done.token != ui.params_token(params):
        st.caption(f"Timed for widths {', '.join(done.params['widths'])} and p {', '.join(done.params['rates'])}; "
                   "press **Time layers** for the current choice.")
    pat = sp[sp.contestant.isin(["row", "tile"])]
    lo = "speedup_lo" if "speedup_lo" in pat else "speedup"
    by_w = pat.groupby("width")[lo].max()  # faster in every repeat, not only in the median
    pays = [int(w) for w, s in by_w.items() if s > 1.1]
    lost = [int(w) for w, s in by_w.items() if s <= 1.1]
    st.metric("Widths where a pattern is faster than conventional (>1.1x in every repeat)",
              ", ".join(map(str, pays)) or "none",
              delta=("not at " + ", ".join(map(str, lost))) if lost else None, delta_color="off", delta_arrow="off",
              help="best of RDP/TDP per width, all timed rates; the slowest of the repeats must be above 1.1x")
    if "speedup_lo" in sp:
        noisy = sp[(sp.contestant != "conventional") & (sp.speedup_lo <= 1) & (sp.speedup_hi >= 1)]
        if len(noisy):
            st.caption("**Within noise** (the repeats' range includes 1x, so no faster or slower here): " + "; ".join(
                f"{DROPOUT_LABELS.get(r.contestant, r.contestant)} at w = {r.width}, p = {r.p:g}: median "
                f"{r.speedup:.2f}x, repeats {r.speedup_lo:.2f}–{r.speedup_hi:.2f}x" for r in noisy.itertuples()) + ".")
    ui.figure(plots.layer_speedup_figure(sp), sp, "layer_speedup")
