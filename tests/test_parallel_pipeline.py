"""Pipeline parallelism (lab/train/parallelism/pipeline*.py): torch's schedules run by the lab's executor.

With an identity codec and no dropout a step's gradients equal one process's up to fp32 summation order (the
batch's loss is a sum over micro-batches; measured ≤ 1e-8 here, asserted at rtol 1e-5 / atol 1e-7) for every
schedule torch ships, P = 2..4 ranks, several micro-batch counts and 2 data replicas (SimComm), for the MLP,
the small CNN and the tiny GPT; on real Gloo ranks they equal torch's own runtime (PipelineStage + the
schedule's `step`) bit for bit. 8-bit sends weigh a quarter of fp32 (counted); timelines and bubbles are
checked against torch's order and the papers' formulas; bad input is one line before any rank starts."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

import pipeline_ranks
from lab.comm.sim import simulate
from lab.train.parallelism import pipeline as pp
from lab.train.parallelism import torch_pipelining_private as tp
from lab.train.parallelism.pipeline_stages import cut, layers_of, partition

SCHEDULES = ["gpipe", "1f1b", "loopedbfs", "interleaved1f1b", "interleavedzerobubble", "zbvzerobubble", "dualpipev"]


def test_the_schedules_are_the_ones_torch_ships():
    assert pp.schedule_names() == SCHEDULES
    assert [tp.is_multi(n) for n in SCHEDULES] == [False, False, True, True, True, True, True]


def test_the_programs_are_torchs():
    """Multi-stage schedules: what torch's visualizer lists with comms. Single-stage ones (recorded from torch's
    own loop): GPipe's compute order is its `pipeline_order`; 1F1B's runs micro-batch 0 on the last rank first,
    which torch 2.13's `Schedule1F1B.pipeline_order` skips (it lists 1F1 .. 1F4 of 4 micro-batches)."""
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    skip = ("UNSHARD", "RESHARD", "REDUCE_GRAD")
    for name in SCHEDULES[2:]:
        for P, M in [(2, 4), (4, 8)]:
            ours, _ = tp.program(name, P, M, 2)
            theirs = get_schedule_ops(name, P, M, 2, with_comms=True)
            assert [[repr(a) for a in acts] for acts in ours] == \
                [[_short(a) for a in acts if a is not None and a.computation_type.value not in skip] for acts in theirs]
    gpipe, _ = tp.program("gpipe", 3, 5, 1)
    ref = tp.build("gpipe", 3, 5, 1).pipeline_order
    assert [[a for a in acts if a.kind in tp.COMPUTE] for acts in gpipe] == \
        [[tp.Act(a.computation_type.value, a.stage_index, a.microbatch_index) for a in ref[r]
          if a is not None and a.computation_type.value in tp.COMPUTE] for r in range(3)]
    one, _ = tp.program("1f1b", 2, 4, 1)
    assert [f"{a.kind}{a.mb}" for a in one[1] if a.kind in tp.COMPUTE] == \
        ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
    assert [f"{a.computation_type.value}{a.microbatch_index}" for a in tp.build("1f1b", 2, 4, 1).pipeline_order[1]
            if a is not None][:2] == ["F1", "B0"]


def _short(a) -> str:
    if a.sub_actions is not None:
        return repr(tp.Act("OVERLAP_F_B", a.sub_actions[0].stage_index, None,
                           tuple(tp.Act(s.computation_type.value, s.stage_index, s.microbatch_index)
                                 for s in a.sub_actions)))
    return repr(tp.Act(a.computation_type.value, a.stage_index, a.microbatch_index))


def _reference(model, x, y):
    """One process: the batch's mean cross-entropy, its gradients (per parameter, in order)."""
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in model.parameters()]


def _check_equal(results, model_fn, x, y, n_stages):
    ref_model = model_fn()
    ref_loss, _ = _reference(ref_model, x, y)
    stages = cut(ref_model, n_stages, x[:1])
    seen = set()
    for r in results:
        for s, grads in r["grads"].items():
            seen.add(s)
            for g, p in zip(grads, stages.modules[s].parameters(), strict=True):
                torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-7)
    assert seen == set(range(n_stages))
    losses = [r["loss"] for r in results if r["loss"] is not None]
    assert losses and all(math.isclose(v, ref_loss, rel_tol=1e-5) for v in losses)


