"""ZeRO-3 / FSDP with ZeRO++ on the two-level cluster: the paper's volume arithmetic, the
ring costs, FSDP rows in `paralab pays` / `paralab plan`, and bad input."""
import json
import math

import pytest
from typer.testing import CliRunner

runner = CliRunner()
BW = (0.5, 5.0, 50.0)  # a short NIC sweep keeps the pays tests quick


def test_zeropp_volume_3M_to_075M_reproduced_by_the_lab_model():
    """ZeRO++ §3: cross-node volume per step 3M (ZeRO-3) -> 0.75M (qwZ halves the forward all-gather, hpZ keeps
    the backward one inside the node, qgZ quarters the gradients). A node must receive (N-1)/N of a tensor, so
    the hierarchical collectives give exactly the paper's numbers over that share."""
    from lab.plan.sharded import PAPER_VOLUME_M, volume_table

    t = volume_table("48x8").set_index("collective")
    for k, (z3, zpp) in PAPER_VOLUME_M.items():
        assert t.loc[k, "zero3_M_per_node_share"] == pytest.approx(z3, rel=1e-12)
        assert t.loc[k, "zeropp_M_per_node_share"] == pytest.approx(zpp, rel=1e-12)
    assert t.loc["total", "zero3_M"] / t.loc["total", "zeropp_M"] == pytest.approx(4.0)
    assert t.loc["total", "zero3_M"] == pytest.approx(3 * 47 / 48)
    # one flat ring over all 384 GPUs crosses each boundary with (P-1)/P of the tensor
    rings = {"all_gather": ["ring"], "reduce_scatter": ["ring"]}
    r = volume_table("48x8", algorithm="ring", candidates=rings).set_index("collective")
    assert r.loc["forward_all_gather", "zero3_M"] == pytest.approx(383 / 384)
    assert r.loc["total", "zeropp_M"] == pytest.approx(0.5 * 383 / 384 + 0.25 * 47 / 48)
    # the lab's own codecs carry their scales: a little more than the paper's scale-free INT8 / INT4
    from lab.experiments import zeropp_volume
    lab = zeropp_volume("48x8", lab_codecs=True).set_index("collective")
    assert 0.75 < lab.loc["total", "zeropp_M_per_node_share"] < 0.8


@pytest.mark.parametrize("switch, factors", [
    ("qwz", {"forward_all_gather": 0.5, "backward_all_gather": 0.5, "reduce_scatter": 1.0}),  # every weight gather
    ("hpz", {"forward_all_gather": 1.0, "backward_all_gather": 0.0, "reduce_scatter": 1.0}),
    ("qgz", {"forward_all_gather": 1.0, "backward_all_gather": 1.0, "reduce_scatter": 0.25})])
def test_each_switch_changes_only_its_collectives(switch, factors):
    from lab.comm.cluster import BF16, make_cluster
    from lab.plan.sharded import PAPER_INT4, PAPER_INT8, layer_traffic

    c = make_cluster("4x8")
    base = layer_traffic(c, 1e8, BF16, "hierarchical", ())
    # the int4 codec on the gradients only with qgz: else bf16, so each switch is seen alone
    one = layer_traffic(c, 1e8, PAPER_INT4 if switch == "qgz" else BF16, "hierarchical", (switch,),
                        weights=PAPER_INT8)
    for k, f in factors.items():
        assert one[k].cross_node_bytes == pytest.approx(f * base[k].cross_node_bytes), k
    if switch == "hpz":  # the backward all-gather moved inside the node, all of it
        assert one["backward_all_gather"].intra_node_bytes == pytest.approx(7 * 2e8)


