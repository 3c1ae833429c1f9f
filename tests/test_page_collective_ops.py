"""The Collectives page's op choice (every nccl-tests collective): its algorithms' modelled
busbw against the op's lower bound, a takeaway from the numbers shown, and the op model itself."""
import pytest

from lazy_import import lazy
from test_app import page as app_page

figures = lazy("chart", "figures")


def page(**query):
    return app_page("collectives", **query)


def test_op_model_ring_vs_pat_and_bruck():
    """Small all-gathers: PAT's log2 P rounds beat the ring's P-1; large ones: the same bytes, both reach
    the bound's busbw; alltoall's Bruck sends more bytes than pairwise."""
    from lab.experiments import op_model

    df = op_model("all_gather", ["ring", "pat"], 64, [8, 1 << 30], "ib_fdr").set_index(["algorithm", "nbytes"])
    assert df.loc[("pat", 8), "model_s"] < df.loc[("ring", 8), "model_s"] / 5
    assert df.loc[("ring", 1 << 30), "busbw_GBps"] == pytest.approx(df.loc[("ring", 1 << 30), "bound_busbw_GBps"], rel=1e-3)
    a2a = op_model("alltoall", ["pairwise", "bruck"], 64, [1 << 20]).set_index("algorithm")
    assert a2a.loc["bruck", "bytes_per_rank"] == pytest.approx(3 * a2a.loc["pairwise", "bytes_per_rank"] * 64 / 63)


def test_page_op_choice_draws_its_algorithms_and_a_takeaway():
    at = page(op="reduce_scatter", P="64", size=str(1 << 10), link="ib_fdr")
    assert not at.exception, at.exception
    take = [s.value for s in at.get("success") if "reduce_scatter of" in s.value]
    assert take and "on 64 ranks" in take[0] and "fastest" in take[0]
    labels = {m.label for m in at.metric}
    assert {"ring", "recursive_halving", "pat", "direct"} <= labels
    at = page(op="gather")
    assert not at.exception and at.error and "all_gather" in at.error[0].value
