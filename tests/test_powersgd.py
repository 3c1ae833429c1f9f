"""PowerSGD (Vogels et al., NeurIPS 2019) as a codec: the anchor is PyTorch's own
`powerSGD_hook`: the same 2-rank Gloo DDP job with torch's hook and with ours (lab.train.ddp_hook
+ lab.codecs.powersgd) at the same rank, warm-up, min_compression_rate, error feedback and warm
start ends with the same parameters, bit for bit."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lab.codecs import get_codec
from lab.codecs.powersgd import PowerSGD, matrix_shape, orthogonalize, should_compress
from lab.comm import simulate
from lab.comm.allreduce import allreduce


# ------------------------------------------------------------------ rank functions (module level)

def _model() -> nn.Module:
    """An MLP with matrices that compress (64x32, 48x64), one that does not at rank 4 (10x48 at
    rate 2: (10+48)*4*2 > 480) and biases (vectors: never)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))


def _train(which: str, cfg: dict, steps: int) -> dict:
    """`steps` SGD steps of a DDP model (one bucket: torch's hook issues its P and Q all_reduces from
    future callbacks, which Gloo can interleave across buckets differently on each rank) with torch's
    powerSGD_hook (which='torch') or ours (which='lab'); the final parameters and bytes."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    from torch.nn.parallel import DistributedDataParallel

    from lab.train.ddp_hook import CodecHookState, codec_hook

    model = _model()
    ddp = DistributedDataParallel(model)
    if which == "torch":
        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=cfg["rank"],
                                 start_powerSGD_iter=cfg["start"], min_compression_rate=cfg["rate"],
                                 use_error_feedback=cfg["ef"], warm_start=cfg["warm"], random_seed=cfg["seed"])
        ddp.register_comm_hook(state, ps.powerSGD_hook)
    else:
        codec = get_codec("powersgd", rank=cfg["rank"], min_compression_rate=float(cfg["rate"]),
                          error_feedback=cfg["ef"], warm_start=cfg["warm"], seed=cfg["seed"])
        state = CodecHookState.of(codec, model=model, start_iter=cfg["start"], min_numel=0)
        ddp.register_comm_hook(state, codec_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    dist.barrier()
    out = {"params": [p.detach().clone() for p in model.parameters()]}
    if which == "lab":
        out.update(sent=state.bytes_sent, fp32=state.fp32_bytes)
    else:
        out.update(stats=state.compression_stats())
    return out


def ddp_powersgd(comm, configs: dict, steps: int) -> dict:
    """Every config with torch's hook and with ours, in one process group (one start-up)."""
    return {name: {which: _train(which, cfg, steps) for which in ("torch", "lab")} for name, cfg in configs.items()}


# ------------------------------------------------------------------ the anchor

CONFIGS = {
    "rank1 (Gram-Schmidt), error feedback, warm start": dict(rank=1, start=2, rate=2, ef=True, warm=True, seed=0),
    "rank4 (Householder QR), error feedback, warm start": dict(rank=4, start=3, rate=2, ef=True, warm=True, seed=7),
    "rank2, no error feedback, no warm start": dict(rank=2, start=2, rate=1, ef=False, warm=False, seed=3),
}


@pytest.fixture(scope="module")
def anchor_runs() -> list[dict]:
    from lab.comm.launch import run

    return run(ddp_powersgd, 2, CONFIGS, STEPS, timeout=120)


STEPS = 8


@pytest.mark.parametrize("name", list(CONFIGS))
def test_same_ddp_job_as_torchs_powersgd_hook_bit_for_bit(name: str, anchor_runs: list[dict]) -> None:
    """2 Gloo ranks, 8 SGD steps: the parameters after torch's powerSGD_hook and after ours are
    equal bit for bit (tolerance 0). With 2 ranks a sum is a + b whatever the order, g/2 and sum/2
    are exact, and we run torch's own sequence of operations: Q seeds from numpy's RandomState,
    randn per Q in shape-grouped order, the same Gram-Schmidt / linalg.qr and bmm calls, on the
    gradient where it lies in the bucket (a rank-1 M Q is a matrix-vector product whose rounding
    follows M's alignment). At P > 2, ours pre-divides by P (g/P is then inexact): not bit for bit."""
    cfg, start = CONFIGS[name], _model()
    n_params = sum(p.numel() for p in start.parameters())
    for r in range(2):
        ref, ours = anchor_runs[r][name]["torch"], anchor_runs[r][name]["lab"]
        for a, b, p0 in zip(ref["params"], ours["params"], start.parameters()):
            assert not torch.equal(a, p0.detach())  # it trained
            assert torch.equal(a, b), f"{name}: rank {r} differs by {(a - b).abs().max().item():.3g}"
    # bytes: warm-up steps carry every value; then what torch's own stats count, in fp32 ring
    # all_reduce volumes (2(P-1)/P = 1 at P = 2)
    ref, ours = anchor_runs[0][name]["torch"], anchor_runs[0][name]["lab"]
    ratio, before, after = ref["stats"]
    assert before == (STEPS - cfg["start"]) * n_params
    assert ours["sent"] == 4 * (cfg["start"] * n_params + after) and ours["sent"] < ours["fp32"]


