"""Rank functions for test_train.py: module level, so that rank processes can import them."""
from __future__ import annotations

import functools
import os
import signal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from lab.train.ddp import ddp_rank
from lab.train.ddp_hook import CodecHookState, codec_hook


def hook_averages(comm, codec, error_feedback, steps):
    """Per step: the gradients DDP left after the hook, and the plain average of every rank's
    own gradients (gathered), on a fixed two-layer model; plus the hook's counters."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.005)
    state = CodecHookState.of(codec, error_feedback, start_iter=2, min_numel=100)
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
