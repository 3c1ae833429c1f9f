"""Predict, then reveal (app/_common.predict): the question is asked before the answer shows, the
reveal explains the answer, the answer lives in the URL, and Home's scorecard counts each question's latest answer
and links back to the questions missed."""
from apptest_runs import shared_components
from lazy_import import lazy

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first test, not at collection


def _quiz(choices_mode: bool = True) -> None:
    import streamlit as st

    import _common as ui

    st.session_state["revealed"] = st.session_state.get("revealed", 0)

    def reveal():
        st.session_state["revealed"] += 1
        return ("ring", "ring re-quantises at each of P-1 hops, 2.0x qgZ's error.") if choices_mode else \
            (40.0, "40 = 2 x 20.")

    got = ui.predict("Which loses more?", ["ring", "qgZ"] if choices_mode else None, reveal,
                     key="q1", unit="dB")
    st.session_state["got"] = got
    st.session_state["shown"] = ui.revealed("q1")
    ui.scorecard({"": "Home"})


def quiz(choices_mode: bool = True, **query) -> AppTest:
    at = shared_components(AppTest.from_function(_quiz, args=(choices_mode,), default_timeout=60))
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _texts(at: AppTest) -> str:
    return " ".join([s.value for s in at.success] + [w.value for w in at.warning] + [e.value for e in at.error])


def test_nothing_is_revealed_before_an_answer():
    at = quiz()
    assert not at.exception
    assert at.radio(key="w_q1").value is None
    assert at.session_state["revealed"] == 0 and at.session_state["got"] is None
    assert "Right" not in _texts(at) and "Not quite" not in _texts(at)
    assert "q1" not in at.query_params


def test_an_answer_reveals_the_explanation_keeps_it_in_the_url_and_scores_it():
    at = quiz()
    at.radio(key="w_q1").set_value("qgZ").run()
    assert not at.exception
    assert "Not quite" in _texts(at) and "2.0x qgZ" in _texts(at) and "computes ring" in _texts(at)
    assert at.query_params["q1"] in ("qgZ", ["qgZ"])
    assert ui_scores(at) == {"": (1, 0)}
    board = " ".join(m.value for m in at.markdown)
    assert "0 right of 1 answered" in board and "Review what I missed" in board
    assert "Home — Which loses more? (you said qgZ)" in board and "q1=qgZ&review=q1" in board  # back to the question
    # a changed answer is revealed again and re-scored: the score follows the answer
    at.radio(key="w_q1").set_value("ring").run()
    assert "Right" in _texts(at) and ui_scores(at) == {"": (1, 1)}
    board = " ".join(m.value for m in at.markdown)
    assert "1 right of 1 answered" in board and "Review what I missed" not in board
    at.run()  # the same answer on a later run keeps its score
    assert ui_scores(at) == {"": (1, 1)}


def test_a_review_link_brings_its_question_into_view_once():
    """Arriving with review=<key> (a scorecard's link) scrolls the question's box into view and drops the
    parameter, so a reload or a later rerun does not scroll again."""
    at = quiz(q1="qgZ", review="q1")
    assert not at.exception and "review" not in at.query_params
    script = [h.proto.body for h in at.get("html") if "scrollIntoView" in h.proto.body]
    assert len(script) == 1 and ".st-key-predict-q1" in script[0]
    at.run()
    assert not [h for h in at.get("html") if "scrollIntoView" in h.proto.body]


def ui_scores(at: AppTest) -> dict:
    return {p: (len(q), sum(q.values())) for p, q in at.session_state["_scorecard"].items()}


def test_a_shared_url_shows_the_reveal():
    at = quiz(q1="ring")
    assert at.radio(key="w_q1").value == "ring" and "Right" in _texts(at) and at.session_state["got"] is True


def test_a_junk_url_answer_is_named_with_what_is_allowed():
    at = quiz(q1="tree")
    assert not at.exception
    assert "'tree'" in _texts(at) and "'ring'" in _texts(at) and "'qgZ'" in _texts(at)
    assert at.session_state["got"] is None


def test_a_number_answer_is_right_within_the_tolerance():
    at = quiz(False)
    at.number_input(key="w_q1").set_value(45.0).run()
    assert "Right" in _texts(at) and "40 dB" in _texts(at)
    at = quiz(False)
    at.number_input(key="w_q1").set_value(80.0).run()
    assert "Not quite" in _texts(at)
    assert at.query_params["q1"] in ("80", ["80"])
    at = quiz(False, q1="abc")
    assert "not a number" in _texts(at) and at.session_state["got"] is None


def test_skip_shows_the_answer_unscored_and_keeps_it_in_the_url():
    """A learner may skip the question: the answer shows (`revealed`), `q1=skip` in the URL reproduces it,
    and neither the skip nor a later answer counts on the scorecard."""
    for mode in (True, False):
        at = quiz(mode)
        assert at.session_state["shown"] is False
        at.button(key="skip-q1").click().run()
        assert not at.exception
        said = " ".join(i.value for i in at.info)
        assert "Skipped." in said and ("computes ring" in said if mode else "computes 40 dB" in said)
        assert at.session_state["shown"] is True and at.session_state["got"] is None
        assert at.query_params["q1"] in ("skip", ["skip"]) and "_scorecard" not in at.session_state
        (at.radio(key="w_q1").set_value("ring") if mode else at.number_input(key="w_q1").set_value(40.0)).run()
        assert "Right" in _texts(at) and at.session_state["got"] is True  # revealed again, not scored
        assert "_scorecard" not in at.session_state or ui_scores(at) == {}
    at = quiz(q1="skip")
    assert not at.error and at.session_state["shown"] is True and "Skipped." in at.info[0].value


def _withheld() -> None:
    import streamlit as st

    import _common as ui

    ui.withheld("the ranking shows once you answer", "Which is best is the question above.",
                zip(st.columns(2), ("Best", "Worst")))


def test_withheld_answers_are_question_marks_a_takeaway_and_a_caption():
    """`ui.withheld`, the one way the pages (codecs, transfer, planner, pays) hold back what would answer the
    question: "?" metrics whose tooltip says what is held back, the takeaway, and that as a caption."""
    at = AppTest.from_function(_withheld, default_timeout=60).run()
    assert not at.exception
    assert [(m.label, m.value, m.help) for m in at.metric] == [("Best", "?", "the ranking shows once you answer"),
                                                               ("Worst", "?", "the ranking shows once you answer")]
    assert [s.value for s in at.success] == ["**Takeaway.** Which is best is the question above."]
    assert [c.value for c in at.caption] == ["The ranking shows once you answer."]
