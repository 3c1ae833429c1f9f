"""The Codecs page as a lesson and its block-scaled views: the takeaway is computed
from the numbers shown, Table 1 sits beside the paper, bad input is a message, URL state survives errors,
unscaled bit layouts, one MX/NVFP4 block drawn, block scaling against the paper's per-tensor types."""
import io
import time

import numpy as np
import pandas as pd
import pytest
import torch

from test_app import page as app_page
from lazy_import import lazy

tables = lazy("static_table", "tables")  # pandas: loaded by the first test that reads a table

figures = lazy("chart", "figures")  # Streamlit loads with the first page test, not at collection


def page(name: str, **query):
    """A page with its prediction skipped (`guess=skip`): the ranking, bars and table these tests read show only
    once the learner has answered or skipped (test_predict_the_best_codec_before_the_reveal checks before)."""
    return app_page(name, **{"guess": "skip", **query})


def _takeaway(at) -> str:
    """The page's first takeaway (ui.takeaway draws an st.success starting 'Takeaway.')."""
    texts = [s.value for s in at.success if s.value.startswith("**Takeaway.**")]
    assert texts, "no takeaway on the page"
    return texts[0]


def test_takeaway_is_computed_from_the_table_and_follows_the_inputs():
    at = page("codecs")
    assert not at.exception and not at.error
    df = tables(at)[0]
    assert "Mean relative error (%)" in df.columns and "SNR (dB)" in df.columns  # plain names, not mean_rel_error
    rel = df.set_index("Codec")["Mean relative error (%)"]
    text = _takeaway(at)
    best = rel.idxmin()
    assert best.split("[")[0] in text and f"{rel.min():.3g} %" in text
    # the ratio it quotes is the table's
    second = rel.sort_values().iloc[1]
    assert f"{second / rel.min():.2g}x lower" in text
    at.selectbox(key="w_dist").set_value("student_t").run()
    assert not at.exception and not at.error
    moved = _takeaway(at)
    assert moved != text and "student_t(3)" in moved


def test_switching_distribution_keeps_each_ones_parameters():
    """Defect 3: student_t no longer takes normal's mu = 0 as its df."""
    at = page("codecs")
    at.number_input(key="w_normal.sigma").set_value(2.0).run()
    at.selectbox(key="w_dist").set_value("student_t").run()
    assert not at.exception and not at.error
    assert at.number_input(key="w_student_t.df").value == 3.0
    assert tables(at)[0].Data[0] == "student_t(3)"
    at.selectbox(key="w_dist").set_value("normal").run()
    assert tables(at)[0].Data[0] == "normal(0,2)"
    assert at.query_params["student_t.df"] in ("3.0", ["3.0"])


def test_an_error_leaves_the_other_sections_and_their_url_state():
    """Defect 3: after an error the sections keep drawing, and 'Values timed' / 'Table 1 samples' keep their
    values in the URL (they used to reset to their smallest options)."""
    at = page("codecs", section="Speed", speed_n=str(1 << 20))
    assert at.select_slider(key="w_speed_n").value == 1 << 20
    at.number_input(key="w_normal.sigma").set_value(-1.0).run()
    assert not at.exception
    assert "scale parameter must be > 0" in at.error[0].value
    assert at.select_slider(key="w_speed_n").value == 1 << 20  # the section still drew
    at.number_input(key="w_normal.sigma").set_value(1.0).run()
    assert not at.error and at.query_params["speed_n"] in (str(1 << 20), [str(1 << 20)])
    at = page("codecs", t1_samples="1000000")
    at.number_input(key="w_normal.sigma").set_value(-1.0).run()
    at.number_input(key="w_normal.sigma").set_value(1.0).run()
    assert at.select_slider(key="w_t1_samples").value == 1_000_000
    assert at.query_params["t1_samples"] in ("1000000", ["1000000"])


