"""Real sharded training: P processes, PyTorch FSDP2 (`fully_shard`), any codec on its collectives.

ZeRO-3 / FSDP (Rajbhandari et al. 2020; Zhao et al. 2023): every layer's weights live sharded, one
1/P flat shard per rank; before a layer's forward and again before its backward the shards are
all-gathered, and after its backward the gradient is reduce-scattered, each rank keeping (and
updating) its own shard. ZeRO++ (Wang et al. 2023) puts quantized weights on the all-gather (qwZ),
quantized gradients on the reduce-scatter (qgZ) and keeps a secondary weight shard per node (hpZ)
so that the backward all-gather stays inside a node. Here:

  - each module that owns parameters (every Linear / Conv2d) is its own `fully_shard` unit, then
    the root; the units' collectives carry `weights_codec` / `grads_codec` (lab/train/fsdp_comm.py,
    through `set_custom_all_gather` / `set_custom_reduce_scatter`) and run the process group's own
    collectives or the registered `lab.comm.collectives` algorithm picked per op (`all_gather`,
    `reduce_scatter`: ring, recursive_doubling, bruck, ..., or a plugin);
  - hpZ is FSDP2's own `reshard_after_forward=<ranks per node>`: after forward each unit keeps the
    shard of the node-local group (contiguous ranks, r // ranks_per_node = node), and the backward
    all-gather runs on that group;
  - same data, seeds, batch order and dropout streams as DDP (lab/train/ddp.py), so the curves of
    the codec run, fp32 FSDP2 and DDP, trained in turn in the same processes, line up;
  - every rank evaluates (an FSDP forward is a collective); rank 0 reports.

Run by the local launcher (`train_fsdp`) or under torchrun (`fsdp_rank(TorchComm.from_env(), ...)`).
"""
from __future__ import annotations

import hashlib
import statistics
import re
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from lab.backend import Progress, RowSink
from lab.comm.base import Comm
from lab.comm.spans import span
from lab.comm.timesplit import Tracer

from .fsdp_comm import NATIVE, NO_CODEC, CodecAllGather, CodecReduceScatter, WireCounter, check_algorithm, check_codec
from .models import build_model, make_optimizer
from .run import TrainConfig, evaluate, load_data
from .stream import ShardStream
from .torch_fsdp_private import set_unshard_async
from .ddp import TRACED_STEPS

COLLECTIVES = ("all_gather_forward", "all_gather_backward", "reduce_scatter")


