"""Each page owns its settings (issue 28): a page reached by the navigation starts from its own defaults (or
what its link carries), never from another page's widget of the same name."""
from test_app import goto, home


def test_a_page_does_not_inherit_another_pages_value_for_the_same_name():
    at = goto(home(), "collectives")
    at.number_input(key="w_P").set_value(64).run()
    assert at.session_state["w_P"] == 64
    at = goto(at, "step_through")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.number_input(key="w_P").value == 4  # Step through's own default, not Collectives' 64
    at = goto(at, "collectives")  # and back: the page starts again from its defaults
    assert at.number_input(key="w_P").value == 8


def test_the_scorecard_keeps_answers_across_pages():
    import _common as ui

    at = goto(home(), "pays")
    at.session_state[ui.SCORE] = {"pays": {"guess": True}}
    at = goto(at, "")
    assert any("1 right of 1 answered" in m.value for m in at.markdown)
