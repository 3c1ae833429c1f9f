"""The Training page in Streamlit's AppTest: which data set and model run is said on the page
(the §3.4 preset on a machine without MNIST says digits, 64 inputs), the §3.4 view carries the paper's
numbers, Train runs in the background with a takeaway from the results, Stop keeps the partial curve, and
bad input is a message."""
import time

import pytest

from lab.experiments import codec_curves, dataset_info
from lab.plots.units import si_bytes_label
from apptest_runs import held, rerun_until, stop_after_rows
from test_app import page as app_page
from test_app_tables import assert_for_people
from lazy_import import lazy

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection
figures = lazy("chart", "figures")


def page(**query) -> AppTest:
    """The training page on its own, its URL carrying `query` (tests/test_app.py's `page`)."""
    return app_page("training", **query)


def texts(at: AppTest, kind: str) -> str:
    return " ".join(str(e.value) for e in at.get(kind))


def wait(at: AppTest, done, timeout: float = 180.0) -> AppTest:
    """Rerun the page until done(at): when its background run ends, not on a clock (apptest_runs.rerun_until)."""
    return rerun_until(at, done, "the background run", timeout)


def finished(at: AppTest) -> bool:
    return any("Final test error per run" in c.value for c in at.caption) or bool(at.error)


@pytest.fixture(scope="module")
def default_view() -> AppTest:
    """The page's default view, rendered once for the tests that only read it."""
    return page()


def test_default_view_names_data_and_model(default_view):
    at = default_view
    assert not at.exception
    md = texts(at, "markdown")
    assert "Runs on digits" in md and "MLP 64-64-64-10" in md
    assert not any("Final test error" in c.value for c in at.caption)  # nothing is trained before Train


def _metric(at: AppTest, label: str):
    return next(m for m in at.metric if m.label == label)


def test_default_view_opens_with_what_one_step_puts_on_the_wire():
    """Before any Train: one real step per codec, its bytes on the wire and the takeaway from them. The 32-bit
    figure is the ring allreduce's volume: K workers each send 2(K-1)/K of the 4-byte gradient."""
    at = page()
    assert not at.exception and not at.error
    n = (64 * 64 + 64) + (64 * 64 + 64) + (64 * 10 + 10)  # MLP 64-64-64-10: weights and biases
    K = 4
    ring = K * 2 * (K - 1) / K * 4 * n
    assert _metric(at, "32-bit: bytes per step").value == si_bytes_label(ring)  # 215 kB
    # the codecs' share is the page's prediction: not on the page before an answer or a skip
    assert _metric(at, "onebit: bytes per step").value == "?" and "%" not in texts(at, "success")
    at.button(key="skip-guess").click().run()
    tree = float(_metric(at, "dynamic_tree: bytes per step").value.split()[0]) * 1e3
    assert 0.25 <= tree / ring < 0.26  # 8 bits a value plus the blocks' scales
    one = float(_metric(at, "onebit: bytes per step").value.split()[0]) * 1e3
    assert one / ring < 0.1
    take = texts(at, "success")
    assert take.count("**Takeaway.**") == 1
    assert f"puts {si_bytes_label(ring)} of 32-bit gradients on the wire" in take
    assert f"dynamic_tree {si_bytes_label(tree)} ({tree / ring:.1%})" in take
    # it follows the controls: twice the workers, more bytes (each worker sends 2(K-1)/K of the gradient)
    at.number_input(key="w_workers").set_value(8).run()
    assert _metric(at, "32-bit: bytes per step").value == si_bytes_label(8 * 2 * 7 / 8 * 4 * n)
    assert "on 8 workers" in texts(at, "success")
    at = page(experiment="consistency models")
    assert not at.exception and not at.error
    take = texts(at, "success")
    assert f"sync 1 update of {si_bytes_label(ring)}" in take and "async 4 updates of" in take


def test_paper_preset_says_which_data_set_and_shows_the_paper():
    at = page(guess="skip")  # the codecs' bytes show once the prediction is made or skipped
    at.button[0].click().run()  # Preset: §3.4
    assert not at.exception
    info = dataset_info("auto")
    shown = texts(at, "warning") + texts(at, "markdown")
    assert f"Runs on {info['name']}" in shown and f"MLP {info['inputs']}-1024-1024-10" in shown
    if info["fell_back"]:
        assert "not the paper's 784" in texts(at, "warning")
    callout = texts(at, "info")
    assert "Paper vs here" in callout and "F(4, 4) = 0.71, p = 0.59" in callout
    # what the paper's five runs put on the wire, measured before any Train: the four 8-bit types a quarter of 32-bit
    base = next(m for m in at.metric if m.label == "32-bit: bytes per step")
    for t in ("linear", "mantissa", "static_tree", "dynamic_tree"):
        assert next(m for m in at.metric if m.label == f"{t}: bytes per step").delta.startswith("-7"), t
    assert base.value.endswith("MB")


