"""The converge task `gpt` (the tiny GPT on a word corpus) under the pipeline and tensor strategies on real Gloo
ranks: the ranks draw the windows converge draws and score as converge scores (perplexity, loss per token); with
an fp32 wire their curve is the one-process curve (to 1e-5 relative: the order of floating-point sums, AdamW's
steps); `paralab converge --task gpt --mode pipeline|tensor` runs to a result with every column the other modes
report, 8-bit sends a quarter of the bytes; the modes that cannot train it, and settings it cannot run, are one
line before any rank starts."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from lab.cli import app
from lab.train.parallelism import get_strategy, train_parallel
from lab.train.parallelism.lm import GPTConfig, LMData, optimizer
from lab.train.parallelism.tensor import TensorSettings
from lazy_import import lazy
from test_cli import schema

jsonschema = lazy("jsonschema")
runner = CliRunner()
# a tiny GPT: 200 words, windows of 8 tokens, width 16, 2 blocks of 4 heads; 8 windows a step
TINY = dict(vocab=200, context=8, dim=16, layers=2, heads=4, batch=8, lr=0.01, workers=2)
REL = 1e-5  # fp32 ranks against one process: the same steps up to the order of floating-point sums


@pytest.fixture(scope="module")
def tiny() -> GPTConfig:
    """TINY for 4 steps, evaluated after steps 2 and 4."""
    n = LMData(GPTConfig(**TINY)).samples_per_epoch
    return GPTConfig(**TINY, epochs=4 * 8 / n, evals_per_epoch=n // 16)


def _one_process(cfg: GPTConfig) -> list[dict]:
    """The same training in one process: the task's TinyGPT, F.cross_entropy over its (batch, vocab, time)
    logits, AdamW, the same windows; an evaluation every `samples_per_epoch // evals_per_epoch` windows."""
    ds = LMData(cfg)
    torch.manual_seed(cfg.seed)
    model = ds.build(cfg)
    opt = optimizer(cfg, model.parameters())
    stream, n = ds.stream(cfg.batch, cfg.seed), ds.samples_per_epoch
    total, every = int(round(cfg.epochs * n)), n // cfg.evals_per_epoch
    rows, losses, step, next_eval = [], [], 0, every
    while stream.samples < total:
        x, y = stream.batch()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
        if stream.samples >= next_eval or stream.samples >= total:
            ppl, vloss = ds.evaluate(model)
            rows.append(dict(step=step, train_loss=sum(losses) / len(losses), test_error=ppl, test_loss=vloss))
            losses = []
            while next_eval <= stream.samples:
                next_eval += every
    return rows


def test_the_ranks_draw_and_score_what_converge_draws_and_scores():
    from lab.train.converge import ConvergeConfig, load_task_data

    cfg = ConvergeConfig(task="gpt", vocab=200, context=8, dim=16, batch=8).resolved()
    task = load_task_data(cfg, 3)
    ranks = LMData(task.train_config())
    assert task.train_config().seed == 3 and ranks.vocab == task.vocab
    mine, theirs = ranks.stream(8, 3), task.batches(2)
    for _ in range(3):
        (x, y), (x2, y2) = mine.batch(), next(theirs)
        assert torch.equal(x, x2) and torch.equal(y, y2) and x.shape == (8, 8) and torch.equal(x[:, 1:], y[:, :-1])
    torch.manual_seed(3)
    model = task.build()
    loss, ppl = task.evaluate(model)
    assert ranks.evaluate(model) == pytest.approx((ppl, loss), rel=1e-6) and ppl == pytest.approx(math.exp(loss))


@pytest.mark.parametrize("mode, settings", [("pipeline", None), ("tensor", TensorSettings()),
                                            ("tensor", TensorSettings(sequence_parallel=True))])
def test_fp32_ranks_train_the_gpt_task_as_one_process(tiny, mode, settings):
    want = _one_process(tiny)
    res = train_parallel(mode, tiny, 2, settings)
    c = res.curve
    assert c.step.tolist() == [2, 4] == [w["step"] for w in want]
    for col in ("train_loss", "test_loss", "test_error"):  # test_error: a language model's perplexity
        assert c[col].tolist() == pytest.approx([w[col] for w in want], rel=REL), col
    assert c.test_loss.iloc[-1] < c.test_loss.iloc[0] < math.log(200)  # it learns, from near-uniform
    s = res.summary
    assert s["bytes"] == s["fp32_bytes"] > 0 and s["procs"] == 2 and s["mode"] == mode
    assert s["parameters"] == sum(p.numel() for p in LMData(tiny).build(tiny).parameters())


@pytest.mark.parametrize("mode", ["pipeline", "tensor"])
def test_converge_gpt_on_two_ranks_reports_what_every_mode_reports(mode, monkeypatch):
    monkeypatch.setenv("PARALAB_COMPILE", "0")  # eager codec kernels: no compile in the ranks
    r = runner.invoke(app, ["converge", "--task", "gpt", "--mode", mode, "-k", "2", "--steps", "6",
                            "--eval-every", "3", "--seeds", "1", "--budget", "1", "--codecs", "dynamic_tree",
                            "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema("converge"))
    assert doc["config"]["mode"] == mode and doc["config"]["task"] == "gpt" and doc["task"]["name"] == "gpt"
    rows = {row["spec"]: row for row in doc["rows"]}
    assert set(rows) == {"fp32", "dynamic_tree"} and all(row["measured"] for row in rows.values())
    assert rows["fp32"]["penalty"] == 1.0 and rows["dynamic_tree"]["reached"] == 1
    # 8-bit activations (and their gradients) on the wire: a quarter of fp32's bytes
    assert 0.24 < rows["dynamic_tree"]["bytes_per_step"] / rows["fp32"]["bytes_per_step"] < 0.27
    for run in doc["runs"]:  # quality: the validation perplexity, exp of the loss per token
        assert run["mode"] == mode and run["steps_run"] == 6
        assert run["final_quality"] == pytest.approx(math.exp(run["final_val_loss"]), rel=1e-6)
        assert run["final_val_loss"] < math.log(2000)
    curve = [p for p in doc["curves"] if p["spec"] == "fp32"]
    assert curve[0]["step"] == 0 and curve[-1]["step"] == 6 and curve[-1]["val_loss"] < curve[0]["val_loss"]


def test_the_smoke_preset_under_a_parallelism_keeps_the_specs_it_can_carry():
    from lab.experiments import converge_config
    from lab.train.converge import smoke_settings

    assert smoke_settings("gpt", "pipeline")["specs"] == ("fp32", "dynamic_tree")
    assert smoke_settings("gpt")["specs"] == ("fp32", "dynamic_tree", "randomk:ratio=0.01", "ef:randomk:ratio=0.01")
    cfg = converge_config(smoke=True, task="gpt", mode="tensor")
    assert cfg.specs == ("fp32", "dynamic_tree") and cfg.optimizer == "adamw" and cfg.workers == 2
    assert cfg.budget == 2.0 and converge_config(smoke=True, task="gpt").budget == 6.0


@pytest.fixture
def no_ranks(monkeypatch):
    import lab.comm.launch as launch

    def started(*a, **k):
        raise AssertionError("ranks started")

    monkeypatch.setattr(launch, "run", started)


@pytest.mark.parametrize("args, says", [
    (["--mode", "hybrid"], "--mode hybrid cannot train task 'gpt' (it trains --model cnn); the tasks it can train: "
                           "cnn"),
    (["--mode", "expert"], "--mode expert cannot train task 'gpt' (it trains --model mlp); the tasks it can train: "
                           "mlp"),
    (["--mode", "tensor", "-k", "3"], "the tiny GPT's 4 attention heads cannot be split over 3 tensor ranks; "
                                      "allowed: a number of tensor ranks that divides 4"),
    (["--mode", "pipeline", "-k", "2", "--batch", "2"], "fewer than --microbatches 4"),
    (["--mode", "pipeline", "-k", "8"], "workers=8; --mode pipeline runs 2..4 processes here"),
    (["--mode", "pipeline", "--codecs", "topk:ratio=0.01"], "topk is a gradient compressor"),
])
def test_what_cannot_train_gpt_is_one_line_before_any_rank_starts(no_ranks, args, says):
    r = runner.invoke(app, ["converge", "--task", "gpt", *args])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.output


def test_pipeline_and_tensor_say_they_train_gpt_and_the_others_do_not():
    assert get_strategy("pipeline").trains("gpt") and get_strategy("tensor").trains("gpt")
    assert not get_strategy("hybrid").trains("gpt") and not get_strategy("expert").trains("gpt")
    with pytest.raises(ValueError, match="--mode hybrid trains cnn; got --model gpt"):
        train_parallel("hybrid", GPTConfig(**TINY), 2)
    with pytest.raises(ValueError, match="heads"):  # TinyGPT's own check, before any rank starts
        train_parallel("pipeline", replace(GPTConfig(**TINY), heads=3), 2)
