"""Multi-scale fusion page (Wu et al. 2015 §4.2): the same small CNN trained at two input scales, softmax
outputs averaged, behind a Run button."""
import streamlit as st

import _common as ui
from lab import plots
from lab.experiments import DATASETS, multiscale_fusion

SCALES = ["8", "12", "16", "20", "24", "28", "32", "42", "48", "56", "64"]


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Multi-scale fusion")
    st.caption("The same small CNN trained at two input scales; the fusion averages their softmax outputs. The defaults "
               "(scikit-learn's digits at 16 and 32 px) take seconds on a CPU; Fashion-MNIST at 28 and 56 px shows the "
               "effect more reliably (minutes).")
    seed = int(ui.seed(where=st.columns([1, 4])[0]))
    k1, k2, k3, k4, k5 = st.columns(5)
    dataset = ui.select("Data set", list(DATASETS), "dataset", "digits", where=k1)
    scales = ui.multiselect("Scales (px)", SCALES, "scales", ["16", "32"], where=k2)
    epochs = ui.number("Epochs", "epochs", 8, where=k3, step=1)
    train_n = ui.number("Training images (0 = all)", "train_n", 0, where=k4, step=500)
    test_n = ui.number("Test images (0 = all)", "test_n", 0, where=k5, step=500)
    fparams = [dataset, scales, epochs, train_n, test_n, seed]


    def fusion():
        if not ui.run_button("Train and fuse", "fusion_run", fparams):
            st.info("Press Train and fuse: one model per scale is trained, then fused.")
            return
        cb = ui.progress()
        res = ui.cached_run("fusion", fparams, lambda: multiscale_fusion(
            dataset=dataset, scales=[int(s) for s in scales], epochs=int(epochs), train_size=int(train_n) or None,
            test_size=int(test_n) or None, seed=seed, progress=cb))
        cb(1.0, "done")
        t = res.table
        cols = st.columns(len(t))
        for i, r in enumerate(t.itertuples()):
            cols[i].metric(f"{r.model}: test error", f"{r.test_error:.2f} %",
                           delta=f"{r.vs_best_single:+.2f} points vs best single" if i == len(t) - 1 else None,
                           delta_color="inverse")
        st.caption(f"{res.info['dataset']} ({res.info['source']}): {res.info['train']} training and {res.info['test']} "
                   f"test images, native {res.info['native_px'][0]}x{res.info['native_px'][1]} px.")
        left, right = st.columns(2)
        with left:
            ui.figure(plots.fusion_figure(t), t, "fusion")
        with right:
            ui.figure(plots.fusion_curve_figure(res.curves), res.curves, "fusion_curves")
        ui.table(res.agreement, "fusion_agreement")


    ui.shown(fusion)