def test_train_shows_results_and_a_takeaway_from_them():
    at = page(codecs=["32-bit", "dynamic_tree"], epochs="0.5", workers="2")
    at.button(key="run_train_run").click().run()
    at = wait(at, finished)
    assert not at.exception and not at.error
    take = texts(at, "success")
    assert "against 32-bit's" in take and "dynamic_tree ends" in take and "25% of the bytes" in take
    assert take.count("**Takeaway.**") == 1 and "One real" not in take  # the curves' takeaway replaces the wire's
    assert_for_people(at, "training runs")
    share = float(at.metric[-2].delta.split("(")[1].split("%")[0])
    assert 20 < share < 30  # 8 bits on the wire instead of 32
    assert at.metric[-2].delta.startswith("-7")  # ~75 % fewer bytes: the arrow points down
    at.selectbox(key="w_x").set_value("bytes sent (MB)").run()  # the axis redraws, the result stays
    assert "dynamic_tree ends" in texts(at, "success")
    at.number_input(key="w_workers").set_value(3).run()  # other settings: the curves stay, labelled as earlier
    assert any("from an earlier Train" in c.value for c in at.caption)
    take = texts(at, "success")  # ... and the takeaway is about what the settings on screen put on the wire
    assert "dynamic_tree ends" not in take and "on 3 workers" in take and take.count("**Takeaway.**") == 1


def test_stop_keeps_the_partial_curve():
    at = page(codecs=["32-bit", "dynamic_tree", "linear"], epochs="20", workers="2", hidden="256")
    with held("train_run"):  # once its first curve points are in
        at.button(key="run_train_run").click().run()
        stop_after_rows(at, "train_run")
    at = wait(at, lambda a: "Stopped" in texts(a, "warning"), 120)
    assert not at.exception
    assert figures(at)
    assert any("Final test error per run" in c.value for c in at.caption)


def test_bad_inputs_are_messages():
    at = page(workers="0")
    assert not at.exception and "1..64" in texts(at, "error")
    at = page(lr="7")
    assert "1e-05..1" in texts(at, "error")
    at = page(dataset="mnist")
    if dataset_info("auto")["fell_back"]:  # no MNIST here: the message says where it looked
        assert "no mnist IDX files found" in texts(at, "error")
    assert not at.exception


def test_progress_names_each_run_once():
    msgs = []
    codec_curves([None, "linear"], dataset="digits", hidden=(16, 16), epochs=0.25, workers=2, batch=64,
                 progress=lambda f, m: msgs.append(m))
    assert msgs and all(not m.startswith("32-bit: 32-bit") for m in msgs)
    assert any(m.startswith("32-bit: epoch") for m in msgs) and any(m.startswith("linear: epoch") for m in msgs)


def test_at_most_six_controls_in_view(default_view):
    from test_page_planner import MAX_IN_VIEW, top_level_inputs

    at = default_view
    shown = top_level_inputs(at)
    assert len(shown) <= MAX_IN_VIEW and any("'Codec per run (overlaid)'" in w for w in shown), shown


def test_many_workers_measure_one_step_on_demand():
    """64 simulated workers: one real step runs every hop on the CPU (seconds), so it waits for its button;
    the takeaway says so, and after the button the bytes are the ring's 2(K-1)/K of the gradient per worker."""
    at = page(workers="64", codecs=["32-bit"])
    assert not at.exception and not at.error
    assert not any(m.label.endswith("bytes per step") for m in at.metric)
    assert "press **Measure one step**" in texts(at, "success")
    at.button(key="wire_measure").click().run()
    assert not at.exception and not at.error
    n = (64 * 64 + 64) + (64 * 64 + 64) + (64 * 10 + 10)
    assert _metric(at, "32-bit: bytes per step").value == si_bytes_label(64 * 2 * 63 / 64 * 4 * n)
    at.number_input(key="w_epochs").set_value(1.0).run()  # measured once: it stays for these settings
    assert _metric(at, "32-bit: bytes per step").value == si_bytes_label(64 * 2 * 63 / 64 * 4 * n)


