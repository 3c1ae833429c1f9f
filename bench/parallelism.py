"""Every registered parallelism with a benchmark case (its `Strategy.bench`) on a shaped 2-rank link: fp32
against the 8-bit codec in the same run, alternately, over seeds.

Each strategy runs alone, one thread per rank (OMP_NUM_THREADS=1), over the case's link (`link_rate` in its
case, else 1 Gbit/s; network namespaces, root): for each seed an fp32 run and a run with the codec on what the
ranks send (the case's `cfg.codec`, else dynamic_tree), in ABBA order (fp32 first on even seeds, the codec
first on odd ones) so a drift in machine load hits both alike. The fp32 run also drops every other codec of
the case's settings (fields ending in `codec`; a case's `baseline` names its own fp32 settings). Recorded per
strategy, in bench/results/parallelism_<strategy>.json: each run (step time, losses, bytes, the strategy's own
summary), and the summary: median step time of fp32 / the codec's (> 1: the codec is faster), the final test
loss of each (mean and seed-to-seed standard deviation; `loss_within_noise`: the means differ by at most twice
the larger deviation), the wire bytes ratio, the strategy's own numbers (medians per variant; `*_s` times as
fp32 / codec ratios, e.g. expert's dispatch_s, pipeline's bubble), the device, library versions and the
vector ISA, and the load average before and after.

    python bench/parallelism.py                                   # every strategy with a case, 3 seeds
    python bench/parallelism.py --strategies pipeline,expert --seeds 2
    python bench/parallelism.py --strategies expert --set epochs=0.05 --link-rate none --out-dir /tmp/b  # a check
"""
from __future__ import annotations

import argparse
import ast
import os
import statistics
import sys
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per rank (lab.comm.launch keeps a value set here)

REPO = Path(__file__).resolve().parent.parent
#: the summary keys every parallelism shares (the rest are the strategy's own numbers)
SHARED = {"label", "mode", "backend", "procs", "steps", "step_s", "bytes", "fp32_bytes", "bytes_ratio",
          "final_test_error", "best_test_error", "final_train_loss", "final_test_loss", "parameters", "carries",
          "split"}
DEFAULT_RATE = "1gbit"
DEFAULT_CODEC = "dynamic_tree"


def case_settings(strategy: Any, codec_run: bool) -> dict:
    """The case's settings for the codec run, or for the fp32 run: its `baseline`, else every field ending in
    `codec` set to None (fp32)."""
    s = dict(strategy.bench.get("settings", {}))
    if codec_run:
        return s
    if "baseline" in strategy.bench:
        return {**s, **strategy.bench["baseline"]}
    return {**s, **{f.name: None for f in fields(strategy.settings) if f.name.endswith("codec")}}


def run_row(res: Any, seed: int, variant: str, codec: str | None) -> dict:
    """One run's numbers: the shared ones and the strategy's own scalar summary values."""
    s = res.summary
    own = {k: v for k, v in s.items() if k not in SHARED and (v is None or isinstance(v, (int, float, str, bool)))}
    return dict(seed=seed, variant=variant, codec=codec or "fp32", steps=s["steps"], step_s=s["step_s"],
                bytes=s["bytes"], fp32_bytes=s["fp32_bytes"], bytes_ratio=s["bytes_ratio"],
                final_train_loss=s.get("final_train_loss"), final_test_loss=s.get("final_test_loss"),
                final_test_error=s.get("final_test_error"), own=own)


def _median(rows: list[dict], key: str) -> float:
    vals = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)]
    return statistics.median(vals) if vals else float("nan")


def summarize(runs: list[dict]) -> dict:
    """fp32 against the codec over the seeds (module docstring)."""
    a = [r for r in runs if r["variant"] == "fp32"]
    b = [r for r in runs if r["variant"] == "codec"]
    la, lb = [r["final_test_loss"] for r in a], [r["final_test_loss"] for r in b]
    sd = lambda v: statistics.stdev(v) if len(v) >= 2 else float("nan")  # noqa: E731
    noise = max(sd(la), sd(lb)) if len(la) >= 2 and len(lb) >= 2 else float("nan")
    diff = statistics.fmean(lb) - statistics.fmean(la)
    per_seed = [ra["step_s"] / rb["step_s"] for ra in a for rb in b if ra["seed"] == rb["seed"]]
    out = dict(step_s_fp32=_median(a, "step_s"), step_s_codec=_median(b, "step_s"),
               step_ratio=_median(a, "step_s") / _median(b, "step_s"), step_ratio_per_seed=per_seed,
               test_loss_fp32=statistics.fmean(la), test_loss_codec=statistics.fmean(lb),
               test_loss_sd_fp32=sd(la), test_loss_sd_codec=sd(lb), test_loss_diff=diff,
               loss_within_noise=(abs(diff) <= 2 * noise) if noise == noise else None,
               test_error_fp32=statistics.fmean(r["final_test_error"] for r in a),
               test_error_codec=statistics.fmean(r["final_test_error"] for r in b),
               bytes_ratio=_median(b, "bytes") / _median(a, "bytes"),
               codec_bytes_ratio=_median(b, "bytes_ratio"))
    own: dict[str, dict] = {}
    keys = sorted({k for r in runs for k, v in r["own"].items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)})
    for k in keys:
        ma = _median([r["own"] for r in a], k)
        mb = _median([r["own"] for r in b], k)
        own[k] = dict(fp32=ma, codec=mb)
        if k.endswith("_s") and mb > 0:
            own[k]["ratio"] = ma / mb
    out["own"] = own
    return out


