"""Dettmers 2016 §3.4 reproduced: 32-bit against the four 8-bit types (and 1-bit SGD with error
feedback for data parallelism) on an MNIST-format data set, several seeds, the final test error
with 99% confidence intervals and a one-way ANOVA across the types ("no significant difference":
the paper reports F(4, 4) = 0.71, p = 0.59 for data and F(4, 4) = 0.54, p = 0.71 for model
parallelism on MNIST)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import pandas as pd

from .run import TrainConfig, load_data, train
from lab.backend import Progress, RowSink

PAPER_TYPES = ("linear", "mantissa", "static_tree", "dynamic_tree")
REPRODUCTIONS = {
    "mnist-dp": dict(parallel="data", types=(None, *PAPER_TYPES, "ef:onebit")),
    "mnist-mp": dict(parallel="model", types=(None, *PAPER_TYPES)),
}
PAPER_ANOVA = {"mnist-dp": (4, 4, 0.71, 0.59), "mnist-mp": (4, 4, 0.54, 0.71)}
SMOKE = dict(dataset="digits", hidden=(64, 64), epochs=3.0, batch=64, evals_per_epoch=1)


@dataclass
class Reproduction:
    """runs: one row per (type, seed); summary: one row per type; anova: the test across types
    (the 32-bit run and the four 8-bit types, as in the paper); curves: every run's curve."""

    which: str
    runs: pd.DataFrame
    summary: pd.DataFrame
    anova: dict
    curves: pd.DataFrame


def type_config(base: TrainConfig, kind: str | None) -> TrainConfig:
    if kind is None:
        return replace(base, codec=None, error_feedback=False)
    if kind.startswith("ef:"):
        return replace(base, codec=kind[3:], error_feedback=True)
    return replace(base, codec=kind, error_feedback=False)


def confidence_interval(values: list[float], level: float = 0.99) -> tuple[float, float]:
    """Student-t interval of the mean; (nan, nan) for fewer than two values."""
    from scipy import stats

    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def anova(groups: dict[str, list[float]]) -> dict:
    """One-way ANOVA (scipy.stats.f_oneway) over groups with >= 2 values each."""
    from scipy import stats

    usable = {k: v for k, v in groups.items() if len(v) >= 2}
    if len(usable) < 2:
        return dict(F=math.nan, p=math.nan, df_between=0, df_within=0, groups=len(usable),
                    note="needs >= 2 seeds per type")
    values = list(usable.values())
    if all(max(v) == min(v) for v in values) and len({v[0] for v in values}) == 1:
        return dict(F=math.nan, p=1.0, df_between=len(values) - 1,
                    df_within=sum(map(len, values)) - len(values), groups=len(values),
                    note="every run gave the same error")
    res = stats.f_oneway(*values)
    return dict(F=float(res.statistic), p=float(res.pvalue), df_between=len(values) - 1,
                df_within=sum(map(len, values)) - len(values), groups=len(values), note="")


def reproduce(which: str, *, seeds: int = 3, base: TrainConfig | None = None, smoke: bool = False,
              progress: Progress | None = None, on_point: RowSink | None = None,
              on_run: RowSink | None = None) -> Reproduction:
    """Run every type of `which` ('mnist-dp' | 'mnist-mp') for seeds 0..seeds-1 on `base`
    (default: the paper's MLP, RMSProp lr 0.003, 4 workers, data set 'auto'); smoke=True
    shrinks it to a seconds-long run on scikit-learn's digits. Each finished (type, seed) run's
    row streams through `on_run`."""
    if which not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {which!r}; known: {', '.join(REPRODUCTIONS)}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds={seeds!r}; it must be an int >= 1 (>= 2 for intervals and the ANOVA)")
    spec = REPRODUCTIONS[which]
    base = base or TrainConfig(dataset="auto", workers=1, epochs=3.0)
    base = replace(base, parallel=spec["parallel"], consistency="sync")
    if smoke:
        base = replace(base, **SMOKE)
    types = spec["types"]
    configs = [type_config(base, t) for t in types]
    for c in configs:
        c.check()
    data_cache: dict[int, object] = {}
    rows, curves = [], []
    total, done = len(types) * seeds, 0
    for seed in range(seeds):
        for kind, cfg in zip(types, configs):
            cfg = replace(cfg, seed=seed)
            data = data_cache.get(seed) or data_cache.setdefault(seed, load_data(cfg))
            label = cfg.label()

            def sub(frac: float, msg: str, done=done) -> None:
                if progress:
                    progress((done + frac) / total, f"[{done + 1}/{total}] seed {seed} {msg}")

            def point(row: dict, label=label, seed=seed) -> None:
                if on_point:
                    on_point(dict(row, type=label, seed=seed))

            t = time.perf_counter()
            res = train(cfg, progress=sub, on_point=point, data=data)
            s = res.summary
            rows.append(dict(type=label, seed=seed, final_test_error=s["final_test_error"],
                             best_test_error=s["best_test_error"], bytes=s["bytes"],
                             modelled_time_s=s["modelled_time_s"], wall_s=time.perf_counter() - t))
            if on_run:
                on_run(dict(rows[-1]))
            curves.append(res.curve.assign(type=label, seed=seed))
            done += 1
    runs = pd.DataFrame(rows)
    summary = type_summary(runs)
    paper_types = {r.type: list(runs[runs.type == r.type].final_test_error)
                   for r in summary.itertuples() if not r.type.startswith("ef(")}
    test = anova(paper_types)
    test["paper"] = dict(zip(("df_between", "df_within", "F", "p"), PAPER_ANOVA[which]))
    return Reproduction(which, runs, summary, test, pd.concat(curves, ignore_index=True))


def type_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per type of finished runs (type, seed, final_test_error, best_test_error, bytes): the
    mean final test error (%) with its sd and 99% CI over the seeds, and the change against the first
    type (32-bit)."""
    summary_rows = []
    for label, g in runs.groupby("type", sort=False):
        errs = list(g.final_test_error)
        lo, hi = confidence_interval(errs)
        summary_rows.append(dict(type=label, seeds=len(errs), mean_test_error=sum(errs) / len(errs),
                                 sd=float(g.final_test_error.std()) if len(errs) > 1 else math.nan,
                                 ci99_low=lo, ci99_high=hi, mean_best_error=float(g.best_test_error.mean()),
                                 bytes_per_run=float(g.bytes.mean())))
    summary = pd.DataFrame(summary_rows)
    ref = summary.mean_test_error.iloc[0]
    summary["vs_32bit"] = summary.mean_test_error - ref
    return summary


__all__ = ["reproduce", "type_summary", "Reproduction", "REPRODUCTIONS", "PAPER_TYPES", "anova", "confidence_interval"]