# ------------------------------------------------------------------ the codec on one rank and on SimComm

def test_rules_match_torchs_hook() -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

    for n, m, r, rate in [(64, 32, 1, 2), (10, 48, 4, 2), (4, 4, 2, 1), (1, 1000, 4, 2), (100, 100, 50, 2)]:
        assert should_compress(n, m, r, rate) == ps._should_compress(n, m, min(n, m, r), rate)[0]
    assert matrix_shape((5, 3, 3, 2)) == (5, 18) and matrix_shape((7,)) == (7, 1) and matrix_shape(()) == (1, 1)
    assert matrix_shape((10,), cols=4) == (3, 4)
    g = torch.Generator().manual_seed(0)
    for r in (1, 2, 5):
        a = torch.randn(1, 40, r, generator=g)
        b = a.clone()
        orthogonalize(a)
        ps._orthogonalize(b)
        assert torch.equal(a, b)
        torch.testing.assert_close(a[0].T @ a[0], torch.eye(r), atol=1e-5, rtol=0)
    z = torch.zeros(1, 8, 2)
    orthogonalize(z)
    assert torch.equal(z, torch.zeros(1, 8, 2))  # torch's hook leaves NaN here


def test_low_rank_matrix_is_recovered_and_wire_is_n_plus_m_times_r() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 3, generator=g) @ torch.randn(3, 128, generator=g)
    c = PowerSGD(rank=3)
    enc = c.encode(x)
    assert enc.wire_bytes == 4 * (256 + 128) * 3 and enc.meta["compressed"]
    assert 32 * 128 * 256 / (8 * enc.wire_bytes) == pytest.approx(256 * 128 / (384 * 3))
    y = c.decode(enc)
    assert ((y - x).norm() / x.norm()).item() < 1e-4  # rank 3 data, rank 3 approximation
    # a full-rank matrix at rank 1: the error is what one power step leaves, < 1
    w = torch.randn(128, 64, generator=g)
    e1 = (c.decode(PowerSGD(rank=1).encode(w)) - w).norm() / w.norm()
    assert 0.9 < e1.item() < 1.0
    # vectors go uncompressed (torch's (n, 1) view) unless cols= views them as rows
    v = torch.randn(10_000, generator=g)
    assert not PowerSGD(rank=4).encode(v).meta["compressed"] and PowerSGD().encode(v).wire_bytes == 40_000
    enc = PowerSGD(rank=4, cols=100).encode(v)
    assert enc.meta["compressed"] and enc.wire_bytes == 4 * (100 + 100) * 4
    assert torch.isfinite(PowerSGD(rank=4, cols=100).decode(enc)).all()


def test_warm_start_and_error_feedback_on_one_rank() -> None:
    """encode_as runs the stream: warm-started power iteration converges to the top singular
    directions of a fixed matrix; error feedback sends, over steps, everything that came in."""
    g = torch.Generator().manual_seed(2)
    u, _ = torch.linalg.qr(torch.randn(96, 96, generator=g))
    v, _ = torch.linalg.qr(torch.randn(48, 48, generator=g))
    s = torch.tensor([10.0, 5.0] + [0.1] * 46)
    x = (u[:, :48] * s) @ v.T
    best = (x - (u[:, :2] * s[:2]) @ v[:, :2].T).norm() / x.norm()  # Eckart-Young at rank 2
    c = PowerSGD(rank=2, error_feedback=False)
    errs = [((c.decode(c.encode_as(x, "w")) - x).norm() / x.norm()).item() for _ in range(6)]
    assert errs[-1] < 1.01 * best.item() and errs[-1] < errs[0]
    c = PowerSGD(rank=1)
    sent = torch.zeros_like(x)
    for _ in range(20):
        sent += c.decode(c.encode_as(x, "w"))
    torch.testing.assert_close(sent + c.residual("w"), 20 * x, atol=1e-3, rtol=1e-5)


