"""Time to accuracy for the UIs: `converge` trains fp32 and each codec spec from the same
seeds to fp32's target and returns tidy tables (per spec, per run, every curve point); see
lab.train.converge for the definitions and docs/converge.md for the result file."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from lab.backend import Progress, RowSink
from lab.train.converge import (MODES, ConvergeConfig, ConvergeError, Penalty, config_dict, converge as run_study,
                                coverage, expand_specs, get_task, load_penalties, modes, result_name, smoke_settings,
                                summarize)
from lab.train.tasks import task_infos, task_names

CONVERGE_FIELDS = tuple(f.name for f in fields(ConvergeConfig))
CONVERGE_MODES = MODES
SUMMARY_COLUMNS = ["spec", "seeds", "reached", "steps_mean", "steps_ci_low", "steps_ci_high", "penalty",
                   "penalty_ci_low", "penalty_ci_high", "time_penalty", "final_val_loss", "final_quality", "step_s"]


@dataclass
class ConvergeResult:
    """`summary`: one row per spec (penalty, t-based 95 % CI, ...); `runs`: one per (spec, seed);
    `curves`: every evaluation (spec, seed, step, val_loss, quality, train_s); `target`: its
    definition and per-seed values; `config`: the settings after the task's defaults."""

    summary: pd.DataFrame
    runs: pd.DataFrame
    curves: pd.DataFrame
    target: dict[str, Any]
    config: dict[str, Any]
    source: str
    task: dict[str, str]


def converge_config(*, smoke: bool = False, **kw: Any) -> ConvergeConfig:
    """A checked ConvergeConfig from keyword arguments (None = the task's default; smoke: the
    --smoke preset under any given setting)."""
    bad = sorted(set(kw) - set(CONVERGE_FIELDS))
    if bad:
        raise ValueError(f"unknown convergence setting(s) {bad}; known: {', '.join(CONVERGE_FIELDS)}")
    given = {k: v for k, v in kw.items() if v is not None}
    base = smoke_settings(str(kw.get("task") or "mlp"), str(kw.get("mode") or "sim")) if smoke else {}
    if "specs" in given:
        given["specs"] = tuple(given["specs"])
    return ConvergeConfig(**{**base, **given}).resolved()


def converge(task: str = "mlp", specs: list[str] | tuple[str, ...] = ("fp32", "dynamic_tree"), *, smoke: bool = False,
             progress: Progress | None = None, on_run: RowSink | None = None, on_eval: RowSink | None = None,
             resume: dict | None = None, **settings: Any) -> ConvergeResult:
    """Steps (and wall-clock seconds here) to fp32's target for every spec on `task` (a registered task:
    `converge_tasks()`), with >= 1 seeds (3 by default) and t-based 95 % CIs. `resume`: an earlier result (its JSON
    as a dict) of the same settings whose finished runs are reused. Bad settings raise ValueError
    with a one-line message; fp32 diverging or learning nothing raises ConvergeError (a ValueError)."""
    cfg = converge_config(smoke=smoke, **{"task": task, "specs": specs, **settings})
    res = run_study(cfg, progress=progress, on_run=on_run, on_eval=on_eval, resume=resume)
    t = get_task(cfg.task)
    return ConvergeResult(pd.DataFrame(res.rows), pd.DataFrame(res.runs), pd.DataFrame(res.curves), res.target,
                          config_dict(cfg), res.source,
                          dict(name=t.name, description=t.description, quality=t.quality, priced_like=t.priced_like))


def converge_tasks() -> tuple[str, ...]:
    """The registered converge tasks' names now (a task plugin registered later included)."""
    return tuple(task_names())


def converge_modes() -> tuple[str, ...]:
    """Every mode a study trains in now: sim, ddp and each registered parallelism (a plugin's included)."""
    return tuple(modes())


def converge_task_descriptions() -> dict[str, str]:
    """Each registered converge task's name -> what it trains on what (the CLI's and the pages' help)."""
    return {t.name: t.description for t in task_infos()}


def __getattr__(name: str) -> Any:
    if name == "CONVERGE_TASKS":  # live: the registry's tasks on every access
        return converge_tasks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def convergence_summary(runs: list[dict], specs: list[str] | None = None, seeds: int | None = None) -> pd.DataFrame:
    """The per-spec table of finished per-seed rows (what a stopped study keeps)."""
    return pd.DataFrame(summarize(runs, specs, seeds))


def codec_coverage(summary: pd.DataFrame | list[dict]) -> dict[str, list[str]]:
    """{'measured': registered codecs with a finished run in `summary`, 'not_measured': the others}."""
    rows = summary.to_dict(orient="records") if isinstance(summary, pd.DataFrame) else list(summary)
    return coverage(rows)


def converge_takeaway(res: ConvergeResult) -> str:
    """One sentence per codec: its penalty and whether it reaches fp32's target."""
    parts = []
    for r in res.summary.to_dict(orient="records"):
        if r["spec"] == "fp32" or not r.get("measured"):
            continue
        if r["never_reached"]:
            parts.append(f"{r['spec']} missed the target in {r['never_reached']} of {r['seeds']} seeds (never pays)")
        elif r.get("penalty_ci_low") is not None:
            parts.append(f"{r['spec']} needs {r['penalty']:.2f}x fp32's steps "
                         f"(95% CI {r['penalty_ci_low']:.2f}-{r['penalty_ci_high']:.2f})")
        else:
            parts.append(f"{r['spec']} needs {r['penalty']:.2f}x fp32's steps")
    return "; ".join(parts) + "." if parts else "only fp32 was run."


__all__ = ["converge", "converge_config", "codec_coverage", "expand_specs", "convergence_summary", "converge_takeaway", "ConvergeResult",
           "ConvergeError", "Penalty", "load_penalties", "result_name", "CONVERGE_TASKS", "converge_tasks",
           "converge_task_descriptions", "CONVERGE_MODES", "converge_modes",
           "SUMMARY_COLUMNS"]
