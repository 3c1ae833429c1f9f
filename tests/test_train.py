"""Training lab: loaders, models, simulated data/model parallelism, error feedback, consistency
models, the DDP hook on real Gloo processes, and the §3.4 reproduction in smoke mode."""
from __future__ import annotations

import copy
import math
import json

import pytest
import torch
from torch import nn

from lab.comm import CommError
from lab.train.consistency import Consistency
from lab.data.images import DataError, load_dataset, load_idx_dir, read_idx, write_idx
from lab.train.data_parallel import GradientExchange, Workers, roundtrip, sum_gradients
from lab.train.model_parallel import ModelParallelMLP
from lab.train.models import MLP, make_optimizer
from lab.train.run import TrainConfig, train

import train_ranks as R


# ---------------------------------------------------------------- loaders

def _mnist_dir(d, n_train=20, n_test=8, gz=True):
    g = torch.Generator().manual_seed(0)
    sfx = ".gz" if gz else ""
    for split, n in (("train", n_train), ("t10k", n_test)):
        write_idx(d / f"{split}-images-idx3-ubyte{sfx}", torch.randint(0, 256, (n, 5, 4), dtype=torch.uint8, generator=g))
        write_idx(d / f"{split}-labels-idx1-ubyte{sfx}", torch.arange(n, dtype=torch.uint8) % 3)
    return d


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.float32, torch.float64])
def test_idx_round_trip_big_endian(tmp_path, dtype):
    t = (torch.arange(24) * 7 - 50).to(dtype).reshape(2, 3, 4) if dtype != torch.uint8 else \
        torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4)
    p = write_idx(tmp_path / "x.idx", t)
    raw = p.read_bytes()
    assert raw[:4] == bytes([0, 0, {torch.uint8: 8, torch.int16: 0x0B, torch.int32: 0x0C, torch.float32: 0x0D,
                                    torch.float64: 0x0E}[dtype], 3])
    assert raw[4:8] == (2).to_bytes(4, "big")
    if dtype == torch.int32:  # big-endian payload: the first value -50 as 4 bytes
        assert raw[16:20] == (-50).to_bytes(4, "big", signed=True)
    assert torch.equal(read_idx(p), t)


def test_mnist_directory_loads_gzipped_or_raw(tmp_path):
    for gz in (True, False):
        d = tmp_path / str(gz)
        d.mkdir()
        ds = load_idx_dir(_mnist_dir(d, gz=gz))
        assert ds.train_x.shape == (20, 20) and ds.test_x.shape == (8, 20)
        assert ds.train_x.dtype == torch.float32 and 0 <= ds.train_x.min() and ds.train_x.max() <= 1
        assert ds.classes == 3 and ds.image_shape == (5, 4)
        assert ds.train_y.tolist() == [i % 3 for i in range(20)]
    same = load_dataset("mnist", path=tmp_path / "True")
    assert torch.equal(same.train_x, load_idx_dir(tmp_path / "True").train_x)


