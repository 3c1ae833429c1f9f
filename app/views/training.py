"""Training page: simulated data- or model-parallel training with a codec per run, or the
consistency models side by side; live curves of loss, test error, bytes and modelled time."""
import pandas as pd
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import (CONSISTENCY_KINDS, DATASETS, LINKS, codec_catalog, codec_curves, codec_spec,
                             consistency_curves)

Y = {"test error (%)": "test_error", "training loss": "train_loss", "test loss": "test_loss"}
X = {"epochs": "epoch", "updates": "step", "bytes sent": "bytes", "modelled time": "time_s"}


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    catalog = codec_catalog()  # read per run: a codec registered later shows too
    CODECS = ["32-bit", *(c.name for c in catalog if not c.work.raw),
              *(codec_spec(c.name, error_feedback=True) for c in catalog if c.gather_only and c.gradient_only)]
    st.title("Training")
    st.caption("Dettmers 2016 §3.4: K virtual workers train the paper's MLP (784-1024-1024-10 by default; smaller "
               "here for speed) with a codec on the wire; Ben-Nun & Hoefler's consistency models. Time is modelled "
               "from measured compute and the chosen link.")


    def preset_paper():
        ui.set_state(experiment="codecs", parallel="data", workers=4, codecs=["32-bit", "dynamic_tree", "linear"],
                     hidden=1024, epochs=1.0, lr=0.001, batch=128, dataset="auto")


    def preset_consistency():
        ui.set_state(experiment="consistency models", workers=4, kinds=list(CONSISTENCY_KINDS), hidden=64, epochs=2.0)


    b1, b2, _ = st.columns([2, 2, 1])
    b1.button("Preset: §3.4 data parallel, 4 workers (slow on CPU)", on_click=preset_paper)
    b2.button("Preset: consistency models", on_click=preset_consistency)

    experiment = ui.radio("Compare", ["codecs", "consistency models"], "experiment", "codecs")
    c1, c2, c3, c4 = st.columns(4)
    if experiment == "codecs":
        runs = ui.multiselect("Codec per run (overlaid)", CODECS, "codecs", ["32-bit", "dynamic_tree", "onebit"])
        runs = ui.codec_option_specs(runs, "codecs")
        parallel = ui.select("Parallelism", ["data", "model"], "parallel", "data", where=c1)
    else:
        runs = ui.multiselect("Consistency models (overlaid)", list(CONSISTENCY_KINDS), "kinds", list(CONSISTENCY_KINDS))
        parallel = "data"
        codec = ui.select("Codec on the wire", CODECS[:8], "codec", "32-bit", where=c1)
        codec = ui.codec_option_specs([codec], "codec")[0]
    workers = ui.number("Workers K", "workers", 4, where=c2, min_value=1, max_value=64, step=1)
    dataset = ui.select("Data set", list(DATASETS), "dataset", "digits", where=c3,
                        help="digits ships with scikit-learn; MNIST / Fashion-MNIST are read from disk if present")
    hidden = ui.select_slider("Hidden units (2 layers)", [32, 64, 128, 256, 512, 1024], "hidden", 64, where=c4)
    d1, d2, d3, d4 = st.columns(4)
    epochs = ui.number("Epochs", "epochs", 3.0, where=d1, min_value=0.25, max_value=50.0, step=0.25)
    lr = ui.number("Learning rate", "lr", 0.003, where=d2, min_value=1e-5, max_value=1.0, format="%.4g")
    batch = ui.number("Batch", "batch", 64, where=d3, min_value=1, max_value=4096, step=1)
    link = ui.select("Link (for modelled time)", list(LINKS), "link", "eth10g", where=d4)
    seed = ui.seed()
    base = dict(dataset=dataset, hidden=(hidden, hidden), epochs=epochs, lr=lr, batch=batch, workers=workers,
                link=link, parallel=parallel, seed=int(seed), evals_per_epoch=4)
    if experiment == "consistency models":
        base["codec"] = None if codec == "32-bit" else codec


    def train(experiment: str, runs: list, base: dict, progress, on_point):
        if experiment == "codecs":
            return codec_curves([None if r == "32-bit" else r for r in runs], progress=progress, on_point=on_point, **base)
        return consistency_curves(list(runs), progress=progress, on_point=on_point, **base)


    x1, x2, _ = st.columns([1, 1, 2])
    xname = ui.select("x axis", list(X), "x", "epochs", where=x1)
    yname = ui.select("y axis", list(Y), "y", "test error (%)", where=x2)

    if not runs:
        st.info("Pick at least one run.")
        st.stop()
    if ui.run_button("Train", "train_run", [experiment, runs, base]):
        live = st.empty()
        points: list[dict] = []

        def on_point(row: dict) -> None:
            points.append(row)
            if len(points) % 2 == 0:
                live.plotly_chart(plots.training_curve_figure(pd.DataFrame(points), X[xname], Y[yname]),
                                  key=f"live_{len(points)}")

        with ui.guard():
            cb = ui.progress()
            curves, summary = ui.cached_run("train", [experiment, runs, base],
                                            lambda: train(experiment, runs, base, cb, on_point))
            cb(1.0, "done")
        live.empty()
        first = summary.iloc[0]
        m = st.columns(min(len(summary), 4))
        for i, (_, r) in enumerate(summary.head(4).iterrows()):
            m[i].metric(f"{r.variant}: final test error", f"{r.final_test_error:.2f} %",
                        delta=None if i == 0 else f"{r.final_test_error - first.final_test_error:+.2f} points",
                        delta_color="inverse")
        n1, n2 = st.columns(2)
        n1.metric(f"Bytes sent ({summary.iloc[-1].variant})", f"{int(summary.iloc[-1].bytes):,}",
                  delta=f"{summary.iloc[-1].bytes / first.bytes:.0%} of {first.variant}", delta_color="off")
        n2.metric(f"Modelled time ({summary.iloc[-1].variant})", f"{summary.iloc[-1].modelled_time_s * 1e3:.3g} ms")
        ui.figure(plots.training_curve_figure(curves, X[xname], Y[yname]), curves, "training_curves")
        ui.table(summary, "training_summary")
    else:
        st.info("Set the runs and press Train: each run is one simulated training job; curves draw as they come.")
