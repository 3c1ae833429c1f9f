"""The Deep Image, Planner and Fusion pages (Wu et al. 2015) teach one lesson each: a question, a
takeaway computed from what is shown, the paper's numbers beside ours with a callout where they differ (Table 1's
counts; Figure 2's crossover, shown as communication time; Figure 3; §4.2), help on every control, log axes with
explicit ticks, and the long work behind Run (streamlit AppTest; app/ is on the pythonpath)."""
import pytest

from test_app import finish, metric, number, page

WIDGETS = ("selectbox", "multiselect", "slider", "select_slider", "number_input", "radio", "checkbox", "text_input")


def _takeaway(at) -> str:
    return next(s.value for s in at.success if s.value.startswith("**Takeaway.**"))


def _callouts(at) -> list[str]:
    return [i.value for i in at.info if i.value.startswith("**Paper vs here.**")]


def _helped(at) -> None:
    for kind in WIDGETS:
        for w in getattr(at, kind):
            assert w.help, f"{kind} {w.label!r} has no help tooltip"


@pytest.mark.parametrize("name,question", [("augmentations", "six cheap image edits"),
                                           ("planner", "How many GPUs pay off"),
                                           ("fusion", "make fewer mistakes together")])
def test_each_page_opens_with_its_question_and_a_takeaway(name, question):
    at = page(name)
    assert not at.exception and not at.error
    assert any(question in m.value for m in at.markdown)
    assert _takeaway(at)
    _helped(at)


def test_deep_image_table1_counts_beside_the_paper_and_the_takeaway_follows_the_sizes():
    at = page("augmentations", di_view="Table 1 counts")
    _helped(at)
    assert metric(at, "Rows matching the paper") == "6 of 6"
    callout = _callouts(at)[0]
    for paper in ("color casting 68,920 (here 68,920)", "vignetting 1,960 (here 1,960)", "rotation 20 (here 20)",
                  "random crop 82,944 (here 82,944)", "all six match"):
        assert paper in callout
    assert "into 1.2 × 10¹⁷ different training images" in _takeaway(at)  # 68920*1960*260*20*2*82944
    at.number_input(key="w_count_image").set_value(256).run()
    assert "1,024 offsets for 224 of 256 px" in _callouts(at)[0]  # cropping depends on the sizes, said so
    assert "into 1.4 × 10¹⁵ different training images" in _takeaway(at)
    assert "cropping alone gives 1,024" in _takeaway(at)  # the crop's own count, not the pipeline's


def test_deep_image_counts_figure_has_explicit_log_ticks():
    from lab import plots
    from lab.experiments import augmentation_counts

    fig = plots.augment_counts_figure(augmentation_counts(512, 224))
    ax = fig.layout.yaxis
    assert ax.type == "log" and list(ax.tickvals)[:3] == [1.0, 10.0, 100.0]
    assert "100,000" in list(ax.ticktext) and not any(t.endswith(("k", "M")) for t in ax.ticktext)


def test_deep_image_settings_takeaway_names_what_changes():
    at = page("augmentations", di_view="Set the parameters")
    assert "every edit is the identity" in _takeaway(at)
    at.slider(key="w_set_angle").set_value(10).run()
    at.checkbox(key="w_set_flip").check().run()
    assert "change the crop by rotation, flip" in _takeaway(at)


def test_deep_image_throughput_runs_behind_its_button():
    at = page("augmentations", di_view="Throughput here", tp_batch="4")
    assert "Press **Time augmentations**" in _takeaway(at)
    at.button(key="run_tp_run").click().run()
    finish(at, lambda a: any(m.label.startswith("Whole pipeline") for m in a.metric) or a.exception, timeout=240)
    assert not at.exception
    assert number(metric(at, "Whole pipeline, batched")) > 0
    assert "images/s" in _takeaway(at) and "the per-image loop" in _takeaway(at)


def test_planner_figure2_is_communication_with_the_crossover_explained():
    from lab.experiments import deep_image_figure2

    f2 = deep_image_figure2()
    assert f2.crossover == 82 and f2.paper_crossover == 16  # docs/deep_image.md: P* = 82 at 64 images per GPU
    assert 300 <= f2.batch_for_paper <= 360  # "P* = 16 needs b ≈ 330 per GPU"
    at = page("planner", check="Deep Image Figure 2 (data vs hybrid)", more="true")
    assert not at.exception and not at.error
    assert metric(at, "Figure 2: data beats hybrid from") == "P = 82"
    callout = next(c for c in _callouts(at) if "beyond 16" in c)
    assert "from P = 82" in callout and f"At {f2.batch_for_paper} images per GPU" in callout
    from lab.plots.plan import plan_comm_figure

    fig = plan_comm_figure(f2.sweep, f2.crossover, f2.paper_crossover)
    assert fig.layout.yaxis.title.text == "communication per step (ms)"
    assert list(fig.layout.xaxis.tickvals) == [2, 4, 8, 16, 32, 64, 128]
    at.checkbox(key="w_overlap").check().run()  # the lazy update hides data parallelism's allreduce
    assert metric(at, "Figure 2: data beats hybrid from") == "P = 2"
    assert any("hides data parallelism's allreduce" in c for c in _callouts(at))


def test_planner_takeaway_follows_the_gpu_counts_and_figure3_has_its_callout():
    at = page("planner", guess="skip")  # the full takeaway once the prediction is made or skipped
    first = _takeaway(at)
    assert first.startswith("**Takeaway.** On 64 v100 GPUs")
    at.multiselect(key="w_gpus").set_value(["1", "2", "4", "8"]).run()
    assert _takeaway(at).startswith("**Takeaway.** On 8 v100 GPUs") and _takeaway(at) != first
    at = page("planner", check="Deep Image Figure 3 (speedup per mini-batch)")
    assert any("Paper: 47x on 64 GPUs" in c and "Model: 50.1x" in c for c in _callouts(at))
    at = page("planner")
    assert any("128 ms per full synchronisation" in c and "Here: 127.7 ms" in c for c in _callouts(at))


def test_fusion_shows_the_paper_before_a_run():
    at = page("fusion")  # the paper's numbers would answer the question: they wait for an answer or a skip
    assert not _callouts(at) and "6.97" not in _takeaway(at)
    at = page("fusion", guess="skip")
    assert "6.97 %, 0.45 points below the better single model" in _takeaway(at)
    assert any("256 px 7.96 %, 512 px 7.42 %, fused 6.97 %" in c for c in _callouts(at))


@pytest.mark.parametrize("fused,said", [(29.0, "1.00 points (4 test images) fewer — the scales complement each other"),
                                        (29.75, "1 test image(s) apart, within one seed's noise"),
                                        (31.0, "1.00 points (4 test images) more — fusion hurts here: the weaker "
                                               "scale (16 px, 40.00 %)")])
def test_fusion_takeaway_judges_by_the_reveal_s_rule(fused, said):
    """The takeaway and the prediction's reveal use one rule: fewer than NOISE_IMAGES test images apart is one
    seed's noise (it once said "too few test images to separate them" of a fusion 4 images worse)."""
    import pandas as pd

    from views.fusion import NOISE_IMAGES, _verdict

    assert NOISE_IMAGES == 2.5  # 400 test images: one image is 0.25 points
    t = pd.DataFrame({"model": ["16 px", "32 px", "fused (mean of softmax)"], "test_error": [40.0, 30.0, fused]})
    text = _verdict(t, {"dataset": "digits", "test": 400})
    assert text.startswith(f"On digits, the fused model misclassifies {fused:.2f} % of the test images against "
                           "30.00 % for the better single model (32 px): ") and said in text, text
