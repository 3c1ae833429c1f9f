"""FSDP2 with codecs on its collectives (lab/train/fsdp.py, fsdp_comm.py): real Gloo ranks, tiny MLP,
few steps. No codec is bit-identical to plain FSDP2; 8-bit weights and gradients train and send
fewer bytes; hpZ's backward all-gather stays inside a node; bad input is one line, before any rank starts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_no_codec_is_plain_fsdp2_and_8_bit_trains_on_a_quarter_of_the_bytes(tmp_path):
    from lab.comm.launch import run

    import fsdp_ranks

    r0, r1 = run(fsdp_ranks.two_rank_cases, 2, str(tmp_path), timeout=120)
    plain, hooked, codec = (r0[k] for k in ("plain", "hooked", "codec"))
    # the hooks without a codec: the same parameters, bit for bit, and the same losses
    assert hooked["digest"] == plain["digest"] and hooked["losses"] == plain["losses"]
    assert r1["hooked"]["digest"] == r1["plain"]["digest"] == plain["digest"]
    assert plain["collectives"] == {}  # FSDP2's own collectives: nothing went through the hooks
    for name in ("all_gather_forward", "all_gather_backward", "reduce_scatter"):
        h, c = hooked["collectives"][name], codec["collectives"][name]
        assert h["sent"] == h["raw"] > 0 and h["calls"] > 0
        # counted from the payloads: MX 8-bit is 8 bits + one 8-bit scale per 32 values; dynamic_tree 8 bits
        # + a 4-byte absmax per chunk; against fp32's 32 bits per value
        assert 0.24 < c["sent"] / c["raw"] < 0.3, (name, c)
        assert c["sent"] / codec["steps"] < 0.3 * h["sent"] / hooked["steps"]
    assert all(g["ranks"] == [0, 1] for g in codec["groups"])
    # it learns, as fp32 does, on the same data and seeds
    first, last = codec["losses"][:2], codec["losses"][-2:]
    assert sum(last) < 0.85 * sum(first)
    assert codec["steps"] == 2 * hooked["steps"] and codec["losses"][:2] != hooked["losses"][:2]
    # the prefetched all-gathers (decoded when FSDP2 waits on them) compute what the blocking ones do
    blocking = r0["codec_blocking"]
    assert blocking["digest"] == codec["digest"] and blocking["losses"] == codec["losses"]
    assert blocking["collectives"] == codec["collectives"]
    # --trace: each rank's trace file, and its median step split into compute, the codec's ranges and the wait
    for r in (r0, r1):
        split = r["codec"]["split"]
        assert split["encode_s"] > 0 and split["decode_s"] > 0 and split["compute_s"] > 0
        assert split["recv_wait_s"] > 0 and split["codec_s"] >= split["encode_s"] + split["decode_s"]
        assert r["codec"]["step_cpu_s"] > 0 and r["plain"]["split"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.trace.json", "rank1.trace.json"]
    # the summary against fp32 FSDP2 (here the hooked run in that role): CPU seconds, late loss, splits
    from lab.train.fsdp import FSDPSettings, assemble
    from lab.train.run import TrainConfig

    res = assemble(TrainConfig(**fsdp_ranks.TINY), FSDPSettings(weights_codec="mxfp8_e4m3"),
                   [[r["codec"], dict(r["hooked"], variant="FSDP2 fp32")] for r in (r0, r1)], "gloo")
    s, runs = res.summary, res.runs.set_index("variant")
    assert s["cpu_ratio"] == pytest.approx(runs.step_cpu_s.iloc[0] / runs.step_cpu_s.iloc[1])
    late = res.curve[res.curve.variant == "codec"].test_loss
    assert s["late_test_loss_ratio"] == pytest.approx(late.iloc[len(late) // 2:].mean()
                                                      / runs.loc["FSDP2 fp32", "late_test_loss"])
    assert [(x["variant"], x["rank"]) for x in s["split"]] == [("codec", 0), ("codec", 1)]


def test_hpz_backward_all_gather_stays_inside_each_node():
    from lab.comm.launch import run

    import fsdp_ranks

    ranks = run(fsdp_ranks.hpz_case, 4, timeout=120)
    for rank, r in enumerate(ranks):
        node = [0, 1] if rank < 2 else [2, 3]
        ag = [g for g in r["groups"] if g["op"] == "all_gather" and g["phase"] in ("forward", "backward")]
        assert {tuple(g["ranks"]) for g in ag if g["phase"] == "backward"} == {tuple(node)}
        assert {tuple(g["ranks"]) for g in ag if g["phase"] == "forward"} == {(0, 1, 2, 3)}
        back = r["collectives"]["all_gather_backward"]
        assert back["calls"] > 0 and back["cross"] == 0 and back["sent"] == back["raw"]
        fwd, rs = r["collectives"]["all_gather_forward"], r["collectives"]["reduce_scatter"]
        # 2 of the 3 peers are on the other node: 2/3 of what went out crossed
        assert fwd["cross"] * 3 == fwd["sent"] * 2 and rs["cross"] * 3 == rs["sent"] * 2
        assert all(g["ranks"] == [0, 1, 2, 3] for g in r["groups"] if g["op"] == "reduce_scatter")


def test_a_registered_all_gather_and_reduce_scatter_run_inside_fsdp2_and_equal_the_native_ones():
    from lab.comm import collectives
    from lab.comm.launch import run

    import fsdp_ranks

    collectives.register_module("counted_all_gather")
    try:
        r0, r1 = run(fsdp_ranks.registered_algorithm_cases, 2, timeout=180)
    finally:
        collectives.unregister("all_gather", "counted_ring")
    for r in (r0, r1):
        native, reg = r["native"], r["registered"]
        # the plugin all-gather and the ring reduce-scatter: the same parameters, bit for bit, and losses
        assert reg["digest"] == native["digest"] and reg["losses"] == native["losses"]
        # the plugin really ran: once per all-gather FSDP2 made (every unshard: forward, backward, evaluation)
        gathers = sum(g["calls"] for g in reg["groups"] if g["op"] == "all_gather")
        assert r["plugin_calls"] == gathers > sum(g["calls"] for g in reg["groups"] if g["phase"] == "eval") > 0
        # a ring on 2 ranks sends what the process group's own collectives pass: one row / one block
        assert reg["collectives"] == native["collectives"]
        # 8-bit weights moved by Bruck's all-gather: the payload bytes unchanged, so the same training
        cn, cb = r["codec_native"], r["codec_bruck"]
        assert cb["digest"] == cn["digest"] and cb["losses"] == cn["losses"]
        assert cb["collectives"]["all_gather_forward"] == cn["collectives"]["all_gather_forward"]
    assert r0["registered"]["digest"] == r1["registered"]["digest"]


@pytest.mark.parametrize("args,says", [
    (["--procs", "1"], "allowed: 2 or more"),
    (["--weights-codec", "powersgd"], "cannot carry weights on an all-gather; allowed: bf16"),
    (["--weights-codec", "topk"], "cannot carry weights on an all-gather; allowed:"),
    (["--grads-codec", "powersgd"], "cannot ride a reduce-scatter; allowed:"),
    (["--procs", "4", "--hpz", "3"], "allowed: 2"),
    (["--procs", "2", "--hpz", "2"], "allowed: none for this many processes"),
    (["--weights-codec", "ef:dynamic_tree"], "drop 'ef:'"),
    (["--codec", "dynamic_tree"], "not --codec"),
    (["--all-gather", "nonsense"], "--all-gather 'nonsense'; allowed: native, ring,"),
    (["--reduce-scatter", "halving"], "--reduce-scatter 'halving'; allowed: native, ring,"),
    (["--reduce-scatter", "ring", "--grads-codec", "ef:dynamic_tree"], "drop the ef: prefix"),
    (["--reduce-scatter", "ring", "--grads-codec", "topk"], "cannot be re-encoded at every hop"),
])
def test_bad_fsdp_input_is_one_line_and_starts_no_rank(monkeypatch, args, says):
    from typer.testing import CliRunner

    import lab.comm.launch
    from lab.cli import app

    monkeypatch.setattr(lab.comm.launch, "run", lambda *a, **k: pytest.fail("a rank was started"))
    r = CliRunner().invoke(app, ["train", "--mode", "fsdp", *args])
    assert r.exit_code == 2, r.output
    assert says in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_model_without_parameters_cannot_be_sharded():
    from torch import nn

    from lab.train.fsdp import FSDPSettings, shard_model
    from lab.train.fsdp_comm import WireCounter

    with pytest.raises(ValueError, match="no parameters to shard"):
        shard_model(nn.Sequential(nn.ReLU()), FSDPSettings(), WireCounter())


@pytest.mark.skipif(shutil.which("torchrun") is None and not (Path(sys.executable).parent / "torchrun").exists(),
                    reason="torchrun is not installed")
def test_fsdp_under_torchrun_writes_the_result(tmp_path):
    import os

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    out = tmp_path / "fsdp.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", "-m", "lab", "train", "--mode", "fsdp",
                        "--weights-codec", "mxfp8_e4m3", "--grads-codec", "dynamic_tree", "--hidden", "16",
                        "--dropout", "0,0", "--epochs", "0.2", "--train-limit", "256", "--evals", "1", "--no-baselines",
                        "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads(out.read_text())
    import jsonschema

    jsonschema.validate(data, json.loads((REPO / "docs" / "schemas" / "train.schema.json").read_text()))
    s = data["summary"]
    assert data["config"]["torchrun"] is True and s["mode"] == "fsdp" and s["procs"] == 2
    assert s["ranks_per_node"] == 2 and "bytes_ratio" not in s  # --no-baselines: the codec run alone
    assert [r["variant"] for r in data["runs"]] == ["FSDP2 w=mxfp8_e4m3 g=dynamic_tree"]
    assert {r["variant"] for r in data["curve"]} == {"FSDP2 w=mxfp8_e4m3 g=dynamic_tree"}
    assert {c["collective"] for c in data["collectives"]} == {"all_gather_forward", "all_gather_backward",
                                                              "reduce_scatter"}
    assert all(0.2 < c["ratio"] < 0.3 for c in data["collectives"])
    assert all(c["cross_node_per_step"] == 0 for c in data["collectives"])  # one node of 2 ranks
