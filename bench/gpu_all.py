"""Everything the lab measures on a GPU, in one command and within 10 minutes on one GPU:

    python bench/gpu_all.py             # run it (a CUDA GPU, CuPy and the CUDA build of torch)
    python bench/gpu_all.py --dry-run   # the plan: each step, its command and its time budget (no GPU needed)

The steps: the environment (nvidia-smi, versions); every `gpu`-marked test (pytest -m gpu); every `paralab bench`
command that has a GPU mode, read from the CLI now (a `--device` option: run with `--device cuda`; a `--pcie`
switch: over the GPU's PCIe link; a `--backend` that takes nccl: one GPU per rank, so on a machine with two or
more), so a new GPU benchmark is in the plan without an edit here; and the kernels' report card measured beside
its prediction (lab.experiments.kernel_measure). Each step runs under its own time budget (the budgets sum to at most
600 s); a step that fails or runs out of time is recorded and the next one runs; a stop (Ctrl-C) keeps what
finished. Results: bench/results/<bench>-<device>-gpu.json per benchmark, kernel_report_card-<device>-gpu.json,
and gpu_all-<device>-gpu.json, the run's log (each step's command, status, exit code and seconds, and the gpu
tests' counts)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the lab from this checkout, as `python bench/gpu_all.py` runs it
TOTAL_S = 600  # the whole run, on one GPU
#: seconds per step; a GPU benchmark the table does not name gets DEFAULT_BENCH_S
BUDGETS = {"env": 10, "tests": 200, "codecs": 90, "dropout": 50, "augment": 40, "transfer": 60, "collectives": 60,
           "kernels": 60}
DEFAULT_BENCH_S = 30
#: each benchmark's GPU-mode arguments beyond its GPU switch, sized to fit its budget
SIZES = {"codecs": ["-b", "256K", "-e", "256M", "-f", "4", "--repeats", "10"], "transfer": ["--target-s", "0.1"],
         "collectives": ["-b", "1M", "-e", "256M", "-f", "4"]}


@dataclass
class Step:
    """One step of the plan: its name, the command, its budget (s), the result file it writes (relative to the
    repository), and why it is skipped on this machine ('' when it runs)."""

    name: str
    command: list[str]
    budget_s: int
    writes: str = ""
    skip: str = ""


def gpu_benchmarks() -> dict[str, list[str]]:
    """{`paralab bench` command: the arguments that put it in its GPU mode} for every benchmark that has one,
    read from the CLI's options now."""
    import typer.main

    from lab.cli import app

    bench = typer.main.get_group(app).commands["bench"]
    out = {}
    for name, cmd in sorted(bench.commands.items()):
        opts = {o: p for p in cmd.params for o in getattr(p, "opts", ())}
        if "--device" in opts:
            out[name] = ["--device", "cuda"]
        elif "--pcie" in opts:
            out[name] = ["--pcie"]
        elif "--backend" in opts and "nccl" in (opts["--backend"].help or ""):
            out[name] = ["--backend", "nccl"]
    return out


def _gpus() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def _slug() -> str:
    try:
        from lab import backend
        return backend.device_slug("cuda") if backend.gpu_available() else "no-gpu"
    except Exception:
        return "no-gpu"


