"""Every parallelism on real ranks beyond data parallelism, for the UIs: pipeline, tensor, hybrid and expert
parallelism, each a module of lab/train/parallelism that defines `STRATEGY` (found by the registry scan, like
the codecs: nothing here lists them), trained on local Gloo processes, over a shaped link (`link_rate`, network
namespaces) or on torchrun's ranks, with a codec on what the ranks send each other (`TrainConfig.codec`)."""
from __future__ import annotations

from dataclasses import asdict, fields, replace
from typing import Any

import pandas as pd

from lab.backend import Progress, RowSink
from lab.train.parallelism import ParallelResult, Settings, Strategy, get_strategy, strategy_infos, strategy_names
# the pipeline's schedules as torch ships them, their planned timeline and bubble (the Pipeline page's "predict first")
from lab.train.parallelism.pipeline import bubble_formula, bubble_of, planned_timeline, schedule_names
from lab.train.parallelism.wire import activation_codec
from lab.train.run import TrainConfig

#: the `paralab train --mode` values that are not registered strategies (data parallelism: simulated, DDP, FSDP2)
DATA_PARALLEL_MODES = ("sim", "ddp", "fsdp")


def parallel_strategies() -> list[str]:
    """The registered strategies' names now, in display order (a plugin registered later included)."""
    return strategy_names()


def strategy_options(mode: str) -> list[str]:
    """The settings fields strategy `mode` takes (its CLI options are `--name-with-dashes`)."""
    return get_strategy(mode).settings.option_names()


def option_modes(option: str) -> list[str]:
    """The registered strategies whose settings have field `option` (e.g. 'microbatches' -> ['pipeline'])."""
    return [s.name for s in strategy_infos() if option in s.settings.option_names()]


def parse_setting(mode: str, text: str) -> tuple[str, Any]:
    """'NAME=VALUE' -> (field, value) of strategy `mode`'s settings, the value read as the field's default is
    typed (int, float, bool, else text; 'none' -> None): a plugin strategy's settings that have no CLI option of
    their own. ValueError (one line) for a malformed item or a name the strategy does not take."""
    import math

    name, sep, value = str(text).partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise ValueError(f"--setting {text!r}; allowed: NAME=VALUE, NAME one of --mode {mode}'s settings: "
                         + ", ".join(strategy_options(mode)))
    known = {f.name: f for f in fields(get_strategy(mode).settings)}
    if name not in known:
        raise ValueError(f"--setting {text!r}: --mode {mode} has no setting {name!r}; its settings: "
                         + (", ".join(known) or "none"))
    default, v = known[name].default, value.strip()
    try:
        if v.lower() == "none" and not isinstance(default, (bool, int, float)):
            return name, None
        if isinstance(default, bool):
            if v.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return name, v.lower() in ("true", "1")
        if isinstance(default, int):
            return name, int(v)
        if isinstance(default, float):
            x = float(v)
            if not math.isfinite(x):
                raise ValueError
            return name, x
    except ValueError:
        raise ValueError(f"--setting {text!r}: {name} takes {type(default).__name__} values, got {v!r}") from None
    if not v:
        raise ValueError(f"--setting {text!r}: an empty value; give one, or leave the setting out for its default")
    return name, v


def strategy_catalog() -> pd.DataFrame:
    """One row per registered strategy: name, description, paper, models it trains, what its codec carries, the
    fewest ranks, its options with their defaults, and whether it has a benchmark case."""
    rows = []
    for s in strategy_infos():
        defaults = {f.name: f.default for f in fields(s.settings)}
        rows.append(dict(name=s.name, description=s.description, paper=s.paper, models=", ".join(s.models),
                         carries=s.carries, min_procs=s.min_procs,
                         options=", ".join(f"--{k.replace('_', '-')} {v}" for k, v in defaults.items()),
                         bench=bool(s.bench), module=s.module))
    return pd.DataFrame(rows, columns=["name", "description", "paper", "models", "carries", "min_procs", "options",
                                       "bench", "module"])


def _config(cfg: TrainConfig | dict | None) -> TrainConfig:
    if cfg is None:
        return TrainConfig()
    if isinstance(cfg, TrainConfig):
        return cfg
    if isinstance(cfg, dict):
        known = {f.name for f in fields(TrainConfig)}
        bad = sorted(set(cfg) - known)
        if bad:
            raise ValueError(f"unknown training setting(s) {bad}; known: {', '.join(sorted(known))}")
        return TrainConfig(**cfg)
    raise ValueError(f"cfg={cfg!r}; allowed: a TrainConfig, a dict of its fields or None")


def parallel_settings(mode: str, cfg: TrainConfig | dict | None = None, procs: int = 2,
                      settings: Settings | dict | None = None) -> Settings:
    """Strategy `mode`'s settings (a Settings, a dict of its fields, None: its defaults) checked with `cfg` on
    `procs` ranks before any rank starts: ValueError (one line) for a mode, model, codec, rank count or setting
    it cannot run, naming what is allowed."""
    strategy = get_strategy(mode)
    cfg = _config(cfg)
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < strategy.min_procs:
        raise ValueError(f"--mode {mode} runs on at least {strategy.min_procs} ranks; got --procs {procs!r}")
    if not strategy.trains(cfg.model):
        raise ValueError(f"--mode {mode} trains --model {' or '.join(strategy.models)}; got --model {cfg.model}")
    if cfg.parallel != "data" or cfg.consistency != "sync":
        raise ValueError(f"--parallel and --consistency are the simulated workers' (--mode sim); --mode {mode} "
                         "splits the model its own way, in lock step")
    if cfg.error_feedback:
        hint = ("; error feedback on its gradients: --grads-codec ef:NAME"
                if "grads_codec" in strategy.settings.option_names() else "")
        raise ValueError(f"--error-feedback is for gradients summed step after step; --mode {mode}'s --codec "
                         f"carries {strategy.carries}, new every step{hint}")
    activation_codec(cfg.codec, strategy.carries)
    if settings is None or isinstance(settings, dict):
        settings = strategy.make_settings(**(settings or {}))
    elif not isinstance(settings, strategy.settings):
        raise ValueError(f"settings {settings!r}; --mode {mode} takes a {strategy.settings.__name__} or a dict "
                         f"of its fields")
    run_cfg = replace(cfg, workers=procs)
    run_cfg.check()
    settings.check(run_cfg, procs)
    return settings