def test_stop_keeps_a_curve_for_every_run():
    """Regression: runs went one after another, so Stop kept only the first curve. They now take turns (a quarter
    epoch each): Stop, as soon as each run has reached its second evaluation, keeps every run's curve, each up to
    about the same epoch; the takeaway compares them with the noise a single seed and test set allow."""
    runs = ["32-bit", "dynamic_tree", "onebit"]
    at = page(codecs=runs, epochs="20", workers="2", hidden="32")
    with held("train_run", 2 * len(runs)):  # every run past its first evaluation
        at.button(key="run_train_run").click().run()
        run = stop_after_rows(at, "train_run")
    at = wait(at, lambda a: "Stopped" in texts(a, "warning"), 120)
    assert not at.exception
    curves = figures(at)[-1]
    drawn = {t["name"] for t in curves["data"]}
    assert set(runs) <= drawn, drawn
    import pandas as pd

    epochs = pd.DataFrame(run.curve()).groupby("variant").epoch.max()
    assert set(epochs.index) == set(runs) and epochs.max() - epochs.min() <= 0.3, epochs  # side by side: one interval apart at most
    take = texts(at, "success")
    assert "test images" in take and "two standard errors" in take


def test_takeaway_says_when_a_difference_is_noise():
    """Regression: '0.22 points' on 449 test images and one seed was reported as a fact."""
    import pandas as pd

    from views.training import _takeaway

    s = pd.DataFrame([{"variant": "32-bit", "final_test_error": 10.02, "bytes": 100.0},
                      {"variant": "dynamic_tree", "final_test_error": 10.24, "bytes": 25.0},
                      {"variant": "onebit", "final_test_error": 30.0, "bytes": 4.0}])
    text = _takeaway("codecs", s, "digits", 449)
    assert "dynamic_tree ends 0.22 points worse, 1 test image, within noise" in text
    assert "onebit ends 19.98 points worse, 90 test images (" in text  # far outside the noise: no caveat
    assert "one image is 0.22 points" in text


def _shown_seconds(at: AppTest) -> int:
    """The seconds on the live progress bar ("<message> · N s")."""
    bars = [p.proto.text for p in at.get("progress") if p.proto.text.endswith(" s")]
    assert bars, "no live progress bar with its seconds while the run is going"
    return int(bars[-1].rsplit("· ", 1)[1].split(" ")[0])


def test_running_timer_advances():
    """Regression: 'running… 0 s' never advanced. While a run goes, the page's progress bar shows the seconds
    since it began, and a later redraw shows more (event-driven: wait until the run's own clock has moved past
    the first reading, then redraw; the run is stopped after)."""
    from apptest_runs import job, wait_for

    at = page(codecs=["32-bit", "dynamic_tree", "linear"], epochs="20", workers="2", hidden="256")
    with held("train_run"):  # at its first curve point (it has begun: its clock runs) it waits for the stop below
        at.button(key="run_train_run").click().run()
        run = wait_for(lambda: job(at, "train_run"), "the run to start")
        wait_for(lambda: run.rows or not run.running, "the run's first curve point")
        assert run.running, (run.state, run.msg)
        at.run()
        first = _shown_seconds(at)
        wait_for(lambda: time.perf_counter() - run.started >= first + 1.5, "the run's clock to pass the shown seconds")
        at.run()
        assert _shown_seconds(at) > first
        run.stop()
    wait_for(lambda: not run.running, "the run to stop")


def test_predict_the_share_of_bytes_before_the_reveal():
    """Predict, then reveal on Training: the share of 32-bit's bytes a codec puts on the wire."""
    at = page(codecs=["32-bit", "dynamic_tree"], workers="2")
    assert not at.exception
    assert "What share of 32-bit's bytes per step does dynamic_tree put on the wire?" in texts(at, "markdown")
    at = page(codecs=["32-bit", "dynamic_tree"], workers="2", guess="25")
    assert not at.exception and "**Right.**" in texts(at, "success") and " = 25" in texts(at, "success")
    at = page(codecs=["32-bit", "dynamic_tree"], workers="2", guess="100")
    assert "**Not quite.**" in texts(at, "warning")


