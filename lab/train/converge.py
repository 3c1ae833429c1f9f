"""Time to accuracy: does a codec still train? For a task and codec specs, train fp32 and
every codec from the same seeds, measure the steps (and wall-clock seconds here) each needs to reach
a target validation loss, and report the penalty = steps / fp32's steps with a confidence interval.

Target (per seed): the validation loss the fp32 run of that seed has at its last step (`steps`),
times (1 + tolerance). A codec run of the same seed (same data split, initialisation and batch
order) trains until it reaches that target, or until its budget of `budget` x `steps` steps ends
(then its steps are infinite: the codec never pays). The per-seed penalty is the ratio of the two
step counts (measured at evaluations, every `eval_every` steps); the reported penalty is the mean
over seeds with a two-sided Student-t 95 % confidence interval (infinite when any seed missed).

Workers: `mode='sim'` runs K virtual workers in this process whose gradients are summed by
`lab.comm.allreduce` on SimComm with the codec's exact per-hop semantics (lab.train.data_parallel);
`mode='ddp'` runs P = 2..4 real processes under PyTorch DDP with the codec as its communication
hook (lab.train.ddp, lab.train.ddp_hook); `mode=NAME`, a registered parallelism (lab.train.parallelism:
pipeline, tensor, ...) that trains the task's model (pipeline and tensor the tiny GPT too:
lab.train.parallelism.lm), runs it on P = 2..4 real processes with the spec's codec on what its ranks send
(activations; no error feedback, no warm-up). A spec is a codec spec of the registry (`ef:` prefix for
error feedback, PowerSGD's rank and start_iter among its options) with an optional `@N`: the first
N steps exchange fp32 gradients (the hook's warm-up, start_iter).

Agarwal et al. 2022 (MLSys, "On the utility of gradient compression") argue that time to
accuracy, not time per step, decides whether compression pays; this module measures the step
count half of it. `load_penalties` reads a result back for the verdicts (lab.plan, pays).
"""
from __future__ import annotations

import copy
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from lab.backend import Progress, RowSink
from lab.comm.allreduce import NATIVE, check_algorithm
from lab.data import Dataset, load_corpus

from .data_parallel import GradientExchange, split_batch, sum_gradients
from .models import make_optimizer
from .run import TrainConfig, evaluate, load_data
from .stream import ShardStream
from .tasks import Task, get_task, task_infos

MODES = ("sim", "ddp")  # the data-parallel modes; every registered parallelism is a mode too (`modes`)
FP32 = "fp32"
MAX_SIM_WORKERS = 64
DDP_PROCS = (2, 4)
CONFIDENCE = 0.95


#: the --smoke preset every task shares (each adds its own `Task.smoke` on top: `smoke_settings`)
SMOKE: dict[str, Any] = dict(specs=("fp32", "dynamic_tree", "randomk:ratio=0.01", "ef:randomk:ratio=0.01"),
                             seeds=3, workers=2, steps=60, eval_every=5, budget=6.0, tolerance=0.5, train_limit=1000)
#: the --smoke budget under a parallelism, whose real ranks train the whole budget
SMOKE_RANK_BUDGET = 2.0


def modes() -> list[str]:
    """Every mode a study can train in now: sim, ddp, then each registered parallelism (plugins included)."""
    from .parallelism import strategy_names

    return [*MODES, *strategy_names()]


def _strategy(mode: str) -> Any:
    """The registered parallelism called `mode`, or None for sim and ddp."""
    if mode in MODES:
        return None
    from .parallelism import REGISTRY

    return REGISTRY.get(mode) if isinstance(mode, str) else None


def smoke_settings(task: str = "mlp", mode: str = "sim") -> dict[str, Any]:
    """The --smoke preset of `task`: SMOKE, then the task's own smoke settings (its model's sizes, its
    optimizer's learning rate), then the task's name; under a parallelism (`mode`), only the preset's specs
    that can carry what its ranks send (activations: fp32 and the dynamic tree) and a budget of 2 (its ranks
    train the whole budget: no early stop)."""
    out = {**SMOKE, **get_task(task).smoke, "task": task}
    strategy = _strategy(mode)
    if strategy is not None:
        from .parallelism.wire import activation_codec

        def carried(text: str) -> bool:
            try:
                spec = Spec.parse(text)
                return spec.is_fp32 or (not spec.error_feedback and not spec.warmup
                                         and activation_codec(spec.codec, strategy.carries) is not None)
            except ValueError:
                return False
        out.update(specs=tuple(t for t in out["specs"] if carried(t)), budget=min(out["budget"], SMOKE_RANK_BUDGET))
    return out


def _task_model(task: Task) -> str | None:
    """The model a real-rank mode builds for `task`: its `train_model`, or 'gpt' for a language-model task."""
    from .parallelism.lm import LM_MODEL

    return LM_MODEL if task.kind == "lm" else task.train_model


class ConvergeError(ValueError):
    """A run that cannot define or reach what it measures (fp32 diverged, a budget too small)."""


