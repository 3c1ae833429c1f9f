"""Pipeline parallelism on real ranks (`paralab train --mode pipeline`): the model cut into stages of about equal
work, each rank running its stages on micro-batches in the order one of torch's schedules gives (GPipe, 1F1B,
interleaved 1F1B, looped BFS, the zero-bubble ones, DualPipeV), activations and their gradients sent between
ranks through `--codec`. With --data D > 1, D pipelines train on shards of each batch and sum their stages'
gradients (fp32 all-reduce over a data x pipeline mesh, DeviceMesh's layout).

Each step is timed action by action on every rank (`tables["timeline"]`), its idle fraction measured
(`bubble_measured`: the median traced step's makespan less each rank's compute, over the makespan, averaged
over ranks) beside the papers' formula with the measured action times (`bubble_formula`) and torch's order laid
out with those times (`bubble_planned`); `tables["memory"]` holds each stage's activations kept for backward.
Papers: GPipe (Huang et al. 2019), PipeDream-Flush / 1F1B and interleaving (Narayanan et al. 2021), breadth-first
(Lamy-Poirier 2023), zero bubble (Qi et al. 2024), DualPipe (DeepSeek-AI 2024); Hoefler et al.'s survey §7.3.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lab.comm.spans import span

from .base import Settings, Strategy
from .mesh import check_mesh, mesh_groups
from .pipeline_exec import StageExecutor, StepRecord
from .pipeline_plan import bubble_formula, bubble_of, check_schedule, planned_timeline, stages_per_rank
from .pipeline_stages import cut, layers_of
from .wire import Wire, activation_codec

CARRIES = "activations and their gradients between stages"
#: the steps whose actions the timeline keeps (0-based, after two warm-up steps): five, so that the median one is
#: a typical step even when the host slows a rank down for a step or two
TIMELINE_STEPS = range(2, 7)


def schedule_names() -> list[str]:
    """The lower-case names of the schedules torch ships (read from torch.distributed.pipelining)."""
    from . import torch_pipelining_private as tp

    return tp.schedule_names()


@dataclass(frozen=True)
class PipelineSettings(Settings):
    """schedule: one of `schedule_names()`; microbatches: per step (per pipeline replica); stages_per_rank: V
    (None: 1 for GPipe / 1F1B, 2 for the others); data: pipeline replicas (procs = data x pipeline ranks)."""

    schedule: str = "1f1b"
    microbatches: int = 4
    stages_per_rank: int | None = None
    data: int = 1

    def check(self, cfg: Any, procs: int) -> None:
        P = check_mesh(procs, self.data)
        if P < 2:
            raise ValueError(f"--mode pipeline needs at least 2 pipeline ranks; {procs} processes / --data "
                             f"{self.data} leaves {P}")
        V = stages_per_rank(self.schedule, self.stages_per_rank)
        if cfg.error_feedback:
            raise ValueError(f"error feedback is for gradients summed step after step; the pipeline's --codec carries "
                             f"{CARRIES}, new every step: drop --error-feedback")
        activation_codec(cfg.codec, CARRIES)
        layers = layer_count(cfg)
        if P * V > layers:
            raise ValueError(f"{P} pipeline ranks x {V} stages per rank = {P * V} stages, more than the {layers} "
                             f"layers of --model {cfg.model}; allowed: at most {layers} stages")
        per_replica = cfg.batch // self.data
        M = self.microbatches
        if not (isinstance(M, bool) or not isinstance(M, int)) and M > per_replica:
            raise ValueError(f"--batch {cfg.batch} over --data {self.data} leaves {per_replica} samples per pipeline, "
                             f"fewer than --microbatches {M}; allowed: at most {per_replica}")
        check_schedule(self.schedule, P, M, V)


def layer_count(cfg: Any) -> int:
    """How many layers `layers_of` finds in cfg's model (built at the smallest size: only the count matters)."""
    from ..models import build_model
    from .lm import is_lm, small_model

    if is_lm(cfg):
        return len(layers_of(small_model(cfg)))
    hidden = tuple(1 for _ in cfg.hidden)
    return len(layers_of(build_model(cfg.model, 64, 10, (8, 8), hidden=hidden, dropout=cfg.dropout,
                                     activation=cfg.activation)))