def test_allreduce_on_simcomm_is_the_same_on_every_rank_and_sends_p_and_q() -> None:
    g = torch.Generator().manual_seed(3)
    low = torch.randn(200, 2, generator=g)
    xs = [low @ torch.randn(2, 100, generator=g) for _ in range(4)]
    exact = sum(xs)

    def rank(comm):
        return allreduce(comm, xs[comm.rank], codec="powersgd:rank=4", key="w"), comm.bytes_sent

    outs = simulate(rank, 4)
    assert all(torch.equal(outs[0][0], o) for o, _ in outs)
    assert ((outs[0][0] - exact).norm() / exact.norm()).item() < 1e-4  # rank 8 at most, seen at 4: ... 2 each
    fp32 = simulate(lambda comm: (allreduce(comm, xs[comm.rank], key="w"), comm.bytes_sent)[1], 4)[0]
    assert outs[0][1] / fp32 == pytest.approx((200 + 100) * 4 / (200 * 100), rel=0.01)


def test_bad_modes_and_wrappers_are_clear_errors() -> None:
    x = torch.randn(32, 16)
    for mode in ("gather", "requantize"):
        with pytest.raises(Exception, match="runs its own collective.*use mode='auto'"):
            simulate(lambda comm: allreduce(comm, x, codec="powersgd", mode=mode), 2)
    with pytest.raises(Exception, match="keeps its own error feedback"):
        simulate(lambda comm: allreduce(comm, x, codec="ef:powersgd"), 2)
    for bad in ("powersgd:rank=0", "powersgd:min_compression_rate=-1", "powersgd:cols=0"):
        with pytest.raises(ValueError, match="allowed"):
            get_codec(bad)
    with pytest.raises(ValueError, match="non-finite"):
        PowerSGD().encode(torch.tensor([[1.0, float("nan")]] * 8))


def test_start_iter_sends_uncompressed_first() -> None:
    x = torch.randn(64, 64)
    c = PowerSGD(rank=1, start_iter=2)
    assert [c.encode_as(x, "w").meta["compressed"] for _ in range(3)] == [False, False, True]
    assert c.residual("w") is not None and math.isfinite(float(c.residual("w").norm()))


# ------------------------------------------------------------------ compression it really achieves

# (model, parameter shapes, rank) -> fp32 values on the wire per step / fp32 values of the model
MODELS = {
    "paper MLP 784-1024-1024-10": [(1024, 784), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)],
    "small CNN on 28x28": [(16, 1, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 1568), (10,)],
}
RATIOS = {  # what the collective moved, measured below on SimComm (docs/formats.md quotes these)
    ("paper MLP 784-1024-1024-10", 1): 6948 / 1863690, ("paper MLP 784-1024-1024-10", 4): 21618 / 1863690,
    ("small CNN on 28x28", 1): 1837 / 20490, ("small CNN on 28x28", 4): 7218 / 20490,
}


@pytest.mark.parametrize("model, rank", list(RATIOS))
def test_compression_ratio_measured_on_the_wire(model: str, rank: int) -> None:
    """Two SimComm ranks allreduce every parameter's gradient (ring): bytes sent with powersgd over
    bytes sent in fp32 is the ratio of values: rank-r P and Q of the matrices that compress, and the
    vectors (and, on the CNN at rank 4, the 16x9 first convolution) uncompressed."""
    shapes = MODELS[model]
    g = torch.Generator().manual_seed(0)
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(2)]

    def rank_fn(codec):
        def fn(comm):
            for i, t in enumerate(grads[comm.rank]):
                allreduce(comm, t, codec=codec, key=f"p{i}")
            return comm.bytes_sent
        return fn

    fp32 = simulate(rank_fn(None), 2)[0]
    sent = simulate(rank_fn(f"powersgd:rank={rank}"), 2)[0]
    assert sent / fp32 == pytest.approx(RATIOS[(model, rank)], rel=1e-9)
    c = PowerSGD(rank=rank)
    assert sum(sum(c.wire_values(s)) for s in shapes) / sum(math.prod(s) for s in shapes) == \
        pytest.approx(RATIOS[(model, rank)])


# ------------------------------------------------------------------ the planner