def test_a_typed_out_of_range_number_is_said_on_the_page():
    """Defect 7: the field's value beyond its range is named with the allowed range, not ignored."""
    at = page("codecs", t1_samples="1000000", lay_signed="1", designer="true")
    at.number_input(key="w_lay_bits").set_value(9).run()
    assert not at.exception
    msg = [e.value for e in at.error if "Total bits" in e.value]
    assert msg and "Total bits = 9 is out of range; allowed: 2..8" in msg[0] and "Computing with 8" in msg[0]
    # the page goes on: the widgets below the field still draw and keep their state (URL included)
    assert at.checkbox(key="w_lay_signed").value and at.select_slider(key="w_t1_samples").value == 1_000_000
    assert len(tables(at)) >= 2
    assert at.number_input(key="w_lay_bits").value == 8  # the field shows the value the page computes with
    at.number_input(key="w_lay_bits").set_value(7).run()  # the message stays until the field changes
    assert not at.error and at.query_params["t1_samples"] in ("1000000", ["1000000"])


def test_unscaled_layouts_use_the_offset_and_show_their_range():
    """Defect 5: with scaling 'none' the offset moves the layout's range (the paper's mantissa and static tree
    use offset 1), and the page says the representable range."""
    at = page("codecs", layout_on="1", lay_scale="none", lay_offset="0", codecs=["dynamic_tree"])
    assert not at.exception and not at.error
    df = tables(at)[0].set_index("Codec")
    row0 = [c for c in df.index if c.startswith("8b-s-dyn-tree")][0]
    assert "o0[" in row0 and row0.endswith(",none]")
    at0 = df.loc[row0, "Mean relative error (%)"]
    cap = " ".join(c.value for c in at.caption)
    assert "largest 1" in cap and "saturate" in cap
    at.number_input(key="w_lay_offset").set_value(1).run()
    assert not at.exception and not at.error
    df = tables(at)[0].set_index("Codec")
    row1 = [c for c in df.index if c.startswith("8b-s-dyn-tree")][0]
    assert "o1[" in row1
    at1 = df.loc[row1, "Mean relative error (%)"]
    # N(0,1): offset 0 clips everything above 1 (about a third of the values), offset 1 reaches 10
    assert at0 > 2 * at1
    assert "largest 10" in " ".join(c.value for c in at.caption)


class _Upload:
    def __init__(self, name: str, data: bytes):
        self.name, self.size, self._data = name, len(data), data

    def getvalue(self) -> bytes:
        return self._data