def test_loader_errors_name_the_path_and_what_was_expected(tmp_path):
    d = _mnist_dir(tmp_path)
    (d / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte\[\.gz\]"):
        load_idx_dir(d)
    bad = tmp_path / "bad.idx"
    bad.write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(DataError, match=r"bad\.idx is not an IDX file: expected the magic bytes"):
        read_idx(bad)
    t = write_idx(tmp_path / "short.idx", torch.zeros(10, 3, dtype=torch.uint8))
    t.write_bytes(t.read_bytes()[:-5])
    with pytest.raises(DataError, match=r"short\.idx: IDX shape \(10, 3\) needs 42 bytes, the file has 37 \(truncated\)"):
        read_idx(t)
    g = tmp_path / "gz.idx.gz"
    g.write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(DataError, match="cannot read IDX file"):
        read_idx(g)
    with pytest.raises(DataError, match="unknown data set 'cifar'; known: auto, mnist, fashion-mnist, digits"):
        load_dataset("cifar")
    with pytest.raises(DataError, match="no mnist IDX files found; looked in: " + str(tmp_path / "empty")):
        (tmp_path / "empty").mkdir()
        load_dataset("mnist", path=tmp_path / "empty")
    with pytest.raises(DataError, match="is not a directory"):
        load_dataset("auto", path=tmp_path / "missing")


def test_mismatched_image_and_label_counts(tmp_path):
    d = _mnist_dir(tmp_path)
    write_idx(d / "train-labels-idx1-ubyte.gz", torch.zeros(19, dtype=torch.uint8))
    with pytest.raises(DataError, match="20 train images but labels of shape \\(19,\\)"):
        load_idx_dir(d)


def test_debian_fashion_mnist_is_found_under_the_system_root(tmp_path, monkeypatch):
    """$PARALAB_SYSTEM_DATA_ROOT moves Debian's dataset-fashion-mnist location: empty root, no
    Fashion-MNIST ('auto' falls back to digits); a root holding it, found there."""
    from lab.data.system import ENV_ROOT

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user caches either
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "root"
    monkeypatch.setenv(ENV_ROOT, str(root))
    with pytest.raises(DataError, match=f"{root}/usr/share/datasets/fashion-mnist.*apt install dataset-fashion-mnist"):
        load_dataset("fashion-mnist")
    assert load_dataset("auto").name == "digits"
    d = root / "usr" / "share" / "datasets" / "fashion-mnist"
    d.mkdir(parents=True)
    _mnist_dir(d)
    ds = load_dataset("auto")
    assert ds.name == "fashion-mnist" and ds.train_x.shape == (20, 20)


def test_digits_is_the_instant_default_and_seeded():
    a, b = load_dataset("digits", seed=1), load_dataset("digits", seed=1)
    assert a.train_x.shape[1] == 64 and len(a.train_y) + len(a.test_y) == 1797
    assert torch.equal(a.test_y, b.test_y)
    assert not torch.equal(a.test_y, load_dataset("digits", seed=2).test_y)


def test_the_digits_are_scikit_learn_s_without_importing_it():
    """digits_table() reads the file scikit-learn ships the digits in: the same arrays as load_digits(), and a
    process that loads them (a rank that trains on them) imports neither scikit-learn nor SciPy (~2 core-s).
    (One fresh process checks both, so this test's worker does not import scikit-learn either.)"""
    import json
    import subprocess
    import sys

    code = """if True:
        import json, sys
        import numpy as np
        from lab.data import load_dataset
        from lab.data.images import digits_table
        load_dataset("digits")
        imported = sorted(m for m in ("sklearn", "scipy") if m in sys.modules)
        data, target = digits_table()
        from sklearn.datasets import load_digits
        bunch = load_digits()
        same = (data.dtype == bunch.data.dtype and np.array_equal(data, bunch.data)
                and target.dtype == bunch.target.dtype and np.array_equal(target, bunch.target))
        print(json.dumps([imported, bool(same), data.shape]))"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [[], True, [1797, 64]], out


# ---------------------------------------------------------------- models and bad input

def test_paper_mlp_shape_and_bad_settings():
    m = MLP(784, 10)
    assert [l.weight.shape for l in m.dense] == [(1024, 784), (1024, 1024), (10, 1024)]
    assert [d.p for d in m if isinstance(d, nn.Dropout)] == [0.2, 0.3, 0.3]
    with pytest.raises(ValueError, match="dropout rate 1.0; allowed: 0 <= p < 1"):
        MLP(784, 10, dropout=(0.2, 1.0, 0.3))
    with pytest.raises(ValueError, match="learning rate 0; it must be > 0"):
        make_optimizer("rmsprop", m.parameters(), 0)


@pytest.mark.parametrize("kw, msg", [
    (dict(codec="nope"), "unknown codec 'nope'"),
    (dict(workers=0), "workers=0; it must be an int >= 1"),
    (dict(lr=-1.0), "learning rate -1.0; it must be > 0"),
    (dict(workers=8, batch=4), "a batch must hold at least one sample per worker"),
    (dict(consistency="hogwild"), "consistency 'hogwild'; allowed: sync, ssp, async, easgd, gossip"),
    (dict(consistency="gossip", graph="star"), "gossip graph 'star'; allowed: ring, random"),
    (dict(staleness=-1, consistency="ssp"), "staleness bound -1"),
    (dict(parallel="model", consistency="ssp"), "consistency must be 'sync'"),
    (dict(parallel="model", model="cnn"), "use --model mlp"),
    (dict(codec="onebit", mode="requantize"), "cannot be re-encoded at every hop"),
    (dict(codec="dynamic_tree", error_feedback=True, mode="requantize"), "mode must be 'gather' or 'auto'"),
    (dict(error_feedback=True), "error feedback needs a lossy codec"),
    (dict(codec="onebit", error_feedback=True, scheme="paper"), "its residual would be added twice"),
    (dict(algorithm="gossip"), "unknown algorithm 'gossip'"),
    (dict(link="carrier-pigeon"), "carrier-pigeon"),
])
def test_bad_training_settings_are_clear_errors(kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig(**kw).check()


# ---------------------------------------------------------------- data parallelism

def _tiny(seed=0, dropout=(0.0, 0.0, 0.0)):
    torch.manual_seed(seed)
    return MLP(64, 10, hidden=(32, 24), dropout=dropout)


def _batch(n=30, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)


def _single_step(model, x, y, opt="sgd"):
    ref = copy.deepcopy(model)
    o = make_optimizer(opt, ref.parameters(), 0.1)
    o.zero_grad()
    nn.functional.cross_entropy(ref(x), y).backward()
    o.step()
    return ref


@pytest.mark.parametrize("algorithm", ["ring", "tree", "recursive_doubling", "rabenseifner", "butterfly_sync",
                                       "parameter_server", "native"])
def test_data_parallel_identity_step_equals_single_worker(algorithm):
    m = _tiny()
    x, y = _batch(30)  # 30 samples over 4 workers: shards of 8, 8, 7, 7
    ref = _single_step(m, x, y)
    w = Workers(copy.deepcopy(m), 4, lambda ps: make_optimizer("sgd", ps, 0.1), GradientExchange(None, algorithm))
    w.sync_step(x, y)
    for k in range(4):
        for p, q in zip(ref.parameters(), w.models[k].parameters()):
            torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def test_paper_scheme_adds_own_gradient_exactly_and_the_others_decoded():
    K = 3
    g = torch.Generator().manual_seed(0)
    grads = [[torch.randn(500, generator=g)] for _ in range(K)]
    ex = GradientExchange("dynamic_tree", scheme="paper")
    codecs = [ex.make_codec() for _ in range(K)]
    out, nbytes = sum_gradients(grads, codecs, ex, ["w"])
    decoded = [roundtrip(codecs[0], grads[k][0], "w")[0] for k in range(K)]
    for k in range(K):
        expect = grads[k][0] + sum(decoded[j] for j in range(K) if j != k)
        torch.testing.assert_close(out[k][0], expect, atol=1e-5, rtol=1e-5)
    assert not torch.equal(out[0][0], out[1][0])  # replicas see different sums
    all_ex = GradientExchange("dynamic_tree")
    out_all, _ = sum_gradients(grads, [all_ex.make_codec() for _ in range(K)], all_ex, ["w"])
    assert all(torch.equal(out_all[k][0], out_all[0][0]) for k in range(K))  # ring: one answer everywhere
    exact = sum(gs[0] for gs in grads)
    assert (out_all[0][0] - exact).norm() / exact.norm() < 0.05
    assert nbytes < 0.6 * K * (K - 1) * 500 * 4  # 8-bit payloads, all-gathered


def test_error_feedback_keeps_what_the_codec_dropped():
    """Sum over steps of what crossed the wire + the final residuals == sum of the true
    gradients (1-bit SGD's memory); without feedback the dropped part is lost for good."""
    K, steps = 2, 20
    g = torch.Generator().manual_seed(3)
    ex, plain = GradientExchange("onebit", error_feedback=True), GradientExchange("onebit")
    cod_ef, cod_plain = [ex.make_codec() for _ in range(K)], [plain.make_codec() for _ in range(K)]
    true = torch.zeros(300)
    sent_ef, sent_plain = torch.zeros(300), torch.zeros(300)
    for _ in range(steps):
        grads = [[torch.randn(300, generator=g)] for _ in range(K)]
        true += sum(gs[0] for gs in grads)
        sent_ef += sum_gradients(grads, cod_ef, ex, ["w"])[0][0][0]
        sent_plain += sum_gradients(grads, cod_plain, plain, ["w"])[0][0][0]
    residual = sum(c._residual["w"] for c in cod_ef)
    torch.testing.assert_close(sent_ef + residual, true, atol=1e-4, rtol=1e-4)
    assert (sent_ef - true).norm() < 0.5 * (sent_plain - true).norm()


# ---------------------------------------------------------------- model parallelism

@pytest.mark.parametrize("K", [1, 3, 4])
def test_model_parallel_identity_step_equals_single_worker(K):
    m = _tiny(dropout=(0.2, 0.3, 0.3))
    x, y = _batch(16)
    ref = copy.deepcopy(m)
    torch.manual_seed(7)
    out_ref = ref(x)
    nn.functional.cross_entropy(out_ref, y).backward()
    mm = copy.deepcopy(m)
    mp = ModelParallelMLP(mm, K)
    torch.manual_seed(7)  # dropout masks drawn as the unsplit network draws them
    out = mp(x)
    nn.functional.cross_entropy(out, y).backward()
    torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=1e-5)
    for p, q in zip(ref.parameters(), mm.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-5)
    # forward: K(K-1) activation slices per hidden layer + K-1 logit slices to worker 0
    assert len(mp.traffic.forward) == 2 * K * (K - 1) + (K - 1)


def test_model_parallel_compresses_activations_and_deltas():
    m = _tiny()
    x, y = _batch(16)
    mm = copy.deepcopy(m)
    mp = ModelParallelMLP(mm, 4, "dynamic_tree")
    out = mp(x)
    nn.functional.cross_entropy(out, y).backward()
    ref = copy.deepcopy(m)
    out_ref = ref(x)
    nn.functional.cross_entropy(out_ref, y).backward()
    rel = ((out - out_ref).norm() / out_ref.norm()).item()
    assert 0 < rel < 0.03
    grel = [((a.weight.grad - b.weight.grad).norm() / b.weight.grad.norm()).item() for a, b in zip(mm.dense, ref.dense)]
    # the last layer's gradient sees one compressed delta; earlier ones the sum of K compressed
    # partial deltas, each scaled by its own absmax, which cancel in part
    assert 0 < grel[2] < 0.03 and 0 < grel[0] < 0.25
    assert len(mp.traffic.backward) == len(mp.traffic.forward)
    assert all(b < 0.35 * 4 * 16 * 10 for b in mp.traffic.forward[-3:])  # logit slices: 8-bit + a scale
    with pytest.raises(ValueError, match="5 workers cannot split a layer of 4 outputs"):
        ModelParallelMLP(MLP(8, 4, hidden=(6,), dropout=(0, 0)), 5)


# ---------------------------------------------------------------- consistency models

def _cfg(**kw):
    base = dict(dataset="digits", hidden=(32,), dropout=(0.0, 0.0), workers=4, batch=32, epochs=2.0,
                optimizer="sgd", momentum=0.0, lr=0.2, compute_s=0.01, evals_per_epoch=2, train_limit=640)
    return TrainConfig(**{**base, **kw})


def test_ssp_with_bound_zero_equals_synchronous_sgd():
    a = train(_cfg(consistency="sync"))
    b = train(_cfg(consistency="ssp", staleness=0))
    assert list(a.curve.samples) == list(b.curve.samples)
    assert b.curve.staleness_max.max() <= 3  # pushes within one clock see the K-1 before them
    assert b.curve.clock_gap_max.max() <= 1
    for ea, eb in zip(a.curve.test_loss, b.curve.test_loss):
        assert ea == pytest.approx(eb, rel=1e-4)


def test_stale_synchronous_bound_holds_and_async_goes_past_it():
    ssp = train(_cfg(consistency="ssp", staleness=1, straggler=1.0))
    assert ssp.curve.clock_gap_max.max() <= 2  # a worker may finish clock c+s+1 before it must wait
    assert ssp.curve.staleness_max.max() >= 1
    asy = train(_cfg(consistency="async", straggler=1.0, delay_s=0.02))
    assert asy.curve.clock_gap_max.max() > 2
    assert asy.curve.staleness_max.max() > ssp.curve.staleness_max.max()
    for r in (ssp, asy):
        assert r.curve.time_s.is_monotonic_increasing
        assert r.curve.test_error.iloc[-1] < r.curve.test_error.iloc[0] - 25


def test_easgd_centre_learns_and_is_reproducible():
    a = train(_cfg(consistency="easgd", beta=0.9, period=1))
    b = train(_cfg(consistency="easgd", beta=0.9, period=1))
    assert a.curve.test_error.tolist() == b.curve.test_error.tolist()
    assert a.curve.test_error.iloc[-1] < a.curve.test_error.iloc[0] - 25
    with pytest.raises(ValueError, match="EASGD beta=0"):
        Consistency("easgd", beta=0)


@pytest.mark.parametrize("graph", ["ring", "random"])
def test_gossip_contracts_the_disagreement_at_the_second_eigenvalue_and_keeps_the_mean(graph):
    """Jin et al. 2016: averaging with neighbours only (Metropolis weights W) keeps the workers' mean and shrinks
    their disagreement by |lambda_2(W)| per round; on a ring of 8, lambda_2 = 1/3 + 2/3 cos(2 pi / 8)."""
    from lab.train.consistency import gossip_round, mixing_matrix, neighbours, second_eigenvalue

    K = 8
    adj = neighbours(graph, K, seed=3)
    assert adj == neighbours(graph, K, seed=3) and all(i in adj[j] for i in range(K) for j in adj[i])
    W = mixing_matrix(adj)
    assert torch.allclose(W.sum(0), torch.ones(K, dtype=W.dtype)) and torch.equal(W, W.T)
    lam = second_eigenvalue(W)
    if graph == "ring":
        assert adj[0] == [1, 7] and lam == pytest.approx(1 / 3 + 2 / 3 * math.cos(2 * math.pi / K), abs=1e-12)
    assert 0 < lam < 1  # connected: a spectral gap
    gen = torch.Generator().manual_seed(0)
    params = [[torch.randn(5, 3, generator=gen, dtype=torch.float64), torch.randn(4, generator=gen,
                                                                                   dtype=torch.float64)]
              for _ in range(K)]
    mean = [torch.stack([p[t] for p in params]).mean(0) for t in range(2)]

    def spread() -> float:
        return sum(float(((torch.stack([p[t] for p in params]) - mean[t]) ** 2).sum()) for t in range(2)) ** 0.5

    before, ratios = spread(), []
    for _ in range(40):
        gossip_round(params, W)
        now = spread()
        ratios.append(now / before)
        before = now
    assert max(ratios) <= lam + 1e-9  # never slower than the bound
    late = math.prod(ratios[20:]) ** (1 / 20)
    assert late == pytest.approx(lam, rel=0.02)  # ... and the slowest mode sets the rate
    for t in range(2):
        assert torch.allclose(torch.stack([p[t] for p in params]).mean(0), mean[t], atol=1e-12)


def test_gossip_trains_the_task_reproducibly_and_sends_to_its_neighbours_only():
    a = train(_cfg(consistency="gossip"))
    b = train(_cfg(consistency="gossip"))
    assert a.curve.test_error.tolist() == b.curve.test_error.tolist()
    assert a.curve.test_error.iloc[-1] < a.curve.test_error.iloc[0] - 25  # the workers' mean learns
    assert a.curve.time_s.is_monotonic_increasing
    # on a ring of 4, each worker sends its fp32 parameters to its 2 neighbours per update
    n = 64 * 32 + 32 + 32 * 10 + 10
    assert a.curve["bytes"].iloc[-1] / a.curve.step.iloc[-1] == pytest.approx(4 * 2 * 4 * n)


def test_compressed_data_parallel_run_matches_32bit_on_digits():
    """A seeded 4-worker run on scikit-learn's digits: 8-bit dynamic tree on a ring (every hop
    re-quantised) ends within 2 points of 32-bit and sends about a quarter of the bytes."""
    base = dict(dataset="digits", hidden=(128, 128), workers=4, batch=64, epochs=4.0, evals_per_epoch=1, seed=0)
    fp32 = train(TrainConfig(**base))
    q8 = train(TrainConfig(codec="dynamic_tree", **base))
    assert fp32.summary["final_test_error"] < 8
    assert abs(q8.summary["final_test_error"] - fp32.summary["final_test_error"]) <= 2.0
    assert 0.24 < q8.summary["bytes"] / fp32.summary["bytes"] < 0.27


# ---------------------------------------------------------------- real DDP

def _no_rank_processes() -> bool:
    import comm_ranks

    return not comm_ranks.launched_children()


def test_ddp_hook_averages_like_allreduce_and_keeps_residuals_by_bucket():
    from lab.comm.launch import run

    res = run(R.hook_averages, 2, "fp16", False, 4, timeout=60)
    for grads, exact in res[0][0]:
        for g, e in zip(grads, exact):
            torch.testing.assert_close(g, e, atol=2e-3, rtol=2e-3)
    res = run(R.hook_averages, 2, "dynamic_tree", True, 5, timeout=60)
    steps, sent, fp32, compressed, keys = res[0]
    for i, (grads, exact) in enumerate(steps):
        for g, e in zip(grads, exact):
            if i < 2:  # start_iter=2: the first two iterations are plain fp32 all_reduce
                torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)
            else:
                assert ((g - e).norm() / e.norm()).item() < 0.05
    assert torch.equal(res[0][0][-1][0][0], res[1][0][-1][0][0])  # every rank holds the same average
    assert compressed > 0 and keys == ["0.weight", "2.weight"]  # residuals keyed by parameter
    assert sent < 0.6 * fp32


