"""Tensor and sequence parallelism (lab/train/parallelism/tensor*.py): with an fp32 wire a step is the
single-process step (dropout included) for 2..4 tensor ranks, with and without sequence parallelism, on the MLP
and the tiny GPT; the codec really carries the activation collectives (8-bit: ~1/4 of fp32's bytes, counted) and
trains; real Gloo ranks (2, and a 2x2 data x tensor mesh) run the strategy's rank function to the single-process
curve; torch's own parallelize_module agrees; bad input is one line before any rank starts.

Ranks that do not need real processes are threads (tests/thread_comm.py): the collectives run inside autograd,
and SimComm's greenlets would share one thread's autograd state."""
from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from lab.codecs import parse_spec
from lab.train.gpt import TinyGPT
from lab.train.models import MLP, build_model, make_optimizer
from lab.train.parallelism import get_strategy, train_parallel
from lab.train.parallelism.tensor import STRATEGY, TensorSettings
from lab.train.parallelism.tensor_layers import TensorGroup, dropout_noise
from lab.train.parallelism.tensor_models import TensorParallelGPT, TensorParallelMLP
from lab.train.run import TrainConfig, evaluate, load_data
from lab.train.stream import ShardStream
from thread_comm import run_threads

DROPOUT = (0.2, 0.3, 0.3)


