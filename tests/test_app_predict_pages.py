"""Predict, then reveal on the pages: each question is on the page unanswered, nothing of its
answer is said before an answer, and the reveal names the right answer with the page's own numbers.
(Pays and Collectives: tests/test_app_state.py.)"""
import math

import pytest

from apptest_runs import job
from lazy_import import lazy
from test_app import finish, page

figures = lazy("chart", "figures")


def _said(at) -> str:
    return " ".join([s.value for s in at.success] + [w.value for w in at.warning] + [c.value for c in at.caption])


def _asked(at, words: str) -> bool:
    return any("Predict first" in m.value and words in m.value for m in at.markdown)


def _answer(at, choice: str):
    at.radio(key="w_guess").set_value(choice).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_planner_asks_which_strategy_is_fastest_on_the_most_gpus():
    at = page("planner")
    assert _asked(at, "which of the strategies")
    assert "Right." not in _said(at) and "Not quite." not in _said(at)
    revealing = ("speedup on 64 GPUs", "Data beats hybrid from")
    before = {m.label: m.value for m in at.metric}
    assert all(before[k] == "?" for k in before if k.endswith("speedup on 64 GPUs")) and len(before) >= 2
    assert "Data beats hybrid from" not in before and "parallelism is fastest" not in _said(at)
    assert not [f for f in figures(at) if "speedup" in str(f).lower()]
    options = at.radio(key="w_guess").options
    assert set(options) == {"data", "hybrid"}
    _answer(at, "model" if "model" in options else options[0])
    said = _said(at)
    assert ("Right." in said) != ("Not quite." in said)
    assert "On 64 GPUs:" in said and "x one GPU" in said and "ms a step" in said
    after = {m.label: m.value for m in at.metric}
    shown = [after[k] for k in after if k.endswith(revealing[0])]
    assert shown and all(v.endswith("x") and v not in " ".join(map(str, before.values())) for v in shown)
    assert revealing[1] in after and any("parallelism is fastest" in s.value for s in at.success)
    assert figures(at)


def test_dropout_asks_how_often_a_unit_is_dropped_and_reveals_the_measured_rates():
    from views import dropout as d

    at = page("dropout")
    assert _asked(at, "how often is each single unit dropped")
    _answer(at, d.DROP_ANSWERS[1])
    said = _said(at)
    assert "Not quite." in said and "computes about p" in said and "RDP (row) drops each unit" in said
    assert "kinds=[" not in said and "['bernoulli'" not in said


def test_deep_image_asks_which_edit_makes_the_most_versions():
    at = page("augmentations")
    assert _asked(at, "most different")
    assert "colour casting" not in at.success[0].value  # the takeaway keeps the answer back until it is given
    _answer(at, "random crop")
    said = _said(at)
    assert "Not quite." in said and "computes color casting" in said and "(256 − 224)²" in said
    assert any("colour casting 68,920" in s.value for s in at.success)


def _shown(at) -> str:
    """Every text on the page but the question's own line (its choices name the edits)."""
    return " ".join([m.value for m in at.markdown if "Predict first" not in m.value]
                    + [e.value for kind in (at.success, at.info, at.warning, at.caption, at.error) for e in kind])


@pytest.mark.parametrize("card,crop", [(256, 224), (512, 224), (128, 64)])
def test_deep_image_texts_count_what_they_name_and_hold_the_answer_back(card, crop):
    """Regression: before its question the page said "a 224-px crop of a 256-px image can come out in 1.4 × 10¹⁵
    different ways": the whole pipeline's count given as the crop's (the crop alone is 1,024), steering the learner
    to "crop". The one count said before an answer is the product of all six edits, named so; no single edit's
    count is said before the answer; afterwards the takeaway gives the crop's and colour casting's own counts."""
    from lab import plots
    from lab.experiments import augmentation_counts
    from views.augmentations import _sci

    cdf = augmentation_counts(card, crop)
    counts = dict(zip(cdf.augmentation, cdf.possible_changes))
    total = int(counts.pop("all (product)"))
    assert total == math.prod(int(n) for n in counts.values())
    at = page("augmentations", card=str(card), crop=str(crop))
    assert not at.exception and _asked(at, f"{card}-px image into the most different {crop}-px")
    take = at.success[0].value
    assert take.startswith(f"**Takeaway.** All six edits together (a {crop}-px crop of the {card}-px image, then")
    assert f"can turn one image into {_sci(total)} different training images, the product of the six" in take
    shown = _shown(at)
    for edit, n in counts.items():
        if n >= 1000:  # the counts that could not be any other number on the page
            assert f"{int(n):,}" not in shown and _sci(int(n)) not in shown, (edit, n)
    single = {e: int(n) for e, n in counts.items()}
    right = max(single, key=single.get)
    label = plots.AUGMENT_LABELS
    _answer(at, label["crop"] if right != "crop" else label["color_cast"])
    take = next(s.value for s in at.success if s.value.startswith("**Takeaway.**"))
    assert (f"cropping alone gives {single['crop']:,} and colour casting {single['color_cast']:,}" in take)
    assert f"computes {label[right]}" in _said(at)