def _cases():
    for name in SCHEDULES:
        V = 2 if tp.is_multi(name) else 1
        for P in (2, 3, 4):
            for M in (P, 2 * P, 3):
                try:
                    tp.check(name, P, M, V)
                except ValueError:
                    continue
                yield name, P, M


@pytest.mark.parametrize("name", SCHEDULES)
def test_every_schedule_equals_one_process_on_simulated_ranks(name):
    x, y = pipeline_ranks.batch()
    ran = 0
    for n, P, M in _cases():
        if n != name:
            continue
        res = simulate(pipeline_ranks.pipeline_grads, P, pipeline_ranks.mlp, x, y, name, M)
        _check_equal(res, pipeline_ranks.mlp, x, y, len(res[0]["stage_to_rank"]))
        ran += 1
    assert ran >= 3


@pytest.mark.parametrize("name,P,M", [("1f1b", 2, 4), ("interleavedzerobubble", 2, 4), ("dualpipev", 2, 5)])
def test_two_data_replicas_sum_their_gradients_to_the_one_process_step(name, P, M):
    x, y = pipeline_ranks.batch()  # 24 samples: 12 per replica, uneven micro-batches where M = 5
    res = simulate(pipeline_ranks.pipeline_grads, 2 * P, pipeline_ranks.mlp, x, y, name, M, None, 2)
    _check_equal(res, pipeline_ranks.mlp, x, y, len(res[0]["stage_to_rank"]))
    assert [r["stage_to_rank"] for r in res[:P]] == [r["stage_to_rank"] for r in res[P:]]


def test_every_schedule_runs_under_nccls_rules_to_the_one_process_step():
    """SimComm(strict=True): a transfer moves only while both of its ends are posted, each rank's batches one
    after the other (NCCL, lab/comm/base.py); a pattern that would hang on a GPU raises CommError "deadlock". 1F1B
    posting its sends alone deadlocked on every P (each neighbour's send waiting for the other's); batched as
    torch's runtime batches them, every schedule runs, also with 8-bit sends and 2 data replicas, and its gradients
    are the ones the lenient rules give (the same order of blocks: bit for bit) and one process's."""
    x, y = pipeline_ranks.batch()
    ran = set()
    for name in SCHEDULES:
        for P in (2, 3, 4):
            M = 2 * P
            nccl = simulate(pipeline_ranks.pipeline_grads, P, pipeline_ranks.mlp, x, y, name, M, strict=True)
            _check_equal(nccl, pipeline_ranks.mlp, x, y, len(nccl[0]["stage_to_rank"]))
            if P == 2:
                lenient = simulate(pipeline_ranks.pipeline_grads, P, pipeline_ranks.mlp, x, y, name, M)
                for a, b in zip(nccl, lenient, strict=True):
                    assert all(torch.equal(g, h) for s in a["grads"] for g, h in zip(a["grads"][s], b["grads"][s]))
            ran.add((name, P))
    assert len(ran) == 3 * len(SCHEDULES)
    for name, P, M, data, codec in [("1f1b", 2, 4, 2, None), ("1f1b", 3, 5, 1, "dynamic_tree")]:
        nccl = simulate(pipeline_ranks.pipeline_grads, data * P, pipeline_ranks.mlp, x, y, name, M, None, data,
                        codec, strict=True)
        lenient = simulate(pipeline_ranks.pipeline_grads, data * P, pipeline_ranks.mlp, x, y, name, M, None, data,
                           codec)
        for a, b in zip(nccl, lenient, strict=True):
            assert a["wire_bytes"] == b["wire_bytes"] > 0
            assert all(torch.equal(g, h) for s in a["grads"] for g, h in zip(a["grads"][s], b["grads"][s]))


def _gpt():
    from lab.train.gpt import TinyGPT

    torch.manual_seed(3)
    return TinyGPT(vocab=16, context=8, dim=16, layers=2, heads=2)


def _cnn():
    from lab.train.models import SmallCNN

    torch.manual_seed(4)
    return SmallCNN((8, 8), 10, dropout=0.0)


@pytest.mark.parametrize("name,P,M", [("gpipe", 4, 4), ("1f1b", 2, 3), ("zbvzerobubble", 2, 4),
                                      ("interleaved1f1b", 2, 2)])
