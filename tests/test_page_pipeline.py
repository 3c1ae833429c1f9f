"""The Pipeline page in Streamlit's AppTest: the planned timeline of the chosen schedule beside its published
bubble formula (the numbers of GPipe / 1F1B's (P−1)/(M+P−1) and interleaving's (P−1)/(V·M+P−1)), the prediction
(which schedule idles least at P = 4, M = 4) kept back until answered and then every schedule drawn, a run on
real Gloo ranks whose measured timeline, bubble, bytes and activations held are the run's own numbers, and bad
input as messages."""
import math

import pytest

from lab.experiments import bubble_formula, bubble_of, planned_timeline, schedule_names
from apptest_runs import job, rerun_until
from test_app import page as app_page
from lazy_import import lazy

figures = lazy("chart", "figures")


def page(**query):
    """The Pipeline page on its own, its URL carrying `query` (tests/test_app.py's `page`)."""
    return app_page("pipeline", **query)


def metric(at, label: str) -> str:
    got = [m for m in at.metric if m.label == label]
    assert got, f"no metric {label!r} in {[m.label for m in at.metric]}"
    return got[0].value


def texts(at, *kinds: str) -> str:
    return " ".join(str(e.value) for k in kinds for e in at.get(k))


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def traces(fig: dict, name_start: str) -> list[dict]:
    return [t for t in fig["data"] if str(t.get("name", "")).startswith(name_start)]


@pytest.fixture(scope="module")
def default_view():
    return page()


def test_default_view_draws_1f1b_planned_beside_its_formula(default_view):
    at = default_view
    assert not at.exception and not at.error
    P, M = 4, 4
    assert metric(at, "Bubble, formula") == pct((P - 1) / (M + P - 1)) == "42.9 %"  # GPipe / 1F1B
    assert metric(at, "Bubble, planned") == "42.9 %"
    assert metric(at, "Planned step") == f"{(M + P - 1) * 3} F"  # (M+P−1) slots of F + B = 1 + 2
    take = texts(at, "success")
    assert take.count("**Takeaway.**") == 1
    assert "idle 42.9 % of the step; its formula says 42.9 %" in take
    assert f"With 8 micro-batches the planned bubble would be {pct(3 / 11)}" in take  # (P−1)/(2M+P−1)
    figs = figures(at)
    assert len(figs) == 1  # the planned timeline only: every schedule's waits for the prediction
    plan = planned_timeline("1f1b", P, M)
    for kind in ("F", "B"):
        (tr,) = traces(figs[0], f"{kind}:")
        want = plan[plan.kind == kind]
        assert len(tr["base"]) == P * M == len(want)
        assert sorted(tr["base"]) == sorted(want.start.tolist())
        # hover: rank, stage, micro-batch and the block's time
        assert all(w in tr["hovertemplate"] for w in ("rank", "stage", "micro-batch", "F times"))
        assert sorted((c[5], c[0], c[1]) for c in tr["customdata"]) == sorted(
            zip(want["rank"], want.stage, want.microbatch))


def _bubbles() -> dict[str, float]:
    """Each schedule's planned bubble at P = 4, M = 4 (its default stages per rank); those that cannot run left out."""
    out = {}
    for s in schedule_names():
        try:
            out[s] = bubble_of(planned_timeline(s, 4, 4))
        except ValueError:
            pass
    return out