def plan(slug: str, gpus: int, results: str = "bench/results") -> list[Step]:
    """The steps in order, for a machine with `gpus` GPUs named `slug` (<results>/<name>-<slug>-gpu.json)."""
    py = sys.executable
    steps = [Step("env", [py, "-c", "import subprocess, torch; print(torch.__version__, torch.version.cuda); "
                          "subprocess.run(['nvidia-smi', '--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                          "clocks.max.mem', '--format=csv'])"], BUDGETS["env"]),
             Step("tests", [py, "-m", "pytest", "-m", "gpu", "tests/", "-q", "-rfE", "-p", "no:cacheprovider",
                            "--continue-on-collection-errors"], BUDGETS["tests"])]
    for name, switch in gpu_benchmarks().items():
        out = f"{results}/{name}-{slug}-gpu.json"
        cmd = [py, "-m", "lab", "bench", name, *switch, *SIZES.get(name, []), "--out", out]
        skip = ""
        if switch[0] == "--backend":
            cmd[-2:-2] = ["--procs", str(max(gpus, 2))]
            skip = "" if gpus >= 2 else f"one GPU per rank: needs 2 or more GPUs, this machine has {gpus}"
        steps.append(Step(name, cmd, BUDGETS.get(name, DEFAULT_BENCH_S), out, skip))
    out = f"{results}/kernel_report_card-{slug}-gpu.json"
    steps.append(Step("kernels", [py, str(Path(__file__).resolve()), "--measure-kernels", out], BUDGETS["kernels"], out))
    return steps


def _test_counts(xml: Path) -> dict[str, int]:
    """pytest's JUnit XML as {tests, failures, errors, skipped, passed}."""
    if not xml.exists():
        return {}
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    c = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    c["passed"] = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
    return c


def run(steps: list[Step], log: Path, slug: str) -> dict:
    """Run each step under its budget, the log rewritten after each (a stop keeps what finished)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "PYTHONUNBUFFERED": "1"}
    record = {"benchmark": "gpu_all", "device": slug, "budget_s": TOTAL_S, "steps": [], "tests": {}}
    xml = Path(tempfile.mkdtemp()) / "gpu-tests.xml"
    try:
        for step in steps:
            entry = {**asdict(step), "status": "skipped" if step.skip else "", "rc": None, "seconds": 0.0, "tail": ""}
            if not step.skip:
                cmd = step.command + ([f"--junitxml={xml}"] if step.name == "tests" else [])
                print(f"== {step.name} (budget {step.budget_s} s): {' '.join(cmd)}", flush=True)
                t0 = time.perf_counter()
                try:
                    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=step.budget_s)
                    entry.update(status="ok" if done.returncode == 0 else "failed", rc=done.returncode,
                                 tail=(done.stdout + done.stderr)[-3000:])
                except subprocess.TimeoutExpired as e:
                    out = (e.stdout or b"") + (e.stderr or b"")
                    entry.update(status="timed out", tail=(out.decode(errors="replace") if isinstance(out, bytes)
                                                           else out)[-3000:])
                entry["seconds"] = time.perf_counter() - t0
                print(entry["tail"][-1500:], flush=True)
                if step.name == "tests":
                    record["tests"] = _test_counts(xml)
            record["steps"].append(entry)
            log.write_text(json.dumps(record, indent=1))
    except KeyboardInterrupt:
        record["stopped"] = True
        log.write_text(json.dumps(record, indent=1))
        print(f"stopped: the finished steps are in {log}")
    return record


def measure_kernels(out: Path) -> int:
    """The kernels step: every kernel of the report card timed alone on this GPU beside the card's prediction
    (lab.experiments.kernel_measure), written to `out` with the device and versions."""
    import platform

    import torch

    from lab.experiments import kernel_measure

    try:
        got = kernel_measure()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    record = {"benchmark": "kernels measure", "device": got["device"], "arch": got["arch"], "gpu": got["gpu"],
              "n": got["n"], "repeats": got["repeats"],
              "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()},
              "timing": "CUDA events after warm-up, median of the repeats; ps per value = time / n",
              "rows": got["rows"]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    for r in got["rows"]:
        pred = f", predicted {r['predicted_ps']:.3g} ({r['bound']} bound)" if "predicted_ps" in r else ""
        print(f"{r['kernel']:26s} {r['measured_ps']:8.3g} ps/value{pred}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan with each step's budget; run nothing")
    ap.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON")
    ap.add_argument("--measure-kernels", metavar="OUT", type=Path,
                    help="only the kernels step: time every kernel of the card here and write OUT")
    ap.add_argument("--results", default=os.environ.get("OUT") or "bench/results",
                    help="where the JSONs go (default: $OUT when set, as on a lent device machine, else bench/results)")
    args = ap.parse_args(argv)
    if args.measure_kernels:
        return measure_kernels(args.measure_kernels)
    gpus, slug = _gpus(), _slug()
    steps = plan(slug, gpus, args.results)
    total = sum(s.budget_s for s in steps if not s.skip)
    if args.dry_run:
        if args.json:
            print(json.dumps({"total_s": total, "limit_s": TOTAL_S, "gpus": gpus, "steps": [asdict(s) for s in steps]}))
        else:
            for s in steps:
                print(f"{s.name:12s} {s.budget_s:4d} s  {'SKIP: ' + s.skip if s.skip else ' '.join(s.command)}")
            print(f"total {total} s of {TOTAL_S} s; {gpus} GPU(s) here")
        return 0
    if gpus == 0:
        print("no CUDA GPU here: `python bench/gpu_all.py --dry-run` shows the plan", file=sys.stderr)
        return 2
    record = run(steps, ROOT / args.results / f"gpu_all-{slug}-gpu.json", slug)
    bad = [s["name"] for s in record["steps"] if s["status"] not in ("ok", "skipped")]
    print(f"done: {len(record['steps'])} steps, {'failed: ' + ', '.join(bad) if bad else 'all ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