@dataclass(frozen=True)
class FSDPSettings:
    """What FSDP adds to a `TrainConfig`: codec specs on the weights' all-gather and the gradients'
    reduce-scatter (None: fp32), hpZ's ranks per node (None: off), `custom` (False: FSDP2's own
    collectives, no hooks; the equality test's baseline) and `baselines` (also train fp32 FSDP2
    and fp32 DDP on the same data and seeds, in the same processes). overlap: FSDP2's all-gathers run
    async and the next unit's is issued before this one computes (explicit forward prefetch, FSDP2's
    backward prefetch), so its transfer overlaps the compute and the codec work (False: FSDP2's
    defaults, each all-gather blocking). all_gather, reduce_scatter: the algorithm each op runs, 'native'
    (the process group's own collective) or a registered `lab.comm.collectives` plugin of that op."""

    weights_codec: str | None = None
    grads_codec: str | None = None
    hpz: int | None = None
    custom: bool = True
    baselines: bool = True
    ranks_per_node: int | None = None
    overlap: bool = True
    all_gather: str = NATIVE
    reduce_scatter: str = NATIVE

    def check(self, procs: int) -> None:
        """ValueError naming the first bad setting and what is allowed."""
        if isinstance(procs, bool) or not isinstance(procs, int) or procs < 2:
            raise ValueError(f"FSDP shards over processes; --procs {procs} is one: allowed: 2 or more "
                             "(one process trains unsharded: use --mode sim or --mode ddp)")
        check_codec(self.weights_codec, "all_gather")
        check_codec(self.grads_codec, "reduce_scatter")
        check_algorithm("all_gather", self.all_gather, self.weights_codec)
        check_algorithm("reduce_scatter", self.reduce_scatter, self.grads_codec)
        if self.hpz is not None:
            ok = [k for k in range(2, procs) if procs % k == 0]
            if isinstance(self.hpz, bool) or not isinstance(self.hpz, int) or self.hpz not in ok:
                raise ValueError(f"--hpz {self.hpz!r}: ranks per node must divide --procs {procs} and leave "
                                 f"two nodes or more; allowed: {', '.join(map(str, ok)) or 'none for this many processes'}")
        rpn = self.ranks_per_node
        if rpn is not None and (isinstance(rpn, bool) or not isinstance(rpn, int) or rpn < 1 or procs % rpn):
            raise ValueError(f"--ranks-per-node {rpn!r} must divide --procs {procs}; allowed: "
                             + ", ".join(str(d) for d in range(1, procs + 1) if procs % d == 0))
        if rpn is not None and self.hpz is not None and rpn != self.hpz:
            raise ValueError(f"--hpz {self.hpz} keeps a weight shard per node of --ranks-per-node {rpn}: give one "
                             "number, or the same")
        if not isinstance(self.overlap, bool):
            raise ValueError(f"overlap={self.overlap!r}; allowed: True (async prefetched all-gathers), False")
        if not self.custom and (self.weights_codec not in NO_CODEC or self.grads_codec not in NO_CODEC):
            raise ValueError("custom=False is FSDP2's own collectives: it takes no codec")
        if not self.custom and self.algorithms:
            raise ValueError("custom=False is FSDP2's own collectives: it runs no registered algorithm")

    @property
    def compressed(self) -> bool:
        return self.weights_codec not in NO_CODEC or self.grads_codec not in NO_CODEC

    @property
    def algorithms(self) -> bool:
        """Whether an op runs a registered algorithm instead of the process group's own."""
        return (self.all_gather or NATIVE) != NATIVE or (self.reduce_scatter or NATIVE) != NATIVE

    def label(self) -> str:
        """'FSDP2 w=mxfp8_e4m3 g=dynamic_tree hpZ=2', 'FSDP2 fp32'."""
        parts = ["FSDP2"]
        if self.weights_codec not in NO_CODEC:
            parts.append(f"w={self.weights_codec}")
        if self.grads_codec not in NO_CODEC:
            parts.append(f"g={self.grads_codec}")
        if not self.compressed:
            parts.append("fp32")
        if self.hpz:
            parts.append(f"hpZ={self.hpz}")
        if (self.all_gather or NATIVE) != NATIVE:
            parts.append(f"ag={self.all_gather}")
        if (self.reduce_scatter or NATIVE) != NATIVE:
            parts.append(f"rs={self.reduce_scatter}")
        return " ".join(parts)