# the narrow casts sum on the wire in their own dtype, which the residual does not see
_EF_TOL = {"bf16": 1e-2, "fp16": 2e-3}


@pytest.mark.registries
@pytest.mark.parametrize("error_feedback,start_iter", [(False, 0), (True, 0), (True, 1), (True, 2)])
def test_every_registered_codec_works_as_a_ddp_hook(error_feedback, start_iter):
    """Every codec in the registry, one 2-rank Gloo group, 4 steps of a 64-128-10 model in small
    buckets. Both ranks hold the same averaged gradient; the first `start_iter` steps are exact
    fp32; without error feedback a compressed step points the way of the true average; with it nothing is
    lost across DDP's bucket rebuild after step 1: sum of hook outputs + the ranks' residuals ==
    sum of true averages (Seide et al. 2014), with residuals keyed by parameter."""
    from lab.codecs import codec_names
    from lab.comm.launch import run

    names = codec_names()
    res = run(R.every_codec_as_hook, 2, names, error_feedback, start_iter, 4, timeout=300)
    failed = {n: res[0][n] for n in names if isinstance(res[0][n], str)}
    assert not failed, failed
    for n in names:
        a, b = res[0][n], res[1][n]
        assert a["compressed"] > 0 and (n == "fp32" or a["sent"] < a["fp32"]), n
        for step, (mine, theirs, exact) in enumerate(zip(a["got"], b["got"], a["exact"])):
            for g, h, e in zip(mine, theirs, exact):
                assert torch.equal(g, h) and torch.isfinite(g).all(), (n, step)
                if step < start_iter or n == "fp32":
                    torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5, msg=f"{n} step {step}")
                elif not error_feedback:  # (error feedback may send an older gradient's remainder instead)
                    assert torch.nn.functional.cosine_similarity(g.reshape(-1), e.reshape(-1), dim=0) > 0, (n, step)
        if not error_feedback:
            continue
        assert sorted(a["residuals"]) == [0, 1, 2], n  # both weights and the 128-wide bias (>= min_numel)
        scale = 1.0 if a["summable"] else 0.5  # summable codecs encode g/P, the others g
        for i, r0 in a["residuals"].items():
            lhs = sum(s[i] for s in a["got"]) + scale * (r0 + b["residuals"][i])
            rhs = sum(s[i] for s in a["exact"])
            tol = _EF_TOL.get(n, 1e-5) * rhs.abs().max().item()
            torch.testing.assert_close(lhs, rhs, atol=tol, rtol=0, msg=f"{n}: parameter {i}")


