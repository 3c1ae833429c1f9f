"""The docs' result tables, regenerated from the commands that print them (and docs/results.md from the results
committed in bench/results), so a page never shows a stale number.

Each table sits between markers in its page:

    <!-- generated: NAME -->
    | ... the table ... |
    <!-- end generated -->

and NAME is one entry of TABLES below: the `paralab` commands it runs (in this process, with `--json`)
and the function that renders their JSON output as markdown (results.md's tables read the JSON files
instead). `python docs/generate.py` rewrites every marked table in place; `python docs/generate.py --check`
rewrites nothing and exits 1 naming the stale ones (tests/test_doc_tables.py runs the check). Only commands
that run in seconds are regenerated here.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

DOCS = Path(__file__).resolve().parent
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


@contextmanager
def builtin_plugins_only() -> Iterator[None]:
    """While the tables render, the registries hold the lab's own plugins only (its package scans): a plugin
    package installed in this environment (a codec, an algorithm, a collective, a task, a parallelism) changes no
    page."""
    from lab.codecs.registry import REGISTRY as codecs
    from lab.comm.algorithms.base import REGISTRY as algorithms
    from lab.comm.collectives.base import REGISTRY as collectives
    from lab.train.parallelism.base import REGISTRY as parallelisms
    from lab.train.tasks.base import REGISTRY as tasks

    saved = []
    for reg in (codecs, algorithms, collectives, tasks, parallelisms):
        reg.load()
        saved.append((reg, dict(reg.items)))
        for key, item in list(reg.items.items()):
            if not reg.builtin(item):
                del reg.items[key]
    try:
        yield
    finally:
        for reg, items in saved:
            reg.items.update(items)


def paralab(*args: str) -> dict:
    """`paralab ARGS --json` run in this process, with the lab's own plugins only: the JSON it prints."""
    from typer.testing import CliRunner

    from lab.cli import app

    with builtin_plugins_only():
        r = CliRunner().invoke(app, [*args, "--json"])
    if r.exit_code != 0:
        raise RuntimeError(f"paralab {' '.join(args)} failed ({r.exit_code}): {r.output.strip()[-500:]}")
    return json.loads(r.stdout)


def _x(v: float) -> str:
    return f"{v:.2f}x"


