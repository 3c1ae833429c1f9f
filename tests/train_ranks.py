"""Rank functions for test_train.py: module level, so that rank processes can import them."""
from __future__ import annotations

import functools
import os
import signal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from lab.codecs import get_codec
from lab.train.ddp import ddp_rank
from lab.train.ddp_hook import CodecHookState, codec_hook


def hook_averages(comm, codec, error_feedback, steps):
    """Per step: the gradients DDP left after the hook, and the plain average of every rank's
    own gradients (gathered), on a fixed two-layer model; plus the hook's counters."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.005)
    state = CodecHookState.of(codec, error_feedback, model, start_iter=2, min_numel=100)
    ddp.register_comm_hook(state, codec_hook)
    ref = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))
    ref.load_state_dict(model.state_dict())
    out = []
    for step in range(steps):
        g = torch.Generator().manual_seed(100 * step + comm.rank)
        x, y = torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)
        ddp.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        ref.zero_grad()
        nn.functional.cross_entropy(ref(x), y).backward()
        mine = [p.grad.clone() for p in ref.parameters()]
        every = [None] * comm.size
        dist.all_gather_object(every, mine)
        exact = [sum(gs[i] for gs in every) / comm.size for i in range(len(mine))]
        out.append(([p.grad.clone() for p in model.parameters()], exact))
    return out, state.bytes_sent, state.fp32_bytes, state.compressed_buckets, sorted(
        getattr(state.codec, "_residual", {}))


def _grads(model, x, y):
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def hooked_steps(comm, make_state, steps):
    """A fresh DDP model (64 -> 128 -> 10, small buckets) with the hook state `make_state(model)` for `steps`
    steps: (model, state, the gradients the hook left per step, the exact average of every rank's own)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ref = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ref.load_state_dict(model.state_dict())
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.02)
    state = make_state(model)
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
    return model, state, got, exact


def every_codec_as_hook(comm, codecs, error_feedback, start_iter, steps):
    """One process group, every codec in turn: a fresh DDP model (64 -> 128 -> 10, small buckets)
    with the codec's hook for `steps` steps. Per codec: the gradients the hook left and the exact
    average of every rank's own gradients, per step; the residuals after the last step (by key);
    the hook's counters. An exception is returned as its text, so one codec cannot hide the rest."""
    out = {}
    for name in codecs:
        try:
            model, state, got, exact = hooked_steps(
                comm, lambda m: CodecHookState.of(name, error_feedback, start_iter=start_iter, min_numel=100), steps)
            res = {k: state.codec.residual(k) for k in state.codec.keys()} if error_feedback else {}
            keys = {state.key(p): i for i, p in enumerate(model.parameters())}
            out[name] = dict(got=got, exact=exact, residuals={keys[k]: r for k, r in res.items()},
                             summable=state.codec.summable, compressed=state.compressed_buckets,
                             sent=state.bytes_sent, fp32=state.fp32_bytes)
        except Exception as e:  # noqa: BLE001 -- reported per codec by the test
            out[name] = f"{type(e).__name__}: {e}"
        dist.barrier()
    return out


def randomk_seeded_by_rank(comm):
    """Random-k built with a different seed on each rank: its payloads cannot be summed; the
    hook's error text (every rank detects it), or None."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(CodecHookState.of(get_codec("randomk", seed=comm.rank), start_iter=0), codec_hook)
    try:
        _grads(ddp, torch.randn(8, 64), torch.randint(0, 10, (8,)))
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None


def dying_ddp(comm, cfg, victim):
    """ddp_rank, but rank `victim` is killed (SIGKILL) inside its third backward pass."""
    if comm.rank == victim:
        calls = {"n": 0}
        real = torch.nn.functional.cross_entropy

        def loss(*a, **kw):
            calls["n"] += 1
            if calls["n"] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **kw)

        torch.nn.functional.cross_entropy = loss
    return ddp_rank(comm, cfg)


def dies_in_codec_hook(comm, cfg, victim, pid_dir, how="kill"):
    """ddp_rank with a codec hook; rank `victim` is killed (SIGKILL) inside the hook on its first
    compressed bucket (after start_iter fp32 steps), in the middle of a backward pass; with
    how="raise" it raises a ValueError there instead."""
    import lab.train.ddp as ddp

    (pid_dir / f"rank{comm.rank}.pid").write_text(str(os.getpid()))
    if comm.rank == victim:
        real = ddp.codec_hook

        @functools.wraps(real)  # DDP checks a comm hook's signature and annotations
        def hook(state, bucket):
            if state.iteration >= state.start_iter:
                if how == "raise":
                    raise ValueError(f"fault injected into rank {comm.rank}'s codec hook")
                os.kill(os.getpid(), signal.SIGKILL)
            return real(state, bucket)

        ddp.codec_hook = hook
    return ddp_rank(comm, cfg)
