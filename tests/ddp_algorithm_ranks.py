"""Rank functions for test_ddp_algorithm.py (module level, so that rank processes import them), and the
test plugin algorithm they register: the ring, counting the buffers it reduces."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from lab.comm.algorithms import Algorithm, algorithm_names, register
from lab.comm.algorithms.ring import reduce as ring_reduce
from lab.train.ddp_hook import CodecHookState, codec_hook

CALLS = {"reduce": 0, "values": 0}


def counting_reduce(comm, buf, ch):
    """The ring's reduce, counted: how many buffers (and values) this rank's plugin reduced."""
    CALLS["reduce"] += 1
    CALLS["values"] += buf.numel()
    ring_reduce(comm, buf, ch)


PLUGIN = Algorithm(name="counting_ring", summary="the ring, counting its calls (test plugin)", citation="test",
                   reduce=counting_reduce, coefficients=lambda P, m: (2.0 * (P - 1), 2.0 * m * (P - 1) / P),
                   total_bytes=lambda P, m: 2.0 * (P - 1) * m)


def _grads(model, x, y):
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def _run(comm, codec, algorithm, error_feedback, start_iter, steps, **options):
    """A fresh DDP model (64 -> 128 -> 10, small buckets) with the codec hook on `algorithm`: per step the
    gradients the hook left and the exact average of every rank's own gradients; the hook's counters."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ref = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ref.load_state_dict(model.state_dict())
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.02)
    state = CodecHookState.of(codec, error_feedback, model, start_iter=start_iter, min_numel=100,
                              algorithm=algorithm, algorithm_options=options)
    ddp.register_comm_hook(state, codec_hook)
    got, exact = [], []
    for step in range(steps):
        g = torch.Generator().manual_seed(100 * step + comm.rank)
        x, y = torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)
        got.append(_grads(ddp, x, y))
        mine = _grads(ref, x, y)
        every = [None] * comm.size
        dist.all_gather_object(every, mine)
        exact.append([sum(gs[i] for gs in every) / comm.size for i in range(len(mine))])
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
