"""`paralab converge`: the penalty and CI arithmetic on synthetic curves, error feedback
rescuing random-k at 1 %, the dynamic tree training like fp32, simulated and DDP workers agreeing,
bad inputs as one-line messages, and a stopped study keeping its finished runs (marked partial)."""
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lab.train.converge as cv
from lab.cli import app
from lazy_import import lazy
from lab.train.converge import (ConvergeConfig, ConvergeError, Run, Spec, arrival, converge, load_penalties, run_row,
                                summarize, t_interval, target_of)

runner = CliRunner()
stats = lazy("scipy.stats")  # loaded by the test that uses it, not at collection
jsonschema = lazy("jsonschema")  # loaded by the test that validates, not at collection
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "schemas" / "converge.schema.json").read_text())
TINY = dict(task="mlp", hidden=(16,), dropout=(0.0, 0.0), train_limit=256, steps=10, eval_every=5, seeds=2,
            workers=2, batch=16, budget=1.0, tolerance=0.5, lr=0.3, momentum=0.0)


def curve(spec: str, seed: int, losses: list[float], every: int = 10) -> Run:
    r = Run(spec, seed, steps_run=every * (len(losses) - 1))
    r.curve = [dict(spec=spec, seed=seed, step=i * every, val_loss=v, quality=v, train_s=0.5 * i * every)
               for i, v in enumerate(losses)]
    return r


# -- arithmetic

def test_target_arrival_penalty_and_t_interval_on_synthetic_curves():
    fp32 = curve("fp32", 0, [2.0, 1.0, 0.6, 0.5, 0.5])  # last step 40: loss 0.5
    target = target_of(fp32, 40, 0.1)
    assert target == pytest.approx(0.55)
    assert arrival(fp32.curve, target)["step"] == 30  # 0.5 <= 0.55 first at step 30
    slow = curve("slow", 0, [2.0, 1.5, 1.0, 0.8, 0.7, 0.6, 0.54])
    row = run_row("mlp", "sim", slow, target, 30.0, 15.0, 40)
    assert row["steps_to_target"] == 60 and row["penalty"] == pytest.approx(2.0)
    assert row["time_to_target_s"] == 30.0 and row["time_penalty"] == pytest.approx(2.0)
    assert row["final_val_loss"] == 0.7  # the quality at fp32's last step, not at the end of the longer run
    never = run_row("mlp", "sim", curve("never", 0, [2.0, 1.9, 1.8, 1.7, 1.6]), target, 30.0, 15.0, 40)
    assert not never["reached"] and math.isinf(never["penalty"])
    # the t interval is Student's: mean ± t(0.975, n-1) s / sqrt(n)
    vals = [1.0, 1.2, 1.1]
    lo, hi = t_interval(vals)
    h = stats.t.ppf(0.975, 2) * stats.tstd(vals) / math.sqrt(3)
    assert (lo, hi) == pytest.approx((1.1 - h, 1.1 + h))
    assert t_interval([1.0]) is None and t_interval([1.0, math.inf]) is None


def test_summary_is_inf_when_any_seed_misses_and_partial_when_seeds_are_missing():
    runs = [dict(spec=s, seed=k, steps_to_target=st, penalty=p, time_penalty=p, reached=math.isfinite(st),
                 time_to_target_s=st, final_val_loss=0.5, final_quality=5.0, step_s=0.1, bytes_per_step=10.0,
                 diverged=False)
            for s, k, st, p in [("fp32", 0, 30, 1.0), ("fp32", 1, 40, 1.0), ("a", 0, 60, 2.0), ("a", 1, 80, 2.0),
                                ("b", 0, 60, 2.0), ("b", 1, math.inf, math.inf), ("c", 0, 30, 1.0)]]
    rows = {r["spec"]: r for r in summarize(runs, ["fp32", "a", "b", "c", "d"], seeds=2)}
    assert rows["a"]["penalty"] == 2.0 and rows["a"]["penalty_ci_low"] == rows["a"]["penalty_ci_high"] == 2.0
    assert rows["a"]["steps_mean"] == 70 and rows["a"]["steps_ci_low"] < 70 < rows["a"]["steps_ci_high"]
    assert math.isinf(rows["b"]["penalty"]) and rows["b"]["never_reached"] == 1 and rows["b"]["penalty_ci_low"] is None
    assert rows["c"]["partial"] and rows["c"]["penalty_ci_low"] is None  # one seed: no interval
    assert not rows["d"]["measured"] and rows["d"]["seeds"] == 0
    assert not rows["a"]["partial"]


