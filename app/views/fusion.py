"""Multi-scale fusion page (Wu et al. 2015 §4.2): the same small CNN trained at two input scales, softmax outputs
averaged — do the two together make fewer mistakes than either alone? Behind Train and fuse (Run / Stop)."""
import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
import chart
from lab import plots
from lab.experiments import DATASETS, multiscale_fusion

SCALES = ["8", "12", "16", "20", "24", "28", "32", "42", "48", "56", "64"]
# §4.2: ImageNet validation top-5 error of the 256 px and 512 px models and of their average
PAPER = pd.DataFrame({"model": ["256 px", "512 px", "fused (mean of softmax)"], "test_error": [7.96, 7.42, 6.97]})


FUSION_ANSWERS = ["fewer mistakes than the better scale", "about the same: a few test images either way",
                  "more mistakes than the better scale"]
NOISE_IMAGES = 2.5  # a difference of fewer test images than this is one seed's luck (the takeaway's rule)
HIDDEN_BEFORE = "the paper's §4.2 numbers show once you answer the question above, or skip it"
HIDDEN_AFTER = ("the test errors, the fused model's bar and the paper's numbers show once you answer the question "
                "above, or skip it")


def _predict_fusion(done) -> None:
    """Does averaging the two scales beat the better one? Revealed from the finished run (these settings)."""
    def reveal():
        if done is None:
            return None
        t, n = done.result.table, done.result.info["test"]
        fused, best = t.iloc[-1], t.iloc[:-1].sort_values("test_error").iloc[0]
        images = (best.test_error - fused.test_error) * n / 100
        right = (FUSION_ANSWERS[1] if abs(images) < NOISE_IMAGES else FUSION_ANSWERS[0] if images > 0 else
                 FUSION_ANSWERS[2])
        return right, (f"Fused {fused.test_error:.2f} % against {best.test_error:.2f} % for {best.model}: "
                       f"{images:+.0f} test images of {n:,} (one image = {100 / n:.2f} points; fewer than "
                       f"{NOISE_IMAGES:g} images apart is within one seed's noise). The paper's ImageNet models: "
                       f"7.42 % → 6.97 %.")
    ui.predict("Averaging the softmax of the same network trained at two scales: does the fused model make fewer "
               "test mistakes than the better single scale?", FUSION_ANSWERS, reveal, key="guess")