def test_ring_costs_by_hand():
    """alpha-beta ring: P-1 messages of one piece, L + bytes*G each, on the ring's link."""
    from lab.comm.cluster import BF16, make_cluster
    from lab.plan.sharded import all_gather, reduce_scatter

    c = make_cluster("2x4", "nvlink4", "eth100g")
    n, P = 8e6, 8
    lk, e = c.ring_link, c.inter_per_gpu
    want = (P - 1) * (lk.L + 2 * n / P * lk.G)
    rings = {"all_gather": ["ring"], "reduce_scatter": ["ring"]}
    flat = all_gather(c, n, BF16, "ring", candidates=rings)
    assert flat.transfer_s == pytest.approx(want) and flat.algorithm == "ring"
    assert reduce_scatter(c, n, BF16, "ring", candidates=rings).transfer_s == pytest.approx(want)
    # one flow per node boundary: one rank's (P-1) pieces of 2n/P bytes leave the node, its 3 others' stay inside
    assert (flat.cross_node_bytes, flat.intra_node_bytes) == pytest.approx((7 * 2 * n / P, 3 * 7 * 2 * n / P))
    # the flat layout asks the registry: every plugin priced by its own cost model, the fastest taken; here
    # recursive doubling, log2(8) = 3 messages on one GPU's share of the network, its peers on both nodes
    free = all_gather(c, n, BF16, "ring")
    assert free.algorithm == "recursive_doubling" and free.where == "recursive_doubling over 8 GPUs"
    assert free.transfer_s == pytest.approx(3 * e.L + (P - 1) / P * 2 * n * e.G) and free.transfer_s < want
    node = 4 * (P - 1) * 2 * n / P  # the node's 4 ranks' bytes, 4 of their 7 peers on the other node
    assert (free.cross_node_bytes, free.intra_node_bytes) == pytest.approx((node * 4 / 7, node * 3 / 7))
    h = all_gather(c, n, BF16, "hierarchical", candidates=rings)
    assert h.transfer_s == pytest.approx((2 - 1) * (e.L + 2 * n / P * e.G) + 3 * (c.intra.L + 2 * n / 4 * c.intra.G))
    assert h.cross_node_bytes == pytest.approx(n)  # (N-1)/N of the tensor's 2n bytes
    assert h.algorithm == "across: ring, inside: ring"
    # every registered plugin competing: inside 4 GPUs recursive doubling's log2(4) = 2 latencies beat the ring's 3,
    # the same bytes; across 2 nodes every algorithm is one message (ties keep the first, the ring)
    best = all_gather(c, n, BF16, "hierarchical")
    assert best.algorithm == "across: ring, inside: recursive_doubling"
    assert best.transfer_s == pytest.approx(h.transfer_s - c.intra.L)
    assert (best.cross_node_bytes, best.intra_node_bytes) == pytest.approx((h.cross_node_bytes, h.intra_node_bytes))


def test_planner_fsdp_moves_one_and_a_half_allreduces():
    """Without a codec, FSDP's all-gather + all-gather + reduce-scatter is 3(P-1) ring messages of n/P per layer,
    DDP's ring allreduce 2(P-1): on one link the communication is 1.5x, the memory smaller."""
    from lab.plan import plan_step

    kw = dict(device="h100", link="pcie3", batch_per_gpu=8)
    d = plan_step("gpt2_small", 8, strategy="data", **kw)
    rings = {"all_gather": ["ring"], "reduce_scatter": ["ring"]}
    f = plan_step("gpt2_small", 8, strategy="fsdp", fsdp_collectives=rings, **kw)
    assert f.comm_s == pytest.approx(1.5 * d.comm_s, rel=1e-9)
    assert f.memory_GB < d.memory_GB
    assert f.algorithm == "flat layout; all-gather ring; reduce-scatter ring"
    # every registered plugin: on 8 GPUs recursive doubling / halving send the ring's bytes in 3 messages, not 7
    best = plan_step("gpt2_small", 8, strategy="fsdp", **kw)
    assert best.algorithm == "flat layout; all-gather recursive_doubling; reduce-scatter recursive_halving"
    assert best.comm_s < f.comm_s and set(best.layers["algorithm"]) == {
        "all-gather recursive_doubling; reduce-scatter recursive_halving"}
    with pytest.raises(ValueError, match="is for strategy 'fsdp'"):
        plan_step("gpt2_small", 8, strategy="data", fsdp_collectives=rings, **kw)
    z = plan_step("gpt2_small", 8, strategy="fsdp", zero_pp="qwz,qgz", codec="int8", **kw)
    assert z.comm_s < f.comm_s / 2
    assert set(f.layers["role"]) == {"fsdp"}


def test_overlap_hides_communication_but_not_more():
    from lab.plan.sharded import fsdp_step

    fwd, bwd = [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]
    ag, rs = [0.5] * 3, [0.5] * 3
    serial = fsdp_step(fwd, bwd, ag, ag, rs, False)
    over = fsdp_step(fwd, bwd, ag, ag, rs, True)
    assert serial == pytest.approx(9 + 4.5)
    assert max(9.0, 4.5) <= over < serial
    assert fsdp_step(fwd, bwd, [5.0] * 3, [5.0] * 3, [5.0] * 3, True) >= 45.0  # the stream is the bound


