"""The planner on a two-level cluster: data parallelism's gradient allreduce from
`lab.comm.cluster` (hierarchical, ZeRO++'s alltoall_quantized, in-network, or a flat registered
algorithm on the slower level), P filling whole nodes, and `paralab plan --cluster`."""
import json

import pytest
from typer.testing import CliRunner

from lab.cli import app
from lab.comm import cluster as cl
from lab.experiments.plan import planner_breakdown, planner_sweep
from lab.plan import get_model

GPT2 = dict(strategies=["data"], device="h100", batch_per_gpu=8)


def sweep(gpus, algorithm="hierarchical", **kw):
    df = planner_sweep("gpt2_small", gpus, algorithm=algorithm, **{**GPT2, **kw})
    return df.set_index("P")


def test_one_node_hierarchical_is_the_ring_on_the_intra_link():
    """Inside one node the hierarchical allreduce is a ring reduce-scatter + allgather: the planner's ring on
    nvlink4 to the nanosecond."""
    two = sweep([8], cluster="8x8", intra="nvlink4", inter="ndr400")
    one = sweep([8], algorithm="ring", link="nvlink4")
    assert two.loc[8, "comm_ms"] == pytest.approx(one.loc[8, "comm_ms"], rel=1e-9)
    assert two.loc[8, "comm_ms"] > 0


def test_cluster_comm_is_the_sum_of_the_layers_two_level_allreduces():
    b = planner_breakdown("gpt2_small", 64, device="h100", batch_per_gpu=8, algorithm="hierarchical",
                          cluster="8x8", intra="nvlink4", inter="ib_ndr")
    c = cl.make_cluster("8x8", "nvlink4", "ib_ndr")
    fp32 = cl.CodecCost("fp32", 4.0)
    want = sum(cl.algorithm_time(c, "hierarchical", lay.params, fp32, intra_codec=fp32).seconds for lay in get_model("gpt2_small").layers)
    assert b.summary.comm_s[0] == pytest.approx(want, rel=1e-9)
    assert b.summary.link[0] == "8x8 (nvlink4 inside, ib_ndr across)"
    assert set(b.layers.sends) == {"gradients"}


def test_hierarchical_beats_a_flat_ring_across_nodes_and_p_fills_whole_nodes():
    hier = sweep([1, 8, 12, 16, 64, 128], cluster="8x8", inter="ib_ndr")
    flat = sweep([16, 64], algorithm="ring", cluster="8x8", inter="ib_ndr")
    # a flat ring runs every hop at one GPU's share of the NIC; the hierarchy keeps 7/8 of the bytes on NVLink
    assert flat.loc[64, "comm_ms"] > 4 * hier.loc[64, "comm_ms"]
    assert hier.loc[64, "efficiency"] > 0.75 > 0.5 > flat.loc[64, "efficiency"]
    assert not hier.loc[12, "feasible"] and "multiple of 8" in hier.loc[12, "note"]
    assert not hier.loc[128, "feasible"] and "do not fit on 8x8" in hier.loc[128, "note"]
    assert hier.loc[1, "comm_ms"] == 0 and hier.loc[64, "speedup"] > hier.loc[16, "speedup"]


def test_a_codec_across_slow_nodes_and_in_network():
    slow = sweep([64], cluster="8x8", inter="eth10g")
    q = sweep([64], cluster="8x8", inter="eth10g", codec="dynamic_tree")
    # the inter-node shard shrinks 4x (fp32 -> 8 bits); the NVLink levels stay fp32
    assert 2.5 < slow.loc[64, "comm_ms"] / q.loc[64, "comm_ms"] < 4.0
    nvls = sweep([64], algorithm="in_network", cluster="8x8", inter="ib_ndr")
    hier = sweep([64], cluster="8x8", inter="ib_ndr")
    assert nvls.loc[64, "comm_ms"] < hier.loc[64, "comm_ms"]
    with pytest.raises(ValueError, match="in_network sums uncompressed"):
        sweep([64], algorithm="in_network", cluster="8x8", codec="dynamic_tree")


@pytest.mark.parametrize("kw, says", [
    (dict(algorithm="hierarchical"), "runs on a two-level cluster"),
    (dict(algorithm="spiral", cluster="8x8"), "also alltoall_quantized, hierarchical, in_network"),
    (dict(cluster="8y8"), "NODESxGPUS"),
    (dict(cluster="2x16", intra="nvlink4"), "more than nvlink4 connects"),
    (dict(cluster="2x8", inter="carrier_pigeon"), "allowed: ib_qdr"),
])
def test_bad_cluster_input_names_what_is_allowed(kw, says):
    with pytest.raises(ValueError, match=says):
        planner_sweep("gpt2_small", [8], **{**GPT2, **kw})


def test_cli_plan_cluster():
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "--model", "gpt2_small", "--device", "h100", "--batch", "8", "--gpus", "1,8,16",
                            "--cluster", "2x8", "--intra", "nvlink4", "--inter", "ndr400", "--algorithm",
                            "hierarchical", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["config"]["cluster"] == "2x8" and out["link"] == "2x8 (nvlink4 inside, ib_ndr across)"
    rows = {row["P"]: row for row in out["rows"]}
    assert rows[16]["feasible"] and rows[16]["comm_ms"] > rows[8]["comm_ms"] > 0
    r = runner.invoke(app, ["plan", "--cluster", "2x8", "--advice"])
    assert r.exit_code == 2 and "drop --cluster or --advice" in r.output
    r = runner.invoke(app, ["plan", "--algorithm", "hierarchical"])
    assert r.exit_code == 2 and "--cluster" in r.output and "Traceback" not in r.output


def test_powersgd_runs_its_fp32_phases_on_the_cluster():
    """PowerSGD (a phased codec) on one node is the planner's flat ring on nvlink4; across 10 GbE its
    low-rank P and Q allreduces cut the fp32 hierarchy's communication several times."""
    one = sweep([8], cluster="8x8", codec="powersgd")
    flat = sweep([8], algorithm="ring", link="nvlink4", codec="powersgd")
    assert one.loc[8, "comm_ms"] == pytest.approx(flat.loc[8, "comm_ms"], rel=1e-9)
    fp32 = sweep([64], cluster="8x8", inter="eth10g")
    psgd = sweep([64], cluster="8x8", inter="eth10g", codec="powersgd")
    assert fp32.loc[64, "comm_ms"] > 4 * psgd.loc[64, "comm_ms"]