def test_the_prediction_keeps_the_answer_back_then_draws_every_schedule():
    at = page()
    assert any("Predict first" in m.value and "idle the least at P = 4 ranks and M = 4" in m.value
               for m in at.markdown)
    bubbles = _bubbles()
    best = min(bubbles, key=bubbles.get)
    worst = max(bubbles, key=bubbles.get)
    assert best not in texts(at, "success", "info", "warning", "markdown")  # nothing of the answer yet
    at.radio(key="w_guess").set_value(worst).run()
    assert not at.exception
    said = texts(at, "warning")
    assert "Not quite." in said and f"the page computes {best}" in said
    assert f"{best} {pct(bubbles[best])}" in said and f"{worst} {pct(bubbles[worst])}" in said
    # why a schedule cannot run at M = 4, in the page's words (it said "--schedule dualpipev ... --microbatches 4")
    why = [c.value for c in at.caption if c.value.startswith("dualpipev:")]
    assert why == ["dualpipev: on 4 ranks × 2 stages per rank it runs 8..32 micro-batches, not 4"], why
    figs = figures(at)
    assert len(figs) == 3  # the bubbles, every schedule's timeline, then the chosen one's
    bars = figs[0]
    (formula,) = traces(bars, "published formula")
    (planned,) = traces(bars, "planned timeline")
    for i, s in enumerate(formula["x"]):
        if s in bubbles:
            assert formula["y"][i] == pytest.approx(100 * bubble_formula(s, 4, 4))
            assert planned["y"][i] == pytest.approx(100 * bubbles[s])
        else:  # a schedule that cannot run at M = 4 is said so, not drawn as zero
            assert planned["y"][i] is None or math.isnan(planned["y"][i])
            assert any(a["x"] == s and a["text"] == "cannot<br>run" for a in bars["layout"]["annotations"])
    titles = [a["text"] for a in figs[1]["layout"]["annotations"]]
    assert titles == [f"{s}: bubble {bubbles[s]:.1%}" for s in schedule_names() if s in bubbles]
    at.radio(key="w_guess").set_value(best).run()
    assert "Right." in texts(at, "success")


def test_url_settings_and_bad_input_are_messages():
    at = page(schedule="interleaved1f1b", P="2", M="4", V="2")
    assert not at.exception and not at.error
    assert metric(at, "Bubble, formula") == pct(1 / (2 * 4 + 1))  # (P−1)/(V·M+P−1)
    fig = figures(at)[0]
    assert max(max(t["customdata"], key=lambda c: c[0])[0] for t in traces(fig, "F:")) == 3  # 2 ranks x 2 stages
    at = page(V="2")  # 1F1B holds one stage per rank
    assert not at.exception and "runs one stage per rank" in texts(at, "error")
    at = page(schedule="dualpipev")  # M = 4 on 4 x 2 stages: DualPipeV needs M >= stages
    assert not at.exception and "Micro-batches M = 4" in texts(at, "error") and "allowed with these: 8..32" in texts(at, "error")
    at = page(P="9")
    assert not at.exception and "allowed" in texts(at, "error") and metric(at, "Bubble, formula") == "42.9 %"


def test_run_on_real_ranks_draws_the_measured_timeline_beside_the_formula():
    """2 Gloo ranks, 1F1B, 4 micro-batches, 8-bit sends: every number on screen is the run's own."""
    P, M = 2, 4
    at = page(P=str(P), M=str(M), steps="5", hidden="64", batch="64", codec="dynamic_tree")
    at.button(key="run_pipe_run").click().run()
    at = rerun_until(at, lambda a: any(m.label == "Bubble, measured" for m in a.metric) or a.error or a.exception,
                     "the pipeline run", 300)
    assert not at.exception and not at.error, texts(at, "error")
    res = job(at, "pipe_run").result
    s = res.summary
    assert metric(at, "Bubble, measured") == pct(s["bubble_measured"])
    assert metric(at, "Formula at measured times") == pct(s["bubble_formula"])
    delta = next(m for m in at.metric if m.label == "Bytes per step").delta
    assert delta == f"{s['bytes_ratio'] - 1:+.0%} vs fp32" and 0.2 <= s["bytes_ratio"] <= 0.4  # 8 bits a value,
    # the blocks' scales; the loss and the evaluations' sends in fp32
    shown = [m.value for m in at.markdown if m.value.startswith("**Measured step")]
    assert shown and f"ranks idle {pct(s['bubble_measured'])} of it" in shown[0]  # the median step, drawn
    figs = figures(at)
    measured = next(f for f in figs if any("ms" in t.get("hovertemplate", "") for t in f["data"]))
    for kind in ("F", "B"):
        (tr,) = traces(measured, f"{kind}:")
        assert len(tr["base"]) == P * M  # every micro-batch's block on every rank
        assert all(w in tr["hovertemplate"] for w in ("stage", "micro-batch", " ms"))
    assert traces(measured, "send activation") and traces(measured, "receive gradient")
    memory = next(f for f in figs if f["layout"].get("yaxis", {}).get("title", {}).get("text", "").startswith("peak"))
    assert memory["data"][0]["text"] == [f"{P - r} held" for r in range(P)]  # 1F1B: rank r keeps P − r
    take = texts(at, "success")
    assert take.count("**Takeaway.**") == 1
    assert f"idled {pct(s['bubble_measured'])} of its median step against the formula's {pct(s['bubble_formula'])}" \
        in take
