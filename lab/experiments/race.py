"""The race to the target: every codec spec's validation-loss curve of a `converge` study
against steps and against modelled time on a cluster (the step model of "Does compression pay?",
`lab.plan.pays`: compute plus the allreduce each codec needs, its fastest algorithm), fp32's target
line, each spec's arrival, and the lessons the numbers teach, computed from them (error feedback,
8-bit types, PowerSGD's rank). Modelled time at step s of a spec with an fp32 warm-up of w steps:
min(s, w) x fp32's step + max(0, s - w) x the codec's step."""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lab.train.converge import Spec, summarize, t_interval
from lab.train.tasks import get_task, task_names

FP32 = "fp32"
EIGHT_BIT = (7.5, 9.0)  # wire bits per value (block scales included: MX 8.25) that count as an 8-bit type
INF_FIELDS = ("steps_to_target", "time_to_target_s", "penalty", "time_penalty")


@dataclass
class RaceResult:
    """curves: the shown seed's evaluations (spec, step, val_loss, quality, modelled_s); arrivals: one
    row per spec (this seed's arrival step and modelled time; over all seeds: steps to target, penalty,
    modelled time to target, each with its t-based 95 % CI, and the speedup in time to target against
    fp32's mean, its CI = fp32's mean over the time's CI bounds; `verdict` against fp32: sooner, later or
    within noise by that CI), best first by the upper end of the time's CI (`rank_arrivals`); target: this
    seed's target loss; lessons: {'steps': [..], 'time': [..]} sentences from the numbers; cluster: the
    cluster in words; partial: fewer runs than the study asked; first, tied: who reaches the target first
    as the intervals support it (`podium`)."""

    curves: pd.DataFrame
    arrivals: pd.DataFrame
    target: float
    seed: int
    seeds: list[int]
    lessons: dict[str, list[str]]
    cluster: str
    model: str
    partial: bool = False
    notes: list[str] = field(default_factory=list)
    first: str | None = None  # the spec first by the upper end of its time-to-target interval (None: no arrival)
    tied: list[str] = field(default_factory=list)  # specs whose interval overlaps the first's: not separated


def committed_race_data(task: str) -> dict[str, Any] | None:
    """The committed `paralab converge` result of `task` (bench/results/converge-<task>-*.json, found as
    the verdicts find it: lab.plan.accuracy.find_result) as {runs, curves, config, task, data, path},
    infinities restored; None when there is none."""
    from lab.plan.accuracy import find_result

    get_task(task)  # ValueError naming the known tasks
    path = find_result(task)
    return None if path is None else race_data(path, task)


