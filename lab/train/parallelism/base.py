"""`Strategy`: one kind of parallelism run on real ranks (`paralab train --mode NAME`), and the registry of them.

A strategy is one module of this package that defines `STRATEGY = Strategy(...)`: what it splits (the papers'
words), the models it trains, what its codec compresses, its own settings (a frozen dataclass with `check`), and
its rank function, which `lab.comm.launch.run` starts on every rank. Strategies are found the way codecs,
algorithms and tasks are (`lab.plugins`): this package's modules, entry points of group `paralab.parallelisms`,
modules named in $PARALAB_PARALLELISMS and strategies registered at run time. Nothing lists them.

The rank function: `rank(comm, cfg: dict, settings: dict, progress=None, on_row=None, trace=None) -> dict`,
with cfg a `TrainConfig`'s fields and settings the strategy's; it returns (every rank) `steps`, `step_s` (median
seconds of a step after the warm-up), `bytes_sent` (this rank's wire bytes, `comm.bytes_sent`), `fp32_bytes`
(what the same messages weigh in fp32), and may add `rows` (rank 0: the curve), `summary` (numbers of the run)
and `tables` ({name: [row dicts]}, e.g. a pipeline's timeline); `assemble` joins them into a `ParallelResult`.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

import pandas as pd

from lab import plugins

ENV = "PARALAB_PARALLELISMS"
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


class Settings:
    """Base of a strategy's settings (a frozen dataclass): `check(cfg, procs)` raises ValueError (one line,
    what was wrong and what is allowed) before any rank starts."""

    def check(self, cfg: Any, procs: int) -> None:  # pragma: no cover - every strategy overrides it
        raise NotImplementedError

    @classmethod
    def option_names(cls) -> list[str]:
        """Its fields: the CLI options (`--name-with-dashes`) this strategy takes."""
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class Strategy:
    """One parallelism on real ranks.

    name: the `--mode` it answers to. description: one line, the papers' words. paper: where the papers teach it.
    settings: its settings class (a frozen dataclass subclassing `Settings`; every field has a default).
    rank: its rank function (module docstring). models: the `TrainConfig` models it trains.
    carries: what `--codec` compresses in it ("activations and their gradients between stages").
    min_procs: the fewest ranks it runs on. order: position in lists (lower first).
    bench: the benchmark's case (bench/parallelism.py: fp32 against the codec in the same run, 2 ranks): its
        TrainConfig fields ("cfg"), settings ("settings") and, optionally, the shaped link's "link_rate"
        (default 1 Gbit/s) at which the link bounds its step.
    lm: its rank also trains the language-model tasks' tiny GPT (`lm.GPTConfig`, model 'gpt': `paralab converge
        --task gpt --mode NAME`).
    """

    name: str
    description: str
    paper: str
    settings: type
    rank: Callable[..., dict]
    models: tuple[str, ...]
    carries: str
    min_procs: int = 2
    order: int = 100
    bench: dict[str, Any] = field(default_factory=dict)
    lm: bool = False
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"strategy name {self.name!r}: allowed are lower-case identifiers ([a-z][a-z0-9_]*)")
        if not (isinstance(self.settings, type) and issubclass(self.settings, Settings)):
            raise ValueError(f"strategy {self.name!r}: settings must be a Settings dataclass, got {self.settings!r}")
        if not callable(self.rank):
            raise ValueError(f"strategy {self.name!r}: rank must be callable, got {self.rank!r}")
        if not self.module:
            object.__setattr__(self, "module", getattr(self.rank, "__module__", "") or "")

    def trains(self, model: str | None) -> bool:
        """Whether its rank trains `model`: one of its models, or the language-model tasks' 'gpt' when `lm`."""
        return model in self.models or (self.lm and model == "gpt")

    def make_settings(self, **given: Any) -> Any:
        """Its settings from the options given (None values left at their defaults); ValueError naming an
        option it does not take."""
        known = self.settings.option_names()
        for k in given:
            if k not in known:
                raise ValueError(f"--{k.replace('_', '-')} is not an option of --mode {self.name}; its options: "
                                 + (", ".join("--" + n.replace("_", "-") for n in known) or "none"))
        return self.settings(**{k: v for k, v in given.items() if v is not None})


_PACKAGE = __name__.rsplit(".", 1)[0]
#: every strategy found (`lab.plugins`: this package's modules that define STRATEGY, entry points
#: `paralab.parallelisms`, $PARALAB_PARALLELISMS, modules carried from the parent process)
REGISTRY: plugins.Registry[Strategy] = plugins.Registry(
    "parallelisms", _PACKAGE, "paralab.parallelisms", ENV, Strategy, attr="STRATEGY", key=lambda s: s.name,
    label=lambda s: f"parallelism {s.name!r}", order=lambda s: (s.order, s.name))


def register(strategy: Strategy, *, replace: bool = False) -> Strategy:
    """Add a strategy at run time (the CLI and the pages see it)."""
    return REGISTRY.register(strategy, replace)


def strategy_infos() -> list[Strategy]:
    """Every registered strategy, in display order."""
    return REGISTRY.ordered()


def strategy_names() -> list[str]:
    return REGISTRY.names()


def get_strategy(name: str) -> Strategy:
    """The registered strategy called `name`; ValueError naming the known ones otherwise."""
    return REGISTRY.lookup(name, "unknown parallelism {key!r}; known: {known}")


@dataclass
class ParallelResult:
    """One run of a strategy: rank 0's curve (step, samples, epoch, train_loss, test_error, test_loss,
    bytes, wall_s), a summary (label, mode, procs, steps, step_s, bytes, fp32_bytes, bytes_ratio, the
    strategy's own numbers) and its tables (rows of every rank, with a `rank` column)."""

    config: Any
    settings: Any
    curve: pd.DataFrame
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types: config, settings, summary, curve and tables as lists of row dicts."""
        return dict(config=asdict(self.config), settings=asdict(self.settings), summary=self.summary,
                    curve=self.curve.to_dict(orient="records"),
                    tables={k: v.to_dict(orient="records") for k, v in self.tables.items()})


def assemble(strategy: Strategy, cfg: Any, settings: Any, results: list[dict], backend: str = "gloo") -> ParallelResult:
    """Every rank's return joined (module docstring): bytes summed over ranks, the slowest rank's step."""
    curve = pd.DataFrame(results[0].get("rows", []))
    sent = sum(int(r["bytes_sent"]) for r in results)
    fp32 = sum(int(r["fp32_bytes"]) for r in results)
    summary: dict[str, Any] = dict(label=cfg.label(), mode=strategy.name, backend=backend, procs=len(results),
                                   steps=int(results[0]["steps"]), step_s=max(float(r["step_s"]) for r in results),
                                   bytes=sent, fp32_bytes=fp32, bytes_ratio=sent / fp32 if fp32 else float("nan"))
    if len(curve):
        summary.update(final_test_error=float(curve.test_error.iloc[-1]), best_test_error=float(curve.test_error.min()),
                       final_train_loss=float(curve.train_loss.iloc[-1]))
    summary.update(results[0].get("summary", {}))
    if any(r.get("split") for r in results):  # --trace: each rank's median traced step (lab.comm.timesplit)
        summary["split"] = [r.get("split") for r in results]
    tables: dict[str, pd.DataFrame] = {}
    for name in sorted({k for r in results for k in r.get("tables", {})}):
        rows = [dict(row, rank=r_i) if "rank" not in row else row
                for r_i, r in enumerate(results) for row in r.get("tables", {}).get(name, [])]
        tables[name] = pd.DataFrame(rows)
    return ParallelResult(cfg, settings, curve, summary, tables)


def _link(procs: int, rate: str | None) -> Any:
    """The network-namespace link the ranks talk over at `rate` (None: plain local ranks)."""
    from contextlib import nullcontext

    if rate is None:
        return nullcontext(None)
    from lab.comm.shaped import ShapedLink, available

    ok, why = available()
    if not ok:
        raise ValueError(f"--link-rate needs network namespaces: {why}")
    return ShapedLink(procs, rate=rate)


def train_parallel(mode: str, cfg: Any, procs: int = 2, settings: Any = None, *, link_rate: str | None = None,
                   backend: str = "gloo", timeout: float = 600.0, progress: Any = None, on_point: Any = None,
                   trace: str | None = None) -> ParallelResult:
    """`cfg` (a TrainConfig) trained by `procs` real processes under strategy `mode` with its `settings`;
    link_rate: the ranks talk over a shaped link of that rate (e.g. '1gbit', network namespaces). Every
    check runs before any rank starts. on_point: each evaluation of rank 0's curve as it is made."""
    from dataclasses import replace

    from lab.comm.launch import run

    strategy = get_strategy(mode)
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < strategy.min_procs:
        raise ValueError(f"--mode {mode} runs on at least {strategy.min_procs} ranks; got procs={procs!r}")
    if not strategy.trains(cfg.model):
        raise ValueError(f"--mode {mode} trains {', '.join(strategy.models)}; got --model {cfg.model}")
    settings = settings if settings is not None else strategy.settings()
    cfg = replace(cfg, workers=procs)
    cfg.check()
    settings.check(cfg, procs)
    with _link(procs, link_rate) as net:
        results = run(strategy.rank, procs, asdict(cfg), asdict(settings), backend=backend, timeout=timeout,
                      net=net, progress=progress, on_row=on_point, trace=trace)
    return assemble(strategy, cfg, settings, results, backend)


__all__ = ["Strategy", "Settings", "ParallelResult", "REGISTRY", "ENV", "register", "strategy_infos", "strategy_names",
           "get_strategy", "assemble", "train_parallel"]