def test_summed_random_k_needs_the_same_seed_on_every_rank():
    from lab.comm.launch import run

    for err in run(R.randomk_seeded_by_rank, 2, timeout=120):
        assert err and "fields ['seed'] differ across ranks" in err and "same options (seed)" in err


def test_two_process_ddp_run_with_8bit_hook():
    from lab.train.ddp import train_ddp

    cfg = dict(dataset="digits", hidden=(256, 256), epochs=4.0, batch=64, evals_per_epoch=1)
    plain = train_ddp(TrainConfig(**cfg), 2, timeout=120)
    q8 = train_ddp(TrainConfig(codec="dynamic_tree", **cfg), 2, timeout=120)
    assert plain.summary["final_test_error"] < 8
    assert abs(q8.summary["final_test_error"] - plain.summary["final_test_error"]) <= 2.0
    assert q8.summary["bytes_ratio"] <= 0.30
    assert q8.summary["compressed_buckets"] > 0
    assert _no_rank_processes()


def test_a_dying_ddp_rank_is_reported_and_nothing_is_left_running():
    from dataclasses import asdict

    from lab.comm.launch import run

    with pytest.raises(CommError, match=r"rank 1 died \(killed by SIGKILL\)|rank 1"):
        run(R.dying_ddp, 2, asdict(TrainConfig(dataset="digits", hidden=(32,), dropout=(0.0, 0.0), batch=32)), 1,
            timeout=20)
    assert _no_rank_processes()


