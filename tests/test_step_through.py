""""See a collective happen": the step-through of one allreduce (lab.experiments.step_through,
lab.plots.step_through, app/views/step_through.py). The numbers users read off the page: bytes per
link against nccl-tests' 2(P−1)/P·n, buffers filling with partial sums until every rank holds the
exact sum, the codec's error growing at re-quantising hops, algbw vs busbw, and the page itself
(URL state, messages for bad input, every registered algorithm at P = 2..8)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import plots
from lab.comm.algorithms import Algorithm, get_algorithm, register, unregister
from lab.experiments import (STEP_P, algorithm_catalog, algorithm_traffic, busbw_table, step_algorithms,
                             step_codecs, step_through)
from test_app import metric, page as app_page
from lazy_import import lazy

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection
figures = lazy("chart", "figures")

PS = range(STEP_P[0], STEP_P[1] + 1)


def page(**query) -> AppTest:
    """The step_through page on its own, its URL carrying `query` (tests/test_app.py's `page`)."""
    return app_page("step_through", **query)


# --- the trace: bytes, buffers, errors ---

def test_ring_every_link_carries_two_p_minus_one_over_p_n():
    P, n = 4, 24
    tr = step_through("ring", P, n)
    links = tr.link_bytes(wire=False)
    share = 2 * (P - 1) / P * n * 4  # 144 B of a 96 B vector
    for r in range(P):
        assert links[r, (r + 1) % P] == share  # each rank sends only to its right neighbour
        assert links[r].sum() == share and links[:, r].sum() == share
    assert tr.summary["busiest_link_x_n"] == pytest.approx(1.5) == tr.summary["busiest_rank_x_n"]
    assert tr.steps == 2 * (P - 1) and len(tr.messages) == P * 2 * (P - 1)
    assert (tr.messages.bytes == tr.messages.fp32_bytes).all()  # no codec: the wire carries fp32


@pytest.mark.parametrize("P", [2, 5, 7, 8])
def test_ring_share_at_other_p(P):
    tr = step_through("ring", P, 840)  # 840 = lcm(1..8): equal segments for every P
    assert tr.summary["busiest_rank_x_n"] == pytest.approx(2 * (P - 1) / P)
    assert tr.summary["busiest_link_x_n"] == pytest.approx(2 * (P - 1) / P)


def test_tree_root_moves_log2p_vectors():
    tr = step_through("tree", 8, 24)
    assert tr.summary["busiest_rank"] == 0
    assert tr.summary["busiest_rank_x_n"] == pytest.approx(3.0)  # 3 children up, 3 down
    assert tr.steps == 6


def test_buffers_fill_with_partial_sums_until_every_rank_holds_the_exact_sum():
    P, n = 4, 24
    tr = step_through("ring", P, n)
    assert (tr.counts[0] == 1).all()  # before any message: each rank its own vector
    assert (tr.masks[0] == (1 << np.arange(P))[:, None]).all()
    after_rs = tr.counts[P - 1]  # after the reduce-scatter each rank owns one finished segment
    for r in range(P):
        assert (after_rs[r] == P).sum() == n // P
    assert (tr.counts[-1] == P).all() and (tr.masks[-1] == (1 << P) - 1).all()
    for f in range(tr.steps):  # a buffer never loses a contribution in a ring
        assert (tr.counts[f + 1] >= tr.counts[f]).all()
    assert tr.final.exact_provenance.all()  # the fp32 run summed every rank exactly once
    assert tr.final.rel_error.max() < 1e-6  # random data in fp32: rounding only


def test_codec_error_grows_at_requantising_hops():
    P = 8
    tr = step_through("ring", P, 840, codec="dynamic_tree")
    m = tr.messages
    per_step = m.groupby("step").max_abs_error.max()
    first, last_rs = per_step[0], per_step[P - 2]  # own data encoded once; P−1 ranks re-encoded P−2 times
    assert m[m.step == 0].kind.eq("own data").all()
    assert m[m.step == P - 2].kind.eq("partial sum").all()
    assert m[m.step == P - 2].contributions_min.eq(P - 1).all()
    assert last_rs > 2 * first
    assert m[m.step >= P - 1].kind.eq("full sum").all()  # allgather: finished sums forwarded
    fp32 = step_through("ring", P, 840)
    assert tr.final.max_abs_error.max() > 1e3 * fp32.final.max_abs_error.max()
    assert fp32.messages.max_abs_error.max() < 1e-5
    # the wire carries 8-bit codes (plus a scale per message), about a quarter of fp32
    assert 0.25 < m.bytes.sum() / m.fp32_bytes.sum() < 0.3


def test_busbw_is_algbw_times_the_share_and_reaches_the_link_for_ring():
    tr = step_through("ring", 4, 840)
    bw = busbw_table(tr, "nvlink4", float(1 << 30)).iloc[0]
    assert bw.busbw_GBps == pytest.approx(bw.algbw_GBps * 1.5)
    assert 0.99 < bw.busbw_of_link <= 1.0  # the busiest rank moves exactly 1.5·n: busbw → link bandwidth
    small = busbw_table(tr, "nvlink4", 1024.0).iloc[0]
    assert small.busbw_of_link < 0.1  # 1 kB: latency-bound
    tree = busbw_table(step_through("tree", 4, 840), "nvlink4", float(1 << 30)).iloc[0]
    assert tree.busbw_of_link < 0.75 + 1e-9  # root moves 2·n: at most 1.5/2 of the link


def test_with_a_codec_busbw_from_the_fp32_size_exceeds_the_link():
    tr = step_through("ring", 4, 840, codec="dynamic_tree")
    bw = busbw_table(tr, "ib_hdr", float(1 << 30))
    assert len(bw) == 2 and bw.iloc[1].busbw_of_link > 3 * bw.iloc[0].busbw_of_link


@pytest.mark.parametrize("algorithm", step_algorithms())
def test_every_registered_algorithm_traces_at_every_p(algorithm):
    algo = get_algorithm(algorithm)
    for P in PS:
        tr = step_through(algorithm, P, 840, codec="dynamic_tree")
        assert (tr.counts[-1] == P).all(), (algorithm, P)  # every rank ends with every contribution
        assert (tr.messages.contributions_min >= 1).all(), (algorithm, P)
        assert tr.final.exact_provenance.all(), (algorithm, P)
        assert tr.final.rel_error.max() < 0.05, (algorithm, P)
        # the traced bytes are what the algorithm's cost model says it sends
        assert tr.summary["total_bytes"] == pytest.approx(algo.total_bytes(P, tr.nbytes)), (algorithm, P)


def test_algorithm_table_covers_the_registry():
    df = algorithm_traffic(6, 24)
    assert df.algorithm.tolist() == algorithm_catalog().name.tolist()
    ring = df.set_index("algorithm").loc["ring"]
    assert ring.busiest_rank_x_n == pytest.approx(ring.nccl_share_x_n) == pytest.approx(10 / 6)


def _star(comm, buf, ch):
    """Test plugin: everyone sends to rank 0, which adds and sends the sum back."""
    if comm.rank == 0:
        for i in range(1, comm.size):
            ch.add_into(ch.recv(buf.numel(), i), buf)
        ch.post([(ch.finalize(buf), k) for k in range(1, comm.size)]).wait()
    else:
        ch.send(ch.encode(buf), 0)
        ch.recv_into(buf, 0)


@pytest.fixture
def star(monkeypatch):
    from lab.comm.algorithms import ENV

    monkeypatch.delenv(ENV, raising=False)
    register(Algorithm(name="test_star", summary="star through rank 0", citation="test plugin", reduce=_star,
                       coefficients=lambda P, m: (2.0, 2.0 * (P - 1) * m), total_bytes=lambda P, m: 2.0 * (P - 1) * m))
    yield "test_star"
    unregister("test_star")


def test_a_plugin_algorithm_is_stepped_through_without_listing_it(star):
    assert star in step_algorithms()
    tr = step_through(star, 5, 24)
    assert (tr.counts[-1] == 5).all() and tr.steps == 2
    assert tr.summary["busiest_rank_x_n"] == pytest.approx(4.0)  # rank 0 receives 4 vectors, sends 4


@pytest.mark.parametrize("bad, allowed", [
    ({"P": 9}, "2 to 8"), ({"P": 1}, "2 to 8"), ({"P": True}, "2 to 8"), ({"n": 0}, "from 1 to"),
    ({"algorithm": "native"}, "ring"), ({"algorithm": "nope"}, "ring"), ({"seed": -1}, "allowed"),
    ({"codec": "topk"}, "butterfly_sync"), ({"codec": "ef:linear"}, "without")])
def test_bad_input_names_what_is_allowed(bad, allowed):
    kw = {"algorithm": "ring", "P": 4, "n": 24} | bad
    with pytest.raises(ValueError, match="allowed|use mode") as e:
        step_through(kw.pop("algorithm"), kw.pop("P"), kw.pop("n"), **kw)
    assert allowed in str(e.value)


def test_codec_list_is_the_registry_less_fp32_and_sparse():
    names = step_codecs()
    assert "dynamic_tree" in names and "nvfp4" in names and "onebit" in names  # onebit: two-stage algorithms
    assert "fp32" not in names and "topk" not in names


# --- the figure ---

def test_figure_has_one_frame_per_step_and_draws_the_step():
    tr = step_through("ring", 4, 24, codec="dynamic_tree")
    fig = plots.step_through_figure(tr, 3)
    full = [f for f in fig.frames if "." not in f.name]
    assert [f.name for f in full] == [str(k) for k in range(tr.steps + 1)]
    assert fig.layout.sliders[0].active == 3 and len(fig.layout.sliders[0].steps) == tr.steps + 1
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Play", "❚❚ Pause"]
    assert len(fig.data[1].x) == 4  # step 3's messages: one arrow per rank
    assert sorted(fig.data[5].marker.color) == sorted(tr.counts[3].ravel().tolist())  # buffer cells
    links = [v for v in fig.data[6].marker.color]
    assert sorted(links)[-4:] == [30.0] * 4  # 3 steps × 10 B of 8-bit codes per ring link
    mid = [f for f in fig.frames if f.name == "2.0"][0]
    assert mid.baseframe == "1" and len(mid.data[3].x) == 4  # packets halfway along step 2's arrows


@pytest.mark.parametrize("algorithm", step_algorithms())
def test_figure_builds_for_every_algorithm(algorithm):
    for P in (2, 7):
        tr = step_through(algorithm, P, 120)
        fig = plots.step_through_figure(tr, tr.steps)
        assert len([f for f in fig.frames if "." not in f.name]) == tr.steps + 1
        assert len(fig.data[5].marker.color) == P * 40  # 120 values in bins of 3 (at most 48 columns)
        assert min(fig.data[5].marker.color) == P  # the last frame: every value is the full sum


# --- the page ---

def _metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r} in {[m.label for m in at.metric]}")


