"""Hybrid parallelism (`lab/train/parallelism/hybrid.py`): the small CNN's conv layers data-parallel, its dense
head model-parallel, on SimComm ranks and on real Gloo processes.

Tolerance of the identity step: the split model computes the same values as the unsplit one, but the conv
runs on shards of the batch, the conv gradients are summed over ranks in the allreduce's order and the head's
matmuls run on slices, so parameters agree with one process to float rounding: with SGD (an update linear in
the gradient) 1e-6 absolute after three steps (observed: at most 3e-8). RMSProp divides each gradient by the root
of its running square, so a gradient within rounding of zero moves its weight by a sizeable part of lr: 1e-4
(lr / 30; observed: at most 4e-6)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from dataclasses import asdict, replace

from lab.codecs.registry import parse_spec
from lab.codecs.wire import WireFormat
from lab.comm.algorithms import get_algorithm
from lab.comm.shaped import parse_rate
from lab.comm.sim import simulate
from lab.train.models import build_model, make_optimizer
from lab.train.parallelism import get_strategy, train_parallel
from lab.train.parallelism.hybrid import BUCKET, KINDS, HybridCNN, HybridSettings, hybrid_rank
from lab.train.run import TrainConfig, load_data

import parallel_hybrid_ranks

ATOL = {"sgd": 1e-6, "rmsprop": 1e-4}
TINY = dict(model="cnn", train_limit=256, batch=30, seed=1, evals_per_epoch=1)


def _batches(cfg: TrainConfig, n: int, size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    ds = load_data(cfg)
    g = torch.Generator().manual_seed(7)
    out = []
    for _ in range(n):
        i = torch.randperm(len(ds.train_y), generator=g)[:size]
        out.append((ds.train_x[i], ds.train_y[i]))
    return out


def _one_process(cfg: TrainConfig, batches) -> tuple[torch.nn.Module, list[float]]:
    """The unsplit SmallCNN trained on the batches in one process (its dropout on torch's global stream)."""
    ds = load_data(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = build_model("cnn", ds.features, ds.classes, ds.image_shape, dropout=cfg.dropout)
        opt = make_optimizer(cfg.optimizer, model.parameters(), cfg.lr, cfg.momentum)
        losses = []
        for x, y in batches:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return model, losses


def _assert_same_as_one_process(ranks: list[dict], model: torch.nn.Module, losses: list[float],
                                atol: float) -> None:
    for r in ranks:
        assert r["losses"] == pytest.approx(losses, abs=atol)
        for name, p in model.features.named_parameters():
            torch.testing.assert_close(r["conv"][name], p.detach(), atol=atol, rtol=0)
            assert torch.equal(r["conv"][name], ranks[0]["conv"][name])  # the replicas never drift apart
        torch.testing.assert_close(r["weight"], model.head[2].weight.detach(), atol=atol, rtol=0)
        torch.testing.assert_close(r["bias"], model.head[2].bias.detach(), atol=atol, rtol=0)


@pytest.mark.parametrize("P,optimizer", [(2, "sgd"), (3, "sgd"), (4, "sgd"), (2, "rmsprop"), (4, "rmsprop")])
def test_without_codecs_a_step_equals_one_process_on_simulated_ranks(P, optimizer):
    # batch 30 over 4 ranks and 10 classes over 3 or 4: uneven shards and uneven slices of the dense layer;
    # dropout 0.3 on the head: every rank draws the unsplit model's mask
    cfg = TrainConfig(**TINY, optimizer=optimizer, lr=0.05 if optimizer == "sgd" else 0.003)
    batches = _batches(cfg, 3, cfg.batch)
    model, losses = _one_process(cfg, batches)
    ranks = simulate(parallel_hybrid_ranks.steps, P, asdict(cfg), {}, batches)
    _assert_same_as_one_process(ranks, model, losses, ATOL[optimizer])
    for i, kind in enumerate(KINDS):  # no codec: the messages weigh what they weigh in fp32 (per rank, the conv
        # gradients' count is the ring's average: its chunks differ by a value when P does not divide a tensor)
        sent = sum(r["traffic"][i]["bytes_per_step"] for r in ranks)
        assert sent == pytest.approx(sum(r["traffic"][i]["fp32_bytes_per_step"] for r in ranks), abs=P) and sent > 0
    for r in ranks:
        assert sum(t["bytes_per_step"] for t in r["traffic"]) * 3 == r["bytes_sent"]


def test_without_codecs_a_step_on_two_gloo_ranks_equals_one_process():
    from lab.comm.launch import run

    cfg = TrainConfig(**TINY, optimizer="sgd", lr=0.05)
    batches = _batches(cfg, 3, 31)  # an odd batch: shards of 16 and 15
    model, losses = _one_process(cfg, batches)
    ranks = run(parallel_hybrid_ranks.steps, 2, asdict(cfg), {}, batches, timeout=120)
    _assert_same_as_one_process(ranks, model, losses, ATOL["sgd"])


def test_the_codecs_run_one_bit_conv_gradients_and_8_bit_activations():
    cfg = TrainConfig(**{**TINY, "batch": 32}, codec="dynamic_tree", optimizer="sgd", lr=0.05)
    settings = HybridSettings(grads_codec="ef:onebit")
    batches = _batches(cfg, 2, cfg.batch)
    ranks = simulate(parallel_hybrid_ranks.steps, 2, asdict(cfg), asdict(settings), batches)
    ds = load_data(cfg)
    onebit, tree = parse_spec("onebit"), parse_spec("dynamic_tree")
    conv = [p for p in build_model("cnn", ds.features, ds.classes, ds.image_shape).features.parameters()]
    feats = 16 * 128  # a shard of 16 samples x 128 conv features (digits: 32 channels of 2x2)
    for r in ranks:
        t = {row["kind"]: row for row in r["traffic"]}
        # 2 ranks, ring in gather mode: each rank sends the bucket's 1-bit payload once (signs + 2 means)
        n = sum(p.numel() for p in conv)
        assert t["conv_gradients"]["bytes_per_step"] == WireFormat.of(onebit, n, torch.float32).nbytes
        assert t["conv_gradients"]["fp32_bytes_per_step"] == 4 * n
        assert 1 / 32 < t["conv_gradients"]["bytes_per_step"] / t["conv_gradients"]["fp32_bytes_per_step"] < 1 / 28
        for kind in ("features", "feature_gradients"):  # one 8-bit block to the other rank, each way
            assert t[kind]["bytes_per_step"] == WireFormat.of(tree, feats, torch.float32).nbytes
            assert t[kind]["fp32_bytes_per_step"] == 4 * feats
        assert 0.25 <= sum(t[k]["bytes_per_step"] for k in KINDS[1:]) / sum(
            t[k]["fp32_bytes_per_step"] for k in KINDS[1:]) < 0.26
        assert sum(row["bytes_per_step"] for row in r["traffic"]) * 2 == r["bytes_sent"]
    # lossy, but close to fp32: the first step's loss (before any update) differs by the 8-bit features only
    fp32 = simulate(parallel_hybrid_ranks.steps, 2, asdict(TrainConfig(**{**TINY, "batch": 32}, optimizer="sgd",
                                                                     lr=0.05)), {}, batches)
    assert ranks[0]["losses"][0] != fp32[0]["losses"][0]
    assert ranks[0]["losses"][0] == pytest.approx(fp32[0]["losses"][0], abs=0.01)


def test_error_feedback_keeps_each_ranks_residual_across_steps():
    cfg = TrainConfig(**TINY)
    ds = load_data(cfg)
    q = parse_spec("onebit").roundtrip

    def rank(comm, spec: str) -> dict:
        net = HybridCNN(comm, cfg, ds, HybridSettings(grads_codec=spec))
        out: dict = dict(g=[], sums=[], residuals=[])
        for step in (1, 2):
            g = torch.Generator().manual_seed(100 * step + comm.rank)
            grads = [torch.randn(p.shape, generator=g) for p in net.conv.parameters()]
            sums = net.sum_conv_grads(grads)
            assert [s.shape for s in sums] == [p.shape for p in net.conv.parameters()]
            out["g"].append(torch.cat([t.reshape(-1) for t in grads]))
            out["sums"].append(torch.cat([t.reshape(-1) for t in sums]))
            if spec.startswith("ef:"):  # the bucket's residual, kept by this rank's codec
                out["residuals"].append(net.codec.residual(BUCKET).clone())
        return out

    ranks, plain = simulate(rank, 2, "ef:onebit"), simulate(rank, 2, "onebit")
    (a1, a2), (b1, b2) = ranks[0]["g"], ranks[1]["g"]
    res = [a1 - q(a1), b1 - q(b1)]  # what each rank's first 1-bit payload did not carry
    for r, want in zip(ranks, res):
        torch.testing.assert_close(r["residuals"][0], want)
        assert want.abs().max() > 0.1
    torch.testing.assert_close(ranks[0]["sums"][0], q(a1) + q(b1))
    # the second step sends gradient + residual: nothing is lost, only delayed
    torch.testing.assert_close(ranks[0]["sums"][1], q(a2 + res[0]) + q(b2 + res[1]))
    kept = ranks[0]["sums"][0] + ranks[0]["sums"][1] + ranks[0]["residuals"][1] + ranks[1]["residuals"][1]
    torch.testing.assert_close(kept, a1 + b1 + a2 + b2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ranks[1]["sums"][1], ranks[0]["sums"][1])  # every rank applies the same sum
    # without memory the first step is the same, the second another sum
    torch.testing.assert_close(plain[0]["sums"][0], ranks[0]["sums"][0])
    torch.testing.assert_close(plain[0]["sums"][1], q(a2) + q(b2))
    assert not torch.allclose(plain[0]["sums"][1], ranks[0]["sums"][1])


def test_the_rank_function_trains_the_papers_setup_and_reports_the_trade():
    # the strategy's own rank function (RankLoop, evaluations, summary) on 2 simulated ranks
    cfg = TrainConfig(**{**TINY, "train_limit": 384, "batch": 64, "epochs": 3.0, "evals_per_epoch": 1},
                      codec="dynamic_tree", optimizer="rmsprop", lr=0.003)
    ranks = simulate(hybrid_rank, 2, asdict(cfg), asdict(HybridSettings(grads_codec="ef:onebit")))
    rows = ranks[0]["rows"]
    assert [r["epoch"] for r in rows] == [1.0, 2.0, 3.0]
    assert rows[-1]["train_loss"] < rows[0]["train_loss"] - 0.3  # the loss falls
    assert rows[-1]["test_error"] < 50.0
    s = ranks[0]["summary"]
    assert s["conv_params"] == 4800 and s["dense_params"] == 128 * 10 + 10 and s["parameters"] == 6090
    assert 1 / 32 < s["conv_grad_bytes_ratio"] < 1 / 28 and 0.25 <= s["activation_bytes_ratio"] < 0.26
    # the head's gradients, data-parallel on the ring, would weigh this much per step (all ranks)
    assert s["dense_grad_fp32_bytes_if_data_parallel"] == 2 * get_algorithm("ring").bytes_per_rank(2, 4 * 1290)
    steps = ranks[0]["steps"]
    total = sum(r["bytes_sent"] for r in ranks)
    assert total == pytest.approx((s["conv_grad_bytes_per_step"] + s["activation_bytes_per_step"]) * steps)


def test_it_trains_on_two_gloo_ranks():
    cfg = TrainConfig(**{**TINY, "train_limit": 384, "batch": 64, "epochs": 2.0}, codec="dynamic_tree")
    res = train_parallel("hybrid", cfg, 2, HybridSettings(grads_codec="ef:onebit"))
    s = res.summary
    assert s["mode"] == "hybrid" and s["procs"] == 2 and s["steps"] == 12
    assert len(res.curve) == 2 and res.curve.train_loss.iloc[-1] < res.curve.train_loss.iloc[0]
    assert math.isfinite(res.curve.test_error.iloc[-1])
    assert s["grads_codec"] == "ef(onebit)" and s["conv_grad_bytes_ratio"] < 1 / 28
    assert s["activation_bytes_ratio"] < 0.26 and s["bytes"] < 0.2 * s["fp32_bytes"]
    traffic = res.tables["traffic"]
    assert sorted(traffic["rank"].unique()) == [0, 1] and set(traffic["kind"]) == set(KINDS)


@pytest.mark.parametrize("cfg,settings,procs,says", [
    (dict(model="mlp"), {}, 2, "--model"),
    (dict(), {}, 11, "10 outputs (classes)"),
    (dict(), dict(grads_codec="nosuch"), 2, "--grads-codec 'nosuch': unknown codec"),
    (dict(), dict(grads_codec="ef:powersgd"), 2, "keeps its own error feedback"),
    (dict(), dict(grads_codec="onebit", algorithm="native"), 2, "carries fp32 only"),
    (dict(), dict(algorithm="nosuch"), 2, "--algorithm: unknown algorithm 'nosuch'"),
    (dict(codec="onebit"), {}, 2, "cannot carry the model-parallel head's activations"),
    (dict(codec="topk"), {}, 2, "cannot carry"),
    (dict(codec="ef:dynamic_tree"), {}, 2, "drop 'ef:'"),
    (dict(codec="dynamic_tree", error_feedback=True), {}, 2, "--grads-codec ef:NAME"),
])
def test_bad_input_is_one_line_before_any_rank_starts(monkeypatch, cfg, settings, procs, says):
    import lab.comm.launch

    monkeypatch.setattr(lab.comm.launch, "run", lambda *a, **k: pytest.fail("a rank was started"))
    with pytest.raises(ValueError) as e:
        train_parallel("hybrid", TrainConfig(**{"model": "cnn", **cfg}), procs,
                       get_strategy("hybrid").make_settings(**settings))
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)


def test_the_strategy_is_registered_and_its_benchmark_case_is_bound_by_its_link():
    s = get_strategy("hybrid")
    assert s.settings.option_names() == ["grads_codec", "algorithm"] and s.models == ("cnn",)
    cfg = TrainConfig(**s.bench["cfg"], workers=2)
    cfg.check()
    settings = s.make_settings(**s.bench["settings"])
    settings.check(cfg, 2)
    assert cfg.codec == "dynamic_tree" and settings.grads_codec == "ef:onebit"
    # one step of the case in fp32: what each rank sends takes >= 20 ms on the case's link (the small CNN's
    # forward and backward on 256 digits take ~3-6 ms on one core); the codecs' ratios are checked above
    rate = parse_rate(s.bench["link_rate"]) / 8  # bytes per second
    ranks = simulate(parallel_hybrid_ranks.steps, 2, asdict(replace(cfg, codec=None)), {}, _batches(cfg, 1, cfg.batch))
    assert min(r["bytes_sent"] for r in ranks) / rate >= 0.020
