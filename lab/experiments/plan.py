"""Parallelism-planner experiments for the dashboard and CLI: a sweep over GPU counts and
strategies, one step's per-layer breakdown, codec advice per layer with each codec's time to
accuracy (its step time x the steps penalty `paralab converge` measured, `lab.plan.accuracy`), and
the papers' arithmetic (Dettmers 2016 §2.3.2, Wu et al. 2015 Figures 2-3). Step times are
predictions of `lab.plan`; the penalties are read from converge results, never guessed."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from lab.plan import accuracy as _accuracy
from lab.plan import (codec_advice, deep_image_scaling, deep_image_speedup, dettmers_alexnet, dettmers_planner,
                      get_model, plan_step, plan_sweep)
from lab.plan.papers import DEEP_IMAGE_PAPER
from lab.plan.strategies import cluster_algorithms
from lab.plan.wire import compressing_codecs
from lab.backend import Progress
from lab.comm.cluster import Cluster, make_cluster, resolve_level_link

DEFAULT_GPUS = (1, 2, 4, 8, 16, 32, 64)


def planner_cluster(cluster: str | Cluster | None, intra: str = "nvlink4", inter: str = "ib_ndr",
                    nics_per_node: int | None = None) -> Cluster | None:
    """The two-level cluster a plan runs on: None (a single `link`), a Cluster, or 'NODESxGPUS' with
    intra- and inter-node link presets (aliases such as ndr400 allowed), `lab.comm.cluster.make_cluster`."""
    if cluster is None:  # the node links are checked anyway: a name no link has is never silently kept
        resolve_level_link(intra, "intra")
        resolve_level_link(inter, "inter")
    if cluster is None or isinstance(cluster, Cluster):
        return cluster
    return make_cluster(cluster, intra, inter, nics_per_node)


def planner_sweep(model: str = "alexnet", gpus: Sequence[int] = DEFAULT_GPUS, *,
                  strategies: Sequence[str] = ("data", "hybrid"), device: str = "v100", link="pcie3",
                  batch_per_gpu: int | None = 128, global_batch: int | None = None, algorithm: str = "ring",
                  codec=None, activation_codec: str | None = None, overlap: bool = False,
                  micro_batches: int | None = None, progress: Progress | None = None,
                  cluster: str | Cluster | None = None, intra: str = "nvlink4", inter: str = "ib_ndr",
                  nics_per_node: int | None = None, zero_pp=(), fsdp_collectives=None) -> pd.DataFrame:
    """Predicted step breakdown (ms), images/s, speedup and efficiency per strategy and P; with `cluster`
    ('8x8', intra and inter link presets) on a two-level machine instead of `link`, where `algorithm` may
    also be hierarchical, alltoall_quantized or in_network (`lab.comm.cluster`). Strategy 'fsdp': ZeRO-3 /
    FSDP with ZeRO++ switches `zero_pp` ('qwz,qgz,hpz', any subset; `lab.plan.sharded`), each collective level
    priced by the fastest registered collective plugin (`fsdp_collectives` {op: [names]} narrows them)."""
    if global_batch is not None:
        batch_per_gpu = None
    return plan_sweep(model, list(gpus), strategies=list(strategies), device=device, link=link,
                      batch_per_gpu=batch_per_gpu, global_batch=global_batch, algorithm=algorithm, codec=codec,
                      activation_codec=activation_codec, overlap=overlap, micro_batches=micro_batches,
                      progress=progress, cluster=planner_cluster(cluster, intra, inter, nics_per_node),
                      zero_pp=zero_pp, fsdp_collectives=fsdp_collectives)


@dataclass
class Breakdown:
    """One step: `summary` (one row of totals), `layers` (per layer), and the model's description."""

    summary: pd.DataFrame
    layers: pd.DataFrame
    model: str