def test_planner_advice_has_wire_bytes_from_the_matrix_shapes() -> None:
    from lab.plan import codec_advice, get_model

    cands = ("none", "dynamic_tree", "mxfp8_e4m3", "nvfp4", "powersgd:rank=4")
    df = codec_advice("alexnet", 16, device="h100", link="eth10g", candidates=cands).set_index("layer")
    fc6 = get_model("alexnet").layers[5]
    assert fc6.matrices == ((4096, 9216),) and fc6.params == 4096 * 9216 + 4096
    assert df.loc["fc6", "none_MB"] == pytest.approx(4 * fc6.params / 1e6)
    assert df.loc["fc6", "powersgd:rank=4_MB"] == pytest.approx(4 * ((4096 + 9216) * 4 + 4096) / 1e6)
    assert df.loc["fc6", "mxfp8_e4m3_MB"] == pytest.approx(8.25 / 8 * fc6.params / 1e6, rel=1e-3)
    assert df.loc["fc6", "nvfp4_MB"] == pytest.approx(4.5 / 8 * fc6.params / 1e6, rel=1e-3)
    # fc6 (38 M values over 10 GbE): the low-rank sums win; conv1 (35 K values): three allreduces'
    # latency and the kernels cost more than they save
    assert df.loc["fc6", "best"] == "powersgd:rank=4"
    assert df.loc["conv1", "powersgd:rank=4_ms"] > df.loc["conv1", "none_ms"]
    for c in cands:
        assert (df[f"{c}_ms"] > 0).all() and (df[f"{c}_MB"] > 0).all()
    conv = get_model("alexnet").layers[1]  # 5x5, two groups: torch's weight (256, 48, 5, 5)
    assert conv.matrices == ((256, 48 * 25),)


def test_planner_work_model_counts_three_allreduces_and_the_compressed_values() -> None:
    from lab.comm import cost
    from lab.plan import get_device, wire_codec
    from lab.plan.links import resolve_link
    from lab.plan.wire import allreduce_seconds, phased_values

    c, dev, lk = wire_codec("powersgd:rank=2"), get_device("v100"), resolve_link("eth10g")
    assert c.mode == "phased" and c.enc_traffic == 40.0 and c.dec_traffic == 4.0
    mats = ((1000, 500),)
    plain, p, q, squeezed = phased_values(c, 500_000 + 1000, mats)
    assert (plain, p, q, squeezed) == (1000, 2000, 1000, 500_000)
    t = allreduce_seconds(501_000, 8, lk, "ring", c, dev, mats)
    comm = sum(cost.allreduce_time("ring", 8, 4.0 * v, lk) for v in (plain, p, q))
    work = 500_000 * 44 / (dev.memory_GBps * 1e9) + (c.enc_kernels + c.dec_kernels) * dev.launch_us * 1e-6
    assert t == pytest.approx(comm + work)
    # no known matrices: a vector to PowerSGD, one fp32 allreduce
    assert allreduce_seconds(10_000, 8, lk, "ring", c, dev) == pytest.approx(cost.allreduce_time("ring", 8, 4e4, lk))


# ------------------------------------------------------------------ every CLI path, tiny runs

def _cli(args: list[str]) -> dict:
    import json

    from typer.testing import CliRunner

    from lab.cli import app

    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


def _cli_error(args: list[str]) -> str:
    from typer.testing import CliRunner

    from lab.cli import app

    r = CliRunner().invoke(app, args)
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    return " ".join(r.output.split())


NEW = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8", "nvfp4", "powersgd:rank=2")


def test_cli_scale_takes_the_new_formats() -> None:
    args = ["scale", "--algorithm", "ring", "--ranks", "2", "--values", "256"]
    for c in (*NEW, "powersgd:rank=2,cols=16"):
        args += ["--codec", c]
    rows = _cli(args)["rows"]
    modes = {r["codec"]: r["mode"] for r in rows}
    assert len(rows) == len(NEW) + 1 and modes["nvfp4"] == "requantize"
    psgd = [r for r in rows if r["codec"].startswith("powersgd")]
    assert {r["mode"] for r in psgd} == {"phased"}
    vec = next(r for r in psgd if "vectors uncompressed" in r["codec"])
    low = next(r for r in psgd if "cols=16" in r["codec"])
    # summed over the 2 ranks: the fp32 vector (ring: 4 bytes a value per rank at P = 2), or P and Q
    # of a 16x16 view at rank 2
    assert vec["wire_bytes"] == 2 * 4 * 256 and low["wire_bytes"] == 2 * 4 * (16 + 16) * 2
    msg = _cli_error(["scale", "--codec", "powersgd", "--mode", "gather", "--ranks", "2", "--values", "64"])
    assert "runs its own collective" in msg and "mode='auto'" in msg


