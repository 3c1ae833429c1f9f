"""The docs' result tables, regenerated from the commands that print them (issue 27 item 8).

Each table sits between markers in its page:

    <!-- generated: NAME -->
    | ... the table ... |
    <!-- end generated -->

and NAME is one entry of TABLES below: the `paralab` commands it runs (in this process, with `--json`)
and the function that renders their JSON output as markdown. `python docs/generate.py` rewrites every
marked table in place; `python docs/generate.py --check` rewrites nothing and exits 1 naming the stale
ones (tests/test_doc_tables.py runs the check). Only commands that run in seconds are regenerated here.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DOCS = Path(__file__).resolve().parent
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def paralab(*args: str) -> dict:
    """`paralab ARGS --json` run in this process: the JSON it prints."""
    from typer.testing import CliRunner

    from lab.cli import app

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
    lines = [f"| cluster | codecs that pay (of {n}) | best codec per step (its algorithm; steps penalty) | best 8-bit "
             "codec | median codec pays below (per NIC) | bf16 baseline |", "|---|---|---|---|---|---|"]
    for label, out in outs:
        comp = [r for r in out["rows"] if r["codec"] != "bf16"]
        best, best8 = _best(comp), _best([r for r in comp if r["bits_per_value"] == 8])
        lesson = out["lesson"]
        one_node = out["config"]["cluster"].startswith("1x")
        below = "— (no network)" if one_node else _gbps(lesson["median_break_even_GBps"])
        lines.append(f"| {label} | {sum(r['pays'] for r in comp)} | {best['codec']} {_x(best['speedup_vs_bf16'])} "
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
    lines = ["| codec | per-step speedup vs bf16 | steps penalty (95% CI) | time-to-accuracy speedup | pays | measured "
             "as |", "|---|---|---|---|---|---|"]
    rows = sorted((r for r in out["rows"] if r["codec"] != "bf16"),
                  key=lambda r: -(r["time_to_accuracy_speedup"] or 0.0))
    for r in rows:
        src = r["penalty_source"]
        if r["accuracy"] == "measured":
            ci = (f" ({r['steps_penalty_ci_low']:.2f}-{r['steps_penalty_ci_high']:.2f})"
                  if r["steps_penalty_ci_low"] is not None else "")
            pen, tta = f"{r['steps_penalty']:.2f}{ci}", _x(r["time_to_accuracy_speedup"])
        else:
            pen, tta = r["accuracy"], "never" if r["accuracy"] == "never reaches the target" else "—"
        how = f"`{src['spec']}`, {src['seeds']} seeds" if src else "—"
        lines.append(f"| {r['codec']} | {_x(r['speedup_vs_bf16'])} | {pen} | {tta} | {'yes' if r['pays'] else 'no'} "
                     f"| {how} |")
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
