"""The Dropout page teaches Song et al. 2019's lesson: its default training run learns and RDP/TDP run
faster than conventional dropout, the takeaway and the Table I callout are computed from that run, Run/Stop keep
the last finished result and the partial curve, bad input (a missing or unreadable corpus) is a message, and the
pattern heatmaps carry a colour legend without overlapping ticks (streamlit AppTest; app/ is on the pythonpath)."""
import pickle

import pytest

import re
import time

from apptest_runs import held, job, stop_after_rows, wait_for
from test_app import finish, metric, number, page
from test_app_tables import assert_for_people
from lazy_import import lazy

tables = lazy("static_table", "tables")  # pandas: loaded by the first test that reads a table

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection
figures = lazy("chart", "figures")

WIDGETS = ("selectbox", "multiselect", "slider", "select_slider", "number_input", "radio", "checkbox", "text_input")


def _trained(at: AppTest) -> bool:
    return any(m.label in ("conventional", "RDP (row)", "TDP (tile)") for m in at.metric) or bool(at.exception) \
        or bool(at.error)


def _takeaway(at: AppTest) -> str:
    return next(s.value for s in at.success if s.value.startswith("**Takeaway.**"))


def _callout(at: AppTest) -> str:
    return next(i.value for i in at.info if i.value.startswith("**Paper vs here.**"))


def test_default_view_opens_with_the_question_a_takeaway_and_help_on_every_control():
    at = page("dropout")
    assert not at.exception and not at.error
    assert any("drop whole rows or tiles" in m.value for m in at.markdown)  # ui.lesson's question
    # the drop rate is the page's prediction: not said (nor charted) before an answer or a skip
    assert "drops every unit" not in _takeaway(at) and "question below" in _takeaway(at)
    assert not any("still dropped" in m.value for m in at.markdown)
    assert any("how often is each single unit dropped" in m.value for m in at.markdown)
    charts = len(figures(at))
    at.button(key="skip-guess").click().run()
    assert "drops every unit 0.700 of the time (target 0.7)" in _takeaway(at)  # Algorithm 1 at the default p
    assert len(figures(at)) == charts + 1  # the searched mix
    for kind in WIDGETS:
        for w in getattr(at, kind):
            assert w.help, f"{kind} {w.label!r} has no help tooltip"


def test_default_training_run_learns_and_the_patterns_are_faster():
    """The defaults (p = 0.7, 64-1024-1024-10 MLP on digits, 8 epochs, lr 0.01, batch 32) must show the paper's
    lesson: every pattern learns (the old defaults stopped at 42-51 %) and RDP/TDP epochs are faster."""
    at = page("dropout")
    at.button(key="run_net_run").click().run()
    finish(at, _trained, timeout=240)
    assert not at.exception and not at.error
    for label in ("conventional", "RDP (row)", "TDP (tile)"):
        assert number(metric(at, label)) >= 85.0, label
    runs = job(at, "net_run").result.table  # the run's numbers; its table shows them for people
    assert_for_people(at, "dropout runs")
    shown = tables(at)[-1]
    assert shown["Speedup vs conventional (x)"].tolist() == pytest.approx(runs.speedup.tolist(), nan_ok=True)
    conventional = runs[runs.kind == "bernoulli"]
    patterns = runs[runs.kind != "bernoulli"]
    # each speedup is conventional's epoch time over the pattern's, from this run; that the patterns are faster
    # is a timing claim, measured by `paralab dropout mlp` / `bench dropout` (tests/test_bench_results.py checks
    # the committed ratios), not here on a shared machine
    assert len(conventional) == 1 and len(patterns) == 2 and (runs.epoch_s > 0).all()
    assert patterns.speedup.tolist() == pytest.approx((float(conventional.epoch_s.iloc[0]) / patterns.epoch_s).tolist())
    # the takeaway says what this run's numbers say, whichever way the timing fell on a shared machine
    take, best = _takeaway(at), patterns.sort_values("speedup").iloc[-1]
    assert {"speedup_lo", "speedup_hi"} <= set(runs.columns)  # the spread the takeaway judges noise by
    if best.speedup_lo <= 1 <= best.speedup_hi:
        assert "is within noise" in take and "no speedup either way" in take
    elif best.speedup > 1.3 * 11.1:
        assert "other work on this machine slowed" in take  # a disturbed timing is named, not shown as a result
    else:
        verdict = "faster" if best.speedup > 1.05 else "no faster" if best.speedup > 0.95 else "slower"
        assert f"as fast as conventional dropout — {verdict}" in take
        assert verdict != "faster" or "1/(1−p)² = 11.1x" in take
    callout = _callout(at)  # Table I's 1024x1024 column beside ours
    assert "RDP (row) 98.01 % at 1.45x" in callout and "TDP (tile) 98.15 % at 1.41x" in callout