@dataclass(frozen=True)
class Spec:
    """One codec spec: `text` as given, codec (None for fp32), error feedback, fp32 warm-up steps."""

    text: str
    codec: str | None
    error_feedback: bool
    warmup: int

    @classmethod
    def parse(cls, text: str) -> "Spec":
        """'fp32' | '[ef:]codec[:options][@N]' (@N: the first N steps in fp32)."""
        from lab.codecs import get_codec

        raw = str(text).strip()
        body, warm = raw, 0
        if "@" in raw:
            body, _, w = raw.rpartition("@")
            if not w.strip().isdigit():
                raise ValueError(f"codec spec {raw!r}: '@{w}' must be '@N', N >= 0 steps of fp32 warm-up")
            warm = int(w)
        body = body.strip()
        from lab.codecs import FP32_ALIASES

        if body.lower() in FP32_ALIASES:
            if warm:
                raise ValueError(f"codec spec {raw!r}: a warm-up needs a codec to warm up to")
            return cls(FP32, None, False, 0)
        ef = body.startswith("ef:")
        codec = body[3:] if ef else body
        try:
            get_codec(codec)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"codec spec {raw!r}: {str(e).strip(chr(34) + chr(39))}") from None
        return cls(raw, codec, ef, warm)

    @property
    def is_fp32(self) -> bool:
        return self.codec is None


@dataclass(frozen=True)
class ConvergeConfig:
    """Everything a convergence study depends on; None fields take the task's defaults (`Task.defaults`)."""

    task: str = "mlp"
    specs: tuple[str, ...] = ("fp32", "dynamic_tree")
    seeds: int = 3
    mode: str = "sim"
    workers: int = 4
    algorithm: str = "ring"
    steps: int | None = None
    budget: float = 3.0
    eval_every: int | None = None
    tolerance: float = 0.05
    lr: float | None = None
    optimizer: str | None = None
    momentum: float | None = None
    batch: int | None = None
    dataset: str | None = None
    data_path: str | None = None
    train_limit: int | None = None
    test_limit: int | None = None
    hidden: tuple[int, ...] | None = None
    dropout: tuple[float, ...] | None = None
    corpus: str | None = None
    vocab: int | None = None
    context: int | None = None
    dim: int | None = None
    layers: int | None = None
    heads: int | None = None
    first_seed: int = 0

    def resolved(self) -> "ConvergeConfig":
        """The config with the task's defaults filled in, checked (ValueError names what is wrong)."""
        task = get_task(self.task)
        fill = {k: v for k, v in task.defaults.items() if getattr(self, k) is None}
        c = replace(self, **fill)
        c._check(task)
        return c

    def _check(self, task: Task) -> None:
        def pos_int(name: str, lo: int = 1) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}={v!r}; it must be an int >= {lo}")

        strategy = _strategy(self.mode)
        if self.mode not in MODES and strategy is None:
            others = [m for m in modes() if m not in MODES]
            raise ValueError(f"mode={self.mode!r}; allowed: sim (K simulated workers), ddp (real processes)"
                             + (f", or a parallelism on real processes: {', '.join(others)}" if others else ""))
        for n in ("seeds", "steps", "eval_every", "batch"):
            pos_int(n)
        pos_int("first_seed", 0)
        if self.mode == "sim" and not 1 <= self.workers <= MAX_SIM_WORKERS:
            raise ValueError(f"workers={self.workers}; simulated workers: 1..{MAX_SIM_WORKERS}")
        if self.mode == "ddp":
            if not DDP_PROCS[0] <= self.workers <= DDP_PROCS[1]:
                raise ValueError(f"workers={self.workers}; DDP runs {DDP_PROCS[0]}..{DDP_PROCS[1]} processes here")
            if task.train_model is None:
                raise ValueError(f"task {task.name!r} trains with simulated workers only (--mode sim); DDP trains "
                                 + ", ".join(t.name for t in task_infos() if t.train_model is not None))
            if self.optimizer not in ("sgd", "rmsprop"):
                raise ValueError(f"optimizer {self.optimizer!r}: DDP runs train with sgd or rmsprop")
        if strategy is not None:
            self._check_strategy(task, strategy)
        if self.batch < self.workers:
            raise ValueError(f"batch={self.batch} cannot feed {self.workers} workers; use a batch >= {self.workers}")
        if self.eval_every > self.steps:
            raise ValueError(f"steps={self.steps} is less than one evaluation interval (eval_every="
                             f"{self.eval_every}): the budget is too small to define a target")
        if not (isinstance(self.budget, (int, float)) and math.isfinite(self.budget) and self.budget >= 1):
            raise ValueError(f"budget={self.budget}; it must be >= 1 (codec runs get budget x steps steps)")
        if not (isinstance(self.tolerance, (int, float)) and 0 <= self.tolerance < 1):
            raise ValueError(f"tolerance={self.tolerance}; allowed 0 <= tolerance < 1 (relative, above fp32's loss)")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr={self.lr}; it must be > 0")
        if not (isinstance(self.momentum, (int, float)) and 0 <= self.momentum < 1):
            raise ValueError(f"momentum={self.momentum}; allowed 0 <= momentum < 1")
        if self.optimizer not in ("sgd", "rmsprop", "adamw"):
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: sgd, rmsprop, adamw")
        if not self.specs:
            raise ValueError("no codec specs; give at least one (fp32 is always run as the reference)")
        check_algorithm(self.algorithm)  # fp32 alone too: a name no algorithm has is never recorded
        for s in self.parsed_specs():
            check_spec(s, self)

    def _check_strategy(self, task: Task, strategy: Any) -> None:
        """A parallelism trains the task's own model on 2..4 real processes, with its default settings."""
        lo = max(strategy.min_procs, DDP_PROCS[0])
        if not lo <= self.workers <= DDP_PROCS[1]:
            raise ValueError(f"workers={self.workers}; --mode {self.mode} runs {lo}..{DDP_PROCS[1]} processes here")
        if not strategy.trains(_task_model(task)):
            can = [t.name for t in task_infos() if strategy.trains(_task_model(t))]
            what = [*strategy.models, *(["gpt"] if strategy.lm else [])]
            raise ValueError(f"--mode {self.mode} cannot train task {task.name!r} (it trains --model "
                             f"{' or '.join(what)}); the tasks it can train: {', '.join(can) or 'none'}")
        lm = task.kind == "lm"
        allowed = ("sgd", "rmsprop", "adamw") if lm else ("sgd", "rmsprop")
        if self.optimizer not in allowed:
            raise ValueError(f"optimizer {self.optimizer!r}: --mode {self.mode} trains {task.name} with "
                             + " or ".join(allowed))
        if lm:
            cfg = _lm_config(self)
            cfg.check()
        else:
            cfg = TrainConfig(dataset=self.dataset, data_path=self.data_path, train_limit=self.train_limit,
                              test_limit=self.test_limit, model=task.train_model, hidden=tuple(self.hidden or ()),
                              dropout=tuple(self.dropout or ()), workers=self.workers, optimizer=self.optimizer,
                              lr=self.lr, momentum=self.momentum, batch=self.batch)
        strategy.settings().check(cfg, self.workers)

    def parsed_specs(self) -> list[Spec]:
        """fp32 first (the reference), then each distinct spec in the order given ('all': every
        registered codec that compresses, with its default options, unless a spec given by name
        builds the same codec: 'all,topk:ratio=0.01' runs top-k once)."""
        from lab.codecs import canonical_spec

        out = [Spec.parse(FP32)]
        keys = {canonical_spec(FP32)}
        for text in expand_specs(self.specs):
            s = Spec.parse(text)
            k = canonical_spec(s.text)
            if k not in keys:
                out.append(s)
                keys.add(k)
        return out

    @property
    def max_steps(self) -> int:
        return int(math.ceil(self.budget * self.steps))