def race_data(path: str | Path, task: str | None = None) -> dict[str, Any]:
    """A `paralab converge` result file as {runs, curves, config, task, data, path, name, wall_s,
    partial}, infinities restored; `name` is its task's name. ValueError (one line) for a file that
    cannot be read, is not a converge result, or is of a task other than `task`."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(doc, dict) or doc.get("command") != "converge" or not isinstance(doc.get("runs"), list):
        raise ValueError(f"{path} is not a `paralab converge` result (no command 'converge' with runs)")
    name = (doc.get("config") or {}).get("task")
    if name not in task_names():
        raise ValueError(f"{path}: its task {name!r} is not one of {', '.join(task_names())}")
    if task is not None and task != name:
        raise ValueError(f"{path} is a result of task {name!r}, not {task!r}")
    runs = pd.DataFrame([{k: (math.inf if v is None and k in INF_FIELDS else v) for k, v in r.items()}
                         for r in doc.get("runs", [])])
    curves = pd.DataFrame(doc.get("curves") or [], columns=["spec", "seed", "step", "val_loss", "quality", "train_s"])
    curves[["val_loss", "quality"]] = curves[["val_loss", "quality"]].astype(float)
    return dict(runs=runs, curves=curves, config=doc.get("config", {}), task=doc.get("task", {}), name=name,
                data=doc.get("data", ""), path=str(path), wall_s=doc.get("wall_s"), partial=bool(doc.get("partial")))


def step_times(specs: list[str], model: str, cluster: str = "8x8", *, gpu: str = "h100", intra: str = "nvlink4",
               inter: str = "eth10g", batch_per_gpu: int = 8, overlap: bool = False) -> pd.DataFrame:
    """Per spec: the modelled seconds of one training step of `model` on `cluster` with its codec (its
    fastest allreduce algorithm; lab.plan.pays.step) and of an fp32 step, its warm-up, wire bits per
    value; `priced` False (with `why`) where the step model has no price for the codec."""
    from lab.comm import cluster as cl
    from lab.comm.cluster import FP32 as FP32_COST
    from lab.plan.devices import get_device
    from lab.plan.layers import get_model
    from lab.plan.pays import Setting, available, codec_cost, step

    dev = get_device(gpu)
    c = cl.make_cluster(cluster, intra, inter)
    s = Setting(get_model(model.replace("-", "_")), c, dev, int(batch_per_gpu), bool(overlap))
    algos = cl.algorithms()

    def best(cost) -> tuple[float, str]:
        got = [(step(s, cost, a)[0], a) for a in algos if available(a, cost, c)]
        return min(got)

    fp32_s, fp32_alg = best(FP32_COST)
    rows = []
    for text in specs:
        sp = Spec.parse(text)
        row = dict(spec=text, warmup=sp.warmup, fp32_step_s=fp32_s, priced=True, why="")
        if sp.is_fp32:
            row.update(step_s=fp32_s, algorithm=fp32_alg, bits_per_value=32.0)
        else:
            try:
                cost = codec_cost(("ef:" if sp.error_feedback else "") + sp.codec, dev)
                t, a = best(cost)
                row.update(step_s=t, algorithm=a, bits_per_value=s.bits_per_value(cost))
            except (ValueError, KeyError) as e:
                row.update(step_s=math.nan, algorithm="", bits_per_value=math.nan, priced=False, why=str(e))
        rows.append(row)
    return pd.DataFrame(rows)


def modelled_seconds(step: float, warmup: int, step_s: float, fp32_step_s: float) -> float:
    """Modelled seconds to reach `step` (inf stays inf): the warm-up's steps at fp32's price, the rest at the codec's."""
    if not math.isfinite(step):
        return math.inf
    w = min(step, warmup)
    return w * fp32_step_s + (step - w) * step_s


def _fmt_pen(r: dict) -> str:
    if r["seeds"] == 0:
        return "not measured"
    if r["never_reached"]:
        return f"never reached the target in {r['never_reached']} of {r['seeds']} seeds"
    ci = (f" (95% CI {r['penalty_ci_low']:.2f}-{r['penalty_ci_high']:.2f})"
          if r.get("penalty_ci_low") is not None else "")
    return f"needs {r['penalty']:.2f}x fp32's steps{ci}"


def _ci_has_one(r: dict) -> bool:
    if r["never_reached"] or r["seeds"] == 0 or r.get("penalty") is None:
        return False
    lo, hi = r.get("penalty_ci_low"), r.get("penalty_ci_high")
    if lo is None:
        return abs(r["penalty"] - 1) < 0.05
    return lo - 1e-9 <= 1.0 <= hi + 1e-9


def _rank(spec: str) -> int | None:
    """PowerSGD's rank of a spec that varies nothing else (no warm-up, default other options); else None."""
    from lab.codecs.registry import split_spec

    sp = Spec.parse(spec)
    if sp.is_fp32 or sp.warmup:
        return None
    _, name, opts = split_spec(sp.codec)
    if name != "powersgd" or set(opts) - {"rank"}:
        return None
    return int(opts.get("rank", 1))