def test_stop_keeps_the_last_result_and_the_partial_curve_and_a_result_survives_other_changes():
    at = page("dropout", net_hidden="64", net_epochs="1", kinds=["bernoulli", "row"])
    at.button(key="run_net_run").click().run()
    finish(at, _trained)
    first = metric(at, "RDP (row)")
    at.number_input(key="w_net_epochs").set_value(50).run()  # other settings: the result stays, labelled
    at.select_slider(key="w_net_hidden").set_value(1024).run()
    assert metric(at, "RDP (row)") == first
    assert any(c.value.startswith("These results are from the last run") for c in at.caption)
    with held("net_run"):  # 50 epochs of 1024 units: minutes; stopped after its first point
        at.button(key="run_net_run").click().run()
        stop_after_rows(at, "net_run")
    assert not at.exception
    assert any(c.value.startswith("stopped after") for c in at.caption)
    assert any(c.value.startswith("Partial curves of the stopped run") for c in at.caption)
    assert metric(at, "RDP (row)") == first  # the last finished result is still shown


def _seconds(said: str) -> float:
    """'3 min 40 s' -> 220, '1 h 05 min' -> 3900 (the progress bar's time left)."""
    units = {"h": 3600, "min": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+) (h|min|s)\b", said))


def test_the_patterns_take_turns_so_stop_keeps_each_one_and_the_bar_says_the_time_left():
    """Regression: the patterns trained one after another (minutes each at Table I's width), so Stop kept
    conventional dropout's curve alone, and the page promised "a few seconds" whatever the settings. The patterns
    now take turns a quarter epoch each: a Stop keeps a curve of every pattern, each as far as the others; while it
    trains, the progress bar estimates the time left from the progress so far."""
    at = page("dropout", net_hidden="1024", net_epochs="20")
    assert not any("a few seconds" in str(w.help) for w in at.button) and "a few seconds" not in str(
        [c.value for c in at.caption])
    with held("net_run", rows=6):  # six points: on the old code all conventional dropout's
        at.button(key="run_net_run").click().run()
        run = wait_for(lambda: job(at, "net_run"), "the run to start")
        wait_for(lambda: len(run.curve()) >= 6, "six points")
        wait_for(lambda: time.perf_counter() - run.started >= 3, "3 s of the run")  # enough to go by
        at.run()
        bar = at.get("progress")[0].proto.text
        said = re.search(r"· (\d+) s · about (.+) left$", bar)
        assert said, bar
        elapsed, left = float(said.group(1)), _seconds(said.group(2))
        rate = (1 - run.frac) / run.frac  # the estimate: seconds so far x what is left / what is done
        assert abs(left - elapsed * rate) <= 0.6 * rate + 10, (bar, run.frac)
        stop_after_rows(at, "net_run")
    kinds = [r["kind"] for r in run.curve()]
    assert kinds[:6] == ["bernoulli", "row", "tile"] * 2
    reached = {k: max(r["epoch"] for r in run.curve() if r["kind"] == k) for k in ("bernoulli", "row", "tile")}
    caption = next(c.value for c in at.caption if c.value.startswith("Partial curves of the stopped run"))
    assert caption == (f"Partial curves of the stopped run ({len(kinds)} points): conventional to epoch "
                       f"{reached['bernoulli']:.2g}, RDP (row) to epoch {reached['row']:.2g}, TDP (tile) to epoch "
                       f"{reached['tile']:.2g}.")


def test_lstm_says_which_corpus_ran_and_unreadable_files_are_messages(tmp_path):
    at = page("dropout", net="LSTM", lstm_hidden="64", lstm_epochs="1", kinds=["bernoulli"])
    at.button(key="run_net_run").click().run()
    finish(at, _trained)
    assert not at.exception and not at.error
    assert any(c.value.startswith("Corpus that ran: **pydoc") for c in at.caption)  # the fallback, named
    (tmp_path / "ptb.train.txt").mkdir()  # a directory where a file should be: an OSError, not a traceback
    for name in ("ptb.valid.txt", "ptb.test.txt"):
        (tmp_path / name).write_text("a b c\n")
    at = page("dropout", net="LSTM", lstm_hidden="64", lstm_epochs="1", kinds=["bernoulli"], corpus="ptb",
              ptb_path=str(tmp_path))
    at.button(key="run_net_run").click().run()
    finish(at, lambda a: a.error or a.exception)
    assert not at.exception
    assert str(tmp_path) in at.error[0].value or "ptb.train.txt" in at.error[0].value


def test_user_errors_cover_unreadable_and_non_pickle_files():
    from lab.experiments import USER_ERRORS

    for err in (FileNotFoundError, IsADirectoryError, PermissionError, pickle.UnpicklingError, ValueError):
        assert issubclass(err, USER_ERRORS), err
    assert not issubclass(TypeError, USER_ERRORS)  # a bug, not a message


def test_pattern_heatmaps_have_one_colour_legend_and_ticks_on_the_outer_panels_only():
    from lab import plots
    from lab.experiments import pattern_masks

    fig = plots.dropout_pattern_figure(pattern_masks(0.7, ["bernoulli", "row", "tile"], samples=2, batch=32,
                                                     units=128, seed=0))
    scales = [t for t in fig.data if t.showscale]
    assert len(scales) == 1 and list(scales[0].colorbar.ticktext) == ["dropped", "kept"]
    layout = fig.to_dict()["layout"]
    inner_y = [v for k, v in layout.items() if k.startswith("yaxis") and k not in ("yaxis", "yaxis3", "yaxis5")]
    assert inner_y and all(ax.get("showticklabels") is False for ax in inner_y)  # column 2: no y tick labels
    inner_x = [layout[k] for k in ("xaxis", "xaxis2", "xaxis3", "xaxis4")]
    assert all(ax.get("showticklabels") is False for ax in inner_x)  # rows 1-2: no x tick labels


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_the_takeaway_follows_the_rate(p):
    at = page("dropout", p=str(p), guess="skip")
    assert f"drops every unit {p:.3f} of the time" in _takeaway(at)


