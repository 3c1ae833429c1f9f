"""Predict, then reveal on the pages: each question is on the page unanswered, nothing of its
answer is said before an answer, and the reveal names the right answer with the page's own numbers.
(Pays and Collectives: tests/test_app_state.py.)"""
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