def planner_breakdown(model: str = "alexnet", P: int = 8, *, strategy: str = "data", device: str = "v100",
                      link="pcie3", batch_per_gpu: int | None = 128, global_batch: int | None = None,
                      algorithm: str = "ring", codec=None, activation_codec: str | None = None,
                      overlap: bool = False, micro_batches: int | None = None,
                      cluster: str | Cluster | None = None, intra: str = "nvlink4", inter: str = "ib_ndr",
                      nics_per_node: int | None = None, zero_pp=(), fsdp_collectives=None) -> Breakdown:
    """Per-layer compute and communication of one predicted step (`cluster`, `zero_pp`, `fsdp_collectives`: as
    `planner_sweep`; fsdp layers name the plugins chosen in `algorithm`)."""
    if global_batch is not None:
        batch_per_gpu = None
    sp = plan_step(model, P, device=device, link=link, strategy=strategy, batch_per_gpu=batch_per_gpu,
                   global_batch=global_batch, algorithm=algorithm, codec=codec, activation_codec=activation_codec,
                   overlap=overlap, micro_batches=micro_batches,
                   cluster=planner_cluster(cluster, intra, inter, nics_per_node), zero_pp=zero_pp,
                   fsdp_collectives=fsdp_collectives)
    return Breakdown(pd.DataFrame([sp.summary()]), sp.layers, get_model(model).describe())


def planner_advice(model: str = "alexnet", P: int = 8, *, strategy: str = "data", device: str = "v100",
                   link="pcie3", batch_per_gpu: int | None = 128, global_batch: int | None = None,
                   algorithm: str = "ring", candidates: Sequence[str] | str | None = None,
                   converge_task: str | None = None, results: Sequence[str] | None = None,
                   zero_pp=()) -> pd.DataFrame:
    """Fastest codec per layer at this P and link, with each candidate's time and the saving (data, model and
    hybrid parallelism; zero_pp, fsdp's switches, is accepted with the planner's other settings and unused). candidates:
    codec names or specs, or None / "all": every registered codec that compresses, read now (a plugin
    registered later is a candidate too). A codec whose measured steps penalty says it never reaches
    the target (`lab.plan.accuracy`: converge_task None = the task closest to the model) is never
    advised: `best` skips it, `best_per_step` is the fastest regardless."""
    if global_batch is not None:
        batch_per_gpu = None
    cands = "all" if candidates is None else candidates if isinstance(candidates, str) else tuple(candidates)
    df = codec_advice(model, P, device=device, link=link, strategy=strategy, batch_per_gpu=batch_per_gpu,
                      global_batch=global_batch, algorithm=algorithm, candidates=cands)
    pen = _accuracy.load(get_model(model), converge_task, results)
    names = [c[:-3] for c in df.columns if c.endswith("_ms") and c != "saving_ms"]
    sunk = {n for n in names if n != "none" and (p := pen.get(n)) is not None and p.never_reaches}
    df["best_per_step"] = df["best"]
    for i, row in df.iterrows():
        if row["best"] not in sunk:
            continue
        times = {n: row[f"{n}_ms"] for n in names if n not in sunk and not math.isnan(row[f"{n}_ms"])}
        best = min(times, key=lambda k: (times[k], k != "none"))
        df.at[i, "best"] = best
        df.at[i, "saving_ms"] = row["none_ms"] - times[best]
        df.at[i, "saving_pct"] = 100.0 * (row["none_ms"] - times[best]) / row["none_ms"] if row["none_ms"] > 0 else 0.0
    return df