def test_at_most_six_controls_in_view_and_the_layer_timing_settings_folded():
    from test_page_planner import MAX_IN_VIEW, top_level_inputs

    at = page("dropout")
    shown = top_level_inputs(at)
    assert len(shown) <= MAX_IN_VIEW, shown
    for label in ("Dropout rate p", "Network", "Hidden units per layer"):  # the lesson's controls stay in view
        assert any(repr(label) in w for w in shown), (label, shown)
    assert not any("'Widths w'" in w or "'Seed'" in w for w in shown)
    assert {"More settings", "Widths and rates to time"} <= {e.label for e in at.expander}
    at = page("dropout", widths=["256", "2048"], rates=["0.5"])  # the folded widths still come from the URL
    assert not at.exception
    assert any(c.value == "**Time layers** times widths 256, 2048 at p = 0.5." for c in at.caption)


def test_a_speedup_inside_the_epochs_spread_is_said_to_be_noise():
    """Regression: at width 128 'no dropout' showed 0.28x of conventional from one noisy run. Each speedup now
    carries its range over the epochs, and the takeaway calls a range that includes 1x within noise (accuracy
    differences too, against the test set's size)."""
    import pandas as pd

    from views.dropout import _takeaway as take

    t = pd.DataFrame([
        {"dataset": "digits", "kind": "bernoulli", "pattern": "conventional", "test_acc": 95.0, "acc_change": 0.0,
         "speedup": 1.0, "speedup_lo": 0.5, "speedup_hi": 2.0, "test_samples": 360},
        {"dataset": "digits", "kind": "row", "pattern": "RDP (row)", "test_acc": 94.7, "acc_change": -0.3,
         "speedup": 1.4, "speedup_lo": 0.28, "speedup_hi": 3.5, "test_samples": 360}])
    text = take(t, {"p": 0.7, "hidden": 128})
    assert "1.40x (0.28–3.50x over the epochs, within noise)" in text and "is within noise" in text
    assert "within noise: ±" in text and "360 test images" in text  # -0.3 points on 360 images
    t.loc[1, ["speedup_lo", "speedup_hi"]] = [1.2, 1.6]
    assert "— faster" in take(t, {"p": 0.7, "hidden": 128})


def test_the_takeaway_never_describes_an_earlier_run():
    """Regression: after a setting changed, the takeaway kept describing the previous run. A result of other
    settings stays on screen, labelled; the takeaway speaks of the settings shown."""
    at = page("dropout", net_hidden="64", net_epochs="1", kinds=["bernoulli", "row"])
    at.button(key="run_net_run").click().run()
    finish(at, _trained)
    assert "64-unit layers" in _takeaway(at)
    assert any("over the epochs" in c.value for c in at.caption)  # the speed spread is shown
    at.slider(key="w_p").set_value(0.5).run() if at.slider else at.number_input(key="w_p").set_value(0.5).run()
    assert any(c.value.startswith("These results are from the last run") for c in at.caption)
    text = _takeaway(at)
    assert "64-unit layers" not in text and "p = 0.5" in text


def test_layer_timings_carry_the_repeats_spread():
    """Regression: the layer section's 'no dropout' at width 128 showed 0.28x of conventional from one noisy
    median. Each speedup now has the range of the repeats' own ratios (error bars, hover) and the page names the
    ones whose range includes 1x as within noise; 'faster' needs every repeat above 1.1x."""
    import pandas as pd

    from lab import plots
    from lab.experiments import layer_speedup

    sp = layer_speedup([64], [0.5], batch=16, steps=1, repeats=3)
    assert {"speedup_lo", "speedup_hi"} <= set(sp.columns)
    assert (sp.speedup_lo <= sp.speedup + 1e-12).all() and (sp.speedup <= sp.speedup_hi + 1e-12).all()
    fig = plots.layer_speedup_figure(sp)
    bar = next(t for t in fig.data if t.type == "bar")
    assert bar.error_y.array is not None and "repeats" in bar.hovertext[0]
    noisy = pd.DataFrame([{"width": 128, "p": 0.5, "contestant": "dense", "speedup": 0.28, "speedup_lo": 0.2,
                           "speedup_hi": 1.3, "ceiling": 2.0}, {"width": 128, "p": 0.5, "contestant": "conventional",
                                                               "speedup": 1.0, "speedup_lo": 1.0, "speedup_hi": 1.0,
                                                               "ceiling": 2.0}])
    fig = plots.layer_speedup_figure(noisy)
    assert "within noise" in next(t for t in fig.data if t.type == "bar").hovertext[0]