# ---------------------------------------------------------------- the reproduction and the CLI

def test_reproduction_smoke_mode_on_digits():
    from lab.train.reproduce import reproduce

    rep = reproduce("mnist-dp", seeds=2, smoke=True)
    assert list(rep.summary.type) == ["32-bit", "linear", "mantissa", "static_tree", "dynamic_tree", "ef(onebit)"]
    assert len(rep.runs) == 12 and rep.runs.final_test_error.between(0, 100).all()
    a = rep.anova
    assert a["df_between"] == 4 and a["df_within"] == 5 and 0 <= a["p"] <= 1
    assert (rep.summary.ci99_low <= rep.summary.mean_test_error).all()
    assert rep.summary.set_index("type").loc["dynamic_tree", "bytes_per_run"] < \
        0.3 * rep.summary.set_index("type").loc["32-bit", "bytes_per_run"]


def test_cli_train_and_reproduce(tmp_path):
    from typer.testing import CliRunner

    from lab.cli import app

    r = CliRunner().invoke(app, ["train", "--hidden", "32", "--dropout", "0,0", "--epochs", "0.5", "--codec",
                                 "dynamic_tree", "--out", str(tmp_path / "run.json")])
    assert r.exit_code == 0, r.output
    payload = json.loads((tmp_path / "run.json").read_text())
    assert payload["config"]["codec"] == "dynamic_tree" and payload["curve"][-1]["epoch"] >= 0.5
    r = CliRunner().invoke(app, ["train", "--reproduce", "mnist-mp", "--smoke", "--seeds", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [s["type"] for s in out["rows"]] == ["32-bit", "linear", "mantissa", "static_tree", "dynamic_tree"]
    r = CliRunner().invoke(app, ["train", "--codec", "nope"])
    assert r.exit_code == 2 and "unknown codec 'nope'" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "--lr", "0"])
    assert r.exit_code == 2 and "'--lr': Input should be greater than 0; allowed: a number above 0, up to 1000" in r.output