def _gbps(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "never"
    return "every bandwidth swept" if v == "inf" or (isinstance(v, float) and math.isinf(v)) else f"{v:.3g} GB/s"


def _row(out: dict, codec: str) -> dict:
    return next(r for r in out["rows"] if r["codec"] == codec)


def _best(rows: list[dict]) -> dict | None:
    return max(rows, key=lambda r: r["speedup_vs_bf16"]) if rows else None


# -- docs/pays.md

PAYS_SETTINGS = [  # (what the doc calls it, the command's arguments)
    ("1x8 nvlink4 (one node)", ["--cluster", "1x8", "--intra", "nvlink4"]),
    ("8x8 nvlink4 + ib_ndr (SHARP)", ["--cluster", "8x8", "--intra", "nvlink4", "--inter", "ib_ndr"]),
    ("8x8 nvlink4 + eth100g, overlap", ["--cluster", "8x8", "--intra", "nvlink4", "--inter", "eth100g", "--overlap"]),
    ("8x8 nvlink4 + eth10g", ["--cluster", "8x8", "--intra", "nvlink4", "--inter", "eth10g"]),
    ("1x8 pcie4_x16 (one node)", ["--cluster", "1x8", "--intra", "pcie4_x16"]),
]


def pays_settings() -> str:
    """Per setting of GPT-2 small on H100s: how many codecs pay, the best codec and the best 8-bit one
    (speedup against the best bf16 step), the median break-even NIC bandwidth and the bf16 baseline."""
    outs = [(label, paralab("pays", "--model", "gpt2-small", "--gpu", "h100", *args)) for label, args in PAYS_SETTINGS]
    n = len([r for r in outs[0][1]["rows"] if r["codec"] != "bf16"])
    lines = [f"| cluster | codecs that pay (of {n}; more within noise) | best codec per step (its algorithm; steps "
             "penalty) | best 8-bit codec | median codec pays below (per NIC) | bf16 baseline |",
             "|---|---|---|---|---|---|"]
    for label, out in outs:
        comp = [r for r in out["rows"] if r["codec"] != "bf16"]
        best, best8 = _best(comp), _best([r for r in comp if r["bits_per_value"] == 8])
        lesson = out["lesson"]
        one_node = out["config"]["cluster"].startswith("1x")
        below = "— (no network)" if one_node else _gbps(lesson["median_break_even_GBps"])
        noise = sum(r["verdict"] == "within noise" for r in comp)
        lines.append(f"| {label} | {sum(r['pays'] for r in comp)}{f' (+{noise})' if noise else ''} | "
                     f"{best['codec']} {_x(best['speedup_vs_bf16'])} "
                     f"({best['best_algorithm']}; {best['accuracy']}) | {_x(best8['speedup_vs_bf16'])} | {below} | "
                     f"{lesson['baseline_algorithm']}, {lesson['baseline_step_ms']:.2f} ms |")
    return "\n".join(lines) + "\n"


PAYS_PAPERS = [  # (the claim, codec, the command's arguments)
    ("ZeRO++ qgZ: 48x8 A100, 10 GbE", "mxfp4_e2m1", ["--cluster", "48x8", "--gpu", "a100", "--intra", "nvlink3",
                                                   "--inter", "eth10g"]),
    ("ZeRO++ qgZ: 48x8 A100, 25 GbE", "mxfp4_e2m1", ["--cluster", "48x8", "--gpu", "a100", "--intra", "nvlink3",
                                                   "--inter", "eth25g"]),
    ("ZeRO++ qgZ: 48x8 A100, 100 GbE", "mxfp4_e2m1", ["--cluster", "48x8", "--gpu", "a100", "--intra", "nvlink3",
                                                    "--inter", "eth100g"]),
    ("ZeRO++ qgZ: 48x8 A100, NDR400 (SHARP)", "mxfp4_e2m1", ["--cluster", "48x8", "--gpu", "a100", "--intra",
                                                           "nvlink3", "--inter", "ib_ndr"]),
    ("PowerSGD: 8x8 H100, NDR400 (SHARP)", "powersgd", ["--cluster", "8x8", "--gpu", "h100", "--inter", "ib_ndr"]),
    ("PowerSGD: 8x8 H100, 10 GbE", "powersgd", ["--cluster", "8x8", "--gpu", "h100", "--inter", "eth10g"]),
    ("dynamic tree: 8x8 H100, 10 GbE", "dynamic_tree", ["--cluster", "8x8", "--gpu", "h100", "--inter", "eth10g"]),
]


def pays_papers() -> str:
    """The settings docs/pays.md holds against the papers: the codec's speedup over the best bf16 step (its
    best algorithm) and the NIC bandwidth below which it pays, GPT-2 small, 8 sequences per GPU."""
    lines = ["| setting | codec | speedup vs bf16 (its best algorithm) | pays below |", "|---|---|---|---|"]
    for label, codec, args in PAYS_PAPERS:
        r = _row(paralab("pays", "--model", "gpt2-small", "--codecs", codec, *args), codec)
        lines.append(f"| {label} | {codec} | {_x(r['speedup_vs_bf16'])} ({r['best_algorithm']}) | {r['pays_below']} |")
    return "\n".join(lines) + "\n"


PAYS_ACCURACY_CODECS = ("dynamic_tree", "fp8_e4m3", "onebit", "ef:onebit", "topk", "ef:topk", "randomk", "ef:randomk",
                        "powersgd:rank=2", "powersgd:rank=4")


def pays_accuracy() -> str:
    """Time to accuracy: AlexNet (the mlp task's priced model) on 8x8 H100s over 10 GbE, every codec spec
    the committed bench/results/converge-mlp-cpu.json measured: per-step speedup, steps penalty, time to
    accuracy. The repository's results only (a user's own results folder is not read)."""
    import os

    from lab.plan.accuracy import RESULTS_ENV

    old = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(DOCS.parent / "bench" / "results")
    try:
        out = paralab("pays", "--model", "alexnet", "--cluster", "8x8", "--gpu", "h100", "--inter", "eth10g",
                      "--codecs", ",".join(PAYS_ACCURACY_CODECS))
    finally:
        if old is None:
            os.environ.pop(RESULTS_ENV)
        else:
            os.environ[RESULTS_ENV] = old
    from lab.plan.pays import rank_key

    lines = ["| codec | per-step speedup vs bf16 | steps penalty (95% CI) | time-to-accuracy speedup (95% interval) | "
             "verdict | measured as |", "|---|---|---|---|---|---|"]
    rows = sorted((r for r in out["rows"] if r["codec"] != "bf16"),  # best first by the interval's low end
                  key=lambda r: rank_key({k: (math.nan if v is None else v) for k, v in r.items()}))
    for r in rows:
        src = r["penalty_source"]
        if r["accuracy"] == "measured":
            ci = (f" ({r['steps_penalty_ci_low']:.2f}-{r['steps_penalty_ci_high']:.2f})"
                  if r["steps_penalty_ci_low"] is not None else "")
            measured = r.get("steps_penalty_measured", r["steps_penalty"])
            counted = f" → {r['steps_penalty']:.2f}" if f"{measured:.2f}" != f"{r['steps_penalty']:.2f}" else ""
            lo, hi = r["time_to_accuracy_speedup_ci_low"], r["time_to_accuracy_speedup_ci_high"]
            pen = f"{measured:.2f}{ci}{counted}"
            tta = _x(r["time_to_accuracy_speedup"]) + (f" ({lo:.2f}-{hi:.2f})" if lo is not None else "")
        else:
            pen, tta = r["accuracy"], "never" if r["accuracy"] == "never reaches the target" else "—"
        how = f"`{src['spec']}`, {src['seeds']} seeds" if src else "—"
        lines.append(f"| {r['codec']} | {_x(r['speedup_vs_bf16'])} | {pen} | {tta} | {r['verdict']} | {how} |")
    return "\n".join(lines) + "\n"


# -- docs/sharded.md

SHARDED_CLUSTER = ["--cluster", "48x8", "--gpu", "a100", "--intra", "nvlink3", "--inter", "eth100g"]
SHARDED_COLLECTIVES = ("forward_all_gather", "backward_all_gather", "reduce_scatter")


def sharded_volume() -> str:
    """ZeRO++ §3's cross-node volume per step with the lab's model: plain bf16 ZeRO-3 (`--zero-pp none`, its
    bf16 row) against ZeRO++ (qwZ with int8 weights, qgZ with mxfp4_e2m1 gradients, hpZ), per collective, in
    units of what one node must receive of the model, M·(N−1)/N (the bf16 forward all-gather's bytes)."""
    z3 = _row(paralab("pays", "--strategy", "fsdp", "--zero-pp", "none", "--model", "gpt-18b", "--codecs", "int8",
                      *SHARDED_CLUSTER), "bf16")
    zpp = _row(paralab("pays", "--strategy", "fsdp", "--zero-pp", "qwz,qgz,hpz", "--model", "gpt-18b", "--codecs",
                       "mxfp4_e2m1", "--weights-codec", "int8", *SHARDED_CLUSTER), "mxfp4_e2m1")
    unit = z3["forward_all_gather_cross_node_MB"]
    paper = {"forward_all_gather": ("1", "0.5"), "backward_all_gather": ("1", "0"),
             "reduce_scatter": ("1", "0.25"), "total": ("3", "0.75")}
    lines = ["| collective | ZeRO-3, bf16 (lab) | ZeRO++ (lab: int8 weights, mxfp4_e2m1 gradients) | paper ZeRO-3 | "
             "paper ZeRO++ | ZeRO++ runs it (plugins chosen) |", "|---|---|---|---|---|---|"]
    for k in (*SHARDED_COLLECTIVES, "total"):
        a = z3["cross_node_MB"] if k == "total" else z3[f"{k}_cross_node_MB"]
        b = zpp["cross_node_MB"] if k == "total" else zpp[f"{k}_cross_node_MB"]
        where = "" if k == "total" else f"{zpp[f'{k}_where']} ({zpp[f'{k}_algorithm']})"
        lines.append(f"| {k.replace('_all_gather', ' all-gather').replace('_', '-')} | {a / unit:.3f} M | {b / unit:.3f} M | {paper[k][0]} M | "
                     f"{paper[k][1]} M | {where} |")
    return "\n".join(lines) + "\n"


SHARDED_NETWORKS = [("10 GbE", "eth10g"), ("25 GbE", "eth25g"), ("100 GbE", "eth100g"), ("NDR400 InfiniBand", "ib_ndr")]


def sharded_throughput() -> str:
    """ZeRO++ against ZeRO-3 per step for an 18B GPT on 48x8 A100s (384 GPUs, ZeRO++'s largest scale), one
    2048-token sequence per GPU, over four networks, without and with overlap (prefetch): the speedup against
    plain bf16 ZeRO-3 and against bf16 FSDP with hpZ (what compression alone adds), and the cross-node GB per
    node per step."""
    lines = ["| network between nodes | ZeRO++ vs ZeRO-3, no overlap | of which compression | ZeRO++ vs ZeRO-3, "
             "overlap | ZeRO-3 step (no overlap / overlap) | cross-node per node per step (ZeRO-3 → ZeRO++) |",
             "|---|---|---|---|---|---|"]
    for label, inter in SHARDED_NETWORKS:
        args = ["pays", "--strategy", "fsdp", "--model", "gpt-18b", "--batch", "1", "--cluster", "48x8", "--gpu",
                "a100", "--intra", "nvlink3", "--inter", inter, "--codecs", "mxfp4_e2m1", "--weights-codec", "int8"]
        out, ov = paralab(*args), paralab(*args, "--overlap")
        r, o = _row(out, "mxfp4_e2m1"), _row(ov, "mxfp4_e2m1")
        lines.append(f"| {label} | {_x(r['speedup_vs_zero3'])} | {_x(r['speedup_vs_bf16'])} | "
                     f"{_x(o['speedup_vs_zero3'])} | {out['lesson']['zero3_step_ms'] / 1e3:.2f} s / "
                     f"{ov['lesson']['zero3_step_ms'] / 1e3:.2f} s | {_zero3_cross(out) / 1e3:.1f} GB → "
                     f"{r['cross_node_MB'] / 1e3:.1f} GB |")
    return "\n".join(lines) + "\n"


def _zero3_cross(out: dict) -> float:
    """Plain ZeRO-3's cross-node MB: the bf16 row's, with the backward all-gather's that hpZ kept inside (it
    equals the forward one's)."""
    b = _row(out, "bf16")
    return b["cross_node_MB"] + b["forward_all_gather_cross_node_MB"] - b["backward_all_gather_cross_node_MB"]


# -- docs/deep_image.md

def deep_image_counts() -> str:
    """Wu et al. 2015 Table 1: the possible changes per augmentation, counted from the grids the ops draw
    from (`paralab augment`), beside the paper's count."""
    out = paralab("augment")
    lines = ["| augmentation | grid | possible changes | paper | matches |", "|---|---|---|---|---|"]
    for r in out["rows"]:
        paper = "—" if r["paper"] is None else f"{r['paper']:.4g}" if r["paper"] >= 1e6 else f"{r['paper']:.0f}"
        count = f"{r['possible_changes']:.4g}" if r["possible_changes"] >= 1e6 else str(r["possible_changes"])
        matches = "—" if r["matches"] is None else "yes" if r["matches"] else "no"
        lines.append(f"| {r['augmentation']} | {r['grid']} | {count} | {paper} | {matches} |")
    return "\n".join(lines) + "\n"


# -- docs/results.md: every result committed under bench/results, read from its JSON (no command is run)

RESULTS = DOCS.parent / "bench" / "results"
ISA_KEYS = ("vector_isa", "vec_isa", "cpu_isa", "isa")  # the CPU's vector ISA, where a benchmark recorded it


def _results(prefix: str = "") -> list[tuple[str, dict]]:
    """(file name, its JSON) of every committed result whose name starts with `prefix`, by name."""
    return [(p.name, json.loads(p.read_text())) for p in sorted(RESULTS.glob(f"{prefix}*.json"))]


def _link(name: str) -> str:
    return f"[{name.removesuffix('.json')}](../bench/results/{name})"


def _kind(name: str, d: dict) -> str:
    """What produced a result: the `paralab` command (without its options), else the benchmark script's name,
    else the file name's first word."""
    cmd = d.get("command")
    if isinstance(cmd, str):
        words = cmd.split()
        words = words[words.index("paralab") + 1:] if "paralab" in words else words
        return " ".join(itertools.takewhile(lambda w: not w.startswith(("-", "[")), words))
    if "ratios_vs_native" in d:
        return "bench collectives"
    return d.get("benchmark") or d.get("name") or name.split("-")[0]


def _device(d: dict) -> str:
    """The device a result was measured on, with the vector ISA where the file records it."""
    dev = d.get("device") or "not recorded"
    for where in (d, d.get("versions") or {}, d.get("config") or {}):
        isa = next((where[k] for k in ISA_KEYS if isinstance(where, dict) and where.get(k)), None)
        if isa:
            return f"{dev}; vector ISA {isa}"
    return dev


def _versions(d: dict) -> str:
    v = d.get("versions") or {}
    return ", ".join(f"{k} {v[k]}" for k in ("torch", "cupy", "cuda") if v.get(k)) or "—"


def _largest(rows: list[dict], key: str) -> list[dict]:
    top = max(r[key] for r in rows)
    return [r for r in rows if r[key] == top]


def _headline(kind: str, d: dict) -> str:
    """The result's main ratios, in one cell."""
    rows = d.get("rows") if isinstance(d.get("rows"), list) else []
    if kind == "bench codecs":
        sizes = sorted({r["n"] for r in rows})
        return (f"{len({r['contestant'] for r in rows})} contestants, 2^{sizes[0].bit_length() - 1}-"
                f"2^{sizes[-1].bit_length() - 1} values (the codec table below)")
    if kind == "bench collectives":
        best = sorted(d["ratios_vs_native"], key=lambda r: -r["busbw_vs_native"])[:3]
        return (f"{d.get('op', 'all_reduce')}, P = {d['procs']}, {d['backend']}: busbw vs native at "
                f"{best[0]['nbytes'] / 2**20:.0f} MiB " + ", ".join(f"{r['algorithm']} {_x(r['busbw_vs_native'])}"
                                                                  for r in best))
    if kind == "bench compressed":
        best = max((r for r in rows if r["codec"] != "fp32" and r.get("overlap", True)),
                   key=lambda r: r["speedup_vs_fp32"])
        return (f"P = {d['procs']}, {d.get('link_rate') or 'loopback'}: best {best['codec']} on {best['algorithm']} "
                f"{_x(best['speedup_vs_fp32'])} fp32")
    if "widths" in d:  # `bench dropout`
        wide = [r for r in _largest(rows, "width") if r["contestant"] in ("row", "tile")]
        return f"width {wide[0]['width']}: " + ", ".join(
            f"{'RDP' if r['contestant'] == 'row' else 'TDP'} p={r['p']} {_x(r['speedup'])}" for r in wide)
    if kind in ("bench augment", "augment"):
        whole = next(r for r in rows if r["op"] == "all")
        return (f"batched vs a per-image loop: whole pipeline {_x(whole['speedup'])}, ops "
                f"{_x(min(r['speedup'] for r in rows))}-{_x(max(r['speedup'] for r in rows))}")
    if "crossover" in d:  # `bench transfer`
        won = [f"{c.split('[')[0]} from {n:,}" for c, n in d["crossover"].items() if n]
        return "compression wins: " + (", ".join(won) + " values" if won else "never (no crossover)")
    if kind == "converge":
        done = [r for r in rows if r["spec"] != "fp32"]
        never = [r["spec"] for r in done if r["never_reached"]]
        return (f"task {d['config']['task']}, {d['config']['mode']} x{d['config']['workers']}, "
                f"{d['config']['seeds']} seeds: {len(done)} specs, {len(never)} never reach fp32's target")
    if kind == "train" and "summary" in d and isinstance(d["summary"], dict):
        s = d["summary"]
        return (f"{s['label']}: step {_x(s['speedup'])} fp32 FSDP2, bytes {_x(s['bytes_ratio'])}, test loss "
                f"{_x(s['test_loss_ratio'])}")
    if kind == "parallelism":
        s = d["summary"]
        return (f"{d['strategy']} on {d['procs']} ranks, {d.get('link_rate') or 'loopback'}: {d['codec']} step "
                f"{_x(s['step_ratio'])} fp32's, bytes {_x(s['bytes_ratio'])}, test loss {_loss(s)}")
    if kind == "pipeline_bubble":
        return (f"measured bubble within 15 % of the published formula in {d['within_15pct_of_formula']} of "
                f"{d['runs']} schedule x micro-batch runs on {d['procs']} ranks, of torch's order laid out with the "
                f"measured times in {d['within_15pct_of_planned']}"
                + (f"; the formula inside the spread of the 5 timed steps in {d['formula_within_step_spread']}"
                   if "formula_within_step_spread" in d else ""))
    if kind == "scale":
        ring = [r for r in rows if r["algorithm"] == "ring" and r["codec"].startswith("dynamic_tree")]
        lo, hi = min(ring, key=lambda r: r["P"]), max(ring, key=lambda r: r["P"])
        return (f"dynamic tree on the ring: relative error {lo['rel_error']:.1%} at P = {lo['P']}, "
                f"{hi['rel_error']:.1%} at P = {hi['P']}")
    if kind == "kernels report":
        spilled = sorted({f"{r['kernel']} ({r['arch']})" for r in rows if r["spill_stores"] or r["spill_loads"]})
        return (f"{len({r['kernel'] for r in rows})} kernels on {', '.join(d['archs'])} ({d['nvcc'].split(', ')[-1]}): "
                f"{min(r['registers'] for r in rows)}-{max(r['registers'] for r in rows)} registers, spills in "
                f"{', '.join(spilled) or 'none'}; memory roof vs H100: " + ", ".join(
                    f"{g['name']} {_x(g['hbm_GBps'] / d['gpus'][0]['hbm_GBps'])}" for g in d["gpus"][1:])
                + "".join(f"; predicted issue bound on {g['name']}: {n} of {len(on)}" for g in d["gpus"]
                          if (on := [r for r in rows if g["name"] in r.get("predicted", {})])
                          for n in [sum(r["predicted"][g["name"]].get("bound") == "issue" for r in on)]))
    if kind == "kernels measure":
        both = sorted(r["measured_over_predicted"] for r in rows if r.get("measured_over_predicted") is not None)
        if not both:
            return f"{len(rows)} kernels measured on {d['device']}; the card has no prediction for this GPU"
        return (f"{len(rows)} kernels on {d['device']}: measured / predicted median {_x(both[len(both) // 2])} "
                f"({_x(both[0])}-{_x(both[-1])}), {sum(x <= 2 for x in both)} within 2x of the card")
    if kind == "gpu_all":
        st = [x["status"] for x in d["steps"]]
        t = d.get("tests") or {}
        return (f"{len(st)} steps: {st.count('ok')} ok, {len(st) - st.count('ok') - st.count('skipped')} failed or "
                f"timed out, {st.count('skipped')} skipped" + (f"; gpu tests {t.get('passed', 0)} passed, "
                f"{t.get('failures', 0) + t.get('errors', 0)} failed" if t else ""))
    if kind == "app-browser":
        worst = max(rows, key=lambda r: r["first_visit_s"])
        start = max(d.get("after_start") or [{}], key=lambda r: r.get("seconds", 0))
        return (f"slowest first visit {worst['first_visit_s']:.2f} s ({worst['page']}) against "
                f"{d['targets_s']['view']:.0f} s" + (f"; right after the server starts {start['seconds']:.2f} s "
                f"({start['page']}) against {d['targets_s']['after_start']:.0f} s" if start else ""))
    if kind == "app-render":
        return f"slowest page script {max(r['cold_s'] for r in rows):.2f} s cold, target {d['target_s']:.0f} s"
    if isinstance(d.get("table"), list) and d["table"] and "pattern" in d["table"][0]:  # `dropout mlp` / `lstm`
        rows = [r for r in d["table"] if r["kind"] in ("row", "tile")]
        change = "ppl_change" if "ppl_change" in rows[0] else "acc_change"
        return (f"{d['experiment']}, RDP and TDP against conventional dropout: epoch "
                f"{_x(min(r['speedup'] for r in rows))}-{_x(max(r['speedup'] for r in rows))}, "
                f"{'perplexity' if change == 'ppl_change' else 'test accuracy'} "
                f"{min(r[change] for r in rows):+.2f} to {max(r[change] for r in rows):+.2f}"
                f"{'' if change == 'ppl_change' else ' points'}")
    if kind == "table1" and isinstance(d.get("runs"), list):
        return f"{len(d['runs'])} seeds of {d['samples']:,} samples, {d['rounding']} rounding"
    if isinstance(d.get("runs"), list) and d["runs"] and {"label", "final_test_error"} <= set(d["runs"][0]):
        by = {}
        for r in d["runs"]:
            by.setdefault(r["label"], []).append(r["final_test_error"])
        return "mean final test error: " + ", ".join(f"{k} {sum(v) / len(v):.2f} %" for k, v in by.items())
    if "max_growth" in d:
        return f"{d['iters']} calls: time per call grew {d['max_growth']:.1%} at most (limit {d['growth_limit']:.0%})"
    if isinstance(d.get("mean_test_error"), dict):
        return "mean test error: " + ", ".join(f"{k} {v:.2f} %" for k, v in d["mean_test_error"].items())
    if isinstance(d.get("anova"), dict):
        a = d["anova"]
        return (f"one-way ANOVA over 32-bit and the 8-bit types: F({a['df_between']}, {a['df_within']}) = "
                f"{a['F']:.2f}, p = {a['p']:.2f}")
    return "—"


def results_index() -> str:
    """Every committed result: what produced it, the device (and vector ISA, where recorded), the library
    versions and its main ratios."""
    lines = ["| result | what | device | versions | main figures |", "|---|---|---|---|---|"]
    for name, d in _results():
        kind = _kind(name, d)
        lines.append(f"| {_link(name)} | `{kind}` | {_device(d)} | {_versions(d)} | {_headline(kind, d)} |")
    return "\n".join(lines) + "\n"


def results_codecs() -> str:
    """`paralab bench codecs` per device: each contestant's speed against torch's fp8 cast in the same run, at
    the largest size measured (> 1: faster than the cast)."""
    files = _results("codecs-")
    cols, cells = [], {}
    for name, d in files:
        top = _largest(d["rows"], "n")
        cols.append(f"{_link(name)} ({d['device']}, 2^{top[0]['n'].bit_length() - 1} values)")
        for r in top:
            if r["op"] in ("encode", "decode_into") and r.get("speed_vs_fp8_cast") is not None:
                cells[(r["contestant"], r["op"]), name] = _x(r["speed_vs_fp8_cast"])
    keys = sorted({k for k, _ in cells})
    lines = ["| contestant | op | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for c, op in keys:
        lines.append(f"| {c} | {op} | " + " | ".join(cells.get(((c, op), n), "—") for n, _ in files) + " |")
    return "\n".join(lines) + "\n"


def results_compressed() -> str:
    """`paralab bench compressed`: one allreduce of each codec against fp32 on the same ranks in the same run
    (chunk pipelining on), per committed run."""
    lines = ["| result | ranks | link | algorithm | speedup vs fp32 per codec |", "|---|---|---|---|---|"]
    for name, d in _results("compressed-"):
        rows = [r for r in d["rows"] if r["codec"] != "fp32" and r.get("overlap", True)]
        algos = sorted({r["algorithm"] for r in rows})
        per = ", ".join(f"{r['codec']}{'' if len(algos) == 1 else ' on ' + r['algorithm']} {_x(r['speedup_vs_fp32'])}"
                        for r in rows)
        lines.append(f"| {_link(name)} | {d['procs']} | {d.get('link_rate') or 'loopback'} | {', '.join(algos)} | "
                     f"{per} |")
    return "\n".join(lines) + "\n"


def results_converge() -> str:
    """`paralab converge`: each codec spec's steps penalty to fp32's target (steps / fp32's steps, mean over
    seeds with its t-based 95 % CI; "never" where a seed missed the target), per committed study."""
    files = _results("converge-")
    cells = {}
    for name, d in files:
        for r in d["rows"]:
            cells[r["spec"], name] = ("never" if r["never_reached"] else
                                      f"{r['penalty']:.2f} ({r['penalty_ci_low']:.2f}-{r['penalty_ci_high']:.2f})")
    specs = list(dict.fromkeys(s for s, _ in cells))
    cols = [f"{_link(n)} ({d['config']['task']}, {d['config']['mode']} x{d['config']['workers']})" for n, d in files]
    lines = ["| codec spec | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for s in specs:
        lines.append(f"| `{s}` | " + " | ".join(cells.get((s, n), "—") for n, _ in files) + " |")
    return "\n".join(lines) + "\n"


def _loss(s: dict) -> str:
    """fp32's final test loss -> the codec's, with the larger seed-to-seed deviation."""
    sd = max((v for v in (s.get("test_loss_sd_fp32"), s.get("test_loss_sd_codec")) if v is not None), default=None)
    return f"{s['test_loss_fp32']:.4f} → {s['test_loss_codec']:.4f}" + (f" (seed sd {sd:.4f})" if sd else "")


def _own(s: dict) -> str:
    """A strategy's own numbers: its times as fp32 / codec ratios, then the codec run's bubble fractions and
    bytes ratios of its parts (e.g. an expert layer's dispatch)."""
    own = s.get("own") or {}
    cells = [f"{k} {_x(v['ratio'])}" for k, v in own.items() if v.get("ratio") is not None]
    cells += [f"{k} {v['codec']:.3f}" for k, v in own.items()
              if ("bubble" in k or k.endswith("bytes_ratio")) and v.get("codec") is not None]
    return ", ".join(cells) or "—"


def results_parallelism() -> str:
    """bench/parallelism.py: each parallelism on a shaped link, fp32 against the codec on what its ranks send,
    alternately in the same run over seeds: step time ratio, wire bytes, final test loss, its own numbers."""
    lines = ["| result | strategy | ranks, link | seeds | step fp32 / codec | bytes | test loss fp32 → codec | "
             "within noise | its own numbers (times: fp32 / codec; the codec run's bubble and bytes ratios) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, d in _results("parallelism_"):
        s = d["summary"]
        noise = {True: "yes", False: "no", None: "—"}[s.get("loss_within_noise")]
        lines.append(f"| {_link(name)} | {d['strategy']} ({d['codec']}) | {d['procs']}, "
                     f"{d.get('link_rate') or 'loopback'} | {d['seeds']} | {_x(s['step_ratio'])} | "
                     f"{_x(s['bytes_ratio'])} | {_loss(s)} | {noise} | {_own(s)} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Table:
    page: str
    render: Callable[[], str]


TABLES: dict[str, Table] = {
    "pays_settings": Table("pays.md", pays_settings),
    "pays_papers": Table("pays.md", pays_papers),
    "pays_accuracy": Table("pays.md", pays_accuracy),
    "deep_image_counts": Table("deep_image.md", deep_image_counts),
    "sharded_volume": Table("sharded.md", sharded_volume),
    "sharded_throughput": Table("sharded.md", sharded_throughput),
    "results_index": Table("results.md", results_index),
    "results_codecs": Table("results.md", results_codecs),
    "results_compressed": Table("results.md", results_compressed),
    "results_converge": Table("results.md", results_converge),
    "results_parallelism": Table("results.md", results_parallelism),
}


def regenerate(page: Path, tables: dict[str, str] | None = None) -> str:
    """The page's text with every marked table rendered now (or taken from `tables`, name -> markdown)."""
    text = page.read_text()
    seen = set()

    def fill(m: re.Match) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise ValueError(f"{page.name}: no generated table {name!r}; known: {', '.join(TABLES)}")
        seen.add(name)
        body = tables[name] if tables and name in tables else TABLES[name].render()
        return m.group(1) + body + m.group(4)

    out = BLOCK.sub(fill, text)
    missing = [n for n, t in TABLES.items() if t.page == page.name and n not in seen]
    if missing:
        raise ValueError(f"{page.name}: the markers of {', '.join(missing)} are missing")
    return out


def stale() -> list[str]:
    """The pages whose committed tables differ from what the commands print now."""
    return [p for p in sorted({t.page for t in TABLES.values()}) if regenerate(DOCS / p) != (DOCS / p).read_text()]


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python docs/generate.py [--check]", file=sys.stderr)
        return 2
    if argv == ["--check"]:
        bad = stale()
        for p in bad:
            print(f"docs/{p}: a generated table is stale; run python docs/generate.py", file=sys.stderr)
        return 1 if bad else 0
    for p in sorted({t.page for t in TABLES.values()}):
        (DOCS / p).write_text(regenerate(DOCS / p))
        print(f"wrote docs/{p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