def race(runs: pd.DataFrame | list[dict], curves: pd.DataFrame | list[dict], *, task: str, seed: int | None = None,
         optimizer: str = "sgd", cluster: str = "8x8", inter: str = "eth10g", intra: str = "nvlink4",
         gpu: str = "h100", model: str | None = None, batch_per_gpu: int = 8, seeds_asked: int | None = None,
         specs: list[str] | None = None) -> RaceResult:
    """The race of a converge study's finished runs (`runs`: one row per (spec, seed), as `converge`
    streams them; `curves`: its evaluations) for one `seed` (None: the first), with modelled time on
    `cluster` for `model` (None: the model the task is priced like). A stopped study's rows work too
    (partial)."""
    runs_l = runs.to_dict(orient="records") if isinstance(runs, pd.DataFrame) else list(runs)
    pts = curves if isinstance(curves, pd.DataFrame) else pd.DataFrame(list(curves))
    get_task(task)  # ValueError naming the known tasks
    fp32_runs = {int(r["seed"]): r for r in runs_l if r["spec"] == FP32}
    if not fp32_runs:
        raise ValueError("no finished fp32 run: the race has no target yet (fp32 runs first and defines it)")
    seeds = sorted(fp32_runs)
    seed = seeds[0] if seed is None else int(seed)
    if seed not in fp32_runs:
        raise ValueError(f"seed {seed} has no finished fp32 run; seeds with one: {', '.join(map(str, seeds))}")
    order = specs or list(dict.fromkeys(r["spec"] for r in runs_l))
    model = model or get_task(task).priced_like
    summary = {r["spec"]: r for r in summarize(runs_l, order, seeds_asked)}
    times = step_times(order, model, cluster, gpu=gpu, intra=intra, inter=inter, batch_per_gpu=batch_per_gpu)
    tm = times.set_index("spec")
    target = float(fp32_runs[seed]["target"])

    def secs(spec: str, step: float) -> float:
        t = tm.loc[spec]
        return modelled_seconds(step, int(t.warmup), float(t.step_s), float(t.fp32_step_s))

    cur = pts[(pts["seed"] == seed) & pts["spec"].isin(order)].copy() if len(pts) else pd.DataFrame(
        columns=["spec", "seed", "step", "val_loss", "quality", "train_s"])
    cur["modelled_s"] = [secs(s, float(k)) for s, k in zip(cur["spec"], cur["step"])]
    fp32_tt = statistics.fmean(secs(FP32, float(r["steps_to_target"])) for r in fp32_runs.values())
    rows = []
    for spec in order:
        mine = [r for r in runs_l if r["spec"] == spec]
        here = next((r for r in mine if int(r["seed"]) == seed), None)
        sm = summary[spec]
        tts = [secs(spec, float(r["steps_to_target"])) for r in mine]
        tt = statistics.fmean(tts) if tts else math.nan
        tt_ci = t_interval(tts) if tts and bool(tm.loc[spec].priced) else None
        t = tm.loc[spec]
        rows.append(dict(
            spec=spec, seeds=sm["seeds"], reached=sm["reached"], never_reached=sm["never_reached"],
            steps_mean=sm.get("steps_mean", math.nan), steps_ci_low=sm.get("steps_ci_low"),
            steps_ci_high=sm.get("steps_ci_high"),
            penalty=sm.get("penalty"), penalty_ci_low=sm.get("penalty_ci_low"),
            penalty_ci_high=sm.get("penalty_ci_high"),
            arrival_step=float(here["steps_to_target"]) if here else math.nan,
            arrival_modelled_s=secs(spec, float(here["steps_to_target"])) if here else math.nan,
            arrival_val_loss=_loss_at(cur, spec, here),
            step_ms=1e3 * float(t.step_s), step_vs_fp32=float(t.step_s) / float(t.fp32_step_s),
            bits_per_value=float(t.bits_per_value), algorithm=t.algorithm, priced=bool(t.priced),
            modelled_time_to_target_s=tt,
            time_to_target_ci_low=tt_ci[0] if tt_ci else None, time_to_target_ci_high=tt_ci[1] if tt_ci else None,
            time_to_accuracy_speedup=(0.0 if math.isinf(tt) else fp32_tt / tt) if tts and t.priced else math.nan,
            speedup_ci_low=fp32_tt / tt_ci[1] if tt_ci and tt_ci[1] > 0 else None,
            speedup_ci_high=fp32_tt / tt_ci[0] if tt_ci and tt_ci[0] > 0 else None))
    arr = pd.DataFrame(rows)
    arr["verdict"] = [versus_fp32(r) for r in rows]
    arr = rank_arrivals(arr)
    nodes, _, per = str(cluster).partition("x")
    where = (f"{nodes} nodes x {per} {gpu.upper()} ({intra} inside a node, {inter} between nodes), {model}"
             if per else f"{cluster} ({gpu}, {intra}, {inter}), {model}")
    lessons = race_lessons(arr, summary, optimizer=optimizer, where=where)
    partial = any(r["partial"] for r in summary.values()) or any(r["seeds"] == 0 for r in summary.values())
    notes = [f"{r.spec}: {r.why}" for r in times.itertuples() if not r.priced]
    first, tied = podium(arr)
    return RaceResult(cur.reset_index(drop=True), arr, target, seed, seeds, lessons, where, model, partial, notes,
                      first, tied)


