"""The sharded planner prices FSDP's collectives through the registered collective plugins
(lab/plan/levels.py): a plugin registered at run time is chosen where it is cheapest, in `plan --strategy
fsdp` and in pays' FSDP rows, and named there; removing it gives the old choice back."""
import pytest
import torch

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

BW = (0.5, 50.0)


def _direct_all_gather(comm, rows: torch.Tensor) -> None:
    """Every rank sends its row straight to every other rank in one batch."""
    P, r = comm.size, comm.rank
    peers = [p for p in range(P) if p != r]
    comm.exchange([(rows[r], p) for p in peers], [(rows[p], p) for p in peers]).wait()


@pytest.fixture
def one_shot_gather():
    """A test all-gather declaring one message's latency and the ring's bytes: cheaper than every built-in."""
    from lab.comm.collectives import Collective, register, unregister

    c = register(Collective(op="all_gather", name="test_one_shot", summary="test: every row straight to every rank",
                            citation="test", run=_direct_all_gather,
                            coefficients=lambda P, m: (1.0, (P - 1) / P * m),
                            total_bytes=lambda P, m: (P - 1) * m, order=900))
    yield c
    unregister("all_gather", "test_one_shot")


def test_a_registered_all_gather_is_exact_and_chosen_by_plan_and_pays(one_shot_gather):
    from lab.comm.collectives import all_gather
    from lab.comm.sim import simulate
    from lab.plan import plan_step
    from lab.plan.links import resolve_link
    from lab.plan.sharded_pays import fsdp_pays

    # it is a real plugin: exact on SimComm
    out = simulate(lambda comm: all_gather(comm, torch.full((2,), float(comm.rank)), algorithm="test_one_shot"), 5)
    assert all(torch.equal(o, torch.arange(5.0).repeat_interleave(2)) for o in out)

    kw = dict(device="h100", link="pcie3", batch_per_gpu=8)
    sp = plan_step("gpt2_small", 8, strategy="fsdp", **kw)
    assert sp.algorithm == "flat layout; all-gather test_one_shot; reduce-scatter recursive_halving"
    assert set(sp.layers["algorithm"]) == {"all-gather test_one_shot; reduce-scatter recursive_halving"}
    # the reduce-scatter did not change; each all-gather lost log2(8) - 1 = 2 latencies per unit
    others = {"all_gather": ["ring", "recursive_doubling", "bruck", "pat"]}
    old = plan_step("gpt2_small", 8, strategy="fsdp", fsdp_collectives=others, **kw)
    assert old.algorithm == "flat layout; all-gather recursive_doubling; reduce-scatter recursive_halving"
    units = sum(1 for n in sp.layers["params"] if n)
    L = resolve_link("pcie3").L
    assert old.comm_s - sp.comm_s == pytest.approx(2 * units * 2 * L, rel=1e-6)

    r = fsdp_pays("gpt2_small", "2x8", inter="eth10g", codecs=["int8"], bandwidths=BW, zero_pp="hpz",
                  algorithms=["hierarchical"])
    row = r.rows.set_index("codec").loc["int8"]
    assert row["forward_all_gather_algorithm"] == "across: ring, inside: test_one_shot"
    assert row["backward_all_gather_algorithm"] == "test_one_shot"  # hpZ: inside the node only
    assert row["reduce_scatter_algorithm"] == "across: ring, inside: recursive_halving"


def test_without_the_plugin_the_old_choice_and_numbers_come_back():
    from lab.comm.collectives import collective_names
    from lab.plan import plan_step

    assert "test_one_shot" not in collective_names("all_gather")
    kw = dict(device="h100", link="pcie3", batch_per_gpu=8)
    sp = plan_step("gpt2_small", 8, strategy="fsdp", **kw)
    assert "test_one_shot" not in sp.algorithm


@pytest.mark.parametrize("bad, says", [
    ({"allgather": ["ring"]}, "allowed: all_gather, reduce_scatter, alltoall"),
    ({"all_gather": ["nope"]}, "all_gather has no algorithm 'nope'; allowed: ring"),
    ({"all_gather": "ring"}, "non-empty list"),
    ({"all_gather": []}, "non-empty list"),
])
def test_bad_candidates_name_what_is_allowed(bad, says):
    from lab.plan import plan_step

    with pytest.raises(ValueError, match=says):
        plan_step("gpt2_small", 8, strategy="fsdp", device="h100", batch_per_gpu=8, fsdp_collectives=bad)


def test_zeropp_volume_is_the_same_with_only_rings():
    """The 3M -> 0.75M arithmetic does not depend on which plugin wins: every candidate here sends the ring's
    bytes, so the chosen ones (Bruck / PAT across 48 nodes) cross node boundaries with the same volume."""
    from lab.plan.sharded import PAPER_INT4, PAPER_INT8, ZERO_PP, layer_traffic
    from lab.comm.cluster import BF16, make_cluster

    c = make_cluster("48x8", "nvlink3", "ib_hdr")
    rings = {"all_gather": ["ring"], "reduce_scatter": ["ring"], "alltoall": ["pairwise"]}
    for codec, zp, w in ((BF16, (), None), (PAPER_INT4, ZERO_PP, PAPER_INT8)):
        best = layer_traffic(c, 1e9, codec, "hierarchical", zp, weights=w)
        ring = layer_traffic(c, 1e9, codec, "hierarchical", zp, weights=w, candidates=rings)
        for k in best:
            assert best[k].cross_node_bytes == pytest.approx(ring[k].cross_node_bytes, rel=1e-12), k
            assert best[k].seconds <= ring[k].seconds * (1 + 1e-12), k


def test_the_ui_entry_points_take_the_candidates_for_fsdp_only():
    from lab.experiments import does_compression_pay, planner_breakdown, planner_sweep

    rings = {"all_gather": ["ring"], "reduce_scatter": ["ring"]}
    b = planner_breakdown("gpt2_small", 8, strategy="fsdp", device="h100", batch_per_gpu=8, fsdp_collectives=rings)
    assert b.summary.loc[0, "algorithm"] == "flat layout; all-gather ring; reduce-scatter ring"
    sw = planner_sweep("gpt2_small", [2, 8], strategies=["data", "fsdp"], device="h100", batch_per_gpu=8,
                       fsdp_collectives=rings)
    best = planner_sweep("gpt2_small", [2, 8], strategies=["data", "fsdp"], device="h100", batch_per_gpu=8)
    assert list(sw[sw.strategy == "data"].step_ms) == list(best[best.strategy == "data"].step_ms)
    assert (best[best.strategy == "fsdp"].comm_ms.values <= sw[sw.strategy == "fsdp"].comm_ms.values).all()
    r = does_compression_pay("gpt2_small", "2x8", strategy="fsdp", codecs=["int8"], bandwidths=BW, zero_pp="hpz",
                             algorithms=["hierarchical"], collectives=rings)
    assert set(r.rows["forward_all_gather_algorithm"]) == {"across: ring, inside: ring"}
    with pytest.raises(ValueError, match="for strategy fsdp"):
        does_compression_pay("gpt2_small", "2x8", codecs=["int8"], bandwidths=BW, collectives=rings)
