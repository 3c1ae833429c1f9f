"""One simulated training run: data, model, K virtual workers (data or model parallel), a
codec on the wire, a consistency model, and a curve of test error against steps, bytes and
modelled wall-clock time (Dettmers 2016 §3.4; paper 001's consistency models)."""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lab.comm import cost
from lab.comm.allreduce import check_algorithm, resolve_mode

from .consistency import Consistency, Timing, run as run_consistency
from lab.data import DATASETS, Dataset, load_dataset
from .data_parallel import GradientExchange, Workers, roundtrip
from .model_parallel import ModelParallelMLP
from .models import ACTIVATIONS, MODELS, build_model, check_rates, make_optimizer
from .stream import ShardStream
from lab.backend import Progress, RowSink

PARALLEL = ("data", "model")


@dataclass(frozen=True)
class TrainConfig(Consistency):
    """Everything one run depends on; the same config and seed give the same curve (except the
    modelled time when compute_s is measured rather than given). The consistency settings are
    `Consistency`'s fields (consistency, staleness, delay_s, straggler, alpha, beta, period)."""

    dataset: str = "digits"
    data_path: str | None = None
    train_limit: int | None = None
    test_limit: int | None = None
    model: str = "mlp"
    hidden: tuple[int, ...] = (1024, 1024)
    dropout: tuple[float, ...] = (0.2, 0.3, 0.3)
    activation: str = "relu"
    parallel: str = "data"
    workers: int = 4
    codec: str | None = None
    algorithm: str = "ring"
    mode: str = "auto"
    scheme: str = "all"
    error_feedback: bool = False
    optimizer: str = "rmsprop"
    lr: float = 0.003
    momentum: float = 0.9
    batch: int = 128
    epochs: float = 1.0
    evals_per_epoch: int = 4
    link: str = "eth10g"
    compute_s: float | None = None
    hook_start: int = 2
    hook_min_numel: int = 1024
    hook_algorithm: str | None = None  # DDP hook: None all_gathers once (or all_reduces summables); else this algorithm per hop
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        """Checked by `check()` (train() calls it), not on construction."""

    def check(self) -> None:
        """Raise ValueError naming the first bad setting and what is allowed."""
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown data set {self.dataset!r}; known: {', '.join(DATASETS)}")
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; known: {', '.join(MODELS)}")
        if self.parallel not in PARALLEL:
            raise ValueError(f"parallel={self.parallel!r}; allowed: {', '.join(PARALLEL)}")
        check_algorithm(self.algorithm)  # model parallelism too, where no allreduce uses it
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}; allowed: {', '.join(ACTIVATIONS)}")
        if self.model == "mlp":
            check_rates(self.dropout, len(self.hidden) + 1)
        else:  # the cnn takes the last rate (before its classifier); every rate given is checked
            check_rates(self.dropout, len(self.dropout))
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers={self.workers!r}; it must be an int >= 1")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"learning rate {self.lr}; it must be > 0")
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < self.workers:
            raise ValueError(f"batch={self.batch!r}: a batch must hold at least one sample per worker "
                             f"(>= {self.workers}); batches not divisible by the workers are split unevenly")
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise ValueError(f"epochs={self.epochs}; it must be > 0")
        if isinstance(self.evals_per_epoch, bool) or not isinstance(self.evals_per_epoch, int) or self.evals_per_epoch < 1:
            raise ValueError(f"evals_per_epoch={self.evals_per_epoch!r}; it must be an int >= 1")
        if self.compute_s is not None and not (self.compute_s > 0 and math.isfinite(self.compute_s)):
            raise ValueError(f"compute_s={self.compute_s}; it must be > 0 seconds (or None to measure)")
        if self.optimizer not in ("rmsprop", "sgd"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}; known: rmsprop, sgd")
        cost.get_link(self.link)
        if self.hook_algorithm is not None:
            if not isinstance(self.hook_algorithm, str):
                raise ValueError(f"hook_algorithm={self.hook_algorithm!r}; give a registered algorithm's name "
                                 "or native")
            check_algorithm(self.hook_algorithm)
        for name in ("hook_start", "hook_min_numel"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name}={v!r}; it must be an int >= 0")
        c = self.consistency_model()
        if self.parallel == "model":
            if self.model != "mlp":
                raise ValueError("model parallelism splits the MLP's dense layers; use --model mlp")
            if c.kind != "sync":
                raise ValueError("model-parallel workers work in lock step; consistency must be 'sync'")
            if self.error_feedback:
                raise ValueError("error feedback is for gradients; model parallelism compresses activations")
            if self.workers > min(self.hidden + (10,)):
                raise ValueError(f"{self.workers} workers cannot split a layer of {min(self.hidden + (10,))} units")
            self.model_exchange_codec()
        else:
            self.exchange()

    def exchange(self) -> GradientExchange:
        return GradientExchange(self.codec, self.algorithm, self.mode, self.scheme, self.error_feedback)

    def model_exchange_codec(self) -> str | None:
        from lab.codecs.registry import get_codec

        if self.codec not in (None, "", "none", "fp32") and get_codec(self.codec).payload_codec.phases:
            raise ValueError(f"codec {self.codec!r} compresses gradient matrices inside a data-parallel allreduce "
                             "(its own collective); model parallelism sends activations and deltas: use "
                             "--parallel data, or a codec such as dynamic_tree or mxfp8_e4m3")
        if self.scheme not in ("all", "paper"):
            raise ValueError(f"scheme={self.scheme!r}; allowed: all, paper")
        return self.codec

    def label(self) -> str:
        if self.codec in (None, "", "none", "fp32"):
            return "32-bit"
        return (f"ef({self.codec})" if self.error_feedback else self.codec) + \
            (" (own 32-bit)" if self.scheme == "paper" else "")


