"""Measured pipeline bubbles against the papers' formulas: every schedule torch ships on 2 Gloo ranks (loopback, no
shaped link), M = 2, 4, 8 micro-batches (M >= P, where the schedule runs them), compute-bound stages of equal work
(a 64-2048x9-10 MLP on digits, batch 1024: eight 2048x2048 layers, two per stage when 4 stages; a
micro-batch's forward then takes ~25 ms at M = 8 on 4 stages, long beside the ~0.5 ms a send of its 1 MiB of
activations takes to post), one thread per rank.

Each run trains 8 steps (`paralab train --mode pipeline`) and reports, for the median of its 5 timed steps, the
bubble measured from every rank's action times, the published formula at the measured F, B, I, W times
(`bubble_formula`), torch's order laid out with those times (`bubble_planned`) and with each block's own time in
that step, sends free (`bubble_replayed`: what the spread of the blocks' times alone leaves idle), with their
ratios, and where each rank's idle time went (waiting for a receive, posting a send, the rest). Writes
bench/results/pipeline_bubble.json (vector ISA and versions recorded). Run it alone on the machine.

Usage: python bench/pipeline_bubble.py [--tiny] [--out PATH]   (--tiny: a seconds-long check of the script)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ["OMP_NUM_THREADS"] = "1"  # one thread per rank (rank processes inherit it)

import torch  # noqa: E402

from lab.backend import device_name, versions  # noqa: E402
from lab.train.parallelism import get_strategy, train_parallel  # noqa: E402
from lab.train.parallelism.pipeline import schedule_names  # noqa: E402
from lab.train.parallelism.pipeline_plan import check_schedule  # noqa: E402
from lab.train.run import TrainConfig  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "pipeline_bubble.json"
P = 2
MICROBATCHES = (2, 4, 8)
TOLERANCE = 0.15  # the measured bubble within 15 % of the formula's


def config(tiny: bool) -> TrainConfig:
    """Compute-bound, equal stages: 9 hidden layers of 2048 (8 of 2048x2048, 2 per stage at 4 stages)."""
    width, batch = (32, 64) if tiny else (2048, 1024)
    return TrainConfig(dataset="digits", model="mlp", hidden=(width,) * 9, dropout=(0.0,) * 10, batch=batch,
                       epochs=0.25 if tiny else 6.0, evals_per_epoch=1, lr=0.001, optimizer="sgd", momentum=0.0,
                       train_limit=256 if tiny else None)


def measure(cfg: TrainConfig, schedule: str, M: int) -> dict:
    settings = get_strategy("pipeline").make_settings(schedule=schedule, microbatches=M)
    t0 = time.perf_counter()
    r = train_parallel("pipeline", cfg, P, settings, timeout=600)
    s = r.summary
    row = {k: s.get(k) for k in ("schedule", "microbatches", "stages_per_rank", "stages", "bubble_measured",
                                 "bubble_formula", "bubble_planned", "bubble_replayed", "t_f_s", "t_b_s", "t_i_s",
                                 "t_w_s", "idle_wait_s", "idle_send_s", "idle_other_s", "step_s", "steps",
                                 "timeline_step", "bubble_steps")}
    m, f, p = s["bubble_measured"], s["bubble_formula"], s["bubble_planned"]
    r_ = s.get("bubble_replayed")
    row.update(P=P, measured_over_formula=m / f if f else None, measured_over_planned=m / p if p else None,
               replayed_over_formula=r_ / f if f and r_ is not None else None,
               within_15pct_of_formula=bool(f) and abs(m / f - 1) <= TOLERANCE,
               within_15pct_of_planned=bool(p) and abs(m / p - 1) <= TOLERANCE,
               formula_within_step_spread=min(row["bubble_steps"]) <= f <= max(row["bubble_steps"]),
               wall_s=time.perf_counter() - t0)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="tiny model and few steps: checks the script, measures nothing")
    ap.add_argument("--out", type=Path, default=None, help=f"where the JSON goes (default {OUT}; --tiny: not written "
                                                            "unless given)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = config(a.tiny)
    load0, t0, rows = os.getloadavg()[0], time.perf_counter(), []
    for schedule in schedule_names():
        for M in MICROBATCHES:
            if M < P:
                continue
            try:
                check_schedule(schedule, P, M)
            except ValueError as e:
                print(f"{schedule:22s} M={M}: skipped ({e})")
                continue
            row = measure(cfg, schedule, M)
            rows.append(row)
            print(f"{schedule:22s} M={M}: measured {row['bubble_measured']:.3f}  formula {row['bubble_formula']:.3f}  "
                  f"planned {row['bubble_planned']:.3f}  replayed {row['bubble_replayed'] or float('nan'):.3f}  "
                  f"steps {min(row['bubble_steps']):.3f}-{max(row['bubble_steps']):.3f}  "
                  f"(F {1e3 * row['t_f_s']:.2f} ms)", flush=True)
    v = versions()
    out = dict(benchmark="pipeline_bubble", device=device_name("cpu"), vector_isa=v.get("vector_isa"), versions=v,
               procs=P, config=dict(
                   dataset=cfg.dataset, hidden=list(cfg.hidden), batch=cfg.batch, epochs=cfg.epochs, tiny=a.tiny,
                   microbatches=list(MICROBATCHES), tolerance=TOLERANCE, threads_per_rank=1, link="loopback"),
               load_avg_1min=[load0, os.getloadavg()[0]], wall_s=time.perf_counter() - t0, rows=rows,
               within_15pct_of_formula=sum(r["within_15pct_of_formula"] for r in rows),
               within_15pct_of_planned=sum(r["within_15pct_of_planned"] for r in rows), runs=len(rows),
               formula_within_step_spread=sum(r["formula_within_step_spread"] for r in rows),
               notes="bubble_measured: the median timed step's makespan less each rank's compute (F, I, W, B), over "
                     "the makespan, averaged over the ranks; bubble_formula: the papers' fraction at the measured "
                     "median block times (I and W from the stages whose backward torch splits: all but the first); "
                     "bubble_planned: torch's action order laid out with those times; bubble_replayed: that order "
                     "with each block's own time in the median step and free sends; idle_wait_s / idle_send_s / "
                     "idle_other_s: the median step's idle per rank (mean), waiting for receives, posting sends, "
                     "the rest; bubble_steps: the bubble of each of the 5 timed steps (its spread), "
                     "formula_within_step_spread: the formula between their least and most.")
    path = a.out if a.out is not None else (None if a.tiny else OUT)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
