"""Rank functions for test_ddp_algorithm.py (module level, so that rank processes import them), and the
test plugin algorithm they register: the ring, counting the buffers it reduces."""
from __future__ import annotations

import torch.distributed as dist

from lab.comm.algorithms import Algorithm, algorithm_names, register
from lab.comm.algorithms.ring import reduce as ring_reduce
from lab.train.ddp_hook import CodecHookState
from train_ranks import hooked_steps

CALLS = {"reduce": 0, "values": 0}


def counting_reduce(comm, buf, ch):
    """The ring's reduce, counted: how many buffers (and values) this rank's plugin reduced."""
    CALLS["reduce"] += 1
    CALLS["values"] += buf.numel()
    ring_reduce(comm, buf, ch)


PLUGIN = Algorithm(name="counting_ring", summary="the ring, counting its calls (test plugin)", citation="test",
                   reduce=counting_reduce, coefficients=lambda P, m: (2.0 * (P - 1), 2.0 * m * (P - 1) / P),
                   total_bytes=lambda P, m: 2.0 * (P - 1) * m)


def _run(comm, codec, algorithm, error_feedback, start_iter, steps, **options):
    """A fresh DDP model with the codec hook on `algorithm` (train_ranks.hooked_steps): per step the gradients
    the hook left and the exact average of every rank's own gradients; the hook's counters."""
    _, state, got, exact = hooked_steps(comm, lambda model: CodecHookState.of(
        codec, error_feedback, model, start_iter=start_iter, min_numel=100, algorithm=algorithm,
        algorithm_options=options), steps)
    dist.barrier()
    return dict(got=got, exact=exact, sent=state.bytes_sent, fp32=state.fp32_bytes,
                compressed=state.compressed_buckets)


def hook_on_algorithms(comm, runs):
    """Each (label, codec, algorithm, error_feedback, start_iter, steps, options) in turn on one group; the
    plugin registered here (as a plugin package would be) and its call counts per run."""
    if "counting_ring" not in algorithm_names():
        register(PLUGIN)
    out = {}
    for label, codec, algorithm, ef, start, steps, options in runs:
        before = dict(CALLS)
        out[label] = _run(comm, codec, algorithm, ef, start, steps, **options)
        out[label]["plugin_calls"] = CALLS["reduce"] - before["reduce"]
        out[label]["plugin_values"] = CALLS["values"] - before["values"]
    return out