def shard_model(model: nn.Module, settings: FSDPSettings, counter: WireCounter,
                device: torch.device | None = None, comm: Comm | None = None) -> nn.Module:
    """`model` sharded in place with FSDP2 over the default group: one unit per module that owns
    parameters, then the root; the units' collectives carry the settings' codecs and run its algorithms
    (a registered one on `comm`, this process's TorchComm by default), counted by `counter`. ValueError
    for a model without parameters."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if not any(True for _ in model.parameters()):
        raise ValueError(f"the model ({type(model).__name__}) has no parameters to shard; FSDP needs a model "
                         "with parameters (--model mlp or cnn)")
    P = dist.get_world_size()
    device = device or torch.device("cpu")
    mesh = init_device_mesh(device.type, (P,))
    wcodec = check_codec(settings.weights_codec, "all_gather")
    gcodec = check_codec(settings.grads_codec, "reduce_scatter")
    reshard: bool | int = settings.hpz if settings.hpz else True
    units = [(name, m) for name, m in model.named_modules()
             if m is not model and any(True for _ in m.parameters(recurse=False))]
    for name, m in units:
        fully_shard(m, mesh=mesh, reshard_after_forward=reshard)
        if settings.custom:
            m.set_custom_all_gather(CodecAllGather(wcodec, counter, full=P if settings.hpz else None,
                                                   algorithm=settings.all_gather or NATIVE, comm=comm))
            m.set_custom_reduce_scatter(CodecReduceScatter(gcodec, counter, name=name or "root",
                                                           algorithm=settings.reduce_scatter or NATIVE, comm=comm))
    fully_shard(model, mesh=mesh)
    if settings.overlap:
        for (_, m), (_, nxt) in zip(units, units[1:]):  # in forward order: the module order of the MLP / CNN
            m.set_modules_to_forward_prefetch([nxt])
        set_unshard_async(model)  # pre-forward / pre-backward unshards async
    return model


def _digest(model: nn.Module) -> str:
    """sha256 of the full (unsharded) parameters' bytes, in order (a collective: every rank calls it)."""
    h = hashlib.sha256()
    for p in model.parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        h.update(full.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def trace_dir(trace: str, variant: str) -> str:
    """Where one run's traces go under --trace DIR: DIR/<variant as a file name> ('FSDP2 fp32' -> fsdp2-fp32)."""
    return str(Path(trace) / (re.sub(r"[^a-z0-9]+", "-", variant.lower()).strip("-") or "run"))


def _train_one(comm: Comm, c: TrainConfig, settings: FSDPSettings, variant: str, progress: Progress | None,
               on_row: RowSink | None, frac: tuple[float, float], trace: str | None = None) -> dict:
    """One FSDP2 run on this rank: curve rows (rank 0's evaluations), wire counts, step times.
    trace: a directory: steps 3..5 recorded under torch.profiler (forward, backward, optimizer and the
    hooks' encode / decode / add / recv-wait ranges), the rank's trace written there, `split` its median."""
    P, rank, device = comm.size, comm.rank, comm.device
    ds = load_data(c)
    torch.manual_seed(c.seed)
    model = build_model(c.model, ds.features, ds.classes, ds.image_shape, hidden=c.hidden, dropout=c.dropout,
                        activation=c.activation).to(device)
    n_values = sum(p.numel() for p in model.parameters())
    counter = WireCounter(ranks_per_node=settings.ranks_per_node or settings.hpz or 1)
    shard_model(model, settings, counter, device, comm)
    opt = make_optimizer(c.optimizer, model.parameters(), c.lr, c.momentum)
    torch.manual_seed(c.seed + 1 + rank)  # dropout masks differ across ranks, as in DDP
    xtr, ytr = ds.train_x.to(device), ds.train_y.to(device)
    xte, yte = ds.test_x.to(device), ds.test_y.to(device)
    stream = ShardStream(xtr, ytr, c.batch, P, c.seed)
    N, total = len(ytr), int(round(c.epochs * len(ytr)))
    every = max(1, N // c.evals_per_epoch)
    rows, times, cpu_times, losses, step_losses = [], [], [], [], []
    step, next_eval = 0, every
    tracer = Tracer(comm, trace) if trace else None
    t0 = time.perf_counter()
    while stream.samples < total:
        x, y = stream.batch()
        xs, ys = x.tensor_split(P)[rank], y.tensor_split(P)[rank]
        traced = tracer is not None and step in TRACED_STEPS
        t, cpu = time.perf_counter(), time.process_time()
        with tracer.step(f"train step {step + 1}") if traced else nullcontext():
            opt.zero_grad(set_to_none=True)
            counter.phase = "forward"
            with span("forward"):
                loss = F.cross_entropy(model(xs), ys)
            counter.phase = "backward"
            with span("backward"):
                loss.backward()
            with span("optimizer"):
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        if not traced:  # a traced step runs under the profiler
            times.append(time.perf_counter() - t)
            cpu_times.append(time.process_time() - cpu)
        losses.append(float(loss.detach()))
        step_losses.append(losses[-1])
        step += 1
        if stream.samples >= next_eval or stream.samples >= total:
            counter.phase = "eval"
            err, tloss = evaluate(model, xte, yte)
            sent = sum(v["sent"] for v in counter.totals().values())
            rows.append(dict(variant=variant, step=step, samples=stream.samples, epoch=stream.samples / N,
                             train_loss=sum(losses) / len(losses), test_error=err, test_loss=tloss,
                             bytes=sent, wall_s=time.perf_counter() - t0))
            if on_row and rank == 0:
                on_row(rows[-1])
            losses = []
            if progress:
                done = frac[0] + (frac[1] - frac[0]) * min(stream.samples / total, 1.0)
                progress(done, f"{variant}: epoch {stream.samples / N:.2f}, test error {err:.2f}%")
            while next_eval <= stream.samples:
                next_eval += every
    counter.phase = "eval"
    digest = _digest(model)
    warm = times[min(len(times) - 1, 2):]
    split = None
    if tracer is not None:
        split = tracer.step_split()
        tracer.save()
    return dict(variant=variant, rows=rows, steps=step, step_s=statistics.median(warm),
                step_cpu_s=statistics.median(cpu_times[min(len(cpu_times) - 1, 2):]), parameters=n_values,
                collectives=counter.totals(), groups=counter.by_group(), digest=digest, losses=step_losses,
                settings=asdict(settings), split=split)


def fsdp_rank(comm: Comm, cfg: dict[str, Any], settings: dict[str, Any], progress: Progress | None = None,
              on_row: RowSink | None = None, trace: str | None = None) -> list[dict]:
    """This rank's runs: FSDP2 with the settings' codecs, then (baselines) fp32 FSDP2 and fp32 DDP on
    the same data and seeds; one dict per run (rank 0's rows carry the curve). trace: a directory; each
    run's per-rank traces go to `trace_dir(trace, variant)` and its dict's `split` holds the step split."""
    from .ddp import ddp_rank

    c = TrainConfig(**cfg)
    s = FSDPSettings(**settings)
    s.check(comm.size)
    runs: list[tuple[str, Any]] = [(s.label(), s)]
    if s.baselines:
        if s.compressed or s.hpz or s.algorithms:
            runs.append(("FSDP2 fp32", FSDPSettings(baselines=False, ranks_per_node=s.ranks_per_node or s.hpz,
                                                    overlap=s.overlap)))
        runs.append(("DDP fp32", None))
    out = []
    for i, (variant, rs) in enumerate(runs):
        frac = (i / len(runs), (i + 1) / len(runs))
        if rs is None:
            def sub(f: float, msg: str) -> None:
                if progress:
                    progress(frac[0] + (frac[1] - frac[0]) * f, f"{variant}: {msg.split(': ', 1)[-1]}")

            def row(r: dict) -> None:
                if on_row:
                    on_row(dict(r, variant=variant))
            d = ddp_rank(comm, asdict(replace(c, codec=None, error_feedback=False)), progress=sub if progress else None,
                         on_row=row if on_row else None, trace=trace_dir(trace, variant) if trace else None)
            out.append(dict(variant=variant, rows=[dict(r, variant=variant) for r in d["rows"]], steps=d["steps"],
                            step_s=d["step_s"], parameters=d["parameters"],
                            collectives={"all_reduce": {"sent": d["bytes_sent"], "raw": d["fp32_bytes"],
                                                        "calls": d["steps"]}},
                            groups=[], digest=None, losses=[], settings=None, split=d.get("split")))
        else:
            out.append(_train_one(comm, c, rs, variant, progress, on_row, frac,
                                  trace_dir(trace, variant) if trace else None))
    return out


@dataclass
class FSDPResult:
    """Every run's curve (`variant` column), one summary row per run, bytes per step per collective
    (measured, against fp32 FSDP2's), the wire counts per process group, and the headline `summary`
    (the codec run against fp32 FSDP2: bytes, step time, CPU seconds per step, loss after the same
    steps: at the last evaluation, and `late_*`: averaged over the last half of the evaluations, where
    one evaluation of a short noisy curve says little)."""

    config: TrainConfig
    settings: FSDPSettings
    curve: pd.DataFrame
    runs: pd.DataFrame
    collectives: pd.DataFrame
    groups: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)
    digest: str | None = None


def assemble(cfg: TrainConfig, settings: FSDPSettings, results: list[list[dict]], backend: str) -> FSDPResult:
    """Rank 0's curves and every rank's wire counts, as tables."""
    P = len(results)
    first = results[0]
    curve = pd.DataFrame([r for run in first for r in run["rows"]])
    runs, coll, groups = [], [], []
    base = next((run for run in first if run["variant"] == "FSDP2 fp32"), None)
    for k, run in enumerate(first):
        steps = max(run["steps"], 1)
        rows = pd.DataFrame(run["rows"])
        totals: dict[str, dict[str, int]] = {}
        for ranks in results:
            for name, d in ranks[k]["collectives"].items():
                t = totals.setdefault(name, {"sent": 0, "raw": 0, "cross": 0, "calls": 0})
                for f in t:
                    t[f] += d.get(f, 0)
        for name, t in totals.items():
            bt = None
            if base is not None and name in COLLECTIVES:
                bt = sum(r[first.index(base)]["collectives"].get(name, {}).get("sent", 0) for r in results)
            coll.append(dict(variant=run["variant"], collective=name, bytes_per_step=t["sent"] / steps,
                             cross_node_per_step=t["cross"] / steps if run["groups"] else float("nan"),
                             uncompressed_per_step=t["raw"] / steps, calls_per_step=t["calls"] / P / steps,
                             ratio=t["sent"] / t["raw"] if t["raw"] else float("nan"),
                             fp32_fsdp_per_step=bt / max(base["steps"], 1) if bt is not None else float("nan")))
        for r, ranks in enumerate(results):
            for g in ranks[k]["groups"]:
                groups.append(dict(variant=run["variant"], rank=r, **g))
        sent = sum(t["sent"] for t in totals.values())
        cross = sum(t["cross"] for n, t in totals.items() if n in COLLECTIVES)
        cpu = [r[k].get("step_cpu_s") for r in results]
        runs.append(dict(variant=run["variant"], steps=run["steps"], step_s=max(r[k]["step_s"] for r in results),
                         step_cpu_s=sum(cpu) / P if None not in cpu else float("nan"),
                         bytes_per_step=sent / steps, cross_node_per_step=cross / steps if run["groups"] else float("nan"),
                         final_train_loss=float(rows.train_loss.iloc[-1]), final_test_loss=float(rows.test_loss.iloc[-1]),
                         late_train_loss=float(rows.train_loss.iloc[len(rows) // 2:].mean()),
                         late_test_loss=float(rows.test_loss.iloc[len(rows) // 2:].mean()),
                         final_test_error=float(rows.test_error.iloc[-1]),
                         best_test_error=float(rows.test_error.min()), parameters=run["parameters"]))
    runs_df = pd.DataFrame(runs)
    main = runs[0]
    summary = dict(label=main["variant"], mode="fsdp", backend=backend, procs=P,
                   weights_codec=settings.weights_codec, grads_codec=settings.grads_codec, hpz=settings.hpz,
                   all_gather=settings.all_gather, reduce_scatter=settings.reduce_scatter,
                   final_test_error=main["final_test_error"], best_test_error=main["best_test_error"],
                   final_train_loss=main["final_train_loss"], final_test_loss=main["final_test_loss"],
                   bytes=int(round(main["bytes_per_step"] * main["steps"])),
                   bytes_per_step=main["bytes_per_step"], cross_node_per_step=main["cross_node_per_step"],
                   ranks_per_node=settings.ranks_per_node or settings.hpz or 1,
                   steps=main["steps"], step_s=main["step_s"], step_cpu_s=main["step_cpu_s"],
                   parameters=main["parameters"])
    if base is not None:
        b = next(r for r in runs if r["variant"] == "FSDP2 fp32")
        summary.update(fp32_bytes_per_step=b["bytes_per_step"], fp32_cross_node_per_step=b["cross_node_per_step"],
                       cross_node_ratio=(main["cross_node_per_step"] / b["cross_node_per_step"]
                                         if b["cross_node_per_step"] else float("nan")),
                       bytes_ratio=main["bytes_per_step"] / b["bytes_per_step"] if b["bytes_per_step"] else float("nan"),
                       speedup=b["step_s"] / main["step_s"] if main["step_s"] else float("nan"),
                       cpu_ratio=main["step_cpu_s"] / b["step_cpu_s"] if b["step_cpu_s"] else float("nan"),
                       train_loss_ratio=main["final_train_loss"] / b["final_train_loss"],
                       test_loss_ratio=main["final_test_loss"] / b["final_test_loss"],
                       late_train_loss_ratio=main["late_train_loss"] / b["late_train_loss"],
                       late_test_loss_ratio=main["late_test_loss"] / b["late_test_loss"])
    if any(run.get("split") for ranks in results for run in ranks):  # --trace: every run's per-rank step split
        summary["split"] = [dict(ranks[k]["split"], variant=run["variant"]) for k, run in enumerate(first)
                            for ranks in results if ranks[k].get("split")]
    return FSDPResult(cfg, settings, curve, runs_df, pd.DataFrame(coll), pd.DataFrame(groups), summary,
                      first[0]["digest"])


def train_fsdp(cfg: TrainConfig, procs: int = 2, settings: FSDPSettings | None = None, *, backend: str = "gloo",
               timeout: float = 300.0, net: Any = None, progress: Progress | None = None,
               on_point: RowSink | None = None, trace: str | None = None) -> FSDPResult:
    """`cfg` trained by `procs` real processes under FSDP2 with `settings` (codecs, hpZ, baselines);
    net: a ShapedLink the ranks run in. on_point: each evaluation of rank 0's curves as it is made.
    trace: a directory for per-rank traces of each run (steps 3..5); `splits` holds their step splits."""
    from lab.comm.launch import run

    settings = settings or FSDPSettings()
    cfg.check()
    settings.check(procs)
    results = run(fsdp_rank, procs, asdict(cfg), asdict(settings), backend=backend, timeout=timeout, net=net,
                  progress=progress, on_row=on_point, trace=trace)
    return assemble(cfg, settings, results, backend)


__all__ = ["FSDPSettings", "FSDPResult", "shard_model", "fsdp_rank", "train_fsdp", "assemble", "trace_dir", "COLLECTIVES"]
