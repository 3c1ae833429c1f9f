"""The Codecs page as a lesson (issue 17) and its block-scaled views (issue 18): the takeaway is computed
from the numbers shown, Table 1 sits beside the paper, bad input is a message, URL state survives errors,
unscaled bit layouts, one MX/NVFP4 block drawn, block scaling against the paper's per-tensor types."""
import io

import numpy as np
import pytest
import torch

from test_app import page
from static_table import tables
from lazy_import import lazy

figures = lazy("chart", "figures")  # Streamlit loads with the first page test, not at collection


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
    at.number_input(key="w_lay_bits").set_value(8).run()
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
    """Issue 18: one block of an MX format: its shared power-of-two scale, which values saturate and which flush."""
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
    """Issue 18's lesson, measured: at 8 bits MXFP8 E4M3 (one scale per 32) beats the paper's dynamic tree on
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
