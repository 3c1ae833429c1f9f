"""The step-through of every collective (lab.experiments.step_through.op_step_through and the
Step through page's Collective choice): all-gather filling buffers, reduce-scatter leaving each rank its
shard, all-to-all's transposition, a broadcast tree, each op's busbw factor from its own message counts."""
from __future__ import annotations

import numpy as np
import pytest

from lab.comm.collectives import collective_names
from lazy_import import lazy
from test_app import page as app_page

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

figures = lazy("chart", "figures")


def page(**query):
    return app_page("step_through", **query)


def test_all_gather_fills_every_buffer_with_every_ranks_row():
    from lab.experiments import op_step_through

    tr = op_step_through("all_gather", "ring", 4, 8)
    assert (tr.masks[0] >= 0).sum() == 4 * 2  # each rank holds its own row only
    last = tr.masks[tr.steps]
    for r in range(4):
        assert list(last[r]) == [1 << j for j in range(4) for _ in range(2)]
    assert tr.final.exact_provenance.all()
    assert tr.summary["busiest_rank_x_n"] == pytest.approx(3 / 4) == tr.summary["nccl_share"]


@pytest.mark.parametrize("algorithm", collective_names("reduce_scatter"))
def test_reduce_scatter_leaves_each_rank_its_shard(algorithm):
    from lab.experiments import op_step_through

    P, k = 6, 2
    tr = op_step_through("reduce_scatter", algorithm, P, P * k)
    last = tr.counts[tr.steps]
    for r in range(P):
        assert (last[r, r * k:(r + 1) * k] == P).all()  # its own shard: every rank summed
    assert tr.final.exact_provenance.all()


def test_alltoall_is_a_transposition_and_bruck_relays():
    from lab.experiments import op_step_through

    P = 5
    for algo in ("pairwise", "bruck"):
        tr = op_step_through("alltoall", algo, P, P)
        last = tr.masks[tr.steps]
        assert (last == np.array([[1 << i for i in range(P)]] * P)).all()  # block i of every rank is rank i's
    pair, bruck = (op_step_through("alltoall", a, 8, 8).summary for a in ("pairwise", "bruck"))
    assert pair["steps"] == 7 and bruck["steps"] == 3
    assert pair["busiest_rank_x_n"] == pytest.approx(7 / 8)
    assert bruck["busiest_rank_x_n"] == pytest.approx(12 / 8)  # Bruck relays: 12 blocks of 8 leave each rank


def test_broadcast_tree_and_the_factor_from_message_counts():
    from lab.experiments import op_busbw_text, op_step_through

    tr = op_step_through("broadcast", "binomial", 8, 4, root=2)
    assert tr.final.exact_provenance.all() and len(tr.messages) == 7
    assert tr.summary["busiest_rank"] == 2 and tr.summary["busiest_rank_x_n"] == 3  # the root sends 3 children
    text = op_busbw_text(tr)
    assert "Why 1." in text and "7 messages" in text and "3·S" in text
    with pytest.raises(ValueError, match="allowed for all_gather on 4 ranks: a multiple of 4"):
        op_step_through("all_gather", "ring", 4, 6)
    with pytest.raises(ValueError, match="allowed: " + ", ".join(collective_names("all_gather"))):
        op_step_through("all_gather", "pairwise", 4, 8)


def test_page_runs_every_op_and_explains_its_factor():
    at = page(op="all_gather", op_algorithm="bruck", P="8", step="2")
    assert not at.exception, at.exception
    assert "Step through all_gather" in at.title[0].value
    text = " ".join(m.value for m in at.markdown)
    assert "Why 0.875" in text and "receive the P−1 shards" in text
    assert "all_gather by bruck at P = 8" in at.get("success")[0].value
    for op in ("reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"):
        at = page(op=op, P="5", step="1")
        assert not at.exception, (op, at.exception)
        assert at.get("success") and f"{op} by" in at.get("success")[0].value
    at = page()  # the allreduce lesson stays the default
    assert not at.exception and "Step through an allreduce" in at.title[0].value


def test_stacked_layout_for_800_px_and_no_crowding_at_p8():
    """The figure stacks its panels one per row (taller, the circle across the width) when asked; at P = 8
    the arrows' byte labels and the buffer grid's numbers go to hover instead of covering the ranks."""
    from lab import plots
    from lab.experiments import op_step_through, step_through

    tr = step_through("ring", 8, 24, codec=None)
    side = plots.step_through_frames(tr)["layout"]
    stacked = plots.step_through_frames(tr, stacked=True)["layout"]
    assert stacked["height"] > side["height"]
    assert stacked["xaxis"]["domain"][1] - stacked["xaxis"]["domain"][0] > 2 * (side["xaxis"]["domain"][1] - side["xaxis"]["domain"][0])
    assert stacked["yaxis2"]["domain"][1] < stacked["yaxis"]["domain"][0]  # buffers below the circle
    fig = plots.step_through_figure(tr, 1, animate=False)
    assert not any(t.text for t in fig.data[:3] if t.mode == "text")  # no byte labels at P = 8
    assert fig.data[5].text is None  # buffer numbers on hover only
    small = plots.step_through_figure(op_step_through("all_gather", "ring", 4, 8), 1, animate=False)
    assert any(t.text for t in small.data[:3] if t.mode == "text")
    at = page(op="all_gather", P="8", layout="stacked")
    assert not at.exception and at.query_params["layout"] == "stacked"