def test_page_renders_with_takeaway_and_explains_busbw():
    at = page()
    assert not at.exception
    take = at.get("success")[0].value
    assert "Ring at P = 4" in take and "1.5·n" in take and "dynamic_tree" in take
    assert _metric(at, "Busiest rank") == "1.5·n"
    assert _metric(at, "Step") == "0 of 6"
    text = " ".join(m.value for m in at.markdown)
    assert "Why 2(P−1)/P" in text
    assert len(figures(at)) == 2


def test_page_url_state_of_step_algorithm_and_p():
    at = page(algorithm="tree", P="8", step="3", codec="none")
    assert not at.exception
    assert _metric(at, "Step") == "3 of 6"
    assert _metric(at, "Busiest rank") == "3·n"
    assert at.query_params["algorithm"] == "tree" and at.query_params["P"] == "8"
    at.button(key="step_next").click().run()
    assert _metric(at, "Step") == "4 of 6" and at.query_params["step"] == "4"
    at.slider(key="w_step").set_value(6).run()
    assert _metric(at, "Full sums") == "100%"
    at.number_input(key="w_P").set_value(2).run()  # fewer steps than the step shown: the last one
    assert not at.exception and _metric(at, "Step") == "2 of 2"


def test_page_bad_input_is_a_message():
    at = page(P="9")
    assert not at.exception and "allowed: 2..8" in at.error[0].value
    at = page(algorithm="ring", codec="onebit")  # sign payloads: two-stage algorithms only
    assert not at.exception and "butterfly_sync" in at.error[0].value


