"""Home shows the whole lab (every page of the page list and every training mode, in its table and its tour), and
each tour step's 'you should see' states only what the page it opens shows: every step opens its page in the
state it names, and a step that states a winner or a number has it held against that page's own metric,
takeaway or table here (streamlit AppTest)."""
from __future__ import annotations

import re

import pytest

import page_list
import tour
from lazy_import import lazy
from test_app import goto, home, page

tables = lazy("static_table", "tables")

STEPS = tour.steps()


def _text(at) -> str:
    """Everything an AppTest run says: markdown, captions, callouts, metrics (label, value, delta)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.success, at.info, at.warning, at.error) for e in kind]
    parts += [f"{m.label} {m.value} {m.delta or ''}" for m in at.metric]
    return " ".join(parts)


def _metric(at, label: str, start: bool = False):
    got = [m for m in at.metric if (m.label.startswith(label) if start else m.label == label)]
    assert got, f"no metric {label!r}: {[m.label for m in at.metric]}"
    return got[0]


def _codecs(at, facts):
    assert _metric(at, f"Best: {facts['winner']}").value == facts["winner_error"]
    normal = page("codecs", **{**tour.CODECS_STEP, "dist": "normal", "guess": "skip"})
    _metric(normal, f"Best: {facts['normal_winner']}")


def _table1(at, facts):
    said = _text(at)
    assert f"within {facts['within']} points" in said and f"up to {facts['linear']} points" in said
    assert f"brings the tree to {facts['tree_exact']} %" in said


def _transfer(at, facts):
    assert _metric(at, "Fastest codec").value == facts["fastest"]
    assert _metric(at, "Its speedup, largest size").value == facts["speedup"]
    assert f"dynamic_tree wins from {facts['dynamic_tree_from']} values" in _text(at)


def _step_through(at, facts):
    assert _metric(at, "Step").value == facts["steps"]
    assert _metric(at, "Bytes sent so far").value == facts["sent"]
    assert _metric(at, "Busiest rank").value == facts["busiest"]
    for algorithm, moved in facts["at_8"].items():  # what the step says the algorithms it suggests move at 8 ranks
        there = page("step_through", algorithm=algorithm, P="8")
        assert _metric(there, "Busiest rank").value == moved, algorithm


def _ops(at, facts):
    assert at.selectbox(key="w_op").options == [o for o in facts["ops"] if o != "all_reduce"]
    assert f"{facts['all_gather_fastest']} is fastest" in " ".join(s.value for s in at.success)


def _split(at, facts):
    table = next(t for t in tables(at) if "Call (ms)" in t.columns)
    means = table.groupby("Codec")["Call (ms)"].mean()
    assert set(means.index) == set(facts)
    for codec, ms in facts.items():
        assert means[codec] == pytest.approx(float(ms), rel=0.01), codec


def _pays(at, facts):
    assert _metric(at, "Codecs that pay here").value == facts["pay_here"]
    assert _metric(at, "Codecs that pay inside one node").value == facts["pay_inside_node"]


def _parallel(at, facts):
    assert at.selectbox(key="w_par_mode").options == facts["strategies"]


def _pipeline(at, facts):
    assert _metric(at, "Bubble, planned").value == facts["planned"]
    assert _metric(at, "Bubble, formula").value == facts["formula"]


def _race(at, facts):
    said = next(s.value for s in at.success if "reaches the target first" in s.value)
    if facts["tied"]:
        assert f"first beyond the seeds' spread: {facts['first']} leads" in said
        assert all(spec in said.split("but the intervals of")[1] for spec in facts["tied"])
    else:
        assert f"{facts['first']} reaches the target first" in said


def _planner(at, facts):
    assert _metric(at, "Data beats hybrid from").value == facts["planner"]
    f2 = _metric(at, "Figure 2: data beats hybrid from")
    assert f2.value == facts["figure2"] and f"beyond {facts['paper']}" in f2.delta


def _deep_image(at, facts):
    assert _metric(at, "Rows matching the paper").value == facts["matching"]


#: (page, step title) -> (query parameters that reveal what the step states, the check against the page)
CHECKS = {
    ("codecs", "Is 8 bits enough?"): ({"guess": "skip"}, _codecs),
    ("codecs", "Table 1, beside the paper"): ({}, _table1),
    ("transfer", "When does compressing a message pay?"): ({"guess": "skip"}, _transfer),
    ("step_through", "See an allreduce happen"): ({}, _step_through),
    ("collectives", "Every collective"): ({}, _ops),
    ("collectives", "Where the time goes"): ({"split_guess": "skip"}, _split),
    ("pays", "Does compression pay on your cluster?"): ({"guess": "skip"}, _pays),
    ("training", "Beyond data parallelism"): ({}, _parallel),
    ("pipeline", "Where does a pipeline sit idle?"): ({}, _pipeline),
    ("training", "The race to the target"): ({}, _race),
    ("planner", "Where does data parallelism stop scaling?"): ({"guess": "skip"}, _planner),
    ("deep_image", "How many images from one?"): ({}, _deep_image),
}


@pytest.mark.parametrize("step", STEPS, ids=[f"{s.page}:{s.title}" for s in STEPS])
def test_every_tour_step_opens_its_page_in_its_state_and_says_what_the_page_shows(step):
    """The page renders with no exception and its widgets take the step's parameters (a parameter that is no
    widget key, or a value the widget refuses, fails here); what the step says it shows is what the page
    shows: each winner and number it states, against the page's own metric, takeaway or table."""
    seen = step.see()
    reveal, check = CHECKS.get((step.page, step.title), ({}, None))
    module = next(p.module for p in page_list.PAGES if p.url_path == step.page)
    at = page(module.removeprefix("views."), **step.params, **reveal)
    assert not at.exception, [e.value for e in at.exception]
    for k, v in step.params.items():
        got = at.session_state[f"w_{k}"]
        want = v if isinstance(v, list) else [v]
        have = got if isinstance(got, (list, tuple)) else [got]
        # a whole-number field holds floats (4.0 for "4": ui.number), so numbers compare as numbers
        same = lambda x: f"{x:g}" if isinstance(x, float) else str(x)  # noqa: E731
        assert [same(x) for x in have] == [str(x) for x in want], (k, got, v)
    assert bool(seen.facts) == (check is not None), "a step that states facts needs a check here, and only such a step"
    if check is not None:
        check(at, seen.facts)
        for value in seen.facts.values():  # and the step's line says them
            for v in value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]:
                assert str(v) in seen.text, (v, seen.text)