def test_the_tiny_gpt_pipelined_on_random_tokens_equals_one_process(name, P, M):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 16, (6, 8), generator=g), torch.randint(0, 16, (6, 8), generator=g)
    assert [type(m).__name__ for m in layers_of(_gpt())] == ["_Embed", "Block", "Block", "_Head"]
    res = simulate(pipeline_ranks.pipeline_grads, P, _gpt, x, y, name, M)
    _check_equal(res, _gpt, x, y, len(res[0]["stage_to_rank"]))


@pytest.mark.parametrize("name,P,M", [("1f1b", 3, 3), ("gpipe", 2, 4)])
def test_the_small_cnn_pipelined_equals_one_process(name, P, M):
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(8, 64, generator=g), torch.randint(0, 10, (8,), generator=g)
    assert len(layers_of(_cnn())) == 3  # conv block, conv block + flatten, dense
    res = simulate(pipeline_ranks.pipeline_grads, P, _cnn, x, y, name, M)
    _check_equal(res, _cnn, x, y, P)


def test_stages_are_balanced_by_flops_and_contiguous():
    assert partition([1, 1, 1, 1], 2) == [(0, 2), (2, 4)]
    assert partition([10, 1, 1, 1, 1, 1, 1], 2) == [(0, 1), (1, 7)]
    assert partition([5, 5, 1, 9], 3) == [(0, 1), (1, 3), (3, 4)]
    with pytest.raises(ValueError, match="cannot cut 2 layers into 3 stages"):
        partition([1, 1], 3)
    model = pipeline_ranks.mlp(width=8, depth=3, features=64)  # 64->8->8->8->5: the first layer is the heaviest
    st = cut(model, 2, torch.zeros(1, 64))
    assert st.spans == [(0, 1), (1, 4)] and st.shapes == [(8,), (5,)]
    assert st.flops[0] == 2 * 64 * 8 and st.flops[1] == 2 * (8 * 8 * 2 + 8 * 5)


def test_8_bit_sends_weigh_a_quarter_of_fp32_and_still_train_the_same_way():
    x, y = pipeline_ranks.batch(n=32, features=64)
    wide = lambda: pipeline_ranks.mlp(width=256, depth=3, features=64)  # noqa: E731
    exact = simulate(pipeline_ranks.pipeline_grads, 2, wide, x, y, "1f1b", 4)
    coded = simulate(pipeline_ranks.pipeline_grads, 2, wide, x, y, "1f1b", 4, None, 1, "dynamic_tree")
    # what stage 0 ([linear 64->256, relu], [linear 256->256, relu]) keeps per micro-batch of 8: its input and
    # the two relu outputs, fp32; 1F1B holds 2 micro-batches there
    assert exact[0]["saved"] == {0: 4 * 8 * (64 + 256 + 256)} and exact[0]["held"] == {0: 2}
    for e, c in zip(exact, coded):
        # fp32: each message is its tensor; 8-bit: a byte per value and a 4-byte scale per block
        assert e["wire_bytes"] == e["fp32_bytes"] > 0
        assert 0.25 <= c["wire_bytes"] / c["fp32_bytes"] < 0.26
        assert c["fp32_bytes"] == e["fp32_bytes"]
        sends = [r for r in c["rows"] if r["kind"].startswith("SEND")]
        assert sum(r["bytes"] for r in sends) == c["wire_bytes"]
        for s in e["grads"]:
            for ge, gc in zip(e["grads"][s], c["grads"][s]):
                assert not torch.equal(ge, gc)  # the codec ran on what was sent
                assert F.cosine_similarity(ge.flatten(), gc.flatten(), dim=0) > 0.99


def test_a_step_records_every_action_and_the_activations_held():
    x, y = pipeline_ranks.batch()
    res = simulate(pipeline_ranks.pipeline_grads, 2, pipeline_ranks.mlp, x, y, "1f1b", 4)
    for r, got in enumerate(res):
        kinds = [row["kind"] for row in got["rows"]]
        assert kinds.count("F") == kinds.count("B") == 4
        assert kinds.count("SEND_F" if r == 0 else "RECV_F") == 4 and kinds.count("SEND_B" if r else "RECV_B") == 4
        assert all(row["end"] >= row["start"] for row in got["rows"])
        # 1F1B keeps P - stage micro-batches in flight (Narayanan et al. 2021 §2.2.1)
        assert got["held"] == {r: 2 - r}
        assert got["saved"][r] > 0
    # the zero-bubble split: every micro-batch's backward is an I then a W on each stage
    res = simulate(pipeline_ranks.pipeline_grads, 2, pipeline_ranks.mlp, x, y, "zbvzerobubble", 4)
    for got in res:
        kinds = [row["kind"] for row in got["rows"]]
        assert kinds.count("I") == kinds.count("W") == 8 and kinds.count("F") == 8