SOONER, LATER, NOISE_OF_FP32 = "sooner than fp32", "later than fp32", "within noise of fp32"


def versus_fp32(r: dict) -> str:
    """A race row's verdict against fp32 by its speedup's 95% CI: sooner / later than fp32 where the whole
    interval is above / below 1, within noise where it straddles 1 (the point where there is no CI); 'never'
    (some seed missed the target), 'not measured' (no finished run), 'not priced' (no step model)."""
    if r["spec"] == FP32:
        return "baseline"
    if not r["seeds"]:
        return "not measured"
    if r["never_reached"]:
        return "never"
    if not r["priced"]:
        return "not priced"
    x, lo, hi = r["time_to_accuracy_speedup"], r.get("speedup_ci_low"), r.get("speedup_ci_high")
    lo, hi = (x, x) if lo is None or hi is None or lo != lo or hi != hi else (lo, hi)
    return SOONER if lo > 1 else LATER if hi < 1 else NOISE_OF_FP32


def _bounds(r: dict) -> tuple[float, float]:
    """(low, high) modelled seconds to the target of a race row: its 95% CI, the mean where there is none."""
    t, lo, hi = r["modelled_time_to_target_s"], r.get("time_to_target_ci_low"), r.get("time_to_target_ci_high")
    return (t, t) if lo is None or hi is None or lo != lo or hi != hi else (lo, hi)


def rank_arrivals(arr: pd.DataFrame) -> pd.DataFrame:
    """The arrivals best first by what the interval supports: the upper end of the modelled time to the target's
    95% CI (the mean where there is none), then the mean; never reached, not priced and not measured last."""
    def key(r: dict) -> tuple:
        t = r["modelled_time_to_target_s"]
        if not r["seeds"] or not r["priced"] or t != t:
            return (2, 0.0, 0.0)
        if not math.isfinite(t):
            return (1, 0.0, 0.0)
        return (0, _bounds(r)[1], t)
    recs = arr.to_dict(orient="records")
    order = sorted(range(len(recs)), key=lambda i: key(recs[i]))
    return arr.iloc[order].reset_index(drop=True)


def podium(arr: pd.DataFrame) -> tuple[str | None, list[str]]:
    """(the spec first by the upper end of its time-to-target interval, the specs whose intervals overlap its
    own: the seeds do not separate them) of ranked arrivals (`rank_arrivals`); (None, []) when none arrived."""
    recs = [r for r in arr.to_dict(orient="records") if r["seeds"] and r["priced"]
            and math.isfinite(r["modelled_time_to_target_s"])]
    if not recs:
        return None, []
    w = min(recs, key=lambda r: (_bounds(r)[1], r["modelled_time_to_target_s"]))
    top = _bounds(w)[1]
    return w["spec"], [r["spec"] for r in recs if r is not w and _bounds(r)[0] <= top]


