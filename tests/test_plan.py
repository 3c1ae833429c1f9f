"""The parallelism planner (lab.plan): presets, the papers' arithmetic (Dettmers 2016 §2.3.2,
Wu et al. 2015 Figures 2-3), agreement with lab.comm.cost, strategies, codec advice, bad input."""
import json
import math

import pytest

from lab.comm import cost
from lab.plan import (Infeasible, Layer, codec_advice, codec_thresholds, crossover, custom_device, custom_model,
                      deep_image_scaling, deep_image_speedup, dettmers_alexnet, dettmers_planner, get_model,
                      plan_step, plan_sweep, resolve_link)
from lab.plan.papers import dettmers_link


# -- presets

@pytest.mark.parametrize("name, params", [("alexnet", 60_965_224), ("vgg16", 138_357_544), ("resnet50", 25_557_032),
                                          ("gpt2_small", 124_439_808)])
def test_preset_parameter_counts(name, params):
    assert get_model(name).params == params


def test_deep_image_table2_weights_and_flops():
    m = get_model("deep_image")
    assert round(m.params / 1e6, 1) == 212.7  # Wu et al. 2015 §5: "212.7M"
    assert [lay.kind for lay in m.layers].count("conv") == 13 and len(m.layers) == 16
    assert get_model("vgg16").flops == pytest.approx(30.94e9, rel=0.01)   # 15.47 GMAC
    assert get_model("resnet50").flops == pytest.approx(8.18e9, rel=0.01)


# -- Dettmers 2016 §2.3.2

def test_dettmers_alexnet_arithmetic():
    df = dettmers_alexnet().set_index("quantity")
    assert df.loc["memory", "model"] == pytest.approx(0.223, abs=0.001)            # 0.223 GB
    assert round(df.loc["one transfer", "model"]) == 32                            # 32 ms at 7 GB/s
    assert round(df.loc["full synchronisation", "model"]) == 128                   # 4 messages: 128 ms
    assert df.loc["with latency per layer", "model"] == pytest.approx(150, rel=0.05)  # "about 150 ms"
    assert df.loc["4 GPUs slower than one", "model"] is True


def test_dettmers_through_the_planner():
    df = dettmers_planner().set_index("P")
    assert df.loc[1, "step_ms"] == pytest.approx(100.0)
    assert df.loc[4, "speedup"] < 1.0  # naive data parallelism on 4 GPUs is slower than one GPU
    per_layer = sum(cost.allreduce_time("tree", 4, 4 * lay.params, dettmers_link())
                    for lay in get_model("alexnet").layers)
    assert df.loc[4, "comm_ms"] == pytest.approx(1e3 * per_layer)
    assert df.loc[4, "step_ms"] == pytest.approx(25.0 + 1e3 * per_layer)
    # the pcie3 preset (7e9 B/s, SI) gives the same verdict
    sp = plan_step("alexnet", 4, device=custom_device(3 * get_model("alexnet").flops * 128 / 0.1 / 1e12),
                   link="pcie3", global_batch=128, algorithm="tree")
    assert sp.step_s > 0.1


# -- Wu et al. 2015 §3.3

def test_deep_image_figure2_shape():
    df, cross = deep_image_scaling(gpus=(1, 2, 4, 8, 16, 32, 64, 128, 256))
    t = df.pivot(index="P", columns="strategy", values="step_ms")
    comm = df.pivot(index="P", columns="strategy", values="comm_ms")
    assert comm.loc[128, "data"] / comm.loc[8, "data"] < 1.2      # data: constant overhead in P
    assert comm.loc[64, "hybrid"] / comm.loc[8, "hybrid"] > 4     # hybrid: grows with P
    assert (t.loc[[2, 4, 8, 16], "hybrid"] < t.loc[[2, 4, 8, 16], "data"]).all()  # hybrid ahead up to 16
    assert (t.loc[[128, 256], "data"] < t.loc[[128, 256], "hybrid"]).all()      # data overtakes it
    assert cross is not None and 16 < cross <= 128   # the paper says "larger than 16"; see docs/deep_image.md