@pytest.mark.parametrize("algorithm", step_algorithms())
def test_page_every_algorithm(algorithm):
    at = page(algorithm=algorithm, P="6", step="2")
    assert not at.exception, at.exception
    assert at.get("success") and f"{algorithm.capitalize()} at P = 6" in at.get("success")[0].value


# --- one step state, a two-level machine, arithmetic on hover ---

def test_play_drives_the_pages_own_step(monkeypatch):
    """Regression: Play animated the figure to step 6 of 6 while the Step slider and metrics stayed at 3. Now Play
    advances the page's one step: slider, metrics and figure agree at every beat, and it stops at the last."""
    import views.step_through as page_mod
    from chart import figures

    at = page(algorithm="ring", P="4", step="3")
    assert not at.exception
    fig = figures(at)[0]
    assert not fig["layout"].get("updatemenus") and not fig["layout"].get("sliders") and not fig.get("frames")
    assert fig["layout"]["annotations"][0]["text"] == "<b>Step 3 of 6: its messages</b>"  # the figure names its step
    monkeypatch.setattr(page_mod, "PLAY_SECONDS", 0.0)  # every run is a beat: the page plays through in one go
    at.button(key="step_play").click().run()
    assert not at.exception
    assert at.slider(key="w_step").value == 6 and metric(at, "Step") == "6 of 6"
    assert metric(at, "Full sums") == "100%"
    assert figures(at)[0]["layout"]["annotations"][0]["text"] == "<b>Step 6 of 6: its messages</b>"
    assert [b.key for b in at.button if b.key == "step_play"]  # stopped at the last step: Play again
    monkeypatch.setattr(page_mod, "PLAY_SECONDS", 3600.0)  # one beat per hour: Play, then Pause at once
    at.button(key="step_play").click().run()
    assert at.slider(key="w_step").value == 0 and metric(at, "Step") == "0 of 6"  # from the start
    at.button(key="step_pause").click().run()
    assert [b.key for b in at.button if b.key == "step_play"]


