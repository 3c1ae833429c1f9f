"""The Kernels page as a lesson: it asks which kind of kernel sits furthest from the memory roof before it shows
the roofline, reveals the answer from the committed report card, computes its takeaway from the card's numbers,
and keeps its GPU, architecture and kernel in the URL (AppTest)."""
import json

import chart
import static_table
from lab.experiments.kernel_report import CARD
from test_app import metric, page

ROWS = json.loads(CARD.read_text())["rows"]


def _texts(at) -> str:
    return " ".join(m.value for m in [*at.markdown, *at.success, *at.warning, *at.caption])


def test_predict_first_then_the_roofline_and_a_takeaway_from_the_card():
    at = page("kernels")
    assert not at.exception and at.title[0].value == "Kernels"
    assert "Why is this kernel memory bound?" in _texts(at)
    assert not chart.figures(at) and "Issue / memory" not in _texts(at)  # nothing that gives the answer away
    at.radio(key="w_guess").set_value("its decoder (codes to x)").run()
    assert not at.exception
    said = _texts(at)
    # the dynamic tree's three kernels on H200 (sm_90): the fused hop furthest from the memory roof, the decoder
    # memory bound
    far = {r["kernel"]: r["predicted"]["H200"]["issue_over_memory"] for r in ROWS if r["arch"] == "sm_90"}
    assert far["hop_codes_block_lut"] > far["encode_block_f32_lut"] > 1 > far["decode_block_f32"]
    assert "Not quite" in said and "its fused hop (decode, add, encode)" in said
    assert f"decoder (decode_block_f32) {next(r for r in ROWS if r['kernel'] == 'decode_block_f32' and r['arch'] == 'sm_90')['instructions_per_byte']:.3g} instructions per byte" in said
    sm90 = [r for r in ROWS if r["arch"] == "sm_90"]
    issue = sum(r["predicted"]["H200"]["bound"] == "issue" for r in sm90)
    assert f"{issue} of {len(sm90)} kernels issue more than that per byte" in said
    assert "On H200, the ridge is at 7.0 instructions per byte" in said
    assert len(chart.figures(at)) == 1
    shown = static_table.tables(at)
    every = next(t for t in shown if len(t) == len(sm90))
    assert len(every.columns) <= 10 and "Occupancy (%)" in every.columns and "Limited by" in every.columns
    assert metric(at, "hop_codes_block_lut: bytes per value") and "issue bound" in _texts(at)


def test_the_url_keeps_gpu_arch_and_kernel_and_a_bad_gpu_is_named_beside_its_control():
    at = page("kernels", guess="skip", gpu="B200", kernel="decode_block_f32", arch="sm_80")
    assert not at.exception and not at.error
    row = next(r for r in ROWS if r["kernel"] == "decode_block_f32" and r["arch"] == "sm_100")
    assert row["predicted"]["B200"]["bound"] == "memory"
    assert next(m for m in at.metric if m.label == "Predicted on B200").delta == "memory bound"
    assert "B200 is sm_100: the table shows sm_80's ptxas numbers" in _texts(at)
    sm80 = static_table.tables(at)[-1]
    assert len(sm80) == sum(r["arch"] == "sm_80" for r in ROWS)
    at = page("kernels", guess="skip", gpu="A100")
    assert not at.exception
    assert any("GPU" in e.value and "'A100'" in e.value and "H200" in e.value for e in [*at.error, *at.warning])