def _data(n: int, features: int, seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable task: 10 classes from a fixed random linear map of Gaussian inputs."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return x, (x @ torch.randn(features, 10, generator=g)).argmax(1)


def _mlp_rank(comm, m0, x, y, sp, codec, steps):
    """`steps` SGD steps of the MLP split over comm's ranks: losses, the first logits, the parameters after."""
    group = TensorGroup(comm, parse_spec(codec) if codec else None)
    model = TensorParallelMLP(copy.deepcopy(m0), group, sp, seed=1)
    losses, first = _sgd_steps(model, x, y, steps)
    return dict(losses=losses, first=first, layers=[(lay.weight.detach(), lay.bias.detach(), lay.index)
                                                    for lay in model.layers],
                table=group.table(), fp32=group.fp32_bytes, sent=comm.bytes_sent)


def _sgd_steps(model, x, y, steps):
    """`steps` SGD steps (lr 0.1, momentum 0.9) on one batch: the losses and the first step's logits."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, first = [], None
    for _ in range(steps):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        first = out.detach() if first is None else first
    return losses, first


def _mlp_reference(m0, x, y, steps):
    m = copy.deepcopy(m0)
    torch.manual_seed(1)  # the global stream nn.Dropout draws from, seeded as the ranks' own
    return (m, *_sgd_steps(m, x, y, steps))


def test_dropout_noise_is_what_torchs_dropout_draws():
    x = torch.randn(7, 9)
    torch.manual_seed(3)
    want = F.dropout(x, 0.3, training=True)
    gen = torch.Generator().manual_seed(3)
    assert torch.equal(x * dropout_noise((7, 9), 0.3, gen), want)
    state = gen.get_state()
    assert dropout_noise((7, 9), 0.0, gen) is None and torch.equal(gen.get_state(), state)  # p = 0 draws nothing


@pytest.mark.parametrize("sp", [False, True], ids=["allreduce", "sequence_parallel"])
@pytest.mark.parametrize("P", [2, 3, 4])
def test_fp32_mlp_steps_are_the_single_process_steps_with_dropout(P, sp):
    # 20-12-9-10 on a batch of 13: uneven splits of the layers over 3 and 4 ranks, padded token shards
    torch.manual_seed(0)
    m0 = MLP(20, 10, (12, 9), DROPOUT)
    x, y = _data(13, 20)
    ref, ref_losses, ref_first = _mlp_reference(m0, x, y, 2)
    ranks = run_threads(_mlp_rank, P, m0, x, y, sp, None, 2)
    for r in ranks:
        assert r["losses"] == pytest.approx(ref_losses, rel=1e-6)
        torch.testing.assert_close(r["first"], ref_first, rtol=1e-5, atol=1e-6)
        for i, (w, b, idx) in enumerate(r["layers"]):
            full = ref.dense[i]
            if i % 2 == 0:  # column: rows of W and of b
                torch.testing.assert_close(w, full.weight.detach()[idx], rtol=1e-5, atol=1e-6)
                torch.testing.assert_close(b, full.bias.detach()[idx], rtol=1e-5, atol=1e-6)
            else:  # row: columns of W, the whole bias
                torch.testing.assert_close(w, full.weight.detach()[:, idx], rtol=1e-5, atol=1e-6)
                torch.testing.assert_close(b, full.bias.detach(), rtol=1e-5, atol=1e-6)
    # the row layer's bias is replicated: the same bits on every rank
    assert all(torch.equal(r["layers"][1][1], ranks[0]["layers"][1][1]) for r in ranks)
    # every slice of every layer is held by exactly one rank
    assert sorted(i for r in ranks for i in r["layers"][0][2].tolist()) == list(range(12))
    # what the fp32 collectives sent is what fp32_bytes says they send (a ring all-reduce splits its bytes
    # unevenly over the ranks; the total is exact)
    assert abs(sum(r["sent"] for r in ranks) - sum(r["fp32"] for r in ranks)) < 1e-6
    ops = {t["op"] for t in ranks[0]["table"]}
    if sp:
        assert {"reduce_scatter", "all_gather", "grad_all_reduce"} <= ops and "all_reduce" not in ops
    else:
        assert ops == {"all_reduce", "all_gather"}


def _gpt_rank(comm, g0, idx, y, sp, codec=None):
    model = TensorParallelGPT(copy.deepcopy(g0), comm, sp, codec=parse_spec(codec) if codec else None)
    out = model(idx)
    F.cross_entropy(out, y).backward()
    b = model.blocks[1]
    return dict(out=out.detach(), grads={n: p.grad for n, p in model.named_parameters()},
                index=dict(qkv=b.qkv.index, proj=b.proj.index, fc1=b.fc1.index), table=model.group.table())


@pytest.mark.parametrize("sp", [False, True], ids=["allreduce", "sequence_parallel"])
@pytest.mark.parametrize("P", [2, 4])
def test_fp32_gpt_step_is_the_single_process_step(P, sp):
    torch.manual_seed(0)
    g0 = TinyGPT(50, context=16, dim=32, layers=2, heads=4)
    gen = torch.Generator().manual_seed(1)
    idx, y = torch.randint(0, 50, (3, 11), generator=gen), torch.randint(0, 50, (3, 11), generator=gen)
    ref = copy.deepcopy(g0)
    want = ref(idx)
    F.cross_entropy(want, y).backward()
    blk = ref.blocks[1]
    for r in run_threads(_gpt_rank, P, g0, idx, y, sp):
        torch.testing.assert_close(r["out"], want.detach(), rtol=1e-5, atol=1e-5)
        g, i = r["grads"], r["index"]
        pairs = [("tok.weight", ref.tok.weight.grad), ("pos.weight", ref.pos.weight.grad),
                 ("head.weight", ref.head.weight.grad), ("ln.weight", ref.ln.weight.grad),
                 ("blocks.1.ln1.weight", blk.ln1.weight.grad), ("blocks.1.ln2.bias", blk.ln2.bias.grad),
                 ("blocks.1.qkv.weight", blk.qkv.weight.grad[i["qkv"]]),
                 ("blocks.1.qkv.bias", blk.qkv.bias.grad[i["qkv"]]),
                 ("blocks.1.proj.weight", blk.proj.weight.grad[:, i["proj"]]),
                 ("blocks.1.proj.bias", blk.proj.bias.grad),
                 ("blocks.1.fc1.weight", blk.mlp[0].weight.grad[i["fc1"]]),
                 ("blocks.1.fc2.weight", blk.mlp[2].weight.grad[:, i["fc1"]]),
                 ("blocks.1.fc2.bias", blk.mlp[2].bias.grad)]
        for name, grad in pairs:
            torch.testing.assert_close(g[name], grad, rtol=1e-4, atol=1e-6, msg=name)
        # each rank holds its heads' q, k and v rows: 3 x dim / P of them
        assert len(i["qkv"]) == 3 * 32 // P
    # 8-bit activation collectives: a quarter of the bytes (every op), logits within a few percent
    for r in run_threads(_gpt_rank, P, g0, idx, y, sp, "dynamic_tree"):
        acts = [t for t in r["table"] if t["op"] != "grad_all_reduce"]
        assert acts and all(0.24 < t["bytes"] / t["fp32_bytes"] < 0.3 for t in acts)
        assert (r["out"] - want.detach()).norm() < 0.05 * want.norm()


@pytest.mark.parametrize("sp", [False, True], ids=["allreduce", "sequence_parallel"])
def test_8_bit_activation_collectives_carry_a_quarter_of_the_bytes_and_train(sp):
    torch.manual_seed(0)
    m0 = MLP(32, 10, (64, 48), (0.0, 0.1, 0.1))
    x, y = _data(64, 32)
    fp32 = run_threads(_mlp_rank, 2, m0, x, y, sp, None, 20)
    q8 = run_threads(_mlp_rank, 2, m0, x, y, sp, "dynamic_tree", 20)
    for r, f in zip(q8, fp32):
        rows, frows = {(t["op"], t["phase"]): t for t in r["table"]}, {(t["op"], t["phase"]): t for t in f["table"]}
        assert rows.keys() == frows.keys()
        for key, t in rows.items():
            assert t["fp32_bytes"] == frows[key]["fp32_bytes"] == frows[key]["bytes"] > 0
            if key[0] == "grad_all_reduce":  # the row bias's partial gradients travel in fp32
                assert t["bytes"] == t["fp32_bytes"]
            else:  # 8 bits a value and a 4-byte scale per block, against 32 bits
                assert 0.24 < t["bytes"] / t["fp32_bytes"] < 0.3, key
        # the codec changed the values, a little, and the run learns as fp32 does
        assert r["losses"][0] != f["losses"][0] and r["losses"][0] == pytest.approx(f["losses"][0], rel=0.02)
        assert r["losses"][-1] < 0.7 * r["losses"][0]
        assert r["losses"][-1] == pytest.approx(f["losses"][-1], rel=0.1)
    # every rank decoded the same sums: the replicated bias stayed the same bits on both ranks
    assert torch.equal(q8[0]["layers"][1][1], q8[1]["layers"][1][1])


# -- the strategy on real Gloo ranks

TINY = dict(dataset="digits", train_limit=256, test_limit=64, hidden=(16, 12), dropout=DROPOUT, batch=32,
            epochs=1.0, evals_per_epoch=2, optimizer="sgd", lr=0.1, momentum=0.9)


def _single_process_curve(cfg: TrainConfig) -> list[dict]:
    """What one process computes on cfg's batches: the mean train loss and the test loss at each evaluation."""
    ds = load_data(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model("mlp", ds.features, ds.classes, ds.image_shape, hidden=cfg.hidden, dropout=cfg.dropout)
    opt = make_optimizer(cfg.optimizer, model.parameters(), cfg.lr, cfg.momentum)
    torch.manual_seed(cfg.seed + 1)
    stream = ShardStream(ds.train_x, ds.train_y, cfg.batch, 1, cfg.seed)
    every, total = len(ds.train_y) // cfg.evals_per_epoch, int(round(cfg.epochs * len(ds.train_y)))
    rows, losses, step, next_eval = [], [], 0, len(ds.train_y) // cfg.evals_per_epoch
    while stream.samples < total:
        x, y = stream.batch()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
        if stream.samples >= next_eval or stream.samples >= total:
            err, tloss = evaluate(model, ds.test_x, ds.test_y)
            rows.append(dict(step=step, train_loss=sum(losses) / len(losses), test_error=err, test_loss=tloss))
            losses = []
            while next_eval <= stream.samples:
                next_eval += every
    return rows


def _same_curve(curve, want, rel=1e-5):
    assert curve.step.tolist() == [w["step"] for w in want]
    assert curve.train_loss.tolist() == pytest.approx([w["train_loss"] for w in want], rel=rel)
    assert curve.test_loss.tolist() == pytest.approx([w["test_loss"] for w in want], rel=rel)
    assert curve.test_error.tolist() == [w["test_error"] for w in want]


def test_fp32_runs_on_gloo_ranks_are_the_single_process_run():
    cfg = TrainConfig(**TINY)
    want = _single_process_curve(cfg)
    two = train_parallel("tensor", cfg, 2, TensorSettings())
    _same_curve(two.curve, want)
    s = two.summary
    assert (s["mode"], s["procs"], s["tensor_ranks"], s["data"]) == ("tensor", 2, 2, 1)
    assert abs(s["bytes"] - s["fp32_bytes"]) <= 2 and s["bytes"] > 0
    t = two.tables["collectives"]
    assert set(t["rank"]) == {0, 1} and set(t["group"]) == {"tensor"}
    # forward: one all-reduce per column-row pair and the logits' all-gather; backward: one all-reduce
    per_step = t[(t["rank"] == 0) & (t["phase"] != "eval")].set_index(["op", "phase"])["calls"] / s["steps"]
    assert per_step.to_dict() == {("all_gather", "forward"): 1, ("all_reduce", "backward"): 1,
                                  ("all_reduce", "forward"): 1}
    # a 2x2 mesh (2 data-parallel replicas of 2 tensor ranks, DeviceMesh's layout), with sequence parallelism
    mesh = train_parallel("tensor", cfg, 4, TensorSettings(sequence_parallel=True, data=2))
    _same_curve(mesh.curve, want)
    t = mesh.tables["collectives"]
    assert set(t[t.group == "data"].op) == {"grad_all_reduce"} and mesh.summary["tensor_ranks"] == 2
    assert {"reduce_scatter", "all_gather"} <= set(t[t.group == "tensor"].op)
    # each tensor group trains on half of every batch: half the activation bytes of the 2-rank run
    ratio = mesh.summary["activation_fp32_bytes_per_step"] / s["activation_fp32_bytes_per_step"]
    assert 0.4 < ratio < 0.6


def test_8_bit_activations_on_gloo_ranks_send_a_quarter_and_learn():
    cfg = TrainConfig(**dict(TINY, codec="dynamic_tree", epochs=2.0, hidden=(64, 32), optimizer="rmsprop", lr=0.01))
    res = train_parallel("tensor", cfg, 2, TensorSettings())
    s, t = res.summary, res.tables["collectives"]
    assert 0.24 < s["bytes_ratio"] < 0.31
    assert all(0.24 < b / f < 0.31 for b, f in zip(t.bytes, t.fp32_bytes))
    assert s["activation_bytes_per_step"] < 0.31 * s["activation_fp32_bytes_per_step"]
    want = _single_process_curve(replace(cfg, codec=None))
    got = res.curve.train_loss.tolist()
    assert got[-1] < 0.9 * got[0]
    assert got == pytest.approx([w["train_loss"] for w in want], rel=0.05) and got != [w["train_loss"] for w in want]


def test_torchs_parallelize_module_computes_what_the_lab_layers_compute():
    from lab.comm.launch import run

    import tensor_ranks

    for r in run(tensor_ranks.dtensor_case, 2, timeout=120):
        assert r["types"] == ("DTensor", "DTensor")
        torch.testing.assert_close(r["out"], r["out_theirs"], rtol=1e-5, atol=1e-6)
        for ours, theirs in r["grads"]:
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


# -- the registry, the bench case and bad input

def test_registered_with_its_settings_and_a_valid_bench_case():
    assert get_strategy("tensor") is STRATEGY
    assert TensorSettings.option_names() == ["sequence_parallel", "data"]
    assert STRATEGY.models == ("mlp",) and STRATEGY.min_procs == 2
    b = STRATEGY.bench
    cfg = replace(TrainConfig(**b["cfg"]), workers=2)
    cfg.check()
    TensorSettings(**b["settings"]).check(cfg, 2)
    assert cfg.batch <= 1348  # one batch of digits' training set


@pytest.mark.parametrize("cfg, settings, procs, message", [
    (dict(hidden=(1, 8)), {}, 2, "a layer of 1 units cannot be split over 2 tensor ranks"),
    ({}, dict(data=3), 4, "--data 3 does not divide 4 processes"),
    ({}, dict(data=2), 2, "leaves 1 tensor rank"),
    (dict(codec="topk"), {}, 2, "gradient compressor"),
    (dict(codec="powersgd"), {}, 2, "gradient compressor"),
    (dict(codec="ef:dynamic_tree"), {}, 2, "drop 'ef:'"),
    (dict(codec="dynamic_tree", error_feedback=True), {}, 2, "--error-feedback"),
    (dict(codec="dynamic_tree", algorithm="native"), {}, 2, "native all_reduce carries fp32 only"),
    (dict(model="cnn"), {}, 2, "--mode tensor trains mlp"),
    ({}, dict(sequence_parallel="yes"), 2, "--sequence-parallel 'yes'"),
])
def test_bad_input_is_one_line_before_any_rank_starts(monkeypatch, cfg, settings, procs, message):
    import lab.comm.launch

    def no_ranks(*a, **k):
        raise AssertionError("ranks started")

    monkeypatch.setattr(lab.comm.launch, "run", no_ranks)
    with pytest.raises(ValueError) as e:
        train_parallel("tensor", TrainConfig(**dict(TINY, **cfg)), procs, TensorSettings(**settings))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_models_and_comms_are_one_line():
    with pytest.raises(ValueError, match="is not an option of --mode tensor"):
        STRATEGY.make_settings(stages=2)
    torch.manual_seed(0)
    with pytest.raises(Exception, match="dropout=0"):
        run_threads(lambda c: TensorParallelGPT(TinyGPT(20, dropout=0.1), TensorGroup(c)), 1)
    gpt = TinyGPT(20, dim=32, heads=4)
    with pytest.raises(Exception, match="4 attention heads cannot be split over 3 tensor ranks"):
        run_threads(lambda c: TensorParallelGPT(copy.deepcopy(gpt), TensorGroup(c)), 3)
    from lab.comm.sim import simulate

    with pytest.raises(Exception, match="SimComm"):
        simulate(lambda c: TensorGroup(c), 2)