def _verdict(t: pd.DataFrame, info: dict) -> str:
    """The takeaway of a finished run, by the reveal's rule: fewer than NOISE_IMAGES test images apart is one
    seed's noise (Wu et al. 2015 §4.2 found the fusion better)."""
    fused, best = t.iloc[-1], t.iloc[:-1].sort_values("test_error").iloc[0]
    worst = t.iloc[:-1].sort_values("test_error").iloc[-1]
    gain = best.test_error - fused.test_error
    images = gain * info["test"] / 100
    head = (f"On {info['dataset']}, the fused model misclassifies {fused.test_error:.2f} % of the test images "
            f"against {best.test_error:.2f} % for the better single model ({best.model}): ")
    if images >= NOISE_IMAGES:
        return head + (f"{gain:.2f} points ({images:.0f} test images) fewer — the scales complement each other, as "
                       "§4.2 found.")
    if images > -NOISE_IMAGES:
        return head + (f"{abs(round(images))} test image(s) apart, within one seed's noise — more test images or "
                       "Fashion-MNIST at 28 and 56 px settle it.")
    return head + (f"{-gain:.2f} points ({-images:.0f} test images) more — fusion hurts here: the weaker scale "
                   f"({worst.model}, {worst.test_error:.2f} %) drags the average down; scales closer in accuracy, or "
                   "Fashion-MNIST at 28 and 56 px, show the paper's gain.")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Multi-scale fusion")
    ui.lesson("Do two copies of a network, trained on the same images at two sizes, make fewer mistakes together "
              "than either alone?",
              "Press **Train and fuse**: compare the fused model's test error (last bar) with each single scale's, "
              "and the paper's ImageNet numbers beside them. The table at the bottom counts the test images only one "
              "of the two got right: where they disagree, the average can pick the right one.")
    k1, k2, k3 = st.columns(3)
    dataset = ui.select("Data set", list(DATASETS), "dataset", "digits", where=k1,
                        help="digits: scikit-learn's 8×8 digits (always here, seconds); mnist / fashion-mnist: IDX "
                             "files if installed (minutes; Fashion-MNIST at 28 and 56 px shows the effect reliably)")
    scales = ui.multiselect("Scales (px)", SCALES, "scales", ["16", "32"], where=k2,
                            help="input sizes the images are resized to, one model each (at least two, 8–64 px); "
                                 "the paper: 256 and 512")
    epochs = ui.number("Epochs", "epochs", 8, where=k3, step=1, min_value=1, max_value=100,
                       help="passes over the training set per model, 1–100")
    with ui.more_settings():
        m1, m2, m3 = st.columns(3)
        seed = int(ui.number("Seed", "seed", 0, where=m1, min_value=0, step=1,
                            help="seeds the subsets, the weights and the data order, ≥ 0: the same seed gives the same run"))
        train_n = ui.number("Training images (0 = all)", "train_n", 0, where=m2, step=500, min_value=0,
                            help="a seeded subset of the training set, 0 = all of it")
        test_n = ui.number("Test images (0 = all)", "test_n", 0, where=m3, step=500, min_value=0,
                           help="a seeded subset of the test set, 0 = all of it")
    params = dict(dataset=dataset, scales=list(scales), epochs=int(epochs), train_n=int(train_n), test_n=int(test_n),
                  seed=seed)

    def go(job: jobs.Job):
        return multiscale_fusion(dataset=dataset, scales=[int(s) for s in scales], epochs=int(epochs),
                                 train_size=int(train_n) or None, test_size=int(test_n) or None, seed=seed,
                                 progress=job.progress, on_point=job.on_row)

    predict_slot = st.container()
    takeaway_slot = st.container()
    job = jobs.controls("Train and fuse", "fusion_run", params, go,
                        help="trains one model per scale, then averages their softmax outputs (digits: seconds)")
    jobs.watch("fusion_run", lambda j: chart.plotly(plots.fusion_curve_figure(pd.DataFrame(j.curve())),
                                                    key="fusion_live"))
    jobs.release()  # nothing heavy follows: the run may begin
    if job is not None and job.error:
        st.error(job.error)
    if job is not None and job.stopped and job.rows:
        st.caption(f"Partial curves of the stopped run ({len(job.rows)} epochs):")
        chart.plotly(plots.fusion_curve_figure(pd.DataFrame(job.curve())), key="fusion_partial")
    done = jobs.last_result("fusion_run")
    with predict_slot:
        _predict_fusion(done if done is not None and done.token == ui.params_token(params) else None)
    # the paper's numbers and this run's errors answer the question: they wait for an answer (or a skip), which
    # the URL carries as soon as it is given, even while the reveal itself waits for a run
    answered = ui.revealed("guess") or st.query_params.get("guess") in (*FUSION_ANSWERS, ui.SKIP)
    paper_gain = PAPER.test_error.iloc[:2].min() - PAPER.test_error.iloc[-1]
    if done is None:
        with takeaway_slot:
            if answered:
                ui.takeaway(f"In the paper, averaging the 256- and 512-px models cut ImageNet top-5 error to "
                            f"{PAPER.test_error.iloc[-1]:.2f} %, {paper_gain:.2f} points below the better single "
                            "model — press **Train and fuse** to test the idea here.")
            else:
                ui.withheld(HIDDEN_BEFORE, "Whether averaging the two scales beats the better one is the question "
                                           "above: answer it (or skip it), then press **Train and fuse** to see it "
                                           "here.")
        if not answered:
            return
        ui.paper_callout("The paper's §4.2 numbers (ImageNet validation, top-5 error): 256 px 7.96 %, 512 px 7.42 %, "
                         "fused 6.97 %. Nothing trained here yet.", "fusion")
        fig = plots.fusion_figure(PAPER)
        fig.update_layout(title="The paper's §4.2: ImageNet top-5 error", margin={"t": 50})
        chart.plotly(fig, key="fusion_paper")
        return
    res = done.result
    if done.token != ui.params_token(params):
        st.caption("These results are from the last run (" + ui.described(done.params)
                   + "); press **Train and fuse** for the current settings.")
    t = res.table
    fused, best = t.iloc[-1], t.iloc[:-1].sort_values("test_error").iloc[0]
    cols = st.columns(len(t))
    labels = [f"{'fused' if i == len(t) - 1 else r.model}: test error" for i, r in enumerate(t.itertuples())]
    if not answered:
        with takeaway_slot:
            singles = " and ".join(t.model.iloc[:-1])
            ui.withheld(HIDDEN_AFTER, f"Whether the fused model beats the better of {singles} on "
                                      f"{res.info['dataset']} is the question above: answer it (or skip it) to see "
                                      "this run's test errors.", zip(cols, labels))
    else:
        with takeaway_slot:
            ui.takeaway(_verdict(t, res.info))
        for i, r in enumerate(t.itertuples()):
            cols[i].metric(labels[i], f"{r.test_error:.2f} %",
                           delta=f"{r.vs_best_single:+.2f} points" if i == len(t) - 1 else None,
                           delta_color="inverse", help="the change is against the better single scale (lower is "
                                                       "better)" if i == len(t) - 1 else None)
    n_test = res.info["test"]
    if answered:
        ui.paper_callout(f"Paper (ImageNet top-5): 256 px 7.96 %, 512 px 7.42 %, fused 6.97 % — {paper_gain:.2f} "
                         f"points ({paper_gain / 7.42:.0%}) below the better one. Here ({res.info['dataset']}, "
                         f"top-1, {n_test:,} test images, one error = {100 / n_test:.2f} points): fused "
                         f"{fused.test_error:.2f} % vs {best.test_error:.2f} %. Upsampling small images adds no "
                         "detail, so what differs between the scales is the object's size against the fixed 3×3 "
                         "kernels — a weaker version of the paper's high-resolution gain.", "fusion")
    st.caption(f"{res.info['dataset']} ({res.info['source']}): {res.info['train']:,} training and {n_test:,} test "
               f"images, native {res.info['native_px'][0]}×{res.info['native_px'][1]} px; {done.seconds:.1f} s.")
    if answered:
        ui.figure(plots.fusion_figure(t), t, "fusion")
    ui.figure(plots.fusion_curve_figure(res.curves), res.curves, "fusion_curves")
    ui.people_table(res.agreement, "fusion_agreement", {"outcome": ("Outcome",), "fraction": (
        "Test images", "%", "share of the test set", 100.0, "%.2f")})