def test_planned_timelines_give_the_papers_bubbles():
    for name, P, M in [("gpipe", 4, 8), ("1f1b", 4, 4), ("interleaved1f1b", 4, 8), ("loopedbfs", 2, 4)]:
        df = pp.planned_timeline(name, P, M)
        assert list(df.columns) == ["rank", "stage", "microbatch", "kind", "start", "end"]
        assert math.isclose(pp.bubble_of(df), pp.bubble_formula(name, P, M), rel_tol=1e-12)
    # GPipe, P = 4, M = 8: (P-1)/(M+P-1); interleaved with V = 2: (P-1)/(V*M+P-1)
    assert math.isclose(pp.bubble_formula("gpipe", 4, 8), 3 / 11)
    assert math.isclose(pp.bubble_formula("interleaved1f1b", 4, 8, 2), 3 / 19)
    # ZB-H1 (Qi et al. 2024) in chunks: idle (P-1)(F + B_input - W) = 3 units over 3 + V*M*(F+B) = 3 + 24
    assert math.isclose(pp.bubble_formula("interleavedzerobubble", 4, 4), 3 / 27)
    assert math.isclose(pp.bubble_of(pp.planned_timeline("interleavedzerobubble", 4, 4)), 3 / 27)
    # DualPipe: (P-1)(F&B + B - 3W) = 3 * (3 + 2 - 3) = 6 over 6 + 2M(F+B) = 48 + 6
    assert math.isclose(pp.bubble_formula("dualpipev", 4, 8), 6 / 54)
    # ZB-V is zero-bubble when F = B_input = W; torch's order idles in its warm-up, (P-1) forwards
    assert pp.bubble_formula("zbvzerobubble", 4, 8) == 0.0
    assert math.isclose(pp.bubble_of(pp.planned_timeline("zbvzerobubble", 4, 8)), 3 / 51)
    # which schedule idles least at P = 4, M = 4 (the page's question): the zero-bubble interleaved one
    least = min((pp.bubble_of(pp.planned_timeline(n, 4, 4)), n) for n in SCHEDULES if n != "dualpipev")
    assert least[1] == "interleavedzerobubble"
    # a slower backward stretches a planned block, not the order
    df = pp.planned_timeline("gpipe", 2, 2, times={"F": 1.0, "B": 3.0})
    assert df.end.max() == 2 * 1 + 1 + 2 * 3 + 3


def test_bad_schedule_settings_are_one_line_with_what_is_allowed():
    from lab.train.parallelism.pipeline_plan import check_schedule

    cases = [(("nonsense", 2, 4, None), "torch's schedules: gpipe, 1f1b, loopedbfs"),
             (("1f1b", 4, 2, None), "cannot run --microbatches 2 (torch: Number of microbatches (2) must be greater "
                                    "than or equal to the number of stages (4).); allowed e.g.: 4, 5"),
             (("interleaved1f1b", 2, 5, None), "allowed e.g.: 1, 2, 3, 4, 6, 8"),
             (("dualpipev", 2, 3, None), "at least as many microbatches as stages"),
             (("gpipe", 2, 4, 2), "runs one stage per rank; got --stages-per-rank 2"),
             (("zbvzerobubble", 2, 4, 3), "exactly 2 stages per rank"),
             (("loopedbfs", 2, 4, 1), "several stages per rank"),
             (("gpipe", 2, 0, None), "--microbatches 0; allowed: an int in 1..4096"),
             (("gpipe", 2, 10**9, None), "--microbatches 1000000000; allowed: an int in 1..4096"),
             (("interleaved1f1b", 2, 4, 10**9), "--stages-per-rank 1000000000; allowed: an int in 1..64")]
    for args, says in cases:
        with pytest.raises(ValueError) as e:
            check_schedule(*args)
        assert says in str(e.value) and "\n" not in str(e.value), (args, str(e.value))


