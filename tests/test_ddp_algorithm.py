"""`CodecHookState(..., algorithm=...)` runs a DDP job's gradient sums through any
registered allreduce algorithm (`lab.comm.allreduce`), plugins included, on real Gloo ranks; without it
the hook is torch.distributed's all_reduce / all_gather as before."""
from __future__ import annotations

import pytest
import torch

import ddp_algorithm_ranks as R

RUNS = [
    # label, codec, algorithm, error feedback, start_iter, steps, algorithm options
    ("default fp32", "fp32", None, False, 0, 3, {}),
    ("rabenseifner fp32", "fp32", "rabenseifner", False, 0, 3, {}),
    ("plugin fp32", "fp32", "counting_ring", False, 1, 3, {}),
    ("plugin 8-bit", "dynamic_tree", "counting_ring", False, 0, 3, {}),
    ("hierarchical ef 8-bit", "dynamic_tree", "hierarchical", True, 0, 3, {"ranks_per_node": 2}),
    ("tree powersgd", "powersgd", "tree", False, 0, 3, {}),
    ("default powersgd", "powersgd", None, False, 0, 3, {}),
]


@pytest.fixture(scope="module")
def results():
    from lab.comm.launch import run

    return run(R.hook_on_algorithms, 4, RUNS, timeout=300)


def _close(a, b, tol):
    for g, e in zip(a, b):
        torch.testing.assert_close(g, e, atol=tol, rtol=tol)


def test_a_registered_algorithm_sums_the_gradients_of_a_real_ddp_job(results):
    for label in ("rabenseifner fp32", "plugin fp32"):
        mine = results[0][label]
        for step, (got, exact) in enumerate(zip(mine["got"], mine["exact"])):
            _close(got, exact, 1e-6)  # fp32 through the algorithm: the average, up to summation order
            for r in results[1:]:
                assert all(torch.equal(g, h) for g, h in zip(got, r[label]["got"][step])), (label, step)
        assert mine["sent"] > 0


def test_the_plugin_is_the_one_that_ran(results):
    """The plugin's reduce ran on every rank for every bucket sum (warm-up, small tensors, the codec's), and
    the default hook never calls it."""
    n_params = 64 * 128 + 128 + 128 * 10 + 10
    for r in results:
        assert r["default fp32"]["plugin_calls"] == 0 and r["rabenseifner fp32"]["plugin_calls"] == 0
        assert r["plugin fp32"]["plugin_values"] >= 3 * n_params  # every gradient value, every step
        assert r["plugin 8-bit"]["plugin_calls"] > 0


def test_a_codec_rides_the_algorithm(results):
    """8-bit on the plugin's ring: every rank holds the same average, close to the exact one; fewer bytes
    than fp32. Hierarchical with error feedback and its own option (ranks_per_node) too."""
    for label in ("plugin 8-bit", "hierarchical ef 8-bit"):
        mine = results[0][label]
        assert mine["compressed"] > 0 and mine["sent"] < 0.6 * mine["fp32"], label
        for step, (got, exact) in enumerate(zip(mine["got"], mine["exact"])):
            for r in results[1:]:
                assert all(torch.equal(g, h) for g, h in zip(got, r[label]["got"][step])), (label, step)
            for g, e in zip(got, exact):
                assert ((g - e).norm() / e.norm()).item() < 0.1, (label, step)


def test_a_phased_codec_sums_through_the_algorithm(results):
    """PowerSGD's fp32 sums through the tree: the same result as through torch's all_reduce, to rounding."""
    for step, (a, b) in enumerate(zip(results[0]["tree powersgd"]["got"], results[0]["default powersgd"]["got"])):
        _close(a, b, 1e-5)


def test_default_is_torch_distributed_and_bad_algorithms_are_messages():
    from lab.codecs import get_codec
    from lab.train.ddp_hook import CodecHookState

    assert CodecHookState(get_codec("fp16")).algorithm is None
    with pytest.raises(ValueError, match="unknown algorithm 'spiral'; known: .*ring"):
        CodecHookState(get_codec("fp16"), algorithm="spiral")
    with pytest.raises(ValueError, match="algorithm_options need an algorithm"):
        CodecHookState(get_codec("fp16"), algorithm_options={"ranks_per_node": 2})