def test_spec_grammar():
    assert Spec.parse("none").is_fp32 and Spec.parse("FP32").text == "fp32"
    s = Spec.parse("ef:topk:ratio=0.01@20")
    assert (s.codec, s.error_feedback, s.warmup) == ("topk:ratio=0.01", True, 20)
    assert Spec.parse("powersgd:rank=2").codec == "powersgd:rank=2"
    for bad, word in [("frob", "unknown codec"), ("topk@x", "@N"), ("fp32@5", "warm-up")]:
        with pytest.raises(ValueError, match=word):
            Spec.parse(bad)


# -- training

def test_error_feedback_rescues_random_k_at_one_percent():
    """Stich et al. 2018: random-k at 1 % without memory barely trains; with error feedback it does."""
    res = converge(ConvergeConfig(**{**cv.smoke_settings("mlp"),
                                     "specs": ("randomk:ratio=0.01", "ef:randomk:ratio=0.01"), "seeds": 2,
                                     "budget": 4.0}))
    rows = {r["spec"]: r for r in res.rows}
    plain, ef = rows["randomk:ratio=0.01"], rows["ef:randomk:ratio=0.01"]
    assert ef["reached"] == 2 and math.isfinite(ef["penalty"]) and ef["penalty"] > 1
    assert plain["penalty"] > ef["penalty"]
    assert plain["final_val_loss"] > ef["final_val_loss"]


def test_dynamic_tree_penalty_is_within_its_ci_of_one_on_the_mlp():
    """Dettmers 2016 §3.4: the 8-bit dynamic tree trains like 32-bit."""
    res = converge(ConvergeConfig(**{**cv.smoke_settings("mlp"), "specs": ("dynamic_tree",), "tolerance": 0.05}))
    dt = {r["spec"]: r for r in res.rows}["dynamic_tree"]
    assert dt["seeds"] == 3 and dt["reached"] == 3
    assert dt["penalty_ci_low"] <= 1.0 <= dt["penalty_ci_high"]


def test_warm_up_steps_run_fp32_exactly():
    cfg = ConvergeConfig(**{**TINY, "specs": ("onebit@10",)}).resolved()
    data = cv.load_task_data(cfg, 0)
    a = cv.train_sim(data, Spec.parse("fp32"), 10)
    b = cv.train_sim(data, Spec.parse("onebit@10"), 10)
    c = cv.train_sim(data, Spec.parse("onebit"), 10)
    assert [r["val_loss"] for r in a.curve] == [r["val_loss"] for r in b.curve]
    assert [r["val_loss"] for r in a.curve] != [r["val_loss"] for r in c.curve]


def test_tiny_transformer_task_trains():
    res = converge(ConvergeConfig(task="gpt", specs=("bf16",), seeds=1, workers=2, steps=20, eval_every=10, budget=1.0,
                                  tolerance=0.2, dim=32, layers=1, heads=2, context=16, vocab=500, batch=8))
    rows = {r["spec"]: r for r in res.rows}
    assert rows["fp32"]["final_val_loss"] < math.log(500)  # below the uniform guess's loss
    assert rows["bf16"]["reached"] == 1