def test_cli_bench_compressed_takes_the_new_formats() -> None:
    out = _cli(["bench", "compressed", "-p", "2", "--values", "4K", "--target-s", "0.01",
                "--codecs", "mxfp8_e4m3,mxfp4_e2m1,nvfp4,powersgd:cols=64"])
    rows = {r["codec"]: r for r in out["rows"]}
    wire = {c: r["wire_bytes_rank0"] for c, r in rows.items()}
    assert wire["mxfp4_e2m1"] < wire["nvfp4"] < wire["mxfp8_e4m3"] < wire["fp32"]
    psgd = rows["powersgd(rank=1, cols=64)"]
    assert psgd["mode"] == "phased" and psgd["wire_bytes_rank0"] == 4 * (64 + 64)  # P and Q of a 64x64 view


def test_cli_train_sim_and_ddp_take_the_new_formats() -> None:
    base = ["train", "--hidden", "32", "--dropout", "0,0", "--epochs", "0.2", "--train-limit", "256", "--evals", "1"]
    for c in ("mxfp6_e2m3", "nvfp4", "powersgd:rank=2"):
        s = _cli([*base, "--codec", c])["summary"]
        assert s["label"] == c and s["bytes"] > 0 and math.isfinite(s["final_test_error"])
    ddp = [*base, "--mode", "ddp", "--epochs", "1", "--batch", "64"]  # 4 steps: 2 of the hook's fp32 warm-up
    for c in ("mxint8", "powersgd:rank=4"):
        s = _cli([*ddp, "--codec", c])["summary"]
        assert s["compressed_buckets"] > 0 and 0 < s["bytes"] < s["fp32_allreduce_bytes"], (c, s)
        assert math.isfinite(s["final_test_error"])
        if c.startswith("powersgd"):  # 64-32-10: the 32x64 weight as rank-4 P and Q (384 values), the
            # rest (32 + 320 + 10 values) in fp32: 746 of 2410 values once the hook's warm-up is over
            assert s["bytes_ratio_compressed"] == pytest.approx(746 / 2410, rel=0.01)
    assert "keeps its own error feedback" in _cli_error([*base, "--codec", "powersgd", "--error-feedback"])
    assert "runs its own collective" in _cli_error([*base, "--codec", "powersgd", "--scheme", "paper"])
    assert "model parallelism sends activations" in _cli_error([*base, "--codec", "powersgd", "--parallel", "model",
                                                               "--workers", "2"])


def test_cli_errors_says_vectors_go_uncompressed_and_cols_views_them_as_a_matrix() -> None:
    rows = _cli(["errors", "--codec", "powersgd:rank=4", "--codec", "powersgd:rank=4,cols=100",
                 "--dist", "normal(0,1)", "--samples", "10000"])["rows"]
    vec, mat = rows
    assert "vectors uncompressed" in vec["codec"] and vec["bits_per_value"] == 32 and vec["mae"] == 0
    assert mat["bits_per_value"] == pytest.approx(32 * (100 + 100) * 4 / 10000)
    assert 0.5 < mat["rmse"] < 1.0  # rank 4 of i.i.d. noise keeps little of it: PowerSGD is for gradients


def test_error_feedback_over_ranks_loses_nothing() -> None:
    """4 SimComm ranks, one codec each, 6 steps of a 96x40 gradient and a 40-vector: the sums the
    collective returned plus every rank's residual equal the exact sums (the residual is each
    rank's share, M - sum/ranks)."""
    P, steps = 4, 6
    g = torch.Generator().manual_seed(5)
    xs = [[(torch.randn(96, 3, generator=g) @ torch.randn(3, 40, generator=g) + 0.1 * torch.randn(96, 40, generator=g),
            torch.randn(40, generator=g)) for _ in range(P)] for _ in range(steps)]
    codecs = [PowerSGD(rank=2, seed=11) for _ in range(P)]

    def rank(comm):
        c, got = codecs[comm.rank], []
        for t in range(steps):
            w, b = xs[t][comm.rank]
            got.append((allreduce(comm, w, codec=c, key="w"), allreduce(comm, b, codec=c, key="b")))
        return got

    outs = simulate(rank, P)
    assert all(torch.equal(outs[0][t][0], o[t][0]) for o in outs for t in range(steps))
    for j, key in enumerate(("w", "b")):
        returned = sum(outs[0][t][j] for t in range(steps))
        exact = sum(xs[t][i][j] for t in range(steps) for i in range(P))
        residuals = sum(c.residual(key) for c in codecs)
        torch.testing.assert_close(returned + residuals, exact, atol=1e-4, rtol=1e-5)
    exact0 = sum(xs[0][i][0] for i in range(P))  # rank 12 (+ noise) seen at rank 2: most of it is deferred
    assert 0.5 < ((outs[0][0][0] - exact0).norm() / exact0.norm()).item() < 1.0