def _loss_fn(total: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A micro-batch's cross-entropy summed over its targets, over the whole batch's `total` targets: the
    micro-batches' losses add up to the batch's mean."""
    return lambda out, y: F.cross_entropy(out, y, reduction="sum") / total


class Pipeline:
    """This rank's part of a pipeline-parallel model: the stages it holds (`mine`, their `params`; the caller
    owns the optimizer), the executor of its schedule's actions, and its data-parallel group.

    comm: every rank (data x pipeline); model: the whole model, built alike on every rank (same seed); example:
    one sample of input (for the stage cut); codec: the spec of what stages send (None: fp32)."""

    def __init__(self, comm: Any, model: nn.Module, example: torch.Tensor, schedule: str, microbatches: int,
                 stages_per_rank: int | None = None, data: int = 1, codec: str | None = None) -> None:
        from . import torch_pipelining_private as tp

        self.comm, self.schedule, self.M, self.D = comm, schedule, microbatches, data
        self.P = check_mesh(comm.size, data)
        self.V = check_schedule(schedule, self.P, microbatches, stages_per_rank)
        if data > 1:
            groups = mesh_groups(comm, (data, self.P), ("data", "pipeline"))
            self.pipe, self.dp = groups["pipeline"], groups["data"]
        else:
            self.pipe, self.dp = comm, None
        self.replica = comm.rank // self.P
        self.stages = cut(model, self.P * self.V, example)
        program, self.stage_to_rank = tp.program(schedule, self.P, microbatches, self.V)
        self.device = comm.device
        self.mine = {s: m.to(self.device) for s, m in enumerate(self.stages.modules)
                     if self.stage_to_rank[s] == self.pipe.rank}
        self.params = [p for s in sorted(self.mine) for p in self.mine[s].parameters()]
        self.wire = Wire(self.pipe, activation_codec(codec, CARRIES))
        self.exe = StageExecutor(self.pipe, self.wire, self.mine, self.stage_to_rank, self.stages.shapes,
                                 program[self.pipe.rank], lambda out, y: out)
        self.last = self.P * self.V - 1
        self.extra_fp32 = 0  # bytes of fp32 sent outside the wire (data all-reduce, losses, evaluations)

    @property
    def holds_last(self) -> bool:
        return self.stage_to_rank[self.last] == self.pipe.rank

    def step(self, x: torch.Tensor, y: torch.Tensor) -> StepRecord:
        """Gradients of the mean loss over the global batch (x, y) in this rank's parameters' .grad (set, not
        accumulated), summed over the data replicas; `loss` of the record: the batch's mean loss on the ranks
        that hold the last stage, else None."""
        for p in self.params:
            p.grad = None
        xr = x.tensor_split(self.D)[self.replica].to(self.device)
        yr = y.tensor_split(self.D)[self.replica].to(self.device)
        xs, ys = list(xr.tensor_split(self.M)), list(yr.tensor_split(self.M))
        self.exe.loss_fn = _loss_fn(y.numel())
        rec = self.exe.run(xs if 0 in self.mine else None, ys if self.holds_last else None, [len(c) for c in xs])
        if self.dp is not None:
            rec.loss = self._sum_over_replicas(rec.loss)
        return rec

    def _sum_over_replicas(self, loss: float | None) -> float | None:
        """The stages' gradients (and the loss, with the last stage) summed over the data replicas: one fp32
        ring all-reduce of them all."""
        from lab.comm.allreduce import allreduce

        parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=self.device)
                 for p in self.params]
        if self.holds_last:
            parts.append(torch.tensor([loss], dtype=torch.float32, device=self.device))
        flat = torch.cat(parts).float()
        b0 = self.dp.bytes_sent
        total = allreduce(self.dp, flat, algorithm="ring", codec=None, check=False)
        self.extra_fp32 += self.dp.bytes_sent - b0
        off = 0
        for p in self.params:
            p.grad = total[off:off + p.numel()].view_as(p).clone()
            off += p.numel()
        return float(total[-1]) if self.holds_last else None

    def loss_to(self, loss: float | None, dst: int = 0) -> float | None:
        """The batch loss handed from replica 0's last-stage rank to rank `dst` of comm (4 bytes, when they
        differ); the loss on dst, None elsewhere."""
        src = self.stage_to_rank[self.last]  # replica 0's pipeline ranks are comm's first P ranks
        me = self.comm.rank
        if src == dst:
            return loss if me == dst else None
        if me == src:
            self.comm.send(torch.tensor([loss], dtype=torch.float32, device=self.device), dst)
            self.extra_fp32 += 4
        elif me == dst:
            buf = torch.empty(1, device=self.device)
            self.comm.recv(buf, src)
            return float(buf[0])
        return None

    def evaluate(self, x: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> tuple[float, float]:
        """(test error %, mean cross-entropy) per target of the pipelined model on (x, y) (a language model's
        targets: its tokens), run by replica 0 stage after stage (eval mode, no gradients, activations through
        the wire); the numbers on comm's rank 0, NaN elsewhere."""
        nan = (float("nan"), float("nan"))
        if self.replica != 0:
            return nan
        for m in self.mine.values():
            m.eval()
        wrong, total = 0.0, 0.0
        with torch.no_grad():
            for i in range(0, len(y), chunk):
                xc, yc, local = x[i:i + chunk].to(self.device), y[i:i + chunk].to(self.device), None
                for s in range(self.last + 1):
                    if s not in self.mine:
                        continue
                    if s == 0:
                        a = xc
                    elif local is not None and self.stage_to_rank[s - 1] == self.pipe.rank:
                        a = local
                    else:
                        a = self.wire.recv((len(yc), *self.stages.shapes[s - 1]), self.stage_to_rank[s - 1])
                    local = self.mine[s](a)
                    if s == self.last:
                        wrong += float((local.argmax(1) != yc).sum())
                        total += float(F.cross_entropy(local, yc, reduction="sum"))
                    elif self.stage_to_rank[s + 1] != self.pipe.rank:
                        self.wire.send(local, self.stage_to_rank[s + 1])
        for m in self.mine.values():
            m.train()
        src = self.stage_to_rank[self.last]
        if src != 0:
            buf = torch.tensor([wrong, total], dtype=torch.float32, device=self.device)
            if self.pipe.rank == src:
                self.pipe.send(buf, 0)
                self.extra_fp32 += 8
            elif self.pipe.rank == 0:
                self.pipe.recv(buf, src)
                wrong, total = float(buf[0]), float(buf[1])
        if self.comm.rank != 0:
            return nan
        return 100.0 * wrong / y.numel(), total / y.numel()