def test_fusion_keeps_the_answer_until_the_run_then_reveals_it():
    from views import fusion as f

    at = page("fusion", epochs="2", scales=["8", "16"])
    assert _asked(at, "fewer test mistakes")
    _answer(at, f.FUSION_ANSWERS[1])
    assert "is kept" in _said(at) and "Right." not in _said(at) and "Not quite." not in _said(at)
    at.button(key="run_fusion_run").click().run()
    finish(at, lambda a: any(m.label.startswith("fused") for m in a.metric) or a.exception)
    said = _said(at)
    assert ("Right." in said) != ("Not quite." in said) and "test images of" in said and "one seed's noise" in said


def test_fusion_says_nothing_of_the_answer_before_it_is_given():
    """Regression: the takeaway stated the answer (the paper's fused model 0.45 points below the better one) before
    the learner had answered, and a run finished without an answer showed the errors. Before an answer (or a skip)
    no takeaway, callout, metric or bar gives it; the answer then shows this run's numbers, the same as its table."""
    from views import fusion as f

    at = page("fusion", epochs="2", scales=["8", "16"])
    assert _asked(at, "fewer test mistakes") and not at.exception
    for gives in ("6.97", "7.42", "7.96", "below the better", "Paper vs here"):
        assert gives not in _shown(at), gives
    assert not figures(at) and not at.metric
    at.button(key="run_fusion_run").click().run()
    finish(at, lambda a: (job(a, "fusion_run") is not None and job(a, "fusion_run").finished) or a.exception)
    at.run()
    table = job(at, "fusion_run").result.table
    errors = [f"{e:.2f} %" for e in table.test_error]
    assert [m.value for m in at.metric] == ["?"] * len(table)  # one per model, the fused one last, held back
    assert [m.label for m in at.metric] == [f"{m}: test error" for m in [*table.model.iloc[:-1], "fused"]]
    shown = _shown(at)
    assert not any(e in shown for e in errors) and "Paper vs here" not in shown and "6.97" not in shown
    assert not [g for g in figures(at) if "test error (%)" in str(g) and "model (input scale)" in str(g)]
    _answer(at, f.FUSION_ANSWERS[0])
    assert [m.value for m in at.metric] == errors
    take = next(s.value for s in at.success if s.value.startswith("**Takeaway.**"))
    fused, best = table.iloc[-1], table.iloc[:-1].sort_values("test_error").iloc[0]
    assert f"misclassifies {fused.test_error:.2f} %" in take and f"{best.test_error:.2f} % for the better" in take
    # the takeaway's verdict is the reveal's answer, by the same rule (fewer than NOISE_IMAGES apart: noise)
    right = next(c for c in f.FUSION_ANSWERS if f"computes {c}" in _said(at))
    verdict = {f.FUSION_ANSWERS[0]: "the scales complement each other", f.FUSION_ANSWERS[1]: "within one seed's noise",
               f.FUSION_ANSWERS[2]: "fusion hurts here"}
    assert verdict[right] in take, (right, take)
    assert any("fused 6.97 %" in i.value and f"fused {fused.test_error:.2f} %" in i.value for i in at.info)
    assert [g for g in figures(at) if "model (input scale)" in str(g)]