def advice_time_to_accuracy(model: str = "alexnet", P: int = 8, *, device: str = "v100", link="pcie3",
                            batch_per_gpu: int | None = 128, global_batch: int | None = None, algorithm: str = "ring",
                            candidates: Sequence[str] | str | None = None, converge_task: str | None = None,
                            results: Sequence[str] | None = None) -> pd.DataFrame:
    """Per candidate codec on every gradient (data parallelism, P GPUs): step time, speedup against
    fp32 per step, the measured steps penalty (relative to fp32, with its 95 % CI) and the
    time-to-accuracy speedup = per-step speedup / penalty (0: never reaches the target; nan: not
    measured), and where the penalty came from. Rows ranked by time to accuracy where measured.
    candidates None / "all": every registered codec that compresses and every other spec the result
    measured (e.g. ef:randomk)."""
    if global_batch is not None:
        batch_per_gpu = None
    if candidates is None or candidates == "all":
        cands = compressing_codecs()
    else:
        cands = [candidates] if isinstance(candidates, str) else list(candidates)
    spec = get_model(model)
    pen = _accuracy.load(spec, converge_task, results)
    if candidates is None or candidates == "all":  # and every other spec the penalties' result measured
        from lab.plan.wire import wire_codec
        have = {_accuracy.canonical(c) for c in cands}
        for sp in pen.specs():
            if "@" in sp or _accuracy.canonical(sp) in have or sp == "fp32":
                continue
            try:
                wire_codec(sp)
            except ValueError:
                continue
            cands.append(sp)
    kw = dict(device=device, link=link, strategy="data", batch_per_gpu=batch_per_gpu, global_batch=global_batch,
              algorithm=algorithm)
    base = plan_step(spec, P, codec=None, **kw).summary()["step_s"]
    rows = [dict(codec="none", step_ms=1e3 * base, speedup=1.0, steps_penalty=1.0, steps_penalty_ci_low=math.nan,
                 steps_penalty_ci_high=math.nan, time_to_accuracy_speedup=1.0, accuracy="baseline",
                 penalty_source=None)]
    for c in dict.fromkeys(x for x in cands if x != "none"):
        t = plan_step(spec, P, codec=c, **kw).summary()["step_s"]
        p = pen.get(c)
        row = dict(codec=c, step_ms=1e3 * t, speedup=base / t)
        if p is None:
            row.update(steps_penalty=math.nan, steps_penalty_ci_low=math.nan, steps_penalty_ci_high=math.nan,
                       time_to_accuracy_speedup=math.nan, accuracy=_accuracy.NOT_MEASURED, penalty_source=None)
        else:
            rel, ci = _accuracy.relative(p, None)
            row.update(steps_penalty=rel, steps_penalty_ci_low=ci[0] if ci else math.nan,
                       steps_penalty_ci_high=ci[1] if ci else math.nan,
                       time_to_accuracy_speedup=0.0 if math.isinf(rel) else row["speedup"] / rel,
                       accuracy=_accuracy.NEVER if math.isinf(rel) else "measured",
                       penalty_source={**pen.source(c), "relative_to": "fp32"})
        rows.append(row)
    df = pd.DataFrame(rows)
    df["rank_by"] = [r.time_to_accuracy_speedup if r.accuracy != _accuracy.NOT_MEASURED else r.speedup
                     for r in df.itertuples()]
    df = df.sort_values(["rank_by"], ascending=False, kind="stable").drop(columns="rank_by").reset_index(drop=True)
    df.attrs["accuracy"] = pen.describe()
    return df


@dataclass
class PaperChecks:
    """Dettmers' AlexNet example (step by step and through the planner), Deep Image's Figure 2
    (data vs hybrid, 64 images per GPU) with the crossover, and Figure 3 (speedup per mini-batch)."""

    dettmers: pd.DataFrame
    dettmers_planner: pd.DataFrame
    figure2: pd.DataFrame
    crossover: int | None
    figure3: pd.DataFrame
    paper: dict


def paper_checks(*, gpus: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128), overlap: bool = False,
                 progress: Progress | None = None) -> PaperChecks:
    """The papers' arithmetic as the planner reproduces it (see `lab.plan.papers`)."""
    fig2, cross = deep_image_scaling(tuple(gpus), overlap=overlap)
    if progress:
        progress(0.5, "Figure 2")
    fig3 = deep_image_speedup(gpus=tuple(g for g in gpus if g <= 64), overlap=overlap)
    if progress:
        progress(1.0, "Figure 3")
    return PaperChecks(dettmers_alexnet(), dettmers_planner(), fig2, cross, fig3, dict(DEEP_IMAGE_PAPER))




def __getattr__(name: str):
    if name == "CLUSTER_ALGORITHMS":  # live: the two-level-only algorithms now (`cluster_algorithms`)
        return cluster_algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_GPUS", "CLUSTER_ALGORITHMS", "cluster_algorithms", "planner_cluster",
           "planner_sweep", "Breakdown", "planner_breakdown", "planner_advice", "advice_time_to_accuracy", "PaperChecks",
           "paper_checks"]