def test_deep_image_figure3_shape():
    df = deep_image_speedup()
    s = df.pivot(index="P", columns="batch", values="speedup")
    assert s.loc[64, 1024] == pytest.approx(47, rel=0.15)                  # "a 47x speedup ... 64 GPUs ... 1024"
    for P in (8, 16, 32, 64):
        assert s.loc[P, 256] < s.loc[P, 512] < s.loc[P, 1024]             # larger batch, larger speedup


# -- the planner against lab.comm.cost, and its strategies

def test_data_parallel_is_compute_plus_cost_model():
    link = cost.LINKS["ib_hdr"]
    sp = plan_step("resnet50", 8, device="a100", link=link, batch_per_gpu=32, algorithm="rabenseifner")
    comm = sum(cost.allreduce_time("rabenseifner", 8, 4 * lay.params, link) for lay in get_model("resnet50").layers)
    assert sp.comm_s == pytest.approx(comm)
    assert sp.step_s == pytest.approx(sp.compute_s + comm)
    assert sp.layers["comm_ms"].sum() == pytest.approx(1e3 * comm)
    assert plan_step("resnet50", 1, device="a100", link=link, batch_per_gpu=32).comm_s == 0


def test_lazy_update_overlap():
    kw = dict(device="k40m", link="ib_fdr", batch_per_gpu=64, algorithm="butterfly_sync")
    off = plan_step("deep_image", 16, overlap=False, **kw)
    on = plan_step("deep_image", 16, overlap=True, **kw)
    assert on.step_s <= off.step_s and on.comm_s == pytest.approx(off.comm_s)
    assert on.exposed_comm_s < 0.01 * off.exposed_comm_s  # 3.5 s of compute hides 0.23 s of allreduce
    fast = plan_step("alexnet", 8, device="h100", link="eth10g", batch_per_gpu=32, overlap=True)
    assert fast.exposed_comm_s > 0.5 * fast.comm_s  # a slow link cannot be hidden behind a fast GPU


def test_pipeline_bubble_and_model_parallel():
    layers = [Layer(f"l{i}", "fc", 1000, 1e9, 100, 100) for i in range(8)]
    m = custom_model("even", layers)
    dev = custom_device(1.0)  # 1 TFLOP/s: 3 ms per layer per sample
    sp = plan_step(m, 4, device=dev, link=cost.custom_link(0, 1e9), strategy="pipeline", global_batch=16,
                   micro_batches=8)
    slot = 3 * 2e9 * 2 / 1e12 + 2 * cost.transfer_time(4 * 100 * 2, cost.custom_link(0, 1e9))
    assert sp.step_s == pytest.approx((8 + 3) * slot)
    assert sp.idle_s / sp.step_s == pytest.approx(3 / 11)  # (P-1)/(M+P-1)
    mp = plan_step(m, 4, device=dev, link="nvlink4", strategy="model", batch_per_gpu=4)
    dp = plan_step(m, 4, device=dev, link="nvlink4", strategy="data", batch_per_gpu=4)
    assert mp.compute_s == pytest.approx(dp.compute_s)
    assert (mp.layers["sends"].iloc[1:] == "activations + deltas").all() and mp.memory_GB < dp.memory_GB
    with pytest.raises(Infeasible, match="only 8 layers"):
        plan_step(m, 16, strategy="pipeline")


def test_codecs_per_layer_change_the_wire():
    base = plan_step("alexnet", 4, link="pcie3")
    q = plan_step("alexnet", 4, link="pcie3", codec={"default": "dynamic_tree", "conv1": "none"})
    w = base.layers.set_index("layer")["wire_MB"]
    wq = q.layers.set_index("layer")["wire_MB"]
    assert wq["conv1"] == w["conv1"] and wq["fc6"] == pytest.approx(w["fc6"] / 4, rel=0.01)
    assert q.comm_s < base.comm_s
    assert plan_step("alexnet", 4, strategy="hybrid", activation_codec="fp16").layers.query("role == 'model'")[
        "codec"].eq("fp16").all()