def test_fsdp_pays_rows_have_ddp_fields_and_bytes_per_collective():
    from lab.plan.pays import pays
    from lab.plan.sharded_pays import fsdp_pays

    ddp = pays("gpt2_small", "2x8", inter="eth10g", codecs=["int8"], bandwidths=BW)
    r = fsdp_pays("gpt2_small", "2x8", inter="eth10g", codecs=["int8", "topk"], bandwidths=BW)
    assert set(ddp.rows.columns) <= set(r.rows.columns)
    assert set(ddp.summary.columns) <= set(r.summary.columns)
    for k in ("forward_all_gather", "backward_all_gather", "reduce_scatter"):
        assert {f"{k}_cross_node_MB", f"{k}_intra_node_MB", f"{k}_ms"} <= set(r.rows.columns)
    s = r.summary.set_index("codec")
    assert s.loc["bf16", "zero_pp"] == "hpz" and s.loc["int8", "zero_pp"] == "qwz+qgz+hpz"
    assert s.loc["int8", "weights_codec"] == "int8" and s.loc["topk", "weights_codec"] == "bf16"
    assert s.loc["bf16", "backward_all_gather_cross_node_MB"] == 0.0  # hpZ on both sides
    assert s.loc["int8", "forward_all_gather_cross_node_MB"] == pytest.approx(
        s.loc["bf16", "forward_all_gather_cross_node_MB"] / 2, rel=1e-3)
    assert s.loc["int8", "speedup_vs_bf16"] > 1.2 and bool(s.loc["int8", "pays"])
    assert s.loc["int8", "speedup_vs_zero3"] > s.loc["int8", "speedup_vs_bf16"]  # hpZ alone helps on 10 Gb/s
    assert s.loc["int8", "accuracy"] == "not measured"  # quantized weights: no run measured them
    assert len(r.sweep) == len(BW) * 2 * 3
    from lab.plan.pays import lesson_sentence
    text = lesson_sentence(r.lesson)
    assert "inside one node (1x8" in text and "on 2x8" in text


def test_cli_pays_and_plan_fsdp_json(tmp_path):
    from lab.cli import app

    out = tmp_path / "p.json"
    r = runner.invoke(app, ["pays", "--strategy", "fsdp", "--zero-pp", "qgz", "--cluster", "2x4", "--codecs",
                            "mxfp4_e2m1", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    import jsonschema
    from pathlib import Path
    schemas = Path(__file__).resolve().parents[1] / "docs" / "schemas"
    jsonschema.validate(d, json.loads((schemas / "pays.schema.json").read_text()))
    assert d["config"]["strategy"] == "fsdp" and d["config"]["zero_pp"] == "qgz"
    row = {x["codec"]: x for x in d["rows"]}["mxfp4_e2m1"]
    assert row["zero_pp"] == "qgz" and row["weights_codec"] == "bf16"
    assert row["reduce_scatter_cross_node_MB"] < row["forward_all_gather_cross_node_MB"] / 3
    assert {a["algorithm"] for a in d["algorithms"]} == {"ring", "hierarchical"}
    r = runner.invoke(app, ["plan", "--model", "gpt2_small", "--strategy", "data,fsdp", "--gpus", "8,16",
                            "--cluster", "2x8", "--zero-pp", "hpz", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    jsonschema.validate(d, json.loads((schemas / "plan.schema.json").read_text()))
    assert d["config"]["zero_pp"] == "hpz"
    assert {x["strategy"] for x in d["rows"]} == {"data", "fsdp"}


@pytest.mark.parametrize("args, words", [
    (["pays", "--strategy", "fsdp", "--cluster", "1x1"], "at least 2"),
    (["pays", "--strategy", "fsdp", "--zero-pp", "qwz,zpp"], "allowed: qwz, qgz, hpz"),
    (["pays", "--strategy", "zero3"], "allowed: ddp, fsdp"),
    (["pays", "--strategy", "fsdp", "--codecs", "powersgd"], "FSDP reduce-scatters"),
    (["plan", "--strategy", "fsdp", "--gpus", "1"], "P must be >= 2"),
    (["plan", "--strategy", "data", "--zero-pp", "hpz"], "is for --strategy fsdp"),
    (["plan", "--strategy", "fsdp", "--zero-pp", "hpq"], "allowed: qwz, qgz, hpz"),
])
def test_bad_input_is_one_line(args, words):
    from lab.cli import app

    r = runner.invoke(app, args)
    assert r.exit_code != 0
    text = r.output.strip()
    assert words in text and "Traceback" not in text and len(text.splitlines()) == 1, text


def test_notebook_experiment_table_and_a_model_by_size():
    from lab.experiments import fsdp_model, fsdp_takeaway, fsdp_traffic

    m = fsdp_model(7)
    assert 6e9 < sum(lay.params for lay in m.layers) < 8e9
    df = fsdp_traffic(7, 4, 8, codec="int8", zero_pp="qwz,qgz,hpz", inter="eth100g")
    assert list(df["collective"]) == ["forward_all_gather", "backward_all_gather", "reduce_scatter", "step"]
    step = df.set_index("collective").loc["step"]
    # int8 on the weights (half of bf16) and on the gradients (half): 0.5 + 0 + 0.5 of the (N-1)/N share
    assert step["cross_node_M"] == pytest.approx(1.0 * 3 / 4, rel=1e-3)
    assert df.attrs["zero3_cross_node_M"] == pytest.approx(3 * 3 / 4)
    assert "ZeRO++ qwz+qgz+hpz" in fsdp_takeaway(df)
    with pytest.raises(ValueError, match="at least 2"):
        fsdp_traffic(1, 1, 1)
    with pytest.raises(ValueError, match="0.01..2000"):
        fsdp_model(-1)
    assert math.isfinite(step["ms"])
