"""The Training page's sharded view (app/views/_fsdp_training.py): FSDP2 beside DDP, in
Streamlit's AppTest; one tiny real run (2 Gloo ranks) whose bytes per collective and takeaway come from
its numbers; the takeaway's words follow the numbers."""
from __future__ import annotations

import pandas as pd
import pytest

from apptest_runs import job, wait_for
from test_app_tables import assert_for_people
from lazy_import import lazy
from test_app import page

AppTest = lazy("streamlit.testing.v1", "AppTest")
MODE = "sharded: FSDP2 vs DDP"


def test_sharded_view_trains_fsdp_beside_ddp_and_shows_bytes_per_collective():
    at = page("training", experiment=MODE, fsdp_hidden="32", fsdp_epochs="0.25")
    assert not at.exception and not at.error
    assert any("What does FSDP send" in m.value for m in at.markdown)
    labels = [s.label for s in at.selectbox]
    assert "Weights codec (all-gather)" in labels and "Gradients codec (reduce-scatter)" in labels
    weights = next(s for s in at.selectbox if s.label == "Weights codec (all-gather)")
    assert "topk" not in weights.options and "powersgd" not in weights.options and "mxfp8_e4m3" in weights.options
    at.button(key="run_fsdp_run").click().run()
    run = wait_for(lambda: job(at, "fsdp_run"), "the FSDP run to start")
    wait_for(lambda: not run.running, "the FSDP run to finish")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert run.state == "done", (run.state, run.error)
    res = run.result
    s = res.summary
    assert {r for r in res.runs.variant} == {"FSDP2 w=mxfp8_e4m3 g=mxfp8_e4m3", "FSDP2 fp32", "DDP fp32"}
    assert 0.2 < s["bytes_ratio"] < 0.3
    bars = [m for m in at.metric if m.label.startswith("Bytes per step")]
    assert bars and "vs FSDP2 fp32" in str(bars[0].delta)
    text = " ".join(m.value for m in at.success)
    assert text.count("**Takeaway.**") == 1
    assert f"{s['bytes_ratio']:.1%} of fp32 FSDP2's bytes" in text
    # fp32 FSDP2 moves the model three times (two all-gathers, one reduce-scatter), DDP's all-reduce twice
    per = res.runs.set_index("variant").bytes_per_step
    assert abs(per["FSDP2 fp32"] / per["DDP fp32"] - 1.5) < 0.05
    assert f"{per['FSDP2 fp32'] / per['DDP fp32']:.2f}x DDP's bytes" in text
    # the run table is for people: human headers with units, its main columns, no 2.637e+05; the rest on a tick
    assert_for_people(at, "fsdp runs")
    from static_table import tables
    runs = next(d for d in tables(at) if "Run" in d.columns)
    assert list(runs.columns) == ["Run", "Steps", "Step (ms)", "Sent per step (kB)", "Final training loss",
                                  "Final test error (%)"]
    assert runs.set_index("Run")["Sent per step (kB)"].to_dict() == pytest.approx((per / 1e3).to_dict())
    at.checkbox(key="w_fsdp_runs_all").check().run()
    assert_for_people(at, "fsdp runs, all columns")
    assert "Parameters" in next(d for d in tables(at) if "Run" in d.columns).columns


def test_bad_sharded_settings_are_a_message():
    at = page("training", experiment=MODE, fsdp_weights="topk")
    assert not at.exception
    # a gradient compressor is not offered for the weights: the URL's choice is refused, naming what is allowed
    assert any("'topk' from the link is not allowed; allowed: 32-bit, bf16" in e.value for e in at.error), \
        [e.value for e in at.error]


def test_takeaway_words_follow_the_numbers():
    from views._fsdp_training import fsdp_takeaway

    runs = pd.DataFrame({"variant": ["FSDP2 w=int8", "FSDP2 fp32", "DDP fp32"], "bytes_per_step": [30.0, 120.0, 80.0]})
    coll = pd.DataFrame({"variant": ["FSDP2 w=int8"], "collective": ["all_gather_backward"],
                         "cross_node_per_step": [0.0]})
    s = dict(label="FSDP2 w=int8", bytes_per_step=30.0, bytes_ratio=0.25, speedup=0.8, train_loss_ratio=1.03,
             steps=10, hpz=2, cross_node_ratio=0.2)
    t = fsdp_takeaway(s, runs, coll)
    assert "1.50x DDP's bytes" in t and "25.0% of fp32 FSDP2's bytes" in t and "0.80x its speed" in t
    assert "slower" in t and "3.0% higher" in t and "20.0% of fp32's bytes crossed nodes" in t
    assert "stayed inside each node" in t
    t = fsdp_takeaway(dict(s, speedup=2.0, train_loss_ratio=1.001, hpz=None), runs, coll)
    assert "faster" in t and "the same after 10 steps" in t and "crossed" not in t