@pytest.mark.parametrize("cfg,settings,procs,says", [
    (dict(hidden=(8,), dropout=(0.1, 0.1)), dict(schedule="1f1b"), 4,
     "4 stages, more than the 2 layers of --model mlp"),
    (dict(model="cnn"), dict(schedule="interleaved1f1b"), 2, "4 stages, more than the 3 layers of --model cnn"),
    (dict(hidden=(16,) * 3, dropout=(0.1,) * 4), dict(microbatches=2), 4, "allowed e.g.: 4, 5"),
    (dict(codec="topk"), dict(), 2, "cannot carry activations and their gradients between stages"),
    (dict(codec="ef:dynamic_tree"), dict(), 2, "drop 'ef:'"),
    (dict(codec="dynamic_tree", error_feedback=True), dict(), 2, "drop --error-feedback"),
    (dict(batch=6), dict(microbatches=4, data=2), 4, "leaves 3 samples per pipeline, fewer than --microbatches 4"),
    (dict(), dict(data=3), 4, "--data 3 does not divide 4 processes"),
    (dict(), dict(data=2), 2, "needs at least 2 pipeline ranks"),
    (dict(), dict(schedule="zb"), 2, "unknown --schedule 'zb'"),
])
def test_bad_input_is_one_line_and_starts_no_rank(monkeypatch, cfg, settings, procs, says):
    import lab.comm.launch
    from lab.train.parallelism import get_strategy, train_parallel
    from lab.train.run import TrainConfig

    monkeypatch.setattr(lab.comm.launch, "run", lambda *a, **k: pytest.fail("a rank was started"))
    s = get_strategy("pipeline").make_settings(**settings)
    with pytest.raises(ValueError) as e:
        train_parallel("pipeline", TrainConfig(**{"hidden": (16, 16), **cfg}), procs, s)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_every_schedule_equals_torchs_own_runtime_on_gloo_ranks():
    from lab.comm.launch import run

    res = run(pipeline_ranks.torch_runtime_all, 2, SCHEDULES, timeout=120)
    for r in res:
        assert set(r) == set(SCHEDULES)
        for name, got in r.items():
            assert got["ours"] and all(torch.equal(a, b) for a, b in zip(got["ours"], got["torch"], strict=True)), name


def test_a_data_x_pipeline_mesh_of_four_gloo_ranks_steps_as_one_process():
    from lab.comm.launch import run

    res = run(pipeline_ranks.train_one_step, 4, 2, "1f1b", timeout=120)
    ref = pipeline_ranks.mlp()
    x, y = pipeline_ranks.batch()
    _check_equal(res, pipeline_ranks.mlp, x, y, 2)
    F.cross_entropy(ref(x), y).backward()
    torch.optim.SGD(ref.parameters(), lr=0.1).step()
    stages = cut(ref, 2, x[:1])
    for r in res:
        for s, params in r["params"].items():
            for a, b in zip(params, stages.modules[s].parameters(), strict=True):
                torch.testing.assert_close(a, b.detach(), rtol=1e-5, atol=1e-7)
    assert res[0]["params"].keys() == res[2]["params"].keys() == {0}  # ranks 0 and 2: the two replicas' stage 0


def test_pipeline_training_on_two_gloo_ranks_with_8_bit_sends(tmp_path):
    from lab.comm.timesplit import load_traces
    from lab.train.parallelism import get_strategy, train_parallel
    from lab.train.run import TrainConfig

    cfg = TrainConfig(train_limit=256, hidden=(32, 32), dropout=(0.0, 0.0, 0.0), batch=32, epochs=1.0,
                      evals_per_epoch=2, lr=0.01, codec="dynamic_tree")
    r = train_parallel("pipeline", cfg, 2, get_strategy("pipeline").make_settings(schedule="1f1b", microbatches=4),
                       trace=str(tmp_path))
    traces = load_traces(tmp_path)  # the traced steps' Chrome traces, one per rank, with the pipeline's ranges
    assert sorted(traces) == [0, 1]
    for t in traces.values():
        assert {"forward", "backward", "optimizer", "encode", "decode"} <= {e.get("name") for e in t["traceEvents"]}
    s = r.summary
    assert s["mode"] == "pipeline" and s["steps"] == 8 and len(r.curve) == 2
    assert r.curve.train_loss.iloc[-1] < 2.3 and r.curve.test_error.iloc[-1] < 90  # it learns (10 classes)
    assert 0.25 <= s["bytes_ratio"] < 0.3  # 8-bit activations and gradients, plus fp32 losses
    assert (s["schedule"], s["microbatches"], s["stages_per_rank"], s["stage_to_rank"]) == ("1f1b", 4, 1, [0, 1])
    assert 0 <= s["bubble_measured"] <= 1 and s["bubble_formula"] == pytest.approx(0.2)
    assert s["bubble_planned"] == pytest.approx(0.2)  # 1F1B's order is its formula whatever F and B take
    tl = r.tables["timeline"]
    assert list(tl.columns) == ["rank", "step", "stage", "microbatch", "kind", "start_s", "end_s", "bytes"]
    assert sorted(tl.step.unique()) == [3, 4, 5, 6, 7] and sorted(tl["rank"].unique()) == [0, 1]
    one = tl[tl.step == 3]
    assert sorted(one.kind.unique()) == ["B", "F", "RECV_B", "RECV_F", "SEND_B", "SEND_F"]
    assert (one.start_s >= 0).all() and (one.end_s >= one.start_s).all()
    mem = r.tables["memory"]
    assert list(mem.microbatches_held) == [2, 1]
    assert (mem.peak_activation_bytes == mem.activation_bytes_per_microbatch * mem.microbatches_held).all()