def pipeline_rank(comm: Any, cfg: dict, settings: dict, progress: Any = None, on_row: Any = None,
                  trace: str | None = None) -> dict:
    """Train on this rank (the rank-function contract of `base.py`): rank 0 returns the curve and the summary;
    every rank its bytes, step time and its rows of the timeline and memory tables."""
    from ..models import build_model
    from .lm import config_of, is_lm, optimizer
    from .loop import RankLoop

    c, s = config_of(cfg), PipelineSettings(**settings)
    loop = RankLoop(comm, c, f"pipeline {s.schedule} {c.label()}", progress, on_row, trace)
    ds = loop.data
    torch.manual_seed(c.seed)
    if is_lm(c):  # the language-model task's TinyGPT, cut after its embeddings, blocks and head
        model, example = ds.build(c), ds.test_x[:1]
    else:
        model = build_model(c.model, ds.features, ds.classes, ds.image_shape, hidden=c.hidden, dropout=c.dropout,
                            activation=c.activation)
        example = ds.train_x[:1]
    pipe = Pipeline(comm, model, example, s.schedule, s.microbatches, s.stages_per_rank, s.data, c.codec)
    opt = optimizer(c, pipe.params)
    torch.manual_seed(c.seed + 1 + comm.rank)  # dropout masks differ across ranks, as on real GPUs
    records: dict[int, tuple[float, StepRecord]] = {}
    step_no = [0]

    def step(x: torch.Tensor, y: torch.Tensor) -> float | None:
        i = step_no[0]
        step_no[0] += 1
        if i <= TIMELINE_STEPS[-1]:
            comm.barrier()  # every rank starts the step together: one time axis for the timeline
        t0 = time.perf_counter()
        rec = pipe.step(x, y)
        with span("optimizer"):
            opt.step()
        if i <= TIMELINE_STEPS[-1]:
            records[i] = (t0, rec)
        return pipe.loss_to(rec.loss)

    def evaluate() -> tuple[float, float]:
        err, loss = pipe.evaluate(ds.test_x, ds.test_y)
        return ds.scored(err, loss) if is_lm(c) else (err, loss)

    out = loop.run(step, evaluate)
    kept = [i for i in sorted(records) if i in TIMELINE_STEPS] or sorted(records)[-1:]
    mine = [(i, records[i][0], records[i][1].rows) for i in kept]
    every = comm.allgather_object(mine)  # control traffic, after training
    starts = {i: min(r[k][1] for r in every) for k, i in enumerate(kept)}
    timeline = [dict(rank=comm.rank, step=i + 1, stage=row["stage"], microbatch=row["microbatch"], kind=row["kind"],
                     start_s=row["start"] - starts[i], end_s=row["end"] - starts[i], bytes=row["bytes"])
                for i, t0, rows in mine for row in rows]
    last = records[kept[-1]][1] if kept else StepRecord()
    memory = [dict(rank=comm.rank, stage=st, peak_activation_bytes=last.saved[st] * last.held[st],
                   microbatches_held=last.held[st], activation_bytes_per_microbatch=last.saved[st])
              for st in sorted(last.held)]
    result = dict(rows=out["rows"], steps=out["steps"], step_s=out["step_s"], bytes_sent=out["bytes_sent"],
                  fp32_bytes=pipe.wire.fp32_bytes + pipe.extra_fp32, tables=dict(timeline=timeline, memory=memory))
    if "split" in out:
        result["split"] = out["split"]
    if comm.rank == 0:
        rows = [dict(rank=r, step=i + 1, kind=row["kind"], stage=row["stage"], microbatch=row["microbatch"],
                     start=row["start"] - starts[i],
                     end=row["end"] - starts[i]) for r, got in enumerate(every) for i, _, rs in got for row in rs]
        result["summary"] = summarise(pd.DataFrame(rows), s.schedule, pipe.P, s.microbatches, pipe.V, s.data,
                                      pipe.stages, pipe.stage_to_rank)
        result["summary"]["parameters"] = sum(p.numel() for p in model.parameters())
    return result