def bench_strategy(name: str, *, seeds: int, codec: str | None, link_rate: str | None, procs: int,
                   overrides: dict) -> dict:
    """Run one strategy's case: fp32 and the codec, alternately, `seeds` seeds each (module docstring)."""
    from lab.backend import device_name, versions
    from lab.experiments import TrainConfig, parallel_training
    from lab.train.parallelism import get_strategy

    strategy = get_strategy(name)
    if not strategy.bench:
        raise ValueError(f"strategy {name!r} has no benchmark case (Strategy.bench)")
    cfg = TrainConfig(**{**strategy.bench.get("cfg", {}), **overrides})
    codec = codec or cfg.codec or DEFAULT_CODEC
    rate = None if link_rate == "none" else (link_rate or strategy.bench.get("link_rate") or DEFAULT_RATE)
    load_before = os.getloadavg()
    runs = []
    for seed in range(seeds):
        order = ("fp32", "codec") if seed % 2 == 0 else ("codec", "fp32")
        for variant in order:
            c = replace(cfg, codec=codec if variant == "codec" else None, seed=cfg.seed + seed)
            settings = case_settings(strategy, variant == "codec")
            print(f"{name}: seed {c.seed}, {variant} ({c.codec or 'fp32'}), link {rate or 'loopback'}",
                  file=sys.stderr, flush=True)
            res = parallel_training(name, c, procs, settings, link_rate=rate)
            runs.append(run_row(res, c.seed, variant, c.codec))
    v = versions()
    return dict(benchmark="parallelism", strategy=name, description=strategy.description, device=device_name("cpu"),
                vector_isa=v.get("vector_isa"), versions=v, procs=procs,
                threads_per_rank=int(os.environ["OMP_NUM_THREADS"]), link_rate=rate, codec=codec,
                seeds=seeds, config=asdict(replace(cfg, codec=codec)),
                settings=case_settings(strategy, True), baseline_settings=case_settings(strategy, False),
                load_before=list(load_before), load_after=list(os.getloadavg()), runs=runs, summary=summarize(runs))


def _overrides(items: list[str]) -> dict:
    from lab.experiments import TrainConfig

    known = {f.name for f in fields(TrainConfig)}
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise SystemExit(f"error: --set {item!r}; allowed: FIELD=VALUE with a TrainConfig field "
                             f"({', '.join(sorted(known))})")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strategies", default=None, help="comma-separated (default: every one with a case)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per variant (>= 2 for the noise)")
    p.add_argument("--codec", default=None, help="the codec run's codec (default: the case's, else dynamic_tree)")
    p.add_argument("--link-rate", default=None, help="a tc rate, or 'none' for loopback (default: the case's, "
                                                     "else 1gbit)")
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a TrainConfig field of every case (a quick check: epochs=0.05)")
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    a = p.parse_args(argv)
    from lab.experiments import USER_ERRORS, parallel_strategies, write_result
    from lab.train.parallelism import get_strategy

    if a.seeds < 1 or a.procs < 1:
        raise SystemExit("error: --seeds and --procs must be >= 1")
    overrides = _overrides(a.set)
    names = [n.strip() for n in a.strategies.split(",") if n.strip()] if a.strategies else \
        [n for n in parallel_strategies() if get_strategy(n).bench]
    for name in names:
        try:
            doc = bench_strategy(name, seeds=a.seeds, codec=a.codec, link_rate=a.link_rate, procs=a.procs,
                                 overrides=overrides)
        except USER_ERRORS as e:
            print(f"error: {name}: {e}", file=sys.stderr)
            return 2
        out = a.out_dir / f"parallelism_{name}.json"
        write_result(out, doc)
        s = doc["summary"]
        print(f"{name}: step fp32 / {doc['codec']} {s['step_ratio']:.2f}x, bytes {s['bytes_ratio']:.3f}x, test loss "
              f"{s['test_loss_fp32']:.4f} -> {s['test_loss_codec']:.4f} (within noise: {s['loss_within_noise']}); "
              f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
