"""Dropout page: Approximate Random Dropout (Song et al., DATE 2019) — row/tile pattern pictures,
Algorithm 1's search trace and distribution, per-unit drop frequency, layer speedup against the
1/(1−p) ceiling, and MLP/LSTM runs."""
import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (KIND_LABELS, LAYER_KINDS, drop_frequency, layer_speedup, lstm_corpora, lstm_table, mlp_table,
                             pattern_masks, search_trace)

PATTERNS = list(LAYER_KINDS)


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Dropout")
    st.caption("Song et al. 2019: instead of dropping random units, drop whole rows (RDP) or tiles (TDP) in a "
               "pattern drawn per iteration, so the GEMMs shrink. Algorithm 1 searches a distribution over patterns "
               "that keeps every unit's drop rate at p (Eq. 2).")


    def preset_table1():
        ui.set_state(p=0.7, net="MLP", net_hidden=1024, widths=[1024, 2048], rates=[0.7])


    st.button("Preset: Table I setting (p = 0.7, 1024-wide MLP)", on_click=preset_table1)
    c1, c2, c3 = st.columns([2, 2, 1])
    p = ui.slider("Dropout rate p", "p", 0.5, 0.0, 0.95, where=c1, step=0.05)
    kinds = ui.multiselect("Patterns", PATTERNS, "kinds", PATTERNS, where=c2, format_func=KIND_LABELS.get)
    seed = ui.seed(where=c3)


    @st.cache_data(max_entries=64)
    def patterns(p: float, kinds: tuple, seed: int):
        return pattern_masks(p, list(kinds), samples=3, batch=64, units=128, seed=seed)  # 2 x 4 tiles of 32x32


    @st.cache_data(max_entries=64)
    def frequency(p: float, kinds: tuple, seed: int):
        return drop_frequency(p, list(kinds), iterations=500, seed=seed)


    @st.cache_data(max_entries=64)
    def search(p: float, seed: int):
        return search_trace(p, seed=seed)


    if not kinds:
        st.info("Pick at least one pattern.")
        st.stop()
    with ui.guard():
        masks = patterns(p, tuple(kinds), int(seed))
        freq = frequency(p, tuple(kinds), int(seed))
        tr = search(p, int(seed)) if p > 0 else None

    m1, m2, m3 = st.columns(3)
    if tr is not None:
        m1.metric("Searched expected rate d·p_u", f"{tr.rate:.4f}", delta=f"{tr.rate - p:+.1e} vs p", delta_color="off")
        m2.metric("Search steps", f"{tr.steps:,}", help="converged" if tr.converged else "stopped at max_steps")
    spread = freq.groupby("kind").drop_freq.std().max()
    m3.metric("Largest spread of per-unit drop rate", f"{spread:.3f}", help="standard deviation over units")

    st.subheader("Patterns")
    ui.figure(plots.dropout_pattern_figure(masks), masks, "dropout_patterns")
    t1, t2 = st.tabs(["Search (Algorithm 1)", "Per-unit drop frequency (Eq. 2)"])
    with t1:
        if tr is None:
            st.caption("p = 0 drops nothing: no search.")
        else:
            a, b = st.columns(2)
            with a:
                ui.figure(plots.search_trace_figure(tr.trace), tr.trace, "search_trace")
            with b:
                ui.figure(plots.search_distribution_figure(tr.final), tr.final, "search_distribution")
    with t2:
        ui.figure(plots.drop_frequency_figure(freq), freq, "drop_frequency")

    st.subheader("Layer speedup against the 1/(1−p) ceiling")
    l1, l2 = st.columns(2)
    widths = ui.multiselect("Widths w (layer pair w×w)", ["256", "512", "1024", "2048", "4096"], "widths",
                            ["256", "512"], where=l1)
    rates = ui.multiselect("Rates", ["0.3", "0.5", "0.7", "0.9"], "rates", ["0.3", "0.5", "0.7"], where=l2)
    if widths and rates and ui.run_button("Time layers", "speed_run", [widths, rates, seed]):
        with ui.guard():
            cb = ui.progress()
            sp = ui.cached_run("layer_speedup", [widths, rates, seed], lambda: layer_speedup(
                [int(w) for w in widths], [float(r) for r in rates], batch=64, steps=4, repeats=3, seed=int(seed),
                progress=cb))
            cb(1.0, "done")
        best = sp[sp.contestant != "conventional"].sort_values("speedup").iloc[-1]
        st.metric("Best speedup", f"{best.speedup:.2f}x", help=f"{best.contestant}, w={best.width}, p={best.p:g}; "
                  f"ceiling {best.ceiling:.2f}x")
        ui.figure(plots.layer_speedup_figure(sp), sp, "layer_speedup")

    st.subheader("Training runs")
    n1, n2, n3 = st.columns(3)
    net = ui.radio("Network", ["MLP", "LSTM"], "net", "MLP", where=n1)
    net_hidden = ui.select_slider("Hidden units", [64, 128, 256, 512, 1024], "net_hidden", 128, where=n2)
    net_epochs = ui.number("Epochs", "net_epochs", 2, where=n3, min_value=1, max_value=20, step=1)
    corpus, ptb_path = "auto", ""
    if net == "LSTM":
        corpora = lstm_corpora()
        usable = corpora[corpora.available | corpora.needs_path]
        k1, k2 = st.columns(2)
        corpus = ui.select("Corpus", list(usable.corpus), "corpus", "auto", where=k1,
                           format_func=dict(zip(usable.corpus, usable.description)).get)
        if corpus == "ptb":
            ptb_path = ui.text("Penn Treebank directory (ptb.train.txt, ptb.valid.txt, ptb.test.txt)", "ptb_path", "",
                               where=k2)
    run_kinds = [k for k in kinds]
    params = [net, net_hidden, net_epochs, p, run_kinds, seed] + ([corpus, ptb_path] if net == "LSTM" else [])
    if ui.run_button("Train", "net_run", params):
        live = st.empty()
        points: list[dict] = []
        y = "train_loss" if net == "MLP" else "train_ppl"

        def on_point(row: dict) -> None:
            points.append(row)
            live.plotly_chart(plots.dropout_curve_figure(pd.DataFrame(points), "epoch", y), key=f"dlive_{len(points)}")

        def go():
            if net == "MLP":
                return mlp_table("digits", hidden=((net_hidden, net_hidden),), rates=((p, p),), kinds=run_kinds,
                                 epochs=int(net_epochs), batch=64, seed=int(seed), progress=cb, on_point=on_point)
            return lstm_table(corpus, ptb_path or None, hidden=net_hidden, rates=((p, p),), kinds=run_kinds,
                              epochs=int(net_epochs),
                              max_train_tokens=20_000, vocab_size=2000, seed=int(seed), progress=cb, on_point=on_point)

        with ui.guard():
            cb = ui.progress()
            res = ui.cached_run("dropout_net", params, go)
            cb(1.0, "done")
        live.empty()
        metric = "test_acc" if net == "MLP" else "test_ppl"
        if net == "LSTM":
            st.caption(f"Corpus: {res.table.corpus.iloc[0]} — {res.table.corpus_source.iloc[0]}, "
                       f"{res.table.train_tokens.iloc[0]:,} training tokens")
        cols = st.columns(len(res.table))
        for i, (_, r) in enumerate(res.table.iterrows()):
            cols[i].metric(f"{r.pattern}: {'test accuracy' if net == 'MLP' else 'test perplexity'}",
                           f"{r[metric]:.2f}" + (" %" if net == "MLP" else ""), delta=f"{r.speedup:.2f}x speed",
                           delta_color="off")
        ui.figure(plots.dropout_curve_figure(res.curves, "epoch", y), res.curves, "dropout_curves")
        ui.figure(plots.dropout_table_figure(res.table, metric), res.table, "dropout_table")
        ui.table(res.table, "dropout_runs")