def check_link_rate(link_rate: str | None) -> None:
    """ValueError (one line, the units allowed) unless `link_rate` is None or a tc rate such as '1gbit'."""
    if link_rate is not None:
        from lab.comm.shaped import parse_rate

        parse_rate(link_rate)


def parallel_training(mode: str, cfg: TrainConfig | dict | None = None, procs: int = 2,
                      settings: Settings | dict | None = None, *, link_rate: str | None = None,
                      backend: str = "gloo", timeout: float = 600.0, progress: Progress | None = None,
                      on_point: RowSink | None = None, trace: str | None = None) -> ParallelResult | None:
    """`cfg` (a TrainConfig or a dict of its fields) trained by strategy `mode` on `procs` local processes (or
    on torchrun's ranks when torchrun started this process: then None on every rank but 0), `settings` its
    options (parallel_settings). link_rate: the ranks talk over a shaped link of that rate (e.g. '1gbit'; root,
    network namespaces). on_point: each evaluation of rank 0's curve as it is made. trace: a directory for one
    Chrome/Perfetto trace per rank (steps 3..5). Every check runs before any rank starts."""
    from lab.comm.dist import TorchComm, in_torchrun
    from lab.train.parallelism import assemble, train_parallel

    from .benchmarks import trace_dir

    cfg = _config(cfg)
    strategy = get_strategy(mode)
    if in_torchrun():
        if link_rate is not None:
            raise ValueError("--link-rate shapes the links between local ranks; under torchrun the network is "
                             "torchrun's: drop --link-rate")
        comm = TorchComm.from_env(backend, timeout)
        settings = parallel_settings(mode, cfg, comm.size, settings)
        cfg = replace(cfg, workers=comm.size)
        out = strategy.rank(comm, asdict(cfg), asdict(settings), trace=trace_dir(trace))
        every = comm.allgather_object(out)
        return _finish(assemble(strategy, cfg, settings, every, backend), strategy) if comm.rank == 0 else None
    settings = parallel_settings(mode, cfg, procs, settings)
    check_link_rate(link_rate)
    res = train_parallel(mode, cfg, procs, settings, link_rate=link_rate, backend=backend, timeout=timeout,
                         progress=progress, on_point=on_point, trace=trace_dir(trace))
    return _finish(res, strategy)


def _finish(res: ParallelResult, strategy: Strategy) -> ParallelResult:
    """The summary keys every result shares: `parameters` (None where the strategy does not count them), what
    the strategy's codec carries, and the last evaluation's test loss."""
    res.summary.setdefault("parameters", None)
    res.summary.setdefault("carries", strategy.carries)
    if len(res.curve) and "test_loss" in res.curve:
        res.summary.setdefault("final_test_loss", float(res.curve.test_loss.iloc[-1]))
    return res


def pipeline_fit(schedule: str, P: int, M: int, V: int | None = None, *, most_microbatches: int = 32,
                 most_stages: int = 4) -> dict[str, Any]:
    """What a pipeline schedule can run, for a UI to say beside the setting it cannot: {"stages_per_rank": V (its
    default when None), "setting": None when (schedule, P ranks, M micro-batches, V stages per rank) runs, else
    "stages_per_rank" (no micro-batch count runs with V) or "microbatches", "allowed": that setting's values it runs
    with, the others kept (stages per rank in 1..most_stages, micro-batches in 1..most_microbatches)}. Torch's rules
    (`pipeline_plan.check_schedule`); an unknown schedule is a ValueError."""
    from lab.train.parallelism.pipeline_plan import check_schedule, default_stages_per_rank

    def runs(p: int, m: int, v: int) -> bool:
        try:
            check_schedule(schedule, p, m, v)
            return True
        except ValueError:
            return False

    used = default_stages_per_rank(schedule) if V is None else V
    out: dict[str, Any] = {"stages_per_rank": used, "setting": None, "allowed": []}
    if runs(P, M, used):
        return out
    ms = [m for m in range(1, most_microbatches + 1) if runs(P, m, used)]
    if ms:
        out.update(setting="microbatches", allowed=ms)
    else:
        out.update(setting="stages_per_rank", allowed=[v for v in range(1, most_stages + 1)
                                                       if any(runs(P, m, v) for m in range(1, most_microbatches + 1))])
    return out


def partial_parallel_summary(mode: str, cfg: TrainConfig, points: list[dict]) -> dict[str, Any]:
    """A stopped run's summary: rank 0's curve so far (final = the last evaluation)."""
    return {"label": cfg.label(), "mode": mode, "final_test_error": points[-1]["test_error"],
            "best_test_error": min(p["test_error"] for p in points), "bytes": points[-1]["bytes"],
            "steps": points[-1]["step"], "wall_s": points[-1]["wall_s"], "parameters": None}


__all__ = ["schedule_names", "planned_timeline", "bubble_formula", "bubble_of", "pipeline_fit", "get_strategy",
           "DATA_PARALLEL_MODES", "ParallelResult", "parallel_strategies", "strategy_options", "option_modes",
           "parse_setting",
           "strategy_catalog", "parallel_settings", "check_link_rate", "parallel_training", "partial_parallel_summary"]
