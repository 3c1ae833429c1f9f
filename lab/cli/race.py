"""`paralab race`: the race to the target as a table: per codec spec of a `paralab converge`
result, steps to fp32's target, the modelled step time on a cluster, modelled time to target and its
speedup against fp32, with t-based 95% CIs over seeds (the Training page's race view, in the terminal)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from .base import app, console, emit, fail, json_option, out_option, print_frame, result
from .names import RegistryHelp


@app.command(cls=RegistryHelp)
def race(task: Optional[str] = typer.Option(None, help="{tasks}: the converge task whose result races "
                                                      "(default: --results' task, else mlp)"),
         results: Optional[Path] = typer.Option(None, "--results", help="a `paralab converge` result file (default: "
                                                                         "converge-<task>-*.json in $PARALAB_RESULTS "
                                                                         "or ./bench/results, then the shipped one)"),
         cluster: str = typer.Option("8x8", help="NODESxGPUS, e.g. 8x8: 8 nodes of 8 GPUs"),
         gpu: str = typer.Option("h100", help="GPU preset: gtx_titan | k40m | v100 | a100 | h100"),
         intra: str = typer.Option("nvlink4", help="link inside a node: nvlink3 | nvlink4 | nvlink5 | pcie3 | "
                                                   "pcie4_x16 | pcie5_x16 (aliases pcie4, pcie5)"),
         inter: str = typer.Option("eth10g", help="one NIC between nodes: ib_hdr | ib_ndr | eth10g | eth25g | "
                                                  "eth100g | eth200g | eth400g ... (aliases hdr, ndr400, 100gbe, ...)"),
         model: Optional[str] = typer.Option(None, help="the priced model: alexnet | deep_image | vgg16 | resnet50 | "
                                                        "gpt2-small (default: the one the task stands for)"),
         batch: int = typer.Option(8, "--batch", min=1, max=1 << 24,
                                   help="samples per GPU per step of the priced model"),
         codecs: Optional[str] = typer.Option(None, "--codecs", help="comma-separated specs of the result to show "
                                                                     "(default: every one it measured; fp32 always)"),
         seed: Optional[int] = typer.Option(None, min=0, max=1 << 31, help="the seed whose arrival step is shown "
                                                                           "(default: the first)"),
         as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Which codec gets the model trained first on a cluster: modelled time to target = steps to fp32's
    target (measured by `paralab converge`) x the step time `paralab pays` models for each codec (its
    fastest allreduce; an @N warm-up's steps at fp32's price). A codec that never reached the target in
    some seed never arrives; one the step model cannot price is 'not priced'."""
    from lab.experiments import USER_ERRORS, committed_race_data, race as run_race, race_data

    config = {"task": task, "results": str(results) if results else None, "cluster": cluster, "gpu": gpu,
              "intra": intra, "inter": inter, "model": model, "batch": batch, "codecs": codecs, "seed": seed}
    try:
        if results is not None:
            data = race_data(results, task)
        else:
            name = "mlp" if task is None else task
            data = committed_race_data(name)
            if data is None:
                fail(f"no converge result for task {name!r} (converge-{name}-*.json in $PARALAB_RESULTS, "
                     f"./bench/results or paralab's reference results): run `paralab converge --task {name} "
                     "--codecs all`, or give --results FILE")
        have = [s for s in dict.fromkeys(data["runs"]["spec"]) if s != "fp32"] if len(data["runs"]) else []
        shown = have
        if codecs:
            shown = [c.strip() for c in codecs.split(",") if c.strip() and c.strip() != "fp32"]
            missing = [c for c in shown if c not in have]
            if missing:
                fail(f"--codecs: {', '.join(map(repr, missing))} not in {data['path']}; it measured: "
                     f"{', '.join(have) or 'nothing but fp32'}")
        cfg = data["config"]
        runs = data["runs"][data["runs"]["spec"].isin(["fp32", *shown])] if len(data["runs"]) else data["runs"]
        res = run_race(runs, data["curves"], task=data["name"], seed=seed, optimizer=cfg.get("optimizer", "sgd"),
                       cluster=cluster, inter=inter, intra=intra, gpu=gpu, model=model, batch_per_gpu=batch,
                       seeds_asked=cfg.get("seeds"), specs=["fp32", *shown])
    except USER_ERRORS as e:
        fail(str(e))
        return
    config.update(task=data["name"], results=data["path"], model=res.model)
    rows = res.arrivals.assign(arrived=[_arrived(r) for r in res.arrivals.to_dict(orient="records")])
    takeaway = next((t for t in res.lessons["time"] if "reaches the target first" in t), None)
    payload = result("race", config, rows=rows, seed=res.seed, seeds=res.seeds, target=res.target,
                     cluster=res.cluster, lessons=res.lessons, takeaway=takeaway, notes=res.notes,
                     partial=res.partial or data["partial"],
                     first=res.first, tied=res.tied,
                     ci="two-sided Student-t 95% interval of the mean over seeds; speedup: fp32's mean time over "
                        "the codec's interval; verdict: sooner or later than fp32 where the speedup's whole interval "
                        "is above or below 1, within noise where it straddles 1; rows best first by the upper end "
                        "of the time's interval; tied: the codecs whose interval overlaps the first's")
    if emit(payload, out, as_json):
        return
    table = res.arrivals.assign(
        reached=[f"{r['reached']}/{r['seeds']}" for r in rows.to_dict(orient="records")],
        steps=[_ci(r["steps_mean"], r["steps_ci_low"], r["steps_ci_high"], "{:.0f}") for r in _recs(res)],
        penalty=[_ci(r["penalty"], r["penalty_ci_low"], r["penalty_ci_high"], "{:.2f}", r["never_reached"])
                 for r in _recs(res)],
        step_vs_fp32=[f"{r['step_vs_fp32']:.0%}" if r["priced"] else "not priced" for r in _recs(res)],
        time_to_target=[_ci(r["modelled_time_to_target_s"], r["time_to_target_ci_low"], r["time_to_target_ci_high"],
                            None, r["never_reached"]) if r["priced"] else "not priced" for r in _recs(res)],
        speedup=[_ci(r["time_to_accuracy_speedup"], r["speedup_ci_low"], r["speedup_ci_high"], "{:.2f}x",
                     r["never_reached"]) if r["priced"] else "not priced" for r in _recs(res)],
        arrived=rows["arrived"])
    cols = ["spec", "reached", "steps", "penalty", "step_ms", "step_vs_fp32", "time_to_target", "speedup",
            "verdict"]  # each step's allreduce algorithm: in --json
    print_frame(table[cols].rename(columns={"spec": "codec", "steps": "steps_to_target (95% CI)",
                                            "penalty": "steps_penalty (95% CI)", "step_ms": "step_ms (modelled)",
                                            "time_to_target": "time_to_target (modelled, 95% CI)",
                                            "speedup": "speedup_vs_fp32 (95% CI)"}),
                f"Race to the target: {data['task'].get('description', data['name'])} ({data['path']}), on "
                f"{res.cluster}; target {res.target:.4g} (seed {res.seed}); best first by the upper end of the "
                "modelled time's 95% CI")
    for text in [*res.lessons["steps"], *res.lessons["time"]]:
        console.print(f"- {text}", highlight=False, soft_wrap=True)
    if payload.get("partial"):
        console.print("partial: some codecs have fewer finished seeds than the study asked (none: not measured)",
                      highlight=False, soft_wrap=True)
    for n in res.notes:
        console.print(f"not priced: {n}", highlight=False, soft_wrap=True)


def _recs(res) -> list[dict]:
    return res.arrivals.to_dict(orient="records")


def _arrived(r: dict) -> str:
    """'yes' (every seed reached the target), 'never' (some seed did not), 'not measured' (no run)."""
    if not r["seeds"]:
        return "not measured"
    return "never" if r["never_reached"] else "yes"


def _ci(v, lo, hi, fmt: str | None, never: int = 0) -> str:
    """A mean with its CI in words ('never' for an infinite one, seconds as s/min/h when fmt is None)."""
    from lab.experiments.race import duration_text

    if never or (v is not None and v == math.inf):
        return "never"
    if v is None or v != v:
        return "not measured"
    f = duration_text if fmt is None else fmt.format
    return f(v) + (f" ({f(lo)}-{f(hi)})" if lo is not None and hi is not None and lo == lo and hi == hi else "")
