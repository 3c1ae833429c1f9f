"""Real data-parallel training: P processes, PyTorch DDP, a codec as its communication hook.

Each rank builds the same model (same seed; DDP also broadcasts rank 0's parameters), walks the
same seeded batch order and trains on its shard of every global batch; DDP averages the
gradients through `codec_hook` (or its own fp32 all_reduce without a codec). Run by the local
launcher (`lab.comm.launch.run`) or under torchrun (`ddp_rank(TorchComm.from_env(), ...)`).
"""
from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from lab.comm.base import Comm
from lab.comm.spans import span
from lab.comm.timesplit import Tracer

from .data_parallel import IDENTITY
from .ddp_hook import CodecHookState, algorithm_hook, codec_hook
from .models import build_model, make_optimizer
from .run import TrainConfig, TrainResult, evaluate, load_data
from .stream import ShardStream
from lab.backend import Progress, RowSink


#: the steps a traced run records (0-based, after two warm-up steps); left out of step_s
TRACED_STEPS = range(2, 5)


def ddp_rank(comm: Comm, cfg: dict[str, Any], progress: Progress | None = None,
             on_row: RowSink | None = None, trace: str | None = None) -> dict:
    """Train on this rank; rank 0 returns the curve (and hands each evaluation to on_row as it is
    made), every rank its bytes and step times. trace: a directory: steps 3..5 are recorded under
    torch.profiler (lab.comm.timesplit; forward, backward, optimizer and the hook's codec ranges), the
    rank's Chrome trace written there, and `split` holds its median traced step's split."""
    c = TrainConfig(**cfg)
    P, rank = comm.size, comm.rank
    device = comm.device
    ds = load_data(c)
    torch.manual_seed(c.seed)
    model = build_model(c.model, ds.features, ds.classes, ds.image_shape, hidden=c.hidden, dropout=c.dropout,
                        activation=c.activation).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    n_values = sum(p.numel() for p in model.parameters())
    state = None
    if c.codec not in (None, *IDENTITY):
        state = CodecHookState.of(c.codec, c.error_feedback, model, start_iter=c.hook_start,
                                  min_numel=c.hook_min_numel, algorithm=c.hook_algorithm)
        ddp.register_comm_hook(state, codec_hook)
    elif c.hook_algorithm not in (None, "native"):  # fp32 gradients summed by the registered algorithm
        state = CodecHookState.of("fp32", model=model, algorithm=c.hook_algorithm)
        ddp.register_comm_hook(state, algorithm_hook)
    opt = make_optimizer(c.optimizer, ddp.parameters(), c.lr, c.momentum)
    torch.manual_seed(c.seed + 1 + rank)  # dropout masks differ across ranks, as on real GPUs
    xtr, ytr = ds.train_x.to(device), ds.train_y.to(device)
    xte, yte = ds.test_x.to(device), ds.test_y.to(device)
    stream = ShardStream(xtr, ytr, c.batch, P, c.seed)
    N, total = len(ytr), int(round(c.epochs * len(ytr)))
    every = max(1, N // c.evals_per_epoch)
    rows, times, losses = [], [], []
    step = 0
    fp32_step = 2 * (P - 1) * 4 * n_values // P if P > 1 else 0
    sent = 0
    tracer = Tracer(comm, trace) if trace else None
    t0 = time.perf_counter()
    next_eval = every
    while stream.samples < total:
        x, y = stream.batch()
        xs, ys = x.tensor_split(P)[rank], y.tensor_split(P)[rank]
        traced = tracer is not None and step in TRACED_STEPS
        t = time.perf_counter()
        with tracer.step(f"train step {step + 1}") if traced else nullcontext():
            opt.zero_grad(set_to_none=True)
            with span("forward"):
                loss = F.cross_entropy(ddp(xs), ys)
            with span("backward"):
                loss.backward()
            with span("optimizer"):
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        if not traced:  # a traced step runs under the profiler
            times.append(time.perf_counter() - t)
        losses.append(float(loss.detach()))
        step += 1
        sent = state.bytes_sent if state is not None else fp32_step * step
        if stream.samples >= next_eval or stream.samples >= total:
            err, tloss = evaluate(model, xte, yte) if rank == 0 else (float("nan"), float("nan"))
            rows.append(dict(step=step, samples=stream.samples, epoch=stream.samples / N,
                             train_loss=sum(losses) / len(losses), test_error=err, test_loss=tloss,
                             bytes=sent, wall_s=time.perf_counter() - t0))
            if on_row:
                on_row(rows[-1])
            losses = []
            if progress:
                progress(min(stream.samples / total, 1.0), f"DDP {c.label()}: epoch {stream.samples / N:.2f}, "
                                                           f"test error {err:.2f}%")
            while next_eval <= stream.samples:
                next_eval += every
    warm = times[min(len(times) - 1, 2):]
    split = None
    if tracer is not None:
        split = tracer.step_split()
        tracer.save()
    return dict(rows=rows, split=split, bytes_sent=sent, fp32_bytes=fp32_step * step, steps=step,
                step_s=statistics.median(warm), parameters=n_values,
                compressed_buckets=state.compressed_buckets if state else 0,
                compressed_bytes=state.compressed_bytes if state else 0,
                compressed_fp32_bytes=state.compressed_fp32_bytes if state else 0)


def train_ddp(cfg: TrainConfig, procs: int = 2, *, backend: str = "gloo", timeout: float = 300.0,
              progress: Progress | None = None, on_point: RowSink | None = None,
              trace: str | None = None) -> TrainResult:
    """`cfg` trained by `procs` real processes under DDP; rank 0's curve, every rank's bytes.
    on_point: each evaluation of rank 0's curve as it is made (a stopped run keeps them).
    trace: a directory for one Chrome trace per rank; the summary's `split` holds each rank's step split."""
    from lab.comm.launch import run

    cfg.check()
    results = run(ddp_rank, procs, asdict(cfg), backend=backend, timeout=timeout, progress=progress, on_row=on_point,
                  trace=trace)
    return assemble(cfg, results, backend)


def assemble(cfg: TrainConfig, results: list[dict], backend: str) -> TrainResult:
    curve = pd.DataFrame(results[0]["rows"])
    sent = sum(r["bytes_sent"] for r in results)
    fp32 = sum(r["fp32_bytes"] for r in results)
    summary = dict(label=cfg.label(), mode="ddp", backend=backend, procs=len(results),
                   final_test_error=float(curve.test_error.iloc[-1]), best_test_error=float(curve.test_error.min()),
                   bytes=int(sent), fp32_allreduce_bytes=int(fp32), bytes_ratio=sent / fp32 if fp32 else float("nan"),
                   steps=results[0]["steps"], step_s=max(r["step_s"] for r in results),
                   parameters=results[0]["parameters"], compressed_buckets=results[0]["compressed_buckets"])
    c_sent = sum(r.get("compressed_bytes", 0) for r in results)
    c_fp32 = sum(r.get("compressed_fp32_bytes", 0) for r in results)
    # the codec's own ratio, without the hook's fp32 warm-up steps (PowerSGD: 0.0055 where the run's is 0.043)
    summary["bytes_ratio_compressed"] = c_sent / c_fp32 if c_fp32 else float("nan")
    if any(r.get("split") for r in results):  # --trace: each rank's median traced step (lab.comm.timesplit)
        summary["split"] = [r.get("split") for r in results]
    return TrainResult(cfg, curve, summary)


__all__ = ["ddp_rank", "train_ddp", "assemble"]
