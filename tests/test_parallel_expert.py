"""Expert parallelism (lab/train/parallelism/expert.py, moe.py): a step on P ranks equals the same mixture of
experts computed in one process (SimComm P = 2..4, 2 Gloo ranks); the codec rides the dispatch (8-bit: about a
quarter of fp32's bytes, counted on the wire); dropped tokens are counted and pass through the residual; bad
input is one line before any rank starts; the benchmark's case is bound by a 1 Gbit/s link."""
from __future__ import annotations

import math
from dataclasses import asdict, fields

import pytest
import torch

import parallel_expert_ranks as R
from lab.comm.sim import simulate
from lab.train.parallelism import get_strategy, train_parallel
from lab.train.parallelism.expert import ExpertSettings, summarize
from lab.train.parallelism.moe import capacity, route
from lab.train.run import TrainConfig


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """SimComm's ranks take turns on this thread, whose grad mode their `torch.no_grad()` blocks share: the
    last block to close may leave it off; the next test starts with it on, as a rank process does."""
    yield
    torch.set_grad_enabled(True)

SMALL = dict(hidden=(16,), dropout=(0.0, 0.0), optimizer="sgd", lr=0.1)


@pytest.mark.parametrize("P,batch,experts,top_k,factor", [
    (2, 12, 4, 1, 1.0),   # Switch: top-1, some tokens dropped
    (2, 10, 2, 2, 0.75),  # GShard: top-2, second choices dropped first
    (3, 10, 6, 2, 1.25),  # shards of 4, 3, 3 tokens: the capacity from the largest
    (4, 16, 4, 1, 2.0),   # one expert per rank
    (4, 13, 8, 2, 1.0),
])
def test_identity_step_equals_the_single_process_moe_step(P, batch, experts, top_k, factor):
    cfg = dict(SMALL, batch=batch, workers=P)
    st = dict(experts=experts, top_k=top_k, capacity_factor=factor, expert_hidden=8)
    res = simulate(R.equal_to_one_process, P, cfg, st)
    for r in res:
        assert r["experts_held"] == experts // P
        assert r["routing_equal"]
        assert r["param_diff"] < 1e-6 and r["loss_diff"] < 1e-6, r  # float rounding of different batch shapes
        assert r["moved"] > 1e-3  # the steps did train: the comparison is not of untouched parameters
    if factor <= 1.0:
        assert sum(r["dropped"] for r in res) > 0  # capacity bit: the reference dropped the same tokens


def test_two_gloo_ranks_equal_one_process_and_8_bit_dispatch_is_a_quarter_of_fp32():
    from lab.comm.launch import run

    ranks = run(R.gloo_cases, 2, timeout=120)
    for r in ranks:
        eq = r["equal"]
        assert eq["routing_equal"] and eq["param_diff"] < 1e-6 and eq["loss_diff"] < 1e-6 and eq["moved"] > 1e-3
        b, f = r["codec"]["bytes"], r["codec"]["fp32_bytes"]
        # towards the experts (dispatch, the combine's gradient): 8 bits + a 4-byte absmax; back: bf16
        assert 0.25 <= b["dispatch"] / f["dispatch"] < 0.3 and 0.25 <= b["combine_grad"] / f["combine_grad"] < 0.3
        assert b["combine"] * 2 == f["combine"] and b["dispatch_grad"] * 2 == f["dispatch_grad"]
        # everything on the wire is the four all-to-alls and the fp32 sum of the dense gradients (+ the losses)
        ring = 2 * 4 * (r["codec"]["dense"] + 1) // 2  # ring all-reduce, 2 ranks: 2 (P-1)/P of the buffer
        assert r["codec"]["sent"] == sum(b.values()) + 2 * ring