def test_sweep_speedup_and_efficiency():
    df = plan_sweep("alexnet", [1, 2, 4, 8, 16, 32, 64], strategies=["data", "hybrid", "pipeline"], device="v100",
                    link="pcie3")
    assert list(df.columns)[:4] == ["strategy", "P", "global_batch", "batch_per_gpu"]
    ok = df[df["feasible"]]
    assert (ok["efficiency"] == ok["speedup"] / ok["P"]).all()
    assert ok.query("P == 1")["speedup"].tolist() == pytest.approx([1.0] * 3)
    assert not df.query("strategy == 'pipeline' and P == 16")["feasible"].iloc[0]  # 8 layers, 16 stages
    assert 16 <= crossover(df, "data", "hybrid") <= 32  # AlexNet on V100s over PCIe: data wins from 32
    assert crossover(df, "hybrid", "data") is None


# -- codec advice

def test_codec_advice_none_then_8bit_then_1bit():
    sizes = {"tiny": 2_000, "mid": 200_000, "large": 20_000_000}
    m = custom_model("sizes", [Layer(k, "conv", n, 1e6, 10, 10) for k, n in sizes.items()])
    df = codec_advice(m, 2, device="gtx_titan", link="pcie3").set_index("layer")
    assert df.loc["tiny", "best"] == "none" and df.loc["mid", "best"] == "dynamic_tree"
    assert df.loc["large", "best"] == "onebit"
    assert (df["saving_ms"] >= 0).all() and df.loc["tiny", "saving_ms"] == 0
    assert df.loc["large", "saving_pct"] > 50
    th = codec_thresholds(2, point_to_point=True)  # Dettmers Fig. 2: 8-bit slower below ~50k values
    assert 20_000 < th["dynamic_tree_beats_fp32_from"] < 100_000
    assert th["dynamic_tree_beats_fp32_from"] < th["onebit_beats_dynamic_tree_from"] < 1_000_000
    hyb = codec_advice("alexnet", 4, strategy="hybrid")
    assert hyb.query("role == 'model'")["onebit_ms"].isna().all()  # 1-bit is not for activations
    assert set(hyb.query("role == 'model'")["best"]) <= {"none", "dynamic_tree"}


# -- links and bad input

def test_calibrated_link_from_bench_json(tmp_path):
    p = tmp_path / "collectives-cpu-P4.json"
    p.write_text(json.dumps({"device": "x", "fit": {"latency_s": 2e-4, "bandwidth_Bps": 2.5e9, "shared": True}}))
    link = resolve_link(str(p))
    assert link.L == 2e-4 and link.bandwidth_Bps == 2.5e9 and link.shared
    assert plan_step("alexnet", 4, link=str(p)).link == link.name
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="no fitted link"):
        resolve_link(str(tmp_path / "bad.json"))


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="lenet"), "presets: alexnet, deep_image"),
    (dict(device="tpu"), "presets: gtx_titan, dettmers2016, k40m, v100, a100, h100"),
    (dict(link="carrier_pigeon"), "presets pcie3"),
    (dict(strategy="zero"), "allowed: data, model, hybrid, pipeline"),
    (dict(algorithm="gossip"), "known are tree"),
    (dict(P=0), "P \\(ranks or GPUs\\) must be an int >= 1"),
    (dict(batch_per_gpu=0), "batch_per_gpu must be an int >= 1"),
    (dict(batch_per_gpu=8, global_batch=64), "not both"),
    (dict(codec="gzip"), "unknown codec 'gzip'"),
    (dict(codec={"fc99": "dynamic_tree"}), "no layer 'fc99'"),
    (dict(activation_codec="onebit", strategy="hybrid"), "gradient compressor"),
])
def test_bad_input(kwargs, match):
    args = dict(model="alexnet", P=4)
    args.update(kwargs)
    model, P = args.pop("model"), args.pop("P")
    with pytest.raises(ValueError, match=match):
        plan_step(model, P, **args)


def test_strong_scaling_needs_a_sample_per_gpu():
    with pytest.raises(Infeasible):
        plan_step("alexnet", 64, global_batch=32)
    assert math.isnan(plan_sweep("alexnet", [64], global_batch=32)["step_ms"].iloc[0])