@dataclass
class TrainResult:
    """The curve (one row per evaluation) and a summary of the run."""

    config: TrainConfig
    curve: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> tuple[float, float]:
    """(test error %, mean cross-entropy) of model on (x, y), in eval mode, without gradients."""
    was = model.training
    model.eval()
    wrong, total = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(y), chunk):
            out = model(x[i:i + chunk])
            wrong += int((out.argmax(1) != y[i:i + chunk]).sum())
            total += float(F.cross_entropy(out, y[i:i + chunk], reduction="sum"))
    model.train(was)
    return 100.0 * wrong / len(y), total / len(y)


def _measure_compute(model: nn.Module, x: torch.Tensor, y: torch.Tensor, repeats: int = 5) -> float:
    """Median seconds of one forward+backward on (x, y), rounded to 2 significant digits so that
    runs on one machine get the same modelled clock; the random stream is left untouched."""
    m = copy.deepcopy(model)
    times = []
    with torch.random.fork_rng(devices=[]):
        for _ in range(repeats + 1):
            t = time.perf_counter()
            m.zero_grad(set_to_none=True)
            F.cross_entropy(m(x), y).backward()
            times.append(time.perf_counter() - t)
    s = sorted(times[1:])[len(times[1:]) // 2]
    return float(f"{s:.2g}")


def load_data(cfg: TrainConfig) -> Dataset:
    ds = load_dataset(cfg.dataset, cfg.data_path, seed=cfg.seed)
    if cfg.train_limit is not None or cfg.test_limit is not None:
        ds = ds.subset(cfg.train_limit, cfg.test_limit, seed=cfg.seed)
    return ds


def train(cfg: TrainConfig, progress: Progress | None = None, on_point: RowSink | None = None,
          data: Dataset | None = None) -> TrainResult:
    """Train once as `cfg` says; every evaluation appends a curve row (streamed to on_point)."""
    cfg.check()
    device = torch.device(cfg.device)
    ds = data if data is not None else load_data(cfg)
    if cfg.batch > len(ds.train_y):
        raise ValueError(f"batch={cfg.batch} is larger than the {len(ds.train_y)} training samples of {ds.name}")
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, ds.features, ds.classes, ds.image_shape, hidden=cfg.hidden,
                        dropout=cfg.dropout, activation=cfg.activation).to(device)
    xtr, ytr = ds.train_x.to(device), ds.train_y.to(device)
    xte, yte = ds.test_x.to(device), ds.test_y.to(device)
    K = cfg.workers
    opt_factory = lambda ps: make_optimizer(cfg.optimizer, ps, cfg.lr, cfg.momentum)  # noqa: E731
    shard = max(1, cfg.batch // K)
    compute_s = cfg.compute_s or _measure_compute(model, xtr[:shard], ytr[:shard])
    n_values = sum(p.numel() for p in model.parameters())
    stream = ShardStream(xtr, ytr, cfg.batch, K, cfg.seed)
    link = cost.get_link(cfg.link)

    if cfg.parallel == "model":
        mp = ModelParallelMLP(model, K, cfg.codec, cfg.scheme)
        opt = opt_factory(list(model.parameters()))
        eval_model: Callable[[], nn.Module] = lambda: mp  # noqa: E731

        def updates():
            clock = 0.0
            while True:
                x, y = stream.batch()
                mp.traffic.forward.clear()
                mp.traffic.backward.clear()
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(mp(x), y)
                loss.backward()
                opt.step()
                clock += compute_s + mp.traffic.time_s(link, K)
                yield float(loss.detach()), len(y), mp.traffic.nbytes, clock, 0, 0
        stream_updates = updates()
    else:
        exchange = cfg.exchange()
        workers = Workers(model, K, opt_factory, exchange)
        probe = workers.codecs[0]
        wire, how = 4.0, "raw"
        if probe is not None:
            c = copy.deepcopy(probe)
            gen = torch.Generator(device="cpu").manual_seed(0)
            wire = sum(roundtrip(c, torch.randn(p.shape, generator=gen).to(device), f"probe{i}")[1]
                       for i, p in enumerate(model.parameters())) / n_values
            how = resolve_mode(probe, exchange.effective_mode)
        timing = Timing(compute_s, link, cfg.algorithm, K, n_values, wire, how)
        runner = run_consistency(cfg.consistency_model(), workers, stream, timing, cfg.seed)
        eval_model = lambda: runner.model  # noqa: E731
        stream_updates = ((u.loss, u.samples, u.nbytes, u.time_s, u.staleness, u.clock_gap) for u in runner)

    N = len(ytr)
    total = int(round(cfg.epochs * N))
    every = max(1, N // cfg.evals_per_epoch)
    rows: list[dict] = []
    t0 = time.perf_counter()
    err, tloss = evaluate(eval_model(), xte, yte)
    row = dict(step=0, samples=0, epoch=0.0, train_loss=math.nan, test_error=err, test_loss=tloss,
               bytes=0, time_s=0.0, wall_s=0.0, staleness_mean=0.0, staleness_max=0, clock_gap_max=0)
    rows.append(row)
    if on_point:
        on_point(dict(row))
    step = samples = nbytes = 0
    losses, stale = [], []
    gap_max = 0
    next_eval = every
    for loss, n, b, clock, st, gap in stream_updates:
        step += 1
        samples += n
        nbytes += b
        losses.append(loss * n)
        stale.append(st)
        gap_max = max(gap_max, gap)
        if not math.isfinite(loss):
            raise FloatingPointError(f"training diverged at step {step} (loss {loss}); lower the learning rate")
        if samples >= next_eval or samples >= total:
            err, tloss = evaluate(eval_model(), xte, yte)
            seen = samples - rows[-1]["samples"]
            row = dict(step=step, samples=samples, epoch=samples / N, train_loss=sum(losses) / max(seen, 1),
                       test_error=err, test_loss=tloss, bytes=nbytes, time_s=clock,
                       wall_s=time.perf_counter() - t0, staleness_mean=sum(stale) / len(stale),
                       staleness_max=max(stale), clock_gap_max=gap_max)
            rows.append(row)
            losses, stale = [], []
            if on_point:
                on_point(dict(row))
            if progress:
                progress(min(samples / total, 1.0), f"{cfg.label()}: epoch {samples / N:.2f}, "
                                                    f"test error {err:.2f}%")
            while next_eval <= samples:
                next_eval += every
        if samples >= total:
            break
    curve = pd.DataFrame(rows)
    summary = dict(label=cfg.label(), dataset=ds.name, train_samples=N, test_samples=len(yte),
                   final_test_error=float(curve.test_error.iloc[-1]), best_test_error=float(curve.test_error.min()),
                   bytes=int(nbytes), bytes_per_step=nbytes / max(step, 1), steps=step,
                   modelled_time_s=float(curve.time_s.iloc[-1]), compute_s=compute_s,
                   wall_s=time.perf_counter() - t0, parameters=n_values)
    return TrainResult(cfg, curve, summary)


__all__ = ["TrainConfig", "TrainResult", "train", "evaluate", "load_data", "PARALLEL"]