def _ci_text(lo, hi, fmt) -> str:
    """', 95% CI a-b' ('' without a CI; ', the same in every seed' where its ends print alike)."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return ""
    return ", the same in every seed" if fmt(lo) == fmt(hi) else f", 95% CI {fmt(lo)}-{fmt(hi)}"


def _loss_at(cur: pd.DataFrame, spec: str, run: dict | None) -> float:
    if run is None or not math.isfinite(float(run["steps_to_target"])):
        return math.nan
    hit = cur[(cur["spec"] == spec) & (cur["step"] == run["steps_to_target"])]
    return float(hit["val_loss"].iloc[0]) if len(hit) else math.nan


def race_lessons(arr: pd.DataFrame, summary: dict[str, dict], *, optimizer: str, where: str) -> dict[str, list[str]]:
    """The sentences each view of the race teaches, from the numbers in `arr` and `summary`:
    'steps': error feedback against none for every codec run both ways, the 8-bit types against fp32;
    'time': who reaches the target first on the cluster as the intervals support it (`podium`: no single
    first where another's interval overlaps its own), what the 8-bit types' steps cost, PowerSGD's rank
    (steps penalty against bytes)."""
    by = {r["spec"]: r for r in arr.to_dict(orient="records")}
    steps: list[str] = []
    time: list[str] = []
    for spec, r in by.items():
        ef = by.get("ef:" + spec)
        if not spec.startswith("ef:") and ef is not None and r["seeds"] and ef["seeds"]:
            plain_s, ef_s = summary[spec], summary["ef:" + spec]
            better = _better(ef_s, plain_s)
            head = f"{spec} {_fmt_pen(plain_s)}; with error feedback it {_fmt_pen(ef_s)}"
            if better is True:
                steps.append(head + ": error feedback keeps what each step did not send and adds it to the next "
                             "gradient, so every coordinate's update arrives, late, instead of being lost "
                             "(Seide et al. 2014; Stich et al. 2018).")
            elif better is False:
                why = (" With " + optimizer + ", the residual arrives as one large late gradient that the optimizer's "
                       "per-coordinate scaling treats as fresh (1-bit Adam freezes Adam's variance first for this "
                       "reason)." if optimizer in ("adamw", "rmsprop") else
                       " The delayed residual costs more here than the dropped coordinates did.")
                steps.append(head + ": here error feedback does not rescue it." + why)
            else:
                steps.append(head + ": no difference beyond the seeds' spread.")
    eight = [s for s, r in by.items() if EIGHT_BIT[0] <= r["bits_per_value"] <= EIGHT_BIT[1] and r["seeds"]
             and not s.startswith("ef:") and "@" not in s]
    if eight:
        ok = [s for s in eight if _ci_has_one(summary[s])]
        pens = [summary[s]["penalty"] for s in eight if summary[s].get("penalty") is not None
                and math.isfinite(summary[s]["penalty"])]
        rng = _span(pens, "{:.2f}") + "x" if pens else "no finite"
        head = (f"{len(ok)} of {len(eight)} 8-bit types ({', '.join(eight)}) reach the target with fp32 "
                f"(penalty {rng} fp32's steps, CI containing 1 for {len(ok)})")
        late = [s for s in eight if s not in ok and (summary[s]["never_reached"] or (summary[s].get("penalty") or 0) > 1)]
        steps.append(head + (": rounding each gradient value to 8 bits adds noise far below the minibatch's own, "
                             "so their curves lie on fp32's (Dettmers 2016 §3.4)." if not late else
                             f"; {', '.join(late)} {'needs' if len(late) == 1 else 'need'} more steps than fp32 "
                             "beyond the seeds' spread: here 8 bits is not free for "
                             + ("it" if len(late) == 1 else "them") + " (Dettmers 2016 §3.4 found no difference)."))
        same = [by[s] for s in ok if by[s]["priced"] and by[s]["time_to_accuracy_speedup"] > 0]
        fast = [r for r in same if r["step_vs_fp32"] < 1]
        slow = [r for r in same if r["step_vs_fp32"] >= 1]
        if fast:
            lo = min(r["step_vs_fp32"] for r in fast)
            hi = max(r["step_vs_fp32"] for r in fast)
            sp = [r["time_to_accuracy_speedup"] for r in fast]
            lows = [r.get("speedup_ci_low") for r in fast]
            highs = [r.get("speedup_ci_high") for r in fast]
            ci = (f" (95% CI {min(lows):.2f}-{max(highs):.2f})" if None not in lows + highs else "")
            noisy = [r["spec"] for r in fast if r["verdict"] == NOISE_OF_FP32]
            time.append(f"The 8-bit types cost almost nothing: the same steps as fp32, each step "
                        f"{_span([lo, hi], '{:.0%}')} of fp32's on {where} (a quarter of the bits), so "
                        f"{'they reach' if len(fast) > 1 else fast[0]['spec'] + ' reaches'} the target "
                        f"{_span(sp, '{:.2f}')}x sooner than fp32{ci}"
                        + (f"; for {_listed(noisy)} that is within the seeds' spread of fp32." if noisy else "."))
        if slow:
            lo = min(r["step_vs_fp32"] for r in slow)
            hi = max(r["step_vs_fp32"] for r in slow)
            names = ", ".join(r["spec"] for r in slow)
            time.append(f"On {where} a step of {names} takes {_span([lo, hi], '{:.0%}')} of fp32's: the network is "
                        f"fast enough that encoding and decoding cost more than the bits saved, so the same steps "
                        f"reach the target later than fp32 "
                        f"({_span([r['time_to_accuracy_speedup'] for r in slow], '{:.2f}')}x fp32's speed).")
    priced = [r for r in by.values() if r["priced"] and r["seeds"] and not math.isnan(r["modelled_time_to_target_s"])]
    if priced:
        fin = [r for r in priced if math.isfinite(r["modelled_time_to_target_s"])]
        never = [r["spec"] for r in priced if not math.isfinite(r["modelled_time_to_target_s"])]
        if fin:
            first, tied = podium(pd.DataFrame(fin))
            w = by[first]
            fp = by.get(FP32)
            vs = (f"; {w['time_to_accuracy_speedup']:.2f}x sooner than fp32"
                  + _ci_text(w.get("speedup_ci_low"), w.get("speedup_ci_high"), "{:.2f}".format)
                  if fp and w["spec"] != FP32 else "")
            when = (f"{duration_text(w['modelled_time_to_target_s'])} modelled"
                    + _ci_text(w.get("time_to_target_ci_low"), w.get("time_to_target_ci_high"), duration_text) + vs)
            cheap = min(priced, key=lambda r: r["step_ms"])
            extra = ("" if cheap["spec"] == w["spec"] else
                     f" The cheapest step is {cheap['spec']}'s ({cheap['step_vs_fp32']:.0%} of fp32's), but it "
                     + (f"never reaches the target" if not math.isfinite(cheap["modelled_time_to_target_s"]) else
                        f"needs {cheap['penalty']:.2f}x the steps") + ".")
            head = (f"On {where}, {w['spec']} reaches the target first ({when}), ahead of every other codec's "
                    "interval." if not tied else
                    f"On {where}, no single codec reaches the target first beyond the seeds' spread: {w['spec']} "
                    f"leads by its interval's upper end ({when}), but the intervals of {_listed(tied)} overlap "
                    "its own.")
            time.append(head + extra + (f" Never there: {', '.join(never)}." if never else ""))
    ranks = sorted((_rank(s), s) for s in by if _rank(s) is not None and by[s]["seeds"])
    if len(ranks) >= 2:
        parts = [f"rank {k}: {_fmt_pen(summary[s]).replace('needs ', '')}, {by[s]['bits_per_value']:.2g} bits per "
                 "value" for k, s in ranks]
        rank_of = {s: k for k, s in ranks}
        first, tied = podium(pd.DataFrame([by[s] for _, s in ranks]))
        tail = ""
        if first is not None:
            t = duration_text(by[first]["modelled_time_to_target_s"])
            tail = (f"; on this cluster rank {rank_of[first]} reaches the target first ({t}), beyond the seeds' "
                    "spread" if not tied else
                    f"; on this cluster rank {rank_of[first]} ({t}) and rank "
                    f"{_listed([str(rank_of[s]) for s in tied])} reach the target within the seeds' spread of "
                    "each other")
        time.append(f"PowerSGD's rank trades steps for bytes ({'; '.join(parts)}): a low rank sends less but "
                    f"approximates the gradient worse, so it pays only while the saved bytes outweigh the extra "
                    f"steps{tail} (Vogels et al. 2019 reach full accuracy at rank 2-4).")
    elif len(ranks) == 1:
        time.append(f"PowerSGD ran at rank {ranks[0][0]} only: add powersgd:rank=2 and powersgd:rank=4 to see where "
                    "the rank matters.")
    return {"steps": steps, "time": time}


def _better(a: dict, b: dict) -> bool | None:
    """True: a reaches the target in fewer steps than b beyond the seeds' spread; False: worse; None: neither."""
    pa = math.inf if a["never_reached"] else a.get("penalty")
    pb = math.inf if b["never_reached"] else b.get("penalty")
    if pa is None or pb is None:
        return None
    if math.isinf(pa) and math.isinf(pb):
        return None
    if math.isinf(pa) or math.isinf(pb):
        return math.isinf(pb)
    la, ha = a.get("penalty_ci_low") or pa, a.get("penalty_ci_high") or pa
    lb, hb = b.get("penalty_ci_low") or pb, b.get("penalty_ci_high") or pb
    if ha < lb:
        return True
    if hb < la:
        return False
    return None


def _listed(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _span(values: list[float], fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def duration_text(s: float) -> str:
    """Seconds in words: ms, s, min or h, three significant digits."""
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 60:
        return f"{s / 60:.3g} min"
    if s >= 1:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms"

# The race's lessons compare these pairs (error feedback or none; PowerSGD's ranks; 8-bit types against 1-bit):
# an experiment design naming its contestants, as Table 1 does. Every registered codec can join the live race.
RACE_LESSON_SPECS = ["dynamic_tree", "fp8_e4m3", "onebit", "ef:onebit", "topk:ratio=0.01", "ef:topk:ratio=0.01",
                     "randomk:ratio=0.01", "ef:randomk:ratio=0.01", "powersgd:rank=1", "powersgd:rank=2",
                     "powersgd:rank=4"]
RACE_LIVE_DEFAULT = ["dynamic_tree", "randomk:ratio=0.01", "ef:randomk:ratio=0.01"]
# specs shown first from a committed result (the rest one click away): the lessons' pairs
RACE_COMMITTED_DEFAULT = ["bf16", "powersgd", *RACE_LESSON_SPECS]


def race_live_specs() -> list[str]:
    """What the live race offers: the lessons' specs, then every other registered codec (read when asked)."""
    from lab.codecs import codec_names

    return [*RACE_LESSON_SPECS, *(c for c in codec_names() if c not in RACE_LESSON_SPECS and c != "fp32")]


__all__ = ["RACE_LESSON_SPECS", "RACE_LIVE_DEFAULT", "RACE_COMMITTED_DEFAULT", "race_live_specs", "RaceResult", "race",
           "versus_fp32", "rank_arrivals", "podium", "SOONER", "LATER", "NOISE_OF_FP32",
           "race_lessons", "step_times", "modelled_seconds", "committed_race_data", "race_data", "duration_text"]
