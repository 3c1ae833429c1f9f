"""Rank functions for test_parallel_pipeline.py (module level, so that rank processes and SimComm can run them)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lab.train.models import MLP
from lab.train.parallelism.pipeline import Pipeline


def mlp(seed: int = 0, depth: int = 9, width: int = 10, features: int = 12, classes: int = 5) -> MLP:
    """A narrow, deep MLP without dropout: enough layers for 4 ranks x 2 stages."""
    torch.manual_seed(seed)
    return MLP(features, classes, hidden=(width,) * depth, dropout=(0.0,) * (depth + 1))


def batch(n: int = 24, features: int = 12, classes: int = 5, seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


def pipeline_grads(comm, model_fn, x, y, schedule: str, microbatches: int, stages_per_rank=None, data: int = 1,
                   codec=None, lr: float = 0.0) -> dict:
    """One pipeline step of model_fn() on (x, y): this rank's stages' gradients (and, with lr > 0, their
    parameters after one SGD step), the loss where known, the bytes sent and their fp32 weight."""
    pipe = Pipeline(comm, model_fn(), x[:1], schedule, microbatches, stages_per_rank, data, codec)
    rec = pipe.step(x, y)
    grads = {s: [p.grad.clone() for p in m.parameters()] for s, m in pipe.mine.items()}
    if lr > 0:
        opt = torch.optim.SGD(pipe.params, lr=lr)
        opt.step()
    params = {s: [p.detach().clone() for p in m.parameters()] for s, m in pipe.mine.items()}
    return dict(grads=grads, params=params, loss=rec.loss, wire_bytes=pipe.wire.comm.bytes_sent,
                fp32_bytes=pipe.wire.fp32_bytes, rows=rec.rows, held=rec.held, saved=rec.saved,
                stage_to_rank=list(pipe.stage_to_rank), spans=pipe.stages.spans)


def torch_runtime_grads(comm, schedule: str, microbatches: int) -> dict:
    """torch's own pipeline runtime (PipelineStage + its schedule's `step`) on the same model, stages and batch,
    then the lab's executor: this rank's stage gradients from each, to compare."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, get_schedule_class

    x, y = batch()
    ours = pipeline_grads(comm, mlp, x, y, schedule, microbatches)
    pipe = Pipeline(comm, mlp(), x[:1], schedule, microbatches)
    n = len(pipe.stage_to_rank)
    stages = [PipelineStage(m, s, n, torch.device("cpu")) for s, m in sorted(pipe.mine.items())]
    cls = get_schedule_class(schedule)
    multi = issubclass(cls, PipelineScheduleMulti)
    sched = cls(stages if multi else stages[0], microbatches, loss_fn=lambda out, t: F.cross_entropy(out, t))
    for p in pipe.params:
        p.grad = None
    args = (x,) if 0 in pipe.mine else ()
    sched.step(*args, target=y if n - 1 in pipe.mine else None)
    return dict(ours=[g for s in sorted(pipe.mine) for g in ours["grads"][s]],
                torch=[p.grad.clone() for p in pipe.params], stages=sorted(pipe.mine))


def torch_runtime_all(comm, schedules: list[str]) -> dict:
    """`torch_runtime_grads` for each schedule (4 micro-batches), one launch."""
    return {name: torch_runtime_grads(comm, name, 4) for name in schedules}


def train_one_step(comm, data: int, schedule: str) -> dict:
    """`pipeline_grads` with one SGD step on real ranks (data x pipeline), the MLP of `mlp`."""
    x, y = batch()
    return pipeline_grads(comm, mlp, x, y, schedule, 4, None, data, None, lr=0.1)