def expand_specs(specs: tuple[str, ...] | list[str]) -> list[str]:
    """The specs with 'all' replaced by every registered codec except fp32 (default options), read
    from the registry now (a plugin registered later is included); a registered name is left out
    of 'all' when a spec given by name builds the same codec (lab.codecs.canonical_spec)."""
    from lab.codecs import canonical_spec, codec_names

    named = set()
    for s in specs:
        if str(s).strip() != "all":
            try:
                named.add(canonical_spec(str(s)))
            except ValueError:
                pass  # Spec.parse reports it
    out: list[str] = []
    for s in specs:
        if str(s).strip() == "all":
            out += [n for n in codec_names() if n != FP32 and canonical_spec(n) not in named]
        else:
            out.append(s)
    return out


def coverage(rows: list[dict], names: list[str] | None = None) -> dict[str, list[str]]:
    """Which codecs a study's per-spec rows measured: {'measured': codec names with at least one finished
    run (any options, with or without error feedback), 'not_measured': the others} among `names` (default:
    every registered codec; fp32 excluded: it is the reference)."""
    from lab.codecs import codec_names
    from lab.codecs.registry import split_spec

    seen = set()
    for r in rows:
        spec = str(r.get("spec", ""))
        if not r.get("measured") or spec == FP32:
            continue
        try:
            seen.add(split_spec(spec.rpartition("@")[0] if "@" in spec else spec)[1])
        except ValueError:
            continue
    names = [n for n in (codec_names() if names is None else names) if n != FP32]
    return dict(measured=[n for n in names if n in seen], not_measured=[n for n in names if n not in seen])


def check_spec(spec: Spec, cfg: ConvergeConfig) -> None:
    """ValueError (one line) when `spec` cannot train in cfg's mode (a gather-only codec where the
    algorithm needs summing, error feedback on a codec with its own, ...)."""
    if spec.is_fp32:
        return
    strategy = _strategy(cfg.mode)
    if strategy is not None:
        from .parallelism.wire import activation_codec

        try:
            if spec.warmup:
                raise ValueError("a warm-up ('@N') is the DDP hook's fp32 start; drop it")
            activation_codec(("ef:" if spec.error_feedback else "") + spec.codec, strategy.carries)
        except ValueError as e:
            raise ValueError(f"codec spec {spec.text!r} cannot train with --mode {cfg.mode}: {e}") from None
        return
    try:
        if cfg.mode == "sim":
            GradientExchange(spec.codec, cfg.algorithm, "auto", "all", spec.error_feedback)
        else:
            from .ddp_hook import CodecHookState

            # what each rank checks when it starts (TrainConfig.check, the hook), here before fp32 trains
            TrainConfig(codec=spec.codec, error_feedback=spec.error_feedback, hook_algorithm=cfg.algorithm).exchange()
            if cfg.algorithm == NATIVE:
                raise ValueError("the native all_reduce carries fp32 only; pick a registered algorithm such as ring")
            CodecHookState.of(spec.codec, spec.error_feedback, start_iter=spec.warmup, algorithm=cfg.algorithm)
    except ValueError as e:
        where = f"simulated workers ({cfg.algorithm})" if cfg.mode == "sim" else "the DDP hook"
        raise ValueError(f"codec spec {spec.text!r} cannot train with {where}: {e}") from None


