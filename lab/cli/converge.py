"""`paralab converge`: time to accuracy, steps to fp32's target per codec spec with CIs."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .base import ABOVE_ZERO, app, check_results_dir, console, emit, fail, json_option, numbers, out_option, print_frame, result, session
from .names import RegistryHelp


@app.command(cls=RegistryHelp)
def converge(
    task: str = typer.Option("mlp", help="a registered task: {task_list}"),
    codecs: str = typer.Option("fp32,dynamic_tree", "--codecs",
                               help="comma-separated codec specs ('ef:' = error feedback, '@N' = N fp32 warm-up "
                                    "steps), e.g. 'dynamic_tree,ef:topk:ratio=0.01,powersgd:rank=2'; "
                                    "'all': every registered codec; fp32 always runs"),
    seeds: Optional[int] = typer.Option(None, min=1, max=1000, help="seeds per spec (default 3; CIs need >= 2)"),
    mode: str = typer.Option("sim", help="sim: K simulated workers (SimComm, every hop's codec semantics); "
                                         "ddp: real processes, the codec as DDP's communication hook; or a "
                                         "parallelism on real processes that trains the task's model, the codec on "
                                         "what its ranks send: {parallelisms}"),
    workers: Optional[int] = typer.Option(None, "--workers", "-k", min=1, max=64, help="workers K (sim: 1..64, default 4) or "
                                                                        "processes P (ddp, the parallelisms: 2..4)"),
    algorithm: str = typer.Option("ring", help="sim: allreduce algorithm of the simulated workers: {algorithms}"),
    steps: Optional[int] = typer.Option(None, min=1, max=1_000_000, help="fp32's steps; its validation loss at the last one defines "
                                                   "the target (default: the task's)"),
    budget: Optional[float] = typer.Option(None, min=1.0, max=1000.0, help="codec runs stop at the target or after budget x steps "
                                                      "(default 3)"),
    tolerance: Optional[float] = typer.Option(None, min=0.0, max=0.999, help="target = fp32's last validation loss x (1 + tolerance), "
                                                         "0 <= tolerance < 1 (default 0.05)"),
    eval_every: Optional[int] = typer.Option(None, min=1, max=1_000_000, help="steps between evaluations (the steps' resolution)"),
    lr: Optional[float] = typer.Option(None, min=ABOVE_ZERO, max=1000.0, help="learning rate (default: the task's)"),
    optimizer: Optional[str] = typer.Option(None, help="sgd | rmsprop | adamw (default: the task's)"),
    momentum: Optional[float] = typer.Option(None, min=0.0, max=1.0, help="sgd momentum (default: the task's)"),
    batch: Optional[int] = typer.Option(None, min=1, max=1 << 20, help="global mini-batch (samples or sequences)"),
    dataset: Optional[str] = typer.Option(None, help="image tasks: auto | mnist | fashion-mnist | digits"),
    train_limit: Optional[int] = typer.Option(None, min=1, max=1 << 31, help="image tasks: a seeded subset of this many training "
                                                         "samples"),
    hidden: Optional[str] = typer.Option(None, help="mlp: hidden layer widths, e.g. 256,256 ('': no hidden layer)"),
    smoke: bool = typer.Option(False, help="a preset in under 2 minutes on 2 CPU cores: the task (default the MLP "
                                           "on digits) small, with its own optimizer settings; fp32, dynamic_tree, "
                                           "random-k 1% with and without error feedback"),
    resume: Optional[Path] = typer.Option(None, help="an earlier result of the same settings (any specs and seeds): its "
                                                     "finished runs are reused, only the missing ones train"),
    out: Optional[Path] = out_option(" (default: bench/results/converge-<task>-<device>.json, none with --smoke)"),
    as_json: bool = json_option(),
) -> None:
    """Time to accuracy: per codec spec, the steps (and seconds here) to reach the validation loss fp32
    reaches at its last step, the penalty = steps / fp32's steps (inf when the budget ends first) with
    a t-based 95% CI over seeds, and the quality at fp32's last step. Ctrl-C keeps the finished runs."""
    from lab.experiments import USER_ERRORS, codec_coverage, converge as run, converge_config, converge_takeaway, \
        convergence_summary, result_name, results_dir

    if not smoke:
        check_results_dir(out, as_json)

    specs = [c.strip() for c in codecs.split(",") if c.strip()]
    widths = tuple(numbers(hidden, "--hidden", int, allow_empty=True)) if hidden is not None else None
    settings = dict(task=task, specs=specs if specs or not smoke else None, seeds=seeds, mode=mode, workers=workers,
                    algorithm=algorithm, steps=steps, budget=budget, tolerance=tolerance, eval_every=eval_every,
                    lr=lr, optimizer=optimizer, momentum=momentum, batch=batch, dataset=dataset,
                    train_limit=train_limit, hidden=widths)
    if widths is not None:
        settings["dropout"] = (0.2,) + (0.3,) * len(widths)
    if smoke and codecs == "fp32,dynamic_tree":  # the preset's specs unless the user named some
        settings["specs"] = None
    try:
        cfg = converge_config(smoke=smoke, **settings)
    except USER_ERRORS as e:
        fail(str(e))
        return
    from dataclasses import asdict

    earlier = None
    if resume is not None:
        import json

        try:
            earlier = json.loads(resume.read_text())
        except (OSError, ValueError) as e:
            fail(f"--resume {resume}: cannot read it as JSON ({e})")
            return

    config = {**asdict(cfg), "smoke": smoke}
    name = result_name(cfg.task, "cpu", cfg.mode, cfg.workers)
    default = None if (as_json or smoke) else results_dir() / f"{name}.json"
    dest = out or default
    spec_order = [s.text for s in cfg.parsed_specs()]
    import time

    t0 = time.perf_counter()
    try:
        with session("converge", config, out or (default.with_suffix(".partial.json") if default else None),
                     as_json) as s:
            s.what = "runs"
            def shape(runs: list[dict]) -> dict:
                rows = convergence_summary(runs, spec_order, cfg.seeds)
                return {"rows": rows, "runs": runs, "codecs": codec_coverage(rows)}

            s.shape = shape
            points: list[dict] = []
            s.extra["curves"] = points  # a stopped run keeps its curves (--resume reuses a finished run with them)
            res = run(progress=s.progress, on_run=lambda r: s.add([r], f"{r['spec']} seed {r['seed']}"),
                      on_eval=points.append, resume=earlier, **{k: v for k, v in asdict(cfg).items()})
    except USER_ERRORS as e:
        fail(str(e))
        return
    payload = result("converge", config, rows=res.summary, runs=res.runs, curves=res.curves, target=res.target,
                     task=res.task, data=res.source, takeaway=converge_takeaway(res),
                     codecs=codec_coverage(res.summary),
                     ci="two-sided Student-t 95% interval of the mean over seeds",
                     wall_s=round(time.perf_counter() - t0, 1))
    if emit(payload, dest, as_json):
        return
    cols = ["spec", "seeds", "reached", "steps_mean", "penalty", "penalty_ci_low", "penalty_ci_high",
            "time_penalty", "final_val_loss", "final_quality", "step_s"]
    print_frame(res.summary[cols], f"Time to accuracy: {res.task['description']} ({res.source}), {cfg.mode} with "
                                   f"{cfg.workers} workers, {cfg.seeds} seeds; final_quality = {res.task['quality']} "
                                   f"at step {cfg.steps}")
    console.print(f"target: {res.target['definition']}", highlight=False, soft_wrap=True)
    console.print(converge_takeaway(res), highlight=False, soft_wrap=True)