def test_every_registered_parallelism_trains_on_real_ranks_fp32_beside_the_codec():
    """The real-rank view offers every registered strategy; tensor parallelism on 2 Gloo ranks trains fp32, then
    8-bit activations: the bytes on screen are those counted on the wire, the takeaway says the share."""
    from apptest_runs import job
    from lab.experiments import parallel_strategies
    from views import _parallel_training as parallel_view

    at = page(experiment=parallel_view.MODE, par_mode="tensor", par_epochs="0.25", par_codec="dynamic_tree")
    assert not at.exception and not at.error
    assert at.selectbox(key="w_par_mode").options == parallel_strategies()
    assert {"pipeline", "tensor", "hybrid", "expert"} <= set(parallel_strategies())
    at.button(key="run_par_run").click().run()
    at = wait(at, lambda a: any("Takeaway" in s.value for s in a.success) or a.error or a.exception)
    assert not at.exception and not at.error, texts(at, "error")
    res = job(at, "par_run").result
    per = {k: r.summary["bytes"] / r.summary["steps"] for k, r in res.items()}
    assert list(per) == ["fp32", "dynamic_tree"]
    assert _metric(at, "fp32: bytes per step").value == si_bytes_label(per["fp32"])
    share = per["dynamic_tree"] / per["fp32"]
    assert 0.25 <= share < 0.3  # 8 bits a value plus the blocks' scales; fp32 losses and evaluations
    assert _metric(at, "dynamic_tree: bytes per step").delta == f"{share - 1:+.0%} vs fp32"
    take = texts(at, "success")
    assert take.count("**Takeaway.**") == 1 and f"dynamic_tree sent {share:.1%} of those bytes" in take
    assert_for_people(at, "real-rank runs")
    curves = figures(at)[-1]
    assert [t["name"] for t in curves["data"]] == ["fp32", "dynamic_tree"]


def test_real_rank_bad_settings_are_one_line_before_any_rank_starts():
    from apptest_runs import job
    from views import _parallel_training as parallel_view

    at = page(experiment=parallel_view.MODE, par_mode="pipeline", par_procs="4", par_layers="1")  # 4 stages, 2 layers
    assert not at.exception
    assert "more than the 2 layers" in texts(at, "error") and job(at, "par_run") is None
    at = page(experiment=parallel_view.MODE, par_mode="expert", **{"expert.experts": "3"})  # 3 experts on 2 ranks
    assert not at.exception and "allowed: a multiple of 2" in texts(at, "error")


def test_consistency_knobs_reach_the_runs_and_the_takeaway_weighs_updates_against_time_per_update():
    """The consistency view: each model's knobs from the URL name the runs (ssp's bound, gossip's graph), a
    predict-first question, curves against modelled time and against updates, and a takeaway whose figures are
    the curves' own: batches to the target x modelled time per batch = time to the target."""
    import re

    q = dict(experiment="consistency models", kinds=["sync", "ssp", "gossip"], staleness="0", straggler="1",
             graph="random", epochs="0.5", workers="3")
    at = page(**q)
    assert not at.exception and not at.error
    assert at.number_input(key="w_straggler").value == 1 and at.selectbox(key="w_graph").value == "random"
    assert "Predict first." in texts(at, "markdown") and "which run reaches the test-error target" in texts(
        at, "markdown")
    at.button(key="run_train_run").click().run()
    at = wait(at, finished)
    assert not at.exception and not at.error
    take = texts(at, "success")  # the answer is held back until the question is answered
    assert "which one got there first in modelled time is the question above" in take and "batches ×" not in take
    assert not figures(at)
    at.radio(key="w_guess_consistency").set_value("sync").run()
    take = [str(e.value) for e in at.success if str(e.value).startswith("**Takeaway.**")]
    assert len(take) == 1
    take = take[0]
    assert "statistical efficiency" in take and "hardware efficiency" in take
    runs = re.findall(r"(sync|ssp\(s=0\)|gossip\(random\)) ([\d.]+) batches × ([\d.]+) (ms|s) = ([\d.]+) (ms|s)", take)
    assert [r[0] for r in runs] == ["sync", "ssp(s=0)", "gossip(random)"], take
    for _, n, per, unit, total, tunit in runs:  # three significant digits each
        assert float(n) * float(per) * (1e-3 if unit == "ms" else 1) == pytest.approx(
            float(total) * (1e-3 if tunit == "ms" else 1), rel=0.01)
    assert len(figures(at)) == 2  # against modelled time and against updates
    titles = [f["layout"]["xaxis"]["title"]["text"].lower() for f in figures(at)]
    assert "time" in titles[0] and ("update" in titles[1] or "step" in titles[1]), titles
    # the answer is the run the same curves put first
    fast = min(runs, key=lambda r: float(r[4]) * (1e-3 if r[5] == "ms" else 1))[0]
    said = texts(at, "success") + texts(at, "warning")
    assert ("**Right.**" in said) == (fast == "sync") and "Measured on the curves below" in said
    at = page(experiment="consistency models", staleness="99")
    assert "SSP staleness bound s" in texts(at, "error") and "0..64" in texts(at, "error")