# -- data and models

def _lm_config(c: ConvergeConfig, **more: Any) -> TrainConfig:
    """A language-model task's settings as the real ranks' config (`lab.train.parallelism.lm.GPTConfig`)."""
    from .parallelism.lm import GPTConfig

    return GPTConfig(task=c.task, corpus=c.corpus, data_path=c.data_path, vocab=c.vocab, context=c.context, dim=c.dim,
                     layers=c.layers, heads=c.heads, workers=c.workers, optimizer=c.optimizer, lr=c.lr,
                     momentum=c.momentum, batch=c.batch, **more)


@dataclass
class TaskData:
    """One seed's data of a task and how to build, feed and score its model."""

    cfg: ConvergeConfig
    seed: int
    dataset: Dataset | None = None
    train_tokens: torch.Tensor | None = None
    valid_tokens: torch.Tensor | None = None
    vocab: int = 0
    source: str = ""

    @property
    def kind(self) -> str:
        return get_task(self.cfg.task).kind

    def train_config(self, spec: Spec | None = None, steps: int = 1) -> TrainConfig:
        """The task as lab.train.run's TrainConfig (the real ranks build their model from it): an image task's,
        or a language-model task's `GPTConfig` (an epoch: the training split's windows)."""
        c = self.cfg
        if self.kind == "lm":
            from .parallelism.lm import epoch_samples

            n = epoch_samples(self.train_tokens, c.context)
            return _lm_config(c, seed=self.seed, codec=spec.codec if spec else None,
                              error_feedback=bool(spec and spec.error_feedback), epochs=steps * c.batch / n,
                              evals_per_epoch=max(1, round(n / (c.eval_every * c.batch))))
        n = len(self.dataset.train_y) if self.dataset is not None else 1
        return TrainConfig(dataset=c.dataset, data_path=c.data_path, train_limit=c.train_limit,
                           test_limit=c.test_limit, model=get_task(c.task).train_model, hidden=tuple(c.hidden or ()),
                           dropout=tuple(c.dropout), workers=c.workers, optimizer=c.optimizer, lr=c.lr,
                           momentum=c.momentum, batch=c.batch, seed=self.seed,
                           codec=spec.codec if spec else None, error_feedback=bool(spec and spec.error_feedback),
                           hook_start=spec.warmup if spec else 0, hook_min_numel=0, hook_algorithm=c.algorithm,
                           epochs=steps * c.batch / n,
                           evals_per_epoch=max(1, round(n / (c.eval_every * c.batch))), compute_s=1.0)

    def build(self) -> nn.Module:
        """The task's model (`Task.build`), initialised from torch's global RNG (seeded by the caller)."""
        return get_task(self.cfg.task).build(self.cfg, self)

    def optimizer(self, params) -> torch.optim.Optimizer:
        c = self.cfg
        if c.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=c.lr, weight_decay=0.0)
        return make_optimizer(c.optimizer, params, c.lr, c.momentum)

    def batches(self, K: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Seeded global batches (the DDP ranks walk the same order for image tasks)."""
        c = self.cfg
        if self.kind == "classify":
            stream = ShardStream(self.dataset.train_x, self.dataset.train_y, c.batch, K, self.seed)
            while True:
                yield stream.batch()
        from .parallelism.lm import LMStream  # the real ranks draw the same windows

        lm = LMStream(self.train_tokens, c.batch, c.context, self.seed)
        while True:
            yield lm.batch()

    def evaluate(self, model: nn.Module) -> tuple[float, float]:
        """(validation loss per sample/token, quality: test error % or perplexity)."""
        if self.kind == "classify":
            err, loss = evaluate(model, self.dataset.test_x, self.dataset.test_y)
            return loss, err
        from .parallelism.lm import perplexity, windows

        x, y = windows(self.valid_tokens, self.cfg.context)
        was = model.training
        model.eval()
        with torch.no_grad():
            loss = float(F.cross_entropy(model(x), y))
        model.train(was)
        return loss, perplexity(loss)


def load_task_data(cfg: ConvergeConfig, seed: int, cache: dict | None = None) -> TaskData:
    """The data of one seed: image tasks split and subset with the seed as `paralab train` does
    (so DDP ranks see the same); the corpus is fixed (seed 0), only the batch order follows the seed."""
    kind = get_task(cfg.task).kind
    key = (cfg.task, seed) if kind == "classify" else (cfg.task, "corpus")
    if cache is not None and key in cache:
        return replace(cache[key], seed=seed)
    if kind == "classify":
        ds = load_data(TrainConfig(dataset=cfg.dataset, data_path=cfg.data_path, train_limit=cfg.train_limit,
                                   test_limit=cfg.test_limit, seed=seed))
        if cfg.batch > len(ds.train_y):
            raise ValueError(f"batch={cfg.batch} is larger than the {len(ds.train_y)} training samples of {ds.name}")
        data = TaskData(cfg, seed, dataset=ds, source=f"{ds.name}: {ds.source}")
    else:
        corpus = load_corpus(cfg.corpus, cfg.data_path, vocab_size=cfg.vocab, seed=0)
        if corpus.valid.numel() < cfg.context + 1 or corpus.train.numel() < cfg.context + 2:
            raise ValueError(f"corpus {corpus.name!r} is too short for a context of {cfg.context} tokens")
        from .parallelism.lm import VALID_TOKENS

        data = TaskData(cfg, seed, train_tokens=corpus.train, valid_tokens=corpus.valid[:VALID_TOKENS],
                        vocab=corpus.vocab_size, source=f"{corpus.name}: {corpus.source}")
    if cache is not None:
        cache[key] = data
    return data


# -- one run

@dataclass
class Run:
    """One (spec, seed) training run: its curve (step, val_loss, quality, train_s) and outcome."""

    spec: str
    seed: int
    curve: list[dict] = field(default_factory=list)
    steps_run: int = 0
    diverged: bool = False
    bytes_per_step: float = float("nan")
    wall_s: float = 0.0


def _loss_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), y, reduction="sum")


def train_sim(data: TaskData, spec: Spec, max_steps: int, *, until: Callable[[int, float], bool] | None = None,
              progress: Progress | None = None, on_eval: RowSink | None = None) -> Run:
    """K simulated workers (cfg.workers) train `spec` from data.seed for up to max_steps steps,
    evaluating every cfg.eval_every steps on worker 0; `until(step, val_loss)` ends it early.
    Each worker's gradient is d(sum of its shard's losses)/(samples or tokens of the batch); the
    sum over workers goes through lab.comm.allreduce with the codec (per-hop semantics,
    lab.train.data_parallel), or is summed exactly in fp32 (fp32 specs and warm-up steps)."""
    cfg, K = data.cfg, data.cfg.workers
    torch.manual_seed(data.seed)
    model = data.build()
    models = [model] + [copy.deepcopy(model) for _ in range(K - 1)]
    opts = [data.optimizer(list(m.parameters())) for m in models]
    names = [n for n, _ in model.named_parameters()]
    n_values = sum(p.numel() for p in model.parameters())
    exchange = None if spec.is_fp32 else GradientExchange(spec.codec, cfg.algorithm, "auto", "all",
                                                          spec.error_feedback)
    codecs = [exchange.make_codec() for _ in range(K)] if exchange else [None] * K
    run = Run(spec.text, data.seed)
    t0 = time.perf_counter()
    train_s, nbytes = 0.0, 0

    def point(step: int) -> float:
        loss, q = data.evaluate(models[0])
        row = dict(spec=spec.text, seed=data.seed, step=step, val_loss=loss, quality=q, train_s=train_s)
        run.curve.append(row)
        if on_eval:
            on_eval(dict(row))
        return loss

    point(0)
    batches = data.batches(K)
    for step in range(1, max_steps + 1):
        x, y = next(batches)
        t = time.perf_counter()
        denom = y.numel()
        grads, loss = [], 0.0
        for k, (xs, ys) in enumerate(split_batch(x, y, K)):
            m = models[k]
            m.zero_grad(set_to_none=True)
            lk = _loss_sum(m, xs, ys)
            (lk / denom).backward()
            grads.append([p.grad for p in m.parameters()])
            loss += float(lk.detach())
        if exchange is not None and step > spec.warmup:
            summed, b = sum_gradients(grads, codecs, exchange, names)
        else:
            total = [torch.stack(gs).sum(0) if K > 1 else gs[0] for gs in zip(*grads)]
            summed = [total] + [[g.clone() for g in total] for _ in range(K - 1)]
            b = 2 * (K - 1) * 4 * n_values if K > 1 else 4 * n_values  # ring all_reduce volume, all ranks
        nbytes += b
        for k in range(K):
            for p, g in zip(models[k].parameters(), summed[k]):
                p.grad = g
            opts[k].step()
        train_s += time.perf_counter() - t
        run.steps_run = step
        if not math.isfinite(loss) or not all(math.isfinite(float(g.abs().max())) for g in summed[0]):
            run.diverged = True
            run.curve.append(dict(spec=spec.text, seed=data.seed, step=step, val_loss=math.nan, quality=math.nan,
                                  train_s=train_s))
            break
        if step % cfg.eval_every == 0 or step == max_steps or step == cfg.steps:
            v = point(step)
            if progress:
                progress(step / max_steps, f"{spec.text} seed {data.seed}: step {step}, validation loss {v:.4g}")
            if until is not None and until(step, v):
                break
    run.bytes_per_step = nbytes / max(run.steps_run, 1)
    run.wall_s = time.perf_counter() - t0
    return run


def train_ddp_run(data: TaskData, spec: Spec, max_steps: int, *, progress: Progress | None = None,
                  timeout: float = 300.0) -> Run:
    """`spec` on cfg.workers real DDP processes (lab.train.ddp, the codec as the communication hook,
    @N as the hook's start_iter); rank 0's curve, trained for max_steps steps (no early stop)."""
    from .ddp import train_ddp

    res = train_ddp(data.train_config(spec, max_steps), data.cfg.workers, timeout=timeout, progress=progress)
    return _rank_run(data, spec, res)


def train_strategy_run(data: TaskData, spec: Spec, max_steps: int, *, progress: Progress | None = None,
                       timeout: float = 300.0) -> Run:
    """`spec` on cfg.workers real processes under the registered parallelism cfg.mode (its default settings,
    the spec's codec on what its ranks send); rank 0's curve, trained for max_steps steps (no early stop)."""
    from .parallelism import train_parallel

    cfg = replace(data.train_config(spec, max_steps), hook_algorithm=None)
    res = train_parallel(data.cfg.mode, cfg, data.cfg.workers, timeout=timeout, progress=progress)
    return _rank_run(data, spec, res)


def _rank_run(data: TaskData, spec: Spec, res: Any) -> Run:
    """A Run from a real-rank result (DDP's or a parallelism's): rank 0's curve after the initial model's point."""
    run = Run(spec.text, data.seed, steps_run=int(res.summary["steps"]), wall_s=float(res.curve.wall_s.iloc[-1]))
    torch.manual_seed(data.seed)
    loss0, q0 = data.evaluate(data.build())  # the ranks build the same initial model from the seed
    run.curve.append(dict(spec=spec.text, seed=data.seed, step=0, val_loss=loss0, quality=q0, train_s=0.0))
    for r in res.curve.to_dict(orient="records"):
        run.curve.append(dict(spec=spec.text, seed=data.seed, step=int(r["step"]), val_loss=float(r["test_loss"]),
                              quality=float(r["test_error"]), train_s=float(r["wall_s"])))
    run.diverged = not math.isfinite(run.curve[-1]["val_loss"])
    run.bytes_per_step = float(res.summary["bytes"]) / max(run.steps_run, 1)
    return run


# -- outcomes and statistics

def at_step(curve: list[dict], step: int) -> dict | None:
    """The curve's row at `step` (None when the run did not get there)."""
    for r in curve:
        if r["step"] == step:
            return r
    return None


def arrival(curve: list[dict], target: float) -> dict | None:
    """The first evaluation whose validation loss is <= target (None: never)."""
    for r in curve:
        if r["step"] > 0 and math.isfinite(r["val_loss"]) and r["val_loss"] <= target:
            return r
    return None


def target_of(fp32: Run, steps: int, tolerance: float) -> float:
    """fp32's validation loss at its last step times (1 + tolerance); ConvergeError when fp32 diverged
    or did not learn (no target can be defined)."""
    last = at_step(fp32.curve, steps)
    if fp32.diverged or last is None or not math.isfinite(last["val_loss"]):
        raise ConvergeError(f"fp32 diverged (seed {fp32.seed}, step {fp32.steps_run}): no target can be defined; "
                            "lower the learning rate")
    first = fp32.curve[0]["val_loss"]
    if not last["val_loss"] < first:
        raise ConvergeError(f"fp32 did not learn in {steps} steps (seed {fp32.seed}: validation loss {first:.4g} -> "
                            f"{last['val_loss']:.4g}): the budget is too small to define a target; raise the steps "
                            "or the learning rate")
    return last["val_loss"] * (1.0 + tolerance)


def t_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Two-sided Student-t interval of the mean of `values` (None for fewer than 2 or any inf)."""
    from scipy import stats

    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return None
    m, sd = statistics.fmean(values), statistics.stdev(values)
    h = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return m - h, m + h


def run_row(task: str, mode: str, run: Run, target: float, fp32_steps: float | None, fp32_time: float | None,
            steps: int) -> dict:
    """One (spec, seed) row: steps and seconds to the target, quality at `steps`, the per-seed penalty."""
    hit = arrival(run.curve, target)
    # the evaluation at fp32's last step (DDP runs evaluate every N/evals samples: the last one before it)
    final = at_step(run.curve, steps) or [r for r in run.curve if r["step"] <= steps][-1]
    s = float(hit["step"]) if hit else math.inf
    t = float(hit["train_s"]) if hit else math.inf
    return dict(task=task, mode=mode, spec=run.spec, seed=run.seed, target=target, reached=hit is not None,
                steps_to_target=s, time_to_target_s=t,
                penalty=s / fp32_steps if fp32_steps else math.nan,
                time_penalty=t / fp32_time if fp32_time else math.nan,
                final_step=int(final["step"]), final_val_loss=float(final["val_loss"]),
                final_quality=float(final["quality"]), best_val_loss=min(r["val_loss"] for r in run.curve),
                steps_run=run.steps_run, step_s=run.curve[-1]["train_s"] / max(run.steps_run, 1),
                bytes_per_step=run.bytes_per_step, diverged=run.diverged, wall_s=run.wall_s)


def summarize(runs: list[dict], specs: list[str] | None = None, seeds: int | None = None) -> list[dict]:
    """One row per spec from its finished per-seed rows: steps and penalty (mean, t-based CI; inf when
    any seed missed the target), time penalty, final quality; `partial` when fewer than `seeds` seeds."""
    order = specs or list(dict.fromkeys(r["spec"] for r in runs))
    out = []
    for spec in order:
        rs = [r for r in runs if r["spec"] == spec]
        if not rs:
            out.append(dict(spec=spec, seeds=0, reached=0, never_reached=0, diverged=0, partial=True,
                            measured=False))
            continue
        steps = [r["steps_to_target"] for r in rs]
        pen = [r["penalty"] for r in rs if not math.isnan(r["penalty"])]
        tpen = [r["time_penalty"] for r in rs if not math.isnan(r["time_penalty"])]
        reached = sum(r["reached"] for r in rs)
        ci_s, ci_p, ci_t = t_interval(steps), t_interval(pen), t_interval(tpen)
        mean = (lambda v: statistics.fmean(v) if v and all(math.isfinite(x) for x in v) else
                (math.inf if v else math.nan))
        out.append(dict(
            spec=spec, seeds=len(rs), reached=reached, never_reached=len(rs) - reached,
            steps_mean=mean(steps), steps_ci_low=ci_s[0] if ci_s else None, steps_ci_high=ci_s[1] if ci_s else None,
            penalty=mean(pen) if pen else None, penalty_ci_low=ci_p[0] if ci_p else None,
            penalty_ci_high=ci_p[1] if ci_p else None,
            time_penalty=mean(tpen) if tpen else None, time_penalty_ci_low=ci_t[0] if ci_t else None,
            time_penalty_ci_high=ci_t[1] if ci_t else None,
            time_to_target_s=mean([r["time_to_target_s"] for r in rs]),
            final_val_loss=statistics.fmean(r["final_val_loss"] for r in rs),
            final_quality=statistics.fmean(r["final_quality"] for r in rs),
            step_s=statistics.fmean(r["step_s"] for r in rs),
            bytes_per_step=statistics.fmean(r["bytes_per_step"] for r in rs),
            diverged=sum(r["diverged"] for r in rs), measured=bool(pen),
            partial=seeds is not None and len(rs) < seeds))
    return out


# -- the study

@dataclass
class Convergence:
    """A study's result: per-spec rows (summarize), per-run rows, every curve point, the target."""

    config: ConvergeConfig
    rows: list[dict]
    runs: list[dict]
    curves: list[dict]
    target: dict[str, Any]
    source: str


def target_definition(cfg: ConvergeConfig) -> str:
    return (f"per seed: the validation loss fp32 reaches at its last step (step {cfg.steps}) "
            f"x (1 + {cfg.tolerance:g}); "
            f"a codec run stops when it reaches it or after {cfg.max_steps} steps (budget {cfg.budget:g} x)")


RESUME_FREE = ("specs", "seeds", "smoke")  # settings a resumed study may change


def resumable(cfg: ConvergeConfig, doc: dict) -> dict[tuple[str, int], tuple[dict, list[dict]]]:
    """{(spec, seed): (run row, its curve points)} of an earlier `paralab converge` result `doc` that
    `cfg` can reuse: every setting but the specs and seeds must be equal (ValueError naming the first
    that differs); its rows' targets and fp32 steps are reused with them; a run whose curve the
    result lacks is not reused."""
    if not isinstance(doc, dict) or doc.get("command") != "converge" or not isinstance(doc.get("runs"), list):
        raise ValueError("the result to resume is not a `paralab converge` result (no command 'converge' with runs)")
    mine = json.loads(json.dumps(asdict(cfg.resolved())))
    theirs = doc.get("config") or {}
    for k, v in mine.items():
        if k not in RESUME_FREE and theirs.get(k) != v:
            raise ValueError(f"cannot resume: the result has {k}={theirs.get(k)!r}, this study {k}={v!r} "
                             f"(only {', '.join(RESUME_FREE[:2])} may differ)")
    curves: dict[tuple[str, int], list[dict]] = {}
    for c in doc.get("curves") or []:
        curves.setdefault((c["spec"], int(c["seed"])), []).append(c)
    out = {}
    for r in doc["runs"]:
        key = (r["spec"], int(r["seed"]))
        if key not in curves:
            continue  # a run without its curve (an older stopped result) trains again
        row = {k: (math.inf if v is None and k in ("steps_to_target", "time_to_target_s", "penalty",
                                                    "time_penalty") else v) for k, v in r.items()}
        out[key] = (row, [{**c, "val_loss": math.nan if c["val_loss"] is None else c["val_loss"],
                           "quality": math.nan if c["quality"] is None else c["quality"]}
                          for c in curves.get(key, [])])
    return out


def converge(cfg: ConvergeConfig, *, progress: Progress | None = None, on_run: RowSink | None = None,
             on_eval: RowSink | None = None, resume: dict | None = None) -> Convergence:
    """Run the study `cfg` describes: per seed, fp32 for cfg.steps steps (it defines the target), then
    every spec until it reaches the target or its budget ends. Each finished (spec, seed) row goes
    to on_run at once (a stopped study keeps them); every evaluation to on_eval. `resume`: an
    earlier result of the same settings (resumable): its finished (spec, seed) runs are reused, not
    trained again (a stopped study goes on; new specs join a finished one)."""
    cfg = cfg.resolved()
    specs = cfg.parsed_specs()
    done = resumable(cfg, resume) if resume is not None else {}
    seeds = [cfg.first_seed + i for i in range(cfg.seeds)]
    cache: dict = {}
    runs: list[dict] = []
    curves: list[dict] = []
    targets: dict[int, float] = {}
    n_jobs, job = len(specs) * len(seeds), 0
    source = ""

    def sink(row: dict) -> None:
        curves.append(row)
        if on_eval:
            on_eval(row)

    for seed in seeds:
        data = load_task_data(cfg, seed, cache)
        source = data.source
        fp32_steps = fp32_time = None
        for spec in specs:
            sub = (lambda f, m, j=job: progress((j + f) / n_jobs, m)) if progress else None
            if (spec.text, seed) in done:
                row, points = done[(spec.text, seed)]
                for r in points:
                    sink(dict(r))
                if spec.is_fp32:
                    targets[seed] = float(row["target"])
                    fp32_steps, fp32_time = float(row["steps_to_target"]), max(float(row["time_to_target_s"]), 1e-12)
                runs.append(dict(row))
                if on_run:
                    on_run(dict(row))
                if progress:
                    progress((job + 1) / n_jobs, f"{spec.text} seed {seed}: reused from the resumed result")
                job += 1
                continue
            if cfg.mode != "sim":
                real = train_ddp_run if cfg.mode == "ddp" else train_strategy_run
                run = real(data, spec, cfg.steps if spec.is_fp32 else cfg.max_steps, progress=sub)
                for r in run.curve:
                    sink(r)
            elif spec.is_fp32:
                run = train_sim(data, spec, cfg.steps, progress=sub, on_eval=sink)
            else:
                tgt = targets[seed]
                run = train_sim(data, spec, cfg.max_steps, progress=sub, on_eval=sink,
                                until=lambda step, v, tgt=tgt: step >= cfg.steps and v <= tgt)
            if spec.is_fp32:
                targets[seed] = target_of(run, cfg.steps, cfg.tolerance)
                hit = arrival(run.curve, targets[seed])
                fp32_steps, fp32_time = float(hit["step"]), max(float(hit["train_s"]), 1e-12)
            row = run_row(cfg.task, cfg.mode, run, targets[seed], fp32_steps, fp32_time, cfg.steps)
            runs.append(row)
            if on_run:
                on_run(dict(row))
            job += 1
    target = dict(definition=target_definition(cfg), tolerance=cfg.tolerance, steps=cfg.steps,
                  max_steps=cfg.max_steps, per_seed={str(k): v for k, v in targets.items()},
                  mean=statistics.fmean(targets.values()), metric="validation loss (cross-entropy per "
                  + ("sample" if get_task(cfg.task).kind == "classify" else "token") + ")")
    return Convergence(cfg, summarize(runs, [s.text for s in specs], cfg.seeds), runs, curves, target, source)


# -- reading results back (for the verdicts: pays, plan --advice)

@dataclass(frozen=True)
class Penalty:
    """A measured steps penalty: mean (inf: some seed never reached the target), its t-based CI
    (None when undefined), seeds and how many reached the target, and where it was measured."""

    spec: str
    penalty: float
    ci: tuple[float, float] | None
    seeds: int
    reached: int
    task: str
    mode: str
    source: str

    @property
    def never_reaches(self) -> bool:
        return math.isinf(self.penalty)


def result_name(task: str, device: str = "cpu", mode: str = "sim", workers: int | None = None) -> str:
    """bench/results file stem of a study: converge-<task>-<device>[-<mode>P] (ddp and the parallelisms)."""
    return f"converge-{task}-{device}" + (f"-{mode}{workers}" if mode != "sim" else "")


def load_penalties(path: str | Path) -> dict[str, Penalty | None]:
    """{codec spec: Penalty, or None when that spec has no measurement (a stopped study's unfinished
    row)} from a `paralab converge` result (bench/results/converge-<task>-<device>.json)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read convergence result {p}: {e}") from None
    if not isinstance(doc, dict) or doc.get("command") != "converge" or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{p} is not a `paralab converge` result (no command 'converge' with rows)")
    cfg = doc.get("config", {})
    out: dict[str, Penalty | None] = {}
    for r in doc["rows"]:
        if not r.get("measured") or not r.get("seeds"):
            out[r["spec"]] = None
            continue
        inf = r.get("never_reached", 0) > 0
        ci = None if inf or r.get("penalty_ci_low") is None else (r["penalty_ci_low"], r["penalty_ci_high"])
        out[r["spec"]] = Penalty(r["spec"], math.inf if inf else float(r["penalty"]), ci, int(r["seeds"]),
                                 int(r["reached"]), str(cfg.get("task", "")), str(cfg.get("mode", "")), str(p))
    return out


def config_dict(cfg: ConvergeConfig) -> dict[str, Any]:
    return asdict(cfg)


__all__ = ["Task", "get_task", "task_infos", "smoke_settings", "Spec", "ConvergeConfig", "ConvergeError", "Convergence", "Penalty", "converge",
           "train_sim", "train_ddp_run", "train_strategy_run", "modes", "summarize", "t_interval", "target_of", "arrival", "load_penalties",
           "result_name", "check_spec", "expand_specs", "load_task_data", "SMOKE", "MODES",
           "config_dict", "coverage", "resumable"]