def summarise(rows: pd.DataFrame, schedule: str, P: int, M: int, V: int, data: int, stages: Any,
              stage_to_rank: Sequence[int]) -> dict[str, Any]:
    """The summary's pipeline numbers from every rank's timeline rows (rank, step, kind, stage, microbatch, start,
    end in seconds from the step's start): the median step's bubble, the formula's and the planned one at the
    measured median F, B, I, W times (I and W from the stages whose backward is split: all but the first), the
    median step replayed with free sends (`bubble_replayed`) and its idle split (`idle_wait_s`, `idle_send_s`,
    `idle_other_s`); `bubble_steps`: the bubble of every timed step, its spread."""
    out: dict[str, Any] = dict(schedule=schedule, microbatches=M, stages_per_rank=V, pipeline_ranks=P, data=data,
                               stages=P * V, stage_layers=[list(sp) for sp in stages.spans],
                               stage_flops=[float(f) for f in stages.flops], stage_to_rank=list(stage_to_rank))
    if rows.empty:
        return dict(out, bubble_measured=float("nan"), bubble_formula=bubble_formula(schedule, P, M, V),
                    bubble_planned=float("nan"))
    spans = {k: g.end.max() - g.start.min() for k, g in rows.groupby("step")}
    ordered = sorted(spans, key=lambda k: spans[k])
    median_step = ordered[len(ordered) // 2]
    step_rows = rows[rows.step == median_step]
    out["bubble_measured"] = bubble_of(step_rows)
    out["bubble_steps"] = [bubble_of(rows[rows.step == k]) for k in sorted(spans)]  # its spread over the steps
    out["timeline_step"] = int(median_step)
    # where the median step's idle went, per rank on average (seconds): waiting for a receive, posting a send, the
    # rest (Python between actions, a rank starting late or ending early); and the same step replayed in torch's
    # order with each block's own measured time and free sends: the idle that the blocks' spread alone leaves
    makespan = step_rows.end.max() - step_rows.start.min()
    took = (step_rows.end - step_rows.start).groupby([step_rows["rank"], step_rows.kind]).sum().unstack(fill_value=0.0)
    waits = took.filter(like="RECV").sum(axis=1)
    sends = took.filter(like="SEND").sum(axis=1)
    busy = took[[k for k in took.columns if k in ("F", "B", "I", "W")]].sum(axis=1)
    out.update(idle_wait_s=float(waits.mean()), idle_send_s=float(sends.mean()),
               idle_other_s=float((makespan - busy - waits - sends).mean()))
    comp = step_rows[step_rows.kind.isin(("F", "B", "I", "W")) & (step_rows["rank"] < P)]  # data replica 0
    own = {(k, int(st), int(mb)): float(e - b) for k, st, mb, b, e in
           zip(comp.kind, comp.stage, comp.microbatch, comp.start, comp.end)}
    out["bubble_replayed"] = bubble_of(planned_timeline(schedule, P, M, V, durations=own))
    dur = (rows.end - rows.start).groupby(rows.kind).median()
    # the first stage's backward is not split (torch runs it whole as its W, its I empty): I and W as the papers
    # define them, the two halves of one backward, come from the other stages
    split = rows[rows.kind.isin(("I", "W")) & (rows.stage > 0)]
    if not split.empty:
        dur = pd.concat([dur.drop(["I", "W"], errors="ignore"),
                         (split.end - split.start).groupby(split.kind).median()])
    t = {k: float(dur[k]) for k in ("F", "B", "I", "W") if k in dur}
    t_b = t.get("B", t.get("I", 0.0) + t.get("W", 0.0))
    t_w = t.get("W")
    out.update({f"t_{k.lower()}_s": v for k, v in t.items()})
    out["bubble_formula"] = bubble_formula(schedule, P, M, V, t_f=t.get("F", 1.0), t_b=t_b, t_w=t_w)
    times = {"F": t.get("F", 1.0), "B": t_b, "I": t.get("I", t_b / 2), "W": t.get("W", t_b / 2)}
    out["bubble_planned"] = bubble_of(planned_timeline(schedule, P, M, V, times))
    return out


STRATEGY = Strategy(
    name="pipeline",
    description="the layers cut into stages on different ranks, micro-batches flowing through them in one of "
                "torch's schedules",
    paper="GPipe (Huang et al. 2019); 1F1B and interleaving (Narayanan et al. 2021); zero bubble (Qi et al. 2024); "
          "DualPipe (DeepSeek-AI 2024); Hoefler et al.'s survey §7.3 (layer pipelining)",
    settings=PipelineSettings,
    rank=pipeline_rank,
    models=("mlp", "cnn"),
    carries=CARRIES,
    order=10,
    lm=True,
    # a 64-16-4096-10 MLP on digits, cut after the 4096-wide layer: each of the 4 micro-batches of 128 sends
    # 128 x 4096 fp32 = 2 MiB forward and 2 MiB back, 16.8 MB a step: 67-134 ms at 1 Gbit/s (125 MB/s; the two
    # directions overlap or not) against 6 x 107 kFLOP x 512 samples = 0.33 GFLOP of compute (~10 ms on one
    # core): the link bounds the step, and 8-bit sends a quarter of it
    bench=dict(cfg=dict(dataset="digits", model="mlp", hidden=(16, 4096), dropout=(0.0, 0.0, 0.0), batch=512,
                        epochs=4.0, evals_per_epoch=1, lr=0.001),
               settings=dict(schedule="1f1b", microbatches=4)),
)

__all__ = ["STRATEGY", "PipelineSettings", "Pipeline", "pipeline_rank", "schedule_names", "planned_timeline",
           "bubble_formula", "bubble_of", "layers_of", "summarise", "CARRIES"]