def test_hierarchical_is_drawn_on_a_two_level_machine():
    """Regression: hierarchical was drawn on one flat link. Its ranks sit in nodes; arrows inside a node and
    between nodes are separate traces (fast and slow links); the page counts bytes per level."""
    tr = step_through("hierarchical", 8, 24)
    assert tr.ranks_per_node == 2
    lv = tr.level_bytes()
    assert lv["inside nodes"] > 0 and lv["between nodes"] > 0
    assert lv["inside nodes"] + lv["between nodes"] == tr.link_bytes().sum()
    fig = plots.step_through_figure(tr, tr.steps, animate=False)
    assert len(fig.layout.shapes) == 4  # one box per node
    names = {t.name for t in fig.data if t.showlegend}
    assert {"inside a node (fast link)", "between nodes (slow link)"} <= names
    slow = next(t for t in fig.data if t.name == "between nodes (slow link)")
    fast = next(t for t in fig.data if t.name == "inside a node (fast link)")
    assert slow.line.width > fast.line.width and slow.line.color != fast.line.color
    assert step_through("ring", 8, 24).ranks_per_node == 0  # a flat algorithm stays on the circle
    at = page(algorithm="hierarchical", P="8")
    assert not at.exception
    assert metric(at, "Bytes inside nodes") and metric(at, "Bytes between nodes")


def test_hover_shows_the_arithmetic():
    """Hovering a bar, an arrow or a cell shows its numbers and the formula with them."""
    from lab.experiments import algorithm_traffic

    tr = step_through("ring", 4, 24)
    fig = plots.step_through_figure(tr, 2, animate=False)
    heads = fig.data[1].hovertext
    assert all(" = " in h and " values × " in h for h in heads)  # bytes = values × bytes per value
    cells = [c[1] for c in fig.data[6].customdata]
    assert "24 + 24 = 48 B" in cells  # two ring steps of 6 fp32 values on one link
    bars = plots.step_traffic_figure(algorithm_traffic(4, 24))
    ring = list(bars.data[0].x).index("ring")
    assert "144 B / n = 144 / 96 B = 1.5·n" in bars.data[0].hovertext[ring]  # ring's busiest rank: 144 B of n


def test_predict_the_busiest_rank_before_the_reveal():
    """Predict, then reveal on Step through: the busiest rank's bytes in multiples of n."""
    at = page(algorithm="ring", P="4")
    assert not at.exception
    assert any("How many bytes does the busiest rank of ring move" in m.value for m in at.markdown)
    at = page(algorithm="ring", P="4", guess="1.5")
    assert not at.exception and any(s.value.startswith("**Right.**") and "2·3/4·n = 1.5·n" in s.value
                                    for s in at.success)
    at = page(algorithm="tree", P="4", guess="1.5")
    assert at.warning and "144 / 96" not in at.warning[0].value and "/ 96 = " in at.warning[0].value
