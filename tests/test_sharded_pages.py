"""The Pays and Planner pages' FSDP / ZeRO++ choice in Streamlit's AppTest."""
from lazy_import import lazy
from test_app import page

AppTest = lazy("streamlit.testing.v1", "AppTest")

FSDP = "FSDP / ZeRO-3 (shard the model)"


def test_pays_page_fsdp_choice_shows_bytes_per_collective():
    at = page("pays", inter="eth10g", nodes="2", strategy=FSDP, guess="skip")  # the choice travels in the URL like the others
    assert at.radio(key="w_strategy").value == FSDP
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "What FSDP sends" in [t.label for t in at.tabs]
    assert at.multiselect(key="w_zero_pp").value == ["qwz", "qgz", "hpz"]
    text = " ".join(str(m.value) for m in at.markdown)
    assert "Across each node boundary per step" in text and "ZeRO-3's" in text
    assert any("bf16 FSDP" in str(c.value) for c in at.caption)  # the notes say what the baseline is
    assert any("than bf16 FSDP (hpz)" in str(i.value) for i in at.info)  # the paper callout, FSDP's numbers
    at.multiselect(key="w_zero_pp").set_value([]).run()  # plain ZeRO-3: every codec on the gradients only
    assert not at.exception and not at.error
    assert any("than bf16 FSDP (none)" in str(i.value) for i in at.info)
    assert "for bf16 (none)" in " ".join(str(m.value) for m in at.markdown)


def test_pays_page_fsdp_one_gpu_is_a_message():
    at = page("pays", nodes="1", gpus="1")
    assert not at.error and "What FSDP sends" not in [t.label for t in at.tabs]  # DDP on one GPU is fine
    at.radio(key="w_strategy").set_value(FSDP).run()
    assert not at.exception and at.error and "at least 2" in at.error[0].value


def test_planner_page_offers_fsdp_with_zero_pp():
    at = page("planner")
    assert "fsdp" in at.multiselect(key="w_strategies").options
    at.multiselect(key="w_strategies").set_value(["data", "fsdp"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.session_state["more"] = True
    at.run()
    zp = at.multiselect(key="w_zero_pp")
    assert zp.options == ["qwz", "qgz", "hpz"]
    zp.set_value(["hpz"]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