def test_the_codec_rides_the_dispatch_and_bytes_are_counted():
    P, batch, d = 2, 32, 64
    cfg = dict(SMALL, hidden=(d,), batch=batch, workers=P)
    st = dict(experts=4, top_k=1, capacity_factor=1.0, expert_hidden=8)
    C = capacity(batch // P, 4, 1, 1.0)
    block = 4 * C * d * 4 // 2  # the [E, C, d] fp32 block, half of it to the other rank
    plain = simulate(R.codec_steps, P, cfg, st)
    for codec, ratio in (("dynamic_tree", (0.25, 0.26)), ("mxfp8_e4m3", (0.25, 0.27))):
        coded = simulate(R.codec_steps, P, dict(cfg, codec=codec), st)
        for r, p in zip(coded, plain):
            assert r["fp32_bytes"] == p["fp32_bytes"] == p["bytes"] == dict.fromkeys(p["bytes"], 2 * block)
            lo, hi = ratio
            assert lo <= r["bytes"]["dispatch"] / r["fp32_bytes"]["dispatch"] < hi, (codec, r["bytes"])
            assert r["bytes"]["combine"] == p["bytes"]["combine"]  # the combine stays fp32
            assert r["sent"] < p["sent"]
            # the codec rounded what it carried: the step is close to fp32's but not the same
            diff = max(float((r["params"][k] - p["params"][k]).abs().max()) for k in p["params"])
            assert 0 < diff < 0.05, (codec, diff)


def test_dropped_tokens_are_counted_and_pass_through_the_residual_only():
    P, batch, E = 2, 16, 4
    cfg = dict(SMALL, batch=batch, workers=P)
    # every token's first choice expert 0, second expert 1
    bias = [8.0, 4.0, 0.0, 0.0]
    for top_k, factor in ((1, 1.0), (2, 1.0), (2, 0.25)):
        st = dict(experts=E, top_k=top_k, capacity_factor=factor, expert_hidden=8)
        C = capacity(batch // P, E, top_k, factor)
        for r in simulate(R.forced_gate, P, cfg, st, bias):
            T = r["shard"]
            want_tokens = [T, T if top_k == 2 else 0, 0, 0]
            assert r["tokens"] == want_tokens
            assert r["dropped"] == [max(0, n - C) for n in want_tokens]
            assert r["gone"] == T - min(T, C)  # both choices past capacity: the token skips the experts
            assert r["residual_only"] == 0.0 and r["kept_differ"]


def test_route_capacity_and_priority_by_hand():
    logits = torch.tensor([[3.0, 2.0, 0.0], [3.0, 0.0, 2.0], [0.0, 3.0, 2.0], [3.0, 2.0, 0.0]])
    rt = route(logits, 2, 2)  # 2 slots per expert, first choices first
    assert rt.expert.tolist() == [[0, 1], [0, 2], [1, 2], [0, 1]]
    # first choices: expert 0 gets tokens 0, 1 (token 3's is dropped), expert 1 token 2; then second choices
    assert rt.kept.tolist() == [[True, True], [True, True], [True, True], [False, False]]
    assert rt.tokens.tolist() == [3, 3, 2] and rt.dropped.tolist() == [1, 1, 0]
    assert rt.slot[:3].tolist() == [[0, 3], [1, 4], [2, 5]]
    assert torch.allclose(rt.gate.sum(1), torch.ones(4))  # top-2: renormalised (GShard)
    p = torch.softmax(logits, -1)
    assert torch.allclose(route(logits, 1, 4).gate[:, 0], p.max(1).values)  # top-1: the probability (Switch)
    first = torch.tensor([3, 1, 0]) / 4
    assert torch.allclose(rt.aux, 3 * (first * p.mean(0)).sum())
    assert capacity(10, 4, 2, 1.25) == 7 and capacity(1, 64, 1, 0.1) == 1
    assert capacity(10, 2, 2, 4.0) == 10  # never more slots than tokens: no token could be dropped at 10
    # one slot each: token 1's first choice (expert 1) wins over token 0's second choice, though token 0 came first
    rt = route(torch.tensor([[3.0, 2.0, 0.0], [0.0, 3.0, 2.0]]), 2, 1)
    assert rt.kept.tolist() == [[True, False], [True, True]] and rt.dropped.tolist() == [0, 1, 0]


def test_summary_load_imbalance_dropped_fraction_and_medians():
    c, s = TrainConfig(batch=8, hidden=(16,), dropout=(0.0, 0.0)), ExpertSettings(experts=2)
    def rows(rank: int) -> list[dict]:  # step 1: 3 and 1 tokens, then 2 and 2; one dropped from expert 0
        return [dict(rank=rank, step=t, expert=e, tokens=[3, 1][e] if t == 1 else 2, dropped=int(e == 0))
                for t in (1, 2, 3, 4) for e in (0, 1)]

    def a2a(rank: int) -> list[dict]:
        return [dict(rank=rank, step=t, op=op, seconds=t * (rank + 1) * 0.1, bytes=10, fp32_bytes=40)
                for t in (1, 2, 3, 4) for op in ("dispatch", "combine", "dispatch_grad", "combine_grad")]
    gathered = [(rows(k), a2a(k), [0.5, 1.5]) for k in range(2)]
    out = summarize(c, s, 2, gathered)
    assert out["load_imbalance"] == pytest.approx((6 / 4 + 1 + 1 + 1) / 4) and out["load_imbalance_max"] == 1.5
    assert out["dropped_fraction"] == pytest.approx(8 / 32) and out["tokens_per_expert"] == [9 / 2, 7 / 2]
    # the first two steps are warm-up; the slowest rank's median: rank 1's steps 3, 4
    assert out["dispatch_s"] == pytest.approx(0.7) and out["combine_bytes"] == 80
    assert out["dispatch_bytes_ratio"] == 0.25 and out["aux_loss"] == 1.0 and out["capacity"] == 3


def test_training_on_two_gloo_ranks_reports_experts_and_all_to_alls():
    cfg = TrainConfig(dataset="digits", train_limit=256, test_limit=64, hidden=(32,), dropout=(0.0, 0.0), batch=32,
                      epochs=2.0, evals_per_epoch=2, lr=0.01, codec="dynamic_tree")
    st = ExpertSettings(experts=4, top_k=2, capacity_factor=1.25, combine="bf16", expert_hidden=16)
    res = train_parallel("expert", cfg, 2, st)
    s, ex, a2a = res.summary, res.tables["experts"], res.tables["alltoall"]
    assert s["mode"] == "expert" and s["procs"] == 2 and s["steps"] == 16 and len(res.curve) == 4
    expert = 32 * 16 + 16 + 16 * 32 + 32
    assert s["parameters"] == (64 * 32 + 32) + (32 * 4 + 4) + (32 * 10 + 10) + 4 * expert
    assert s["expert_parameters_per_rank"] == 2 * expert
    assert res.curve.train_loss.iloc[-1] < 0.8 * res.curve.train_loss.iloc[0]  # it learns
    assert s["capacity"] == math.ceil(1.25 * 16 * 2 / 4) and s["dispatch_codec"] == "dynamic_tree"
    # every rank routed its 16 tokens to 2 experts each, every step
    assert len(ex) == 2 * 16 * 4 and (ex.groupby(["rank", "step"]).tokens.sum() == 32).all()
    assert (ex.dropped <= ex.tokens).all()
    assert s["dropped_fraction"] == pytest.approx(ex.dropped.sum() / ex.tokens.sum())
    assert s["load_imbalance"] >= 1.0 and sum(s["tokens_per_expert"]) == pytest.approx(64)
    assert 0.25 <= s["dispatch_bytes_ratio"] < 0.3 and s["combine_bytes"] * 2 == s["combine_fp32_bytes"]
    assert s["dispatch_s"] > 0 and s["combine_s"] > 0
    assert set(a2a.op) == {"dispatch", "combine", "dispatch_grad", "combine_grad"} and len(a2a) == 2 * 16 * 4
    # the run's bytes: all-to-alls (evaluations' too) and dense gradients; fp32's weight is more
    assert s["bytes"] < s["fp32_bytes"] and a2a.bytes.sum() < s["bytes"]


def _no_ranks(*a, **k):
    raise AssertionError("a rank was started")


@pytest.mark.parametrize("procs,cfg,settings,needle", [
    (2, {}, dict(experts=3), "--experts 3 cannot be split over 2 processes"),
    (4, {}, dict(experts=6), "allowed: a multiple of 4"),
    (2, {}, dict(top_k=5), "--top-k 5 is more than the 4 experts"),
    (2, {}, dict(top_k=0), "--top-k 0"),
    (2, {}, dict(capacity_factor=0.0), "--capacity-factor 0.0"),
    (2, {}, dict(capacity_factor=-1.0), "--capacity-factor -1.0"),
    (2, {}, dict(capacity_factor=float("nan")), "--capacity-factor nan"),
    (2, {}, dict(combine="fp16"), "--combine 'fp16'; allowed: fp32, bf16"),
    (2, {}, dict(expert_hidden=0), "--expert-hidden 0; allowed: an integer 1..65536"),
    (2, {}, dict(experts=10**12), "--experts 1000000000000; allowed: an integer 1..256"),
    (2, {}, dict(experts=2.0), "--experts 2.0"),
    (2, dict(codec="topk"), {}, "cannot carry the tokens dispatched to the experts"),
    (2, dict(codec="powersgd"), {}, "cannot carry the tokens dispatched to the experts"),
    (2, dict(codec="ef:dynamic_tree"), {}, "drop 'ef:'"),
    (2, dict(codec="dynamic_tree", error_feedback=True), {}, "--error-feedback is for gradients"),
    (2, dict(model="cnn"), {}, "--mode expert trains mlp"),
    (1, {}, {}, "runs on at least 2 ranks"),
])
def test_bad_input_is_one_line_before_any_rank_starts(monkeypatch, procs, cfg, settings, needle):
    import lab.comm.launch

    monkeypatch.setattr(lab.comm.launch, "run", _no_ranks)
    with pytest.raises(ValueError) as e:
        train_parallel("expert", TrainConfig(**dict(dict(hidden=(16,), dropout=(0.0, 0.0), batch=8), **cfg)),
                       procs, ExpertSettings(**settings))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_strategy_options_and_the_benchmark_case_is_link_bound():
    strat = get_strategy("expert")
    assert [f.name for f in fields(strat.settings)] == ["experts", "top_k", "capacity_factor", "combine",
                                                        "expert_hidden"]
    assert asdict(strat.make_settings(top_k=2, combine=None)) == asdict(ExpertSettings(top_k=2))
    with pytest.raises(ValueError, match="--microbatches is not an option of --mode expert"):
        strat.make_settings(microbatches=4)
    cfg, st = TrainConfig(**dict(strat.bench["cfg"], workers=2)), ExpertSettings(**strat.bench["settings"])
    cfg.check()
    st.check(cfg, 2)
    assert cfg.codec == "dynamic_tree" and cfg.dataset == "digits" and cfg.batch <= 1348  # digits' training set
    # each rank's fp32 dispatch: half of its [E, C, d] block; at 1 Gbit/s (125 MB/s) >= 40 ms a step, so the
    # link bounds it; 8 bits carry a quarter of it
    C = capacity(cfg.batch // 2, st.experts, st.top_k, st.capacity_factor)
    sent = st.experts * C * cfg.hidden[0] * 4 // 2
    assert sent / 125e6 >= 0.04