def test_a_stopped_run_keeps_its_curve_so_far(tmp_path, monkeypatch):
    """Ctrl-C half-way: the finished curve points are written, marked partial, atomically (no .part)."""
    from typer.testing import CliRunner

    import lab.train.run as run_mod
    from lab.cli import app

    calls = {"n": 0}
    real = run_mod.evaluate

    def stop_after_two(*a, **kw):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(run_mod, "evaluate", stop_after_two)
    out = tmp_path / "run.json"
    r = CliRunner().invoke(app, ["train", "--hidden", "32", "--dropout", "0,0", "--out", str(out)])
    assert r.exit_code == 130 and "interrupted" in r.output and "marked partial" in r.output
    data = json.loads(out.read_text())
    assert data["partial"] is True and len(data["curve"]) == 2
    assert data["summary"]["final_test_error"] == data["curve"][-1]["test_error"]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_experiment_functions_return_tidy_curves():
    from lab.experiments import codec_curves, consistency_curves

    points = []
    base = dict(dataset="digits", hidden=(32,), dropout=(0.0, 0.0), batch=32, epochs=0.5, train_limit=320,
                compute_s=0.01, evals_per_epoch=2)
    curves, summary = consistency_curves(["sync", "ssp", "async", "easgd"], on_point=points.append, **base)
    assert list(summary.variant) == ["sync", "ssp(s=2)", "async", "easgd"]
    assert set(curves.variant) == set(summary.variant) and {"time_s", "bytes", "test_error"} <= set(curves.columns)
    assert len(points) == len(curves) and points[0]["variant"] == "sync"
    curves, summary = codec_curves([None, "dynamic_tree", "ef:onebit"], parallel="data", **base)
    by = summary.set_index("variant")["bytes"]
    assert by["dynamic_tree"] < 0.3 * by["32-bit"] and by["ef(onebit)"] < 0.1 * by["32-bit"]
    with pytest.raises(ValueError, match=r"unknown training setting\(s\) \['colour'\]"):
        codec_curves([None], colour="red")
    with pytest.raises(ValueError, match=r"variant 'ef\(dynamic_tree\)': .*mode must be 'gather'"):
        codec_curves(["ef:dynamic_tree"], mode="requantize", **base)


def test_training_figures_draw_every_variant():
    import pandas as pd

    from lab.plots import reproduction_figure, training_curve_figure

    curves = pd.DataFrame(dict(variant=["a", "a", "b", "b"], epoch=[0, 1, 0, 1], time_s=[0, 2, 0, 1],
                               test_error=[90, 10, 90, 12]))
    fig = training_curve_figure(curves, x="time_s")
    assert [t.name for t in fig.data] == ["a", "b"] and list(fig.data[1].x) == [0, 1]
    with pytest.raises(ValueError, match="x='colour'"):
        training_curve_figure(curves, x="colour")
    s = pd.DataFrame(dict(type=["32-bit", "linear"], mean_test_error=[10.0, 10.5], ci99_low=[9.0, 9.5],
                          ci99_high=[11.0, 11.5]))
    f = reproduction_figure(s)
    assert list(f.data[0].error_y.array) == [1.0, 1.0]