def test_a_forward_of_dualpipevs_overlapped_pair_is_sent_when_it_ends_and_every_pair_keeps_its_order():
    from lab.train.parallelism.pipeline_exec import _sends_to_move

    moved_by = {}
    for name in SCHEDULES:
        V = 2 if tp.is_multi(name) else 1
        for P in (2, 3, 4):
            for M in (2 * P, 8):
                try:
                    program, s2r = tp.program(name, P, M, V)
                except ValueError:
                    continue
                for acts in program:
                    flat = [b for a in acts for b in (a.sub if a.kind == tp.OVERLAP else (a,))]
                    moves = _sends_to_move(flat, s2r)
                    moved_by[name] = moved_by.get(name, 0) + len(moves)
                    for i, j in moves.items():
                        a, b = flat[i], flat[j]
                        assert (b.kind, b.stage, b.mb) == ("SEND_F" if a.kind == "F" else "SEND_B", a.stage, a.mb)
                        dst = s2r[b.stage + 1 if b.kind == "SEND_F" else b.stage - 1]
                        assert not [c for c in flat[i + 1:j] if c.kind in ("SEND_F", "SEND_B")
                                    and s2r[c.stage + 1 if c.kind == "SEND_F" else c.stage - 1] == dst]
    # only DualPipeV lists a send after a later block (its overlapped forward-backward pairs)
    assert moved_by["dualpipev"] > 0 and not any(n for k, n in moved_by.items() if k != "dualpipev")


def test_summary_takes_I_and_W_from_split_backwards_and_replays_a_step_with_its_own_block_times():
    from types import SimpleNamespace

    from lab.train.parallelism.pipeline_plan import bubble_of, planned_timeline

    stages = SimpleNamespace(spans=[(0, 1)] * 4, flops=[1.0] * 4)
    # a step laid out exactly as planned (unit times): measured, planned and replayed bubbles agree
    plan = planned_timeline("interleaved1f1b", 2, 4, 2).assign(step=1)
    s = pp.summarise(plan, "interleaved1f1b", 2, 4, 2, 1, stages, [0, 1, 0, 1])
    assert s["bubble_measured"] == pytest.approx(bubble_of(plan)) == pytest.approx(s["bubble_planned"])
    assert s["bubble_replayed"] == pytest.approx(s["bubble_measured"]) and s["bubble_steps"] == [s["bubble_measured"]]
    assert s["idle_wait_s"] == 0 and s["idle_send_s"] == 0
    # the first stage's backward is torch's whole backward in W (its I empty): the formula's I and W come from
    # the stages whose backward is split, here 1 and 1, not the first stage's 0 and 2
    rows = [dict(rank=0, step=1, stage=0, microbatch=m, kind=k, start=0.0, end=d)
            for m in range(3) for k, d in (("I", 0.0), ("W", 2.0))]
    rows += [dict(rank=1, step=1, stage=1, microbatch=m, kind=k, start=0.0, end=1.0) for m in range(2)
             for k in ("F", "I", "W")]
    s = pp.summarise(pd.DataFrame(rows), "zbvzerobubble", 2, 4, 2, 1, stages, [0, 1, 1, 0])
    assert (s["t_i_s"], s["t_w_s"], s["t_f_s"]) == (1.0, 1.0, 1.0)
    assert s["bubble_formula"] == pp.bubble_formula("zbvzerobubble", 2, 4, 2, t_f=1.0, t_b=2.0, t_w=1.0)