def test_the_tour_reaches_every_page_and_every_mode():
    assert {s.page for s in STEPS} == {p.url_path for p in page_list.PAGES if p is not page_list.HOME}
    said = " ".join(f"{s.title} {s.params}" for s in STEPS)
    assert "sharded: FSDP2 vs DDP" in said and "Race to the target" in said and "Where the time goes" in said
    beyond = next(s for s in STEPS if s.params.get("experiment") == "beyond data parallel: real ranks").see()
    assert beyond.facts["strategies"] == tour.modes()[1]


def test_home_shows_every_page_mode_and_collective_in_its_table_and_tour():
    from lab.experiments import DATA_PARALLEL_MODES, op_names, parallel_strategies

    at = home()
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    for p in page_list.PAGES[1:]:
        assert f"| **{p.title}** |" in text, p.title  # a row of the table
    for mode in [*DATA_PARALLEL_MODES, *parallel_strategies()]:
        assert re.search(rf"\b{mode}\b", text), mode
    for op in op_names():
        assert op in text, op
    links = [p.proto.label for p in at.get("page_link")]
    assert links == [f"Step {i}: {s.title}" for i, s in enumerate(STEPS, 1)]
    for view in ("Sharded training: FSDP2 against DDP", "The race to the target", "Where the time goes",
                 "Every collective"):
        assert f"*{view}*" in text, view  # in its page's row of the table
    # what you should see is folded (it may answer the page's question) and computed once opened
    assert not any("keeps the values closest" in m.value for m in at.markdown)
    at.session_state["tour-see-1"] = True
    at.run()
    assert not at.exception
    first = tour.steps()[0].see()
    assert any(m.value == first.text for m in at.markdown) and f"**{first.facts['winner']}**" in first.text


def test_a_page_added_to_the_list_gets_a_tour_step_and_a_row(tmp_path, monkeypatch):
    extra = page_list.PageInfo("Extra", ":material/star:", "views.fusion", "extra", "How one list feeds the tour.")
    monkeypatch.setattr(page_list, "PAGES", [*page_list.PAGES, extra])
    steps = tour.steps()
    assert steps[-1].page == "extra" and steps[-1].see().text == "How one list feeds the tour."
    from views.overview import overview_table

    assert "| **Extra** | How one list feeds the tour. |" in overview_table(page_list.PAGES)  # no paper, nothing inside


def test_review_links_open_the_missed_question_and_a_changed_answer_is_rescored():
    """Answer Pays' question wrong: Home's scorecard counts it and links back to it (its page, its URL state,
    review=<key>); answer it right on the page: the score follows."""
    import _common as ui

    at = goto(home(), "pays")
    at.radio(key="w_guess").set_value("yes, faster than bf16").run()
    assert ui.SCORE in at.session_state and at.session_state[ui.SCORE]["pays"] == {"guess": False}
    at = goto(at, "")
    board = " ".join(m.value for m in at.markdown)
    assert "0 right of 1 answered" in board and "Review what I missed" in board
    link = [p for p in at.get("page_link") if "you said yes, faster than bf16" in p.proto.label]
    assert len(link) == 1 and "Does 1-bit SGD (onebit) make a training step faster" in link[0].proto.label
    assert "review=guess" in link[0].proto.query_string and "guess=yes" in link[0].proto.query_string
    at = goto(at, "pays")
    at.radio(key="w_guess").set_value("no, slower than bf16").run()
    assert at.session_state[ui.SCORE]["pays"] == {"guess": True}
    at = goto(at, "")
    board = " ".join(m.value for m in at.markdown)
    assert "1 right of 1 answered" in board and "Review what I missed" not in board
