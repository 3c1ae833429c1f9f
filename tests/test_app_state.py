"""Each page owns its settings (docs/design.md rule 7): a page reached by the navigation starts from its own defaults (or
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


def test_pays_tables_have_human_headers_and_the_prediction_reveals_from_them():
    from static_table import tables
    from test_app import page

    at = page("pays", guess="skip")  # the tables show once the prediction is made or skipped
    assert not at.exception
    heads = {h for d in tables(at) for h in d.columns}
    raw = {"best_algorithm", "step_ms", "speedup_vs_bf16", "comm_ms", "codec_time", "pays", "cross_node_MB"}
    assert not heads & raw, heads & raw
    assert {"Fastest allreduce", "Step (ms)", "Speedup vs bf16 (x)", "Communication (ms)", "Verdict"} <= heads
    cells = {str(v) for d in tables(at) for v in d.to_numpy().ravel()}
    assert not cells & {"True", "False"}
    at = page("pays")
    at.radio(key="w_guess").set_value("yes, faster than bf16").run()
    said = " ".join(w.value for w in at.warning) + " ".join(s.value for s in at.success)
    assert "Not quite" in said and "ib_ndr" in said and "ms against bf16" in said  # 1-bit does not pay on NDR400
    page_eth = page("pays", inter="eth10g", guess="yes, faster than bf16")
    assert any("Right" in s.value for s in page_eth.success)


def test_collectives_asks_how_much_more_ring_requantisation_loses_than_qgz():
    from test_app import page

    at = page("collectives")
    assert not at.exception
    assert any("qgZ" in m.value and "Predict first" in m.value for m in at.markdown)
    assert "paper 001" not in " ".join(m.value for m in at.markdown) + str([m.help for m in at.metric])
    at.radio(key="w_guess").set_value("about 60x").run(timeout=180)
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "Not quite" in said and "re-encodes" in said and "% relative error" in said