def _npy(arr, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def _pt(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class Custom:  # a pickled object that torch's weights_only loader refuses
    pass


@pytest.mark.parametrize("name,data,says", [
    ("objects.pt", _pt({"model": Custom()}), "holds Python objects other than tensors"),
    ("set.pt", _pt({"a": {1, 2}}), "no tensor found"),
    ("objects.npy", _npy(np.array([{"a": 1}], dtype=object), allow_pickle=True), "holds Python objects"),
    ("text.npy", _npy(np.array(["a", "b"])), "not real numbers"),
])
def test_non_tensor_uploads_say_what_is_accepted_without_unsafe_advice(monkeypatch, name, data, says):
    """Defect 2: an UnpicklingError is a message; no message suggests allow_pickle or weights_only=False."""
    import streamlit as st

    monkeypatch.setattr(st, "file_uploader", lambda *a, **kw: _Upload(name, data))
    at = page("codecs", source="upload")
    assert not at.exception, at.exception
    msg = at.error[0].value
    assert name in msg and says in msg
    assert ".pt/.pth" in msg and ".npy" in msg and "numeric array" in msg  # what is accepted
    assert "allow_pickle" not in msg and "weights_only" not in msg


def test_table1_shows_the_papers_numbers_beside_ours_with_clear_names():
    """Defect 6: published and measured columns are named apart; the chart shows paper and both roundings."""
    at = page("codecs")
    t1 = tables(at)[1]
    for col in ("Paper %", "Ours %", "Ours exact %", "Paper MAE", "Our MAE"):
        assert col in t1.columns
    assert "paper_mae" not in t1.columns and "mae_paper" not in t1.columns
    dyn = t1[(t1.Type == "dynamic_tree") & (t1.Distribution == "N(0,1)")].iloc[0]
    assert dyn["Paper %"] == 2.46
    assert abs(dyn["Ours %"] - 2.46) < 0.3  # the paper's rounding reproduces it
    assert dyn["Ours exact %"] < dyn["Ours %"]
    callout = [i.value for i in at.info if i.value.startswith("**Paper vs here.**")]
    assert callout and "linear" in callout[0]
    charts = figures(at)
    assert len(charts) >= 2  # the error bars and Table 1's paper-vs-measured chart
    takeaway = [s.value for s in at.success if "On N(0,1) with the paper's rounding" in s.value][0]
    assert f"{dyn['Ours %']:.2f} %" in takeaway


def test_block_view_draws_saturation_and_flush_to_zero():
    """One block of an MX format: its shared power-of-two scale, which values saturate and which flush."""
    from lab.experiments import block_view, get_codec

    x = torch.full((64,), 0.5)
    x[40] = 100.0  # block 1's largest value: the scale follows it
    x[41] = 1e-3  # far below the block's smallest positive value: flushes to zero
    x[42] = 99.0
    view = block_view("mxfp4_e2m1", x, "largest value")
    a = view.attrs
    assert a["block"] == 1 and a["blocks"] == 2 and a["block_size"] == 32
    assert a["scale"] == 2.0 ** (6 - 2)  # OCP MX: 2^(floor(log2 100) - emax(E2M1) = 2)
    assert a["largest"] == 6 * 16 and a["smallest"] == 0.5 * 16
    fate = view.set_index("index").fate
    assert fate[40] == "saturated" and fate[42] == "saturated" and fate[41] == "flushed to zero"
    assert a["counts"]["flushed to zero"] == 30  # the 29 values 0.5 too are below half of 8
    y = get_codec("mxfp4_e2m1").decode(get_codec("mxfp4_e2m1").encode(x))
    assert torch.equal(torch.tensor(view.decoded.values, dtype=torch.float32), y[32:])
    nv = block_view("nvfp4", x, 0)
    assert nv.attrs["block_size"] == 16 and len(nv) == 16
    with pytest.raises(ValueError, match="not a block-scaled format"):
        block_view("dynamic_tree", x)
    with pytest.raises(ValueError, match="out of range; allowed: 0..1"):
        block_view("mxfp8_e4m3", x, 5)


def test_block_section_on_the_page():
    at = page("codecs", section="One MX / NVFP4 block", blk_fmt="mxfp8_e4m3", dist="student_t")
    assert not at.exception and not at.error
    labels = [m.label for m in at.metric]
    assert {"Shared scale", "Saturated", "Flushed to zero"} <= set(labels)
    text = [s.value for s in at.success if "shares the scale" in s.value]
    assert text and "mxfp8_e4m3" in text[0]


def test_block_scaling_lesson_where_it_wins_and_where_not():
    """The block-scaled lesson, measured: at 8 bits MXFP8 E4M3 (one scale per 32) beats the paper's dynamic tree on
    outliers and heavy tails but not on plain N(0,1); the page's takeaway says so from the same numbers."""
    from lab.experiments import block_scaling_lesson

    df = block_scaling_lesson(8, samples=16_384, seed=0).set_index(["data", "codec"]).mean_rel_error
    tree, mx = "dynamic_tree[nearest,tensor]", "mxfp8_e4m3"
    assert df["N(0,1)", mx] > 1.3 * df["N(0,1)", tree]
    out = "N(0,1) with 0.1 % outliers x1000"
    assert df[out, mx] < 0.5 * df[out, tree]
    assert df["Student-t(3): heavy tails", mx] < df["Student-t(3): heavy tails", tree]
    at = page("codecs", section="Block scaling vs per tensor")
    assert not at.exception and not at.error
    text = [s.value for s in at.success if s.value.startswith("**Takeaway.** At 8 bits")][0]
    assert "loses on N(0,1)" in text and "N(0,1) with 0.1 % outliers x1000" in text


def test_best_follows_the_measure_the_learner_ranks_by():
    """Regression: Codecs crowned a codec from mean relative error only; linear/int8 had lower largest error and
    the same grid. The learner picks the measure; Best, the takeaway and the bars follow it, the takeaway says what
    the measure means for gradients, which codec another measure crowns, and that linear and int8 are one grid."""
    from test_app import metric

    q = dict(dist="student_t", codecs=["dynamic_tree", "linear", "int8", "fp8_e4m3"])
    at = page("codecs", **q)
    assert not at.exception and not at.error
    df = tables(at)[0].set_index("Codec")
    rel_best = df["Mean relative error (%)"].idxmin().split("[")[0]
    assert any(m.label == f"Best: {rel_best}" for m in at.metric)
    text = _takeaway(at)
    assert "linear and int8 give identical numbers: the same grid" in text and "absmax / 127" in text
    assert "Another measure crowns another codec" in text and "by largest error linear leads" in text
    at = page("codecs", rank_by="Largest error", **q)
    assert not at.exception and not at.error
    worst_err = df["Largest absolute error"]
    best = worst_err.idxmin().split("[")[0]
    assert best in ("linear", "int8") and any(m.label == f"Best: {best}" for m in at.metric)
    assert f"{worst_err.min():.3g}" in metric(at, "Best:")
    text = _takeaway(at)
    assert "lowest largest error" in text and rel_best in text  # the other measure's winner is named
    assert any("outliers" in c.value for c in at.caption)  # what the measure means for gradients
    bars = figures(at)[0]
    assert bars["layout"]["yaxis"]["title"]["text"] == "Largest absolute error"
    at = page("codecs", rank_by="SNR", **q)
    df_snr = df["SNR (dB)"]
    assert any(m.label == f"Best: {df_snr.idxmax().split('[')[0]}" for m in at.metric)  # higher is better
    assert "highest SNR" in _takeaway(at)


def test_the_layout_designer_makes_a_normal_6_bit_float():
    """Regression: sign, 3 exponent bits and a 2-bit linear mantissa gave 35 distinct values of 64 codes, with no
    word why. The page now says why and points to mxfp6_e3m2, and a 'float' mantissa (implicit leading 1,
    subnormals) makes the 6-bit float: 63 distinct values (±0 share one), mxfp6_e3m2's element grid."""
    from lab.codecs.block_scaled import FORMATS, value_table
    from lab.experiments import get_codec

    fp6 = get_codec("layout", total_bits=6, signed=True, exponent_bits=3, base=2, offset=0, mantissa="float",
                    dynamic=False, scale="absmax")
    ours = np.array(fp6.values.tolist())
    mx = np.unique(value_table(FORMATS["e3m2"]).double().numpy()[:64])
    assert len(ours) == 63 and np.allclose(ours, mx / mx.max())
    q = dict(layout_on="1", lay_bits="6", lay_dynamic="0", lay_exp="3", lay_base="2")
    at = page("codecs", lay_mantissa="linear", **q)
    assert not at.exception and not at.error
    warn = at.warning[0].value
    assert "Only 35 distinct values of 64 codes" in warn and "mxfp6_e3m2" in warn and "float" in warn
    at = page("codecs", lay_mantissa="float", **q)
    assert not at.exception and not at.error and not at.warning
    assert any("63 distinct values of 64 codes" in c.value for c in at.caption)
    assert any(c.startswith("6b-s-e3-float2") for c in tables(at)[0]["Codec"])
    at = page("codecs")
    at.button(key="lay_fp6").click().run()
    assert not at.exception and any("63 distinct values of 64 codes" in c.value for c in at.caption)


def test_predict_the_best_codec_before_the_reveal():
    """Predict, then reveal on Codecs: which codec has the lowest relative error on Student-t(3)?"""
    q = dict(dist="student_t", codecs=["dynamic_tree", "linear", "fp8_e4m3"])
    at = app_page("codecs", **q)
    assert not at.exception
    assert any("Which codec has the lowest mean relative error on student_t(3)?" in m.value for m in at.markdown)
    assert any("Answer to see" in c.value for c in at.caption)
    # nothing of the answer before it: no ranking, no error table, no bars; all of it once skipped
    assert all(m.value == "?" for m in at.metric if m.label in ("Best", "Worst"))
    assert not any(m.label.startswith("Best: ") for m in at.metric)
    assert not any("Mean relative error (%)" in t.columns for t in tables(at))
    assert "has the lowest" not in " ".join(s.value for s in at.success)
    charts = len(figures(at))  # Table 1's chart beside the paper, further down
    at = page("codecs", **q)
    assert any(m.label.startswith("Best: ") for m in at.metric) and "Skipped." in at.info[0].value
    assert len(figures(at)) == charts + 1  # the error bars
    df = tables(at)[0].set_index("Codec")
    best = df["Mean relative error (%)"].idxmin().split("[")[0]
    wrong = next(c for c in ("dynamic_tree", "linear", "fp8_e4m3") if c != best)
    at = page("codecs", guess=wrong, **q)
    assert not at.exception and at.warning and f"the page computes {best}" in at.warning[0].value
    at = page("codecs", guess=best, **q)
    assert any(s.value.startswith("**Right.**") for s in at.success)


def test_bit_explorer_shows_a_codes_value_neighbours_and_rounding_interval():
    """A bit explorer (Float Toy) for every table and block-scaled format: flip bits, see the value, its
    neighbours and the inputs that round to it; one MX block under a shared scale the learner sets."""
    from lab.experiments.bits import explorable, explore

    names = explorable()
    assert {"dynamic_tree", "linear", "mantissa", "static_tree", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"} <= set(names)
    e = explore("mxfp6_e3m2", 0b001101)  # + 2^(3−3) × (1 + 1/4)
    assert e.value == 1.25 and e.below == 1.0 and e.above == 1.5 and (e.lo, e.hi) == (1.125, 1.375)
    assert e.fields == [("sign", "0"), ("exponent", "011"), ("mantissa", "01")]
    assert "2^(3 − 3) × (1 + 1/4) = 1.25" in e.formula
    assert "subnormal" in explore("mxfp4_e2m1", 0b0001).formula
    assert not explore("mxfp8_e4m3", 0x7F).used  # the NaN code
    lin = explore("linear", 254)
    assert lin.value == 1.0 and lin.hi == float("inf")  # above the top: saturates to it
    at = page("codecs", section="Bit explorer", bx_fmt="mxfp6_e3m2", bx_code=str(0b001101))
    assert not at.exception and not at.error
    assert metric_of(at, "Value") == "1.25" and metric_of(at, "Rounds from") == "[1.125, 1.375]"
    sign, exponent, mantissa = at.get("button_group")  # one coloured group of pills per field
    assert sign.value == [] and set(exponent.value) == {"e1", "e0"} and mantissa.value == ["m0"]  # the 1-bits lit
    mantissa.set_value([]).run()  # flip the mantissa's last bit off: 1.0
    assert metric_of(at, "Value") == "1" and str(0b001100) in str(at.query_params["bx_code"])
    assert at.text_input(key="w_bx_x").value == "1.0"  # the Value field follows the bits
    sat0 = int(metric_of(at, "Saturated").split()[0])
    at.slider(key="w_bx_scale_k").set_value(at.slider(key="w_bx_scale_k").min).run()  # a much smaller scale
    assert not at.exception and int(metric_of(at, "Saturated").split()[0]) > sat0
    assert "saturates" in [s.value for s in at.success if "block" in s.value][-1]


def test_float_toy_formats_round_as_torch_and_the_standards_say():
    """The hardware floats beside the lab's formats: fp32, fp16, bf16 and the OCP 8-bit floats, bit by bit, with
    their neighbours, rounding intervals (ties to even; ±∞ past the top, E4M3 saturating) and a typed value."""
    from lab.experiments.bits import compare_formats, explorable, explore, number_line, round_to_code

    assert {"fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "dynamic_tree", "nvfp4"} <= set(explorable())
    assert round_to_code("fp32", 0.1) == 0x3DCCCCCD and explore("fp32", 0x3DCCCCCD).value == float(np.float32(0.1))
    top = explore("fp16", 0x7BFF)
    assert top.value == 65504 and top.below == 65472 and top.above is None and (top.lo, top.hi) == (65488, 65520)
    assert [round_to_code("fp16", v) for v in (65519.0, 65520.0, -1e-10)] == [0x7BFF, 0x7C00, 0x8000]
    assert explore("fp16", 0x7C00).value == float("inf") and not explore("fp16", 0x7E00).used  # ∞; NaN
    assert round_to_code("fp16", 1 + 2 ** -11) == 0x3C00  # a tie goes to the even code (1.0, not 1 + 2^-10)
    assert round_to_code("fp8_e4m3", 1e9) == 0x7E and explore("fp8_e4m3", 0x7E).hi == float("inf")  # saturates
    assert round_to_code("fp8_e5m2", 61440.0) == 0x7C  # E5M2 has ∞
    assert round_to_code("bf16", 0.1) == 0x3DCD and explore("bf16", 0x3DCD).value == 0.10009765625
    zero = explore("fp16", 0)
    assert zero.below == -(2.0 ** -24) and zero.above == 2.0 ** -24 and explore("fp16", 0x8000).above == 2.0 ** -24
    for c in range(256):  # fp8 E4M3 is MX's E4M3 element: the same values, neighbours and intervals
        a, b = explore("fp8_e4m3", c), explore("mxfp8_e4m3", c)
        assert a.used == b.used and (not a.used or (a.value, a.below, a.above, a.lo) == (b.value, b.below, b.above, b.lo))
    line = number_line("fp16", round_to_code("fp16", 0.1), 0.1)
    assert line.attrs["typed"] == 0.1 and list(line.role).count("this code") == 1
    assert line[line.role == "this code"].value.iloc[0] == 0.0999755859375 and len(line) == 7
    cmp = compare_formats(0.1).set_index("format")
    assert cmp.stored["fp16"] == 0.0999755859375 and cmp.stored["fp8_e4m3"] == 0.1015625
    assert cmp.stored["fp8_e5m2"] == 0.09375 and cmp.stored["mxfp4_e2m1"] == 0.0  # flushed at scale 1
    assert cmp.code_bits["fp16"] == "0 01011 1001100110" and cmp.rel_error["fp8_e5m2"] == pytest.approx(0.0625)
    assert "dynamic_tree" not in compare_formats(float("inf")).format.tolist()  # tables code finite values only


def test_float_toy_on_the_page_types_a_value_and_flips_a_bit():
    """Type a value: the bits, the value, its neighbours, the number line and the table of every format follow;
    click a bit: the Value field shows the new code's value."""
    at = page("codecs", section="Bit explorer", bx_fmt="fp16")
    assert not at.exception and not at.error
    at.text_input(key="w_bx_x").set_value("0.1").run()
    assert not at.exception and not at.error
    assert metric_of(at, "Value") == "0.0999756" and metric_of(at, "Next above") == "0.100037"
    assert any("You typed 0.1: fp16 stores 0.0999755859375" in c.value for c in at.caption)
    sign, exponent, mantissa = at.get("button_group")
    assert set(exponent.value) == {"e3", "e1", "e0"} and set(mantissa.value) == {"m9", "m6", "m5", "m2", "m1"}
    every = tables(at)[-1].set_index("Format")
    assert every.loc["fp16", "Stored value"] == 0.0999755859375 and every.loc["bf16", "Stored value"] == 0.10009765625
    assert every.loc["fp8_e4m3", "Stored value"] == 0.1015625 and every.loc["fp8_e5m2", "Stored value"] == 0.09375
    assert every.loc["fp16", "Code (sign exponent mantissa)"] == "0 01011 1001100110"
    text = [s.value for s in at.success if "in every format" in s.value or "exactly" in s.value][-1]
    assert "No format stores 0.1 exactly" in text and "fp32 comes closest (0.100000001" in text
    line = figures(at)[-1]
    assert [t["x"] for t in line["data"] if t.get("name", "").startswith("your value")] == [[0.1]]
    mantissa.set_value(list(mantissa.value) + ["m0"]).run()  # flip the last bit on: the next value up
    assert not at.exception and not at.error
    assert at.text_input(key="w_bx_x").value == "0.10003662109375" and metric_of(at, "Value") == "0.100037"
    assert at.query_params["bx_code"] in ("11879", ["11879"]) and at.query_params["bx_x"] in (
        "0.10003662109375", ["0.10003662109375"])
    at.text_input(key="w_bx_x").set_value("70000").run()  # past the top: fp16 rounds to +∞
    assert metric_of(at, "Value") == "∞" and any("becomes ∞" in c.value for c in at.caption)


@pytest.mark.parametrize("query,says", [
    (dict(bx_code="99999"), "Bits: code '99999' from the link (bx_code) is not allowed for fp8_e4m3; allowed: a whole "
                            "number 0..255 (8 bits)"),
    (dict(bx_code="1.5", bx_fmt="mxfp6_e3m2"), "Bits: code '1.5' from the link (bx_code) is not allowed for mxfp6_e3m2; "
                                               "allowed: a whole number 0..63"),
    (dict(bx_x="abc"), "Value: 'abc' is not a number"),
    (dict(bx_x="inf", bx_fmt="dynamic_tree"), "Value: value inf: dynamic_tree codes finite values only"),
])
def test_out_of_range_bit_explorer_values_are_said_beside_their_control(query, says):
    """A code out of range or fractional in the link, or a value that is not a number, is named beside its control
    with what is allowed; the explorer still draws."""
    at = page("codecs", section="Bit explorer", **query)
    assert not at.exception
    assert any(says in e.value for e in at.error), [e.value for e in at.error]
    assert metric_of(at, "Value")  # the explorer goes on with a code it says


def test_codec_speed_has_spreads_and_times_no_first_call():
    """codec_speed: every median with its 95 % interval and min–max, more repeats where cheap, the cast ratio with
    its range, the machine's load and threads; a codec's slow first call (its compile) is warm-up, never timed."""
    from lab.experiments import codec_speed, get_codec

    class SlowFirstCall:  # a codec whose first encode costs 0.3 s, as a first compile does
        def __init__(self):
            self.inner, self.calls = get_codec("int8"), 0

        def describe(self):
            return "int8 (slow first call)"

        def encode(self, x):
            self.calls += 1
            if self.calls == 1:
                time.sleep(0.3)
            return self.inner.encode(x)

        def decode(self, e):
            return self.inner.decode(e)

    threads = torch.get_num_threads()
    df = codec_speed([SlowFirstCall(), "linear"], 4096, repeats=5, budget_s=0.05, threads=1)
    assert torch.get_num_threads() == threads  # restored
    assert set(df.codec) == {"int8 (slow first call)", "linear[nearest,tensor]", "torch fp8_e4m3 cast"}
    assert (df.repeats >= 5).all() and (df.repeats <= 41).all()
    assert (df.ns_min <= df.ns_lo).all() and (df.ns_lo <= df.ns_per_value).all()
    assert (df.ns_per_value <= df.ns_hi).all() and (df.ns_hi <= df.ns_max).all()
    assert (df.vs_cast_lo <= df.speed_vs_fp8_cast).all() and (df.speed_vs_fp8_cast <= df.vs_cast_hi).all()
    slow = df[df.codec.str.startswith("int8")]
    assert (slow.ns_max * 4096 / 1e9 < 0.3).all()  # the 0.3 s first call is not among the timed ones
    assert df.attrs["threads"] == 1 and df.attrs["cores"] >= 1 and "load_before" in df.attrs
    with pytest.raises(ValueError, match="threads=0"):
        codec_speed(["int8"], 64, threads=0)


def test_codec_speed_times_on_the_cores_a_busy_machine_leaves_free(monkeypatch):
    """On a machine whose load fills its cores, threaded passes wait at every step for a descheduled thread (a pass
    of a few ns per value measured at hundreds): by default codec_speed times on the cores left free, at least one,
    and gives torch its threads back."""
    import os

    from lab.experiments import codec_speed

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count() or 1) + 8, 0.0, 0.0))
        df = codec_speed(["int8"], 4096, repeats=3, budget_s=0)
        assert df.attrs["threads"] == 1 and df.attrs["threads_before"] == 2 and torch.get_num_threads() == 2
        monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: all of torch's threads
        assert codec_speed(["int8"], 4096, repeats=3, budget_s=0).attrs["threads"] == min(2, os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


def test_speed_section_shows_spreads_says_within_noise_and_warns_when_busy(monkeypatch):
    """The Speed section on a machine whose load is above its cores: a load warning, a table with each median's
    interval and min–max and its repeats, and a takeaway that quotes the table and ranks only beyond the noise."""
    import os

    from views import codecs as codecs_view

    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    at = page("codecs", section="Speed", speed_n="65536", codecs=["int8", "linear"])
    at.button(key="run_speed_run").click().run()
    assert not at.exception and not at.error
    assert any("busy machine (load average 64.0" in w.value for w in at.warning)
    speed = tables(at)[-1]
    assert {"ns per value (median)", "95 % interval (ns)", "min–max (ns)", "Repeats", "vs torch's cast"} <= set(speed)
    assert (speed.Repeats >= 5).all()
    enc = speed[(speed.Operation == "encode") & (speed.Codec != "torch fp8_e4m3 cast")]
    top = enc.sort_values("ns per value (median)").iloc[0]
    text = [s.value for s in at.success if "encodes fastest" in s.value][0]
    assert f"{top.Codec} encodes fastest, {top['ns per value (median)']:.2g} ns per value" in text
    assert f"(95 % interval {top['95 % interval (ns)'].split('–')[0][:2]}" in text
    # the verdict's words follow the intervals
    row = dict(op="encode", speed_vs_fp8_cast=2.0)
    cast = dict(codec="torch fp8_e4m3 cast", ns_per_value=2.0, ns_lo=1.9, ns_hi=2.1, vs_cast_lo=1, vs_cast_hi=1, **row)
    close = pd.DataFrame([dict(codec="a", ns_per_value=1.0, ns_lo=0.9, ns_hi=1.2, vs_cast_lo=1.6, vs_cast_hi=2.3, **row),
                          dict(codec="b", ns_per_value=1.1, ns_lo=1.0, ns_hi=1.3, vs_cast_lo=1.5, vs_cast_hi=2.1, **row),
                          cast])
    assert "within noise of b" in codecs_view._speed_verdict(close)
    apart = close.assign(ns_lo=[0.9, 1.25, 1.9], ns_hi=[1.2, 1.3, 2.1])
    assert "ahead of b beyond the noise" in codecs_view._speed_verdict(apart)
    near_cast = close.assign(vs_cast_lo=[0.8, 0.8, 1], vs_cast_hi=[1.3, 1.3, 1])
    assert "against torch's fp8 cast it is within noise (0.8x–1.3x)" in codecs_view._speed_verdict(near_cast)


def metric_of(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)