def test_simulated_and_ddp_workers_agree_without_dropout():
    """Same seed, init, batch order, shards, optimizer and allreduce algorithm (ring; the DDP hook runs
    lab.comm.allreduce on the process group, the codec riding every hop as on SimComm): K=2 simulated
    workers and 2 DDP processes give the same validation curve to float rounding (rel 1e-5) and the
    same bytes per step, for fp32 and for a codec with error feedback. Random-k differs: each process
    draws its own random stream."""
    cfg = ConvergeConfig(**{**TINY, "mode": "ddp", "eval_every": 4, "steps": 8, "specs": ("fp32",)}).resolved()
    data = cv.load_task_data(cfg, 0)
    for spec in ("fp32", "ef:topk:ratio=0.25"):
        ddp = cv.train_ddp_run(data, Spec.parse(spec), 8)
        sim = cv.train_sim(data, Spec.parse(spec), 8)
        d = {r["step"]: r["val_loss"] for r in ddp.curve}
        s = {r["step"]: r["val_loss"] for r in sim.curve}
        assert set(d) == set(s) == {0, 4, 8}
        for step in d:
            assert d[step] == pytest.approx(s[step], rel=1e-5), spec
        assert d[8] < d[0]
        if spec != "fp32":
            assert ddp.bytes_per_step == sim.bytes_per_step


# -- bad input and stops

@pytest.mark.parametrize("args,word", [
    (["--task", "resnet"], "unknown task 'resnet'"),
    (["--codecs", "frob"], "unknown codec 'frob'"),
    (["--codecs", "ef:powersgd"], "cannot train with simulated workers"),
    (["--codecs", "topk:ratio=0.01", "--algorithm", "native"], "cannot train with simulated workers (native)"),
    (["--task", "gpt", "--mode", "ddp"], "simulated workers only"),
    (["--mode", "ddp", "-k", "8"], "2..4 processes"),
    (["--steps", "3"], "budget is too small"),
    (["--budget", "0.5"], "--budget"),
])
def test_bad_input_is_one_line(args, word):
    r = runner.invoke(app, ["converge", *args])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert word in " ".join(r.output.split()), r.output


def test_fp32_that_diverges_or_learns_nothing_defines_no_target():
    with pytest.raises(ConvergeError, match="fp32"):
        converge(ConvergeConfig(**{**TINY, "lr": 1e6, "seeds": 1, "specs": ("fp32",)}))
    r = runner.invoke(app, ["converge", "--hidden", "16", "--train-limit", "256", "--steps", "10", "--eval-every", "5",
                            "--seeds", "1", "-k", "2", "--batch", "16", "--lr", "1e-9", "--json"])
    assert r.exit_code == 2 and "fp32 did not learn" in " ".join(r.output.split())


def test_a_stopped_study_keeps_finished_runs_marked_partial(tmp_path, monkeypatch):
    real = cv.train_sim
    calls = []

    def stop_on_third(*a, **kw):
        calls.append(1)
        if len(calls) == 3:  # fp32 and the first codec finished; stop during the second codec
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(cv, "train_sim", stop_on_third)
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["converge", "--hidden", "16", "--train-limit", "256", "--steps", "10", "--eval-every", "5",
                            "--seeds", "2", "-k", "2", "--batch", "16", "--budget", "1", "--tolerance", "0.9",
                            "--codecs", "dynamic_tree,int8", "--out", str(out)])
    assert r.exit_code == 130, r.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["partial"] is True and [x["spec"] for x in doc["runs"]] == ["fp32", "dynamic_tree"]
    rows = {x["spec"]: x for x in doc["rows"]}
    assert rows["dynamic_tree"]["partial"] and rows["dynamic_tree"]["measured"] and not rows["int8"]["measured"]
    pen = load_penalties(out)
    assert pen["int8"] is None and pen["dynamic_tree"].seeds == 1 and pen["dynamic_tree"].ci is None


def test_load_penalties_reads_a_full_result(tmp_path):
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["converge", "--hidden", "16", "--train-limit", "256", "--steps", "10", "--eval-every", "5",
                            "--seeds", "2", "-k", "2", "--batch", "16", "--budget", "1", "--tolerance", "0",
                            "--codecs", "randomk:ratio=0.01", "--out", str(out)])
    assert r.exit_code == 0, r.output
    pen = load_penalties(out)
    assert pen["fp32"].penalty == 1.0 and pen["fp32"].ci == (1.0, 1.0) and pen["fp32"].task == "mlp"
    assert pen["randomk:ratio=0.01"].never_reaches  # 10 steps of 1 % random-k: never
    with pytest.raises(ValueError, match="not a `paralab converge` result"):
        (tmp_path / "x.json").write_text("{}")
        load_penalties(tmp_path / "x.json")