# -- the CLI

def test_cli_plan_table_and_json():
    from typer.testing import CliRunner

    from lab.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["plan", "--model", "alexnet", "--gpus", "1,2,4,8,16,32,64", "--link", "pcie3",
                            "--strategy", "data"])
    assert r.exit_code == 0, r.output
    assert "exposed_comm_ms" in r.output and "speedup" in r.output and "alexnet" in r.output
    r = runner.invoke(app, ["plan", "--model", "deep_image", "--gpus", "1,16", "--device", "k40m", "--link", "ib_fdr",
                            "--strategy", "data,hybrid,pipeline", "--batch", "64", "--algorithm", "butterfly_sync",
                            "--overlap", "--layers", "--advice", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {row["strategy"] for row in out["rows"]} == {"data", "hybrid", "pipeline"}
    assert out["layers"]["hybrid"]["P"] == 16 and len(out["advice"]["data"]["rows"]) == 16


def test_cli_reproduces_dettmers_4_gpus_slower_than_one():
    """Dettmers 2016 §2.3.2 from the CLI: the paper's device (a 100 ms AlexNet pass of 128 images)
    and link make naive data parallelism on 4 GPUs slower than one GPU, exactly as
    `dettmers_planner` computes; the physical GTX Titan preset (309 ms pass) does not."""
    from typer.testing import CliRunner

    from lab.cli import app

    def speedups(device: str, link: str) -> dict[int, dict]:
        r = CliRunner().invoke(app, ["plan", "--model", "alexnet", "--gpus", "1,4", "--strategy", "data", "--device",
                                     device, "--link", link, "--algorithm", "tree", "--global-batch", "128",
                                     "--json"])
        assert r.exit_code == 0, r.output
        return {row["P"]: row for row in json.loads(r.stdout)["rows"]}

    paper = speedups("dettmers2016", "dettmers2016")
    assert paper[1]["step_ms"] == pytest.approx(100.0) and paper[4]["speedup"] < 1  # slower than one GPU
    ref = dettmers_planner().set_index("P")
    assert paper[4]["step_ms"] == pytest.approx(ref.loc[4, "step_ms"])  # the same numbers as the library's example
    assert speedups("dettmers2016", "pcie3")[4]["speedup"] < 1  # the physical 7 GB/s link: the same verdict
    titan = speedups("gtx_titan", "pcie3")
    assert titan[1]["step_ms"] > 300 and titan[4]["speedup"] > 1  # why the paper's preset exists beside it
    r = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "200"})
    assert "dettmers2016" in r.output and "gtx_titan is the physical card" in " ".join(r.output.split())


def test_dettmers_presets_are_the_papers_numbers():
    from lab.plan import DEVICES, link_presets

    lk, ref = link_presets()["dettmers2016"], dettmers_link()
    assert (lk.L, lk.bandwidth_Bps) == (ref.L, ref.bandwidth_Bps) and "pcie3" in link_presets()
    sp = plan_step("alexnet", 1, device="dettmers2016", link="dettmers2016", global_batch=128)
    assert sp.step_s == pytest.approx(0.1)  # the paper's "< 100 ms" pass
    assert DEVICES["dettmers2016"].flops_per_s > DEVICES["gtx_titan"].peak_tflops * 1e12  # above the card's peak


@pytest.mark.parametrize("args, match", [
    (["--model", "lenet"], "unknown model"), (["--gpus", "0,2"], "must be an int >= 1"),
    (["--batch", "0"], "allowed: an integer from 1 to"), (["--link", "foo"], "unknown link"),
    (["--strategy", "zero"], "allowed: data, model, hybrid, pipeline"), (["--gpus", "x"], "comma-separated"),
    (["--batch", "8", "--global-batch", "64"], "not both"),
])
def test_cli_plan_bad_input(args, match):
    from typer.testing import CliRunner

    from lab.cli import app

    r = CliRunner().invoke(app, ["plan", *args])
    assert r.exit_code == 2 and match in " ".join(r.output.split()) and "Traceback" not in r.output
