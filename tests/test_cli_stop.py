"""Ctrl-C on the commands whose work runs in rank processes (bench collectives / transfer / compressed,
train --mode ddp) and on the long single-process ones not covered in test_cli.py (dropout lstm,
train --reproduce): the run stops at once with exit 130, says where it was, and the rows rank 0 had
finished are written, marked partial, in the command's schema. Rank 0 streams each finished row to
the parent (lab.comm.launch's on_row), so the parent has them when the stop comes."""
import importlib
import inspect
import json
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from test_cli import ENV, REPO, schema, stop_at
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

# command -> (arguments, the stderr line to stop at, the result's key for finished rows, row check)
STOPPABLE = {
    "bench collectives": (["bench", "collectives", "-p", "2", "-b", "1K", "-e", "256M", "-f", "4",
                           "--algorithms", "ring,tree", "-n", "2", "-w", "0"], "done: ring 1024 B", "rows",
                          lambda r: r["algorithm"] == "ring" and r["nbytes"] == 1024 and r["busbw_GBps"] > 0),
    "bench transfer": (["bench", "transfer", "-b", "4K", "-e", "256M", "-f", "4", "--codecs", "linear",
                        "--target-s", "0.05"], "done: 1024 values, linear", "rows",
                       lambda r: r["n_values"] == 1024 and r["speedup_vs_fp32"] > 0),
    # 16K values: under lab.codecs.cpu.MIN_COMPILED, so no rank pays torch.compile's start-up
    "bench compressed": (["bench", "compressed", "-p", "2", "--values", "16K",
                          "--codecs", "linear," * 40 + "fp16", "--target-s", "0.2"], "done: codec linear", "rows",
                         lambda r: r["codec"] == "fp32" and r["speedup_vs_fp32"] == 1.0),
    "train --mode ddp": (["train", "--mode", "ddp", "--procs", "2", "--hidden", "16", "--dropout", "0,0",
                          "--epochs", "200", "--train-limit", "256", "--evals", "2"],
                         "done: evaluation at epoch 0.50", "curve", lambda r: r["step"] >= 1 and r["bytes"] > 0),
    "dropout lstm": (["dropout", "lstm", "--smoke", "--corpus", "pydoc", "--rates", "0.1;0.2;0.3;0.4;0.5;0.6;0.7"],
                     "done: ", "rows", lambda r: r["test_ppl"] > 1),
    "train --reproduce": (["train", "--reproduce", "mnist-dp", "--seeds", "5", "--smoke"], "done: ", "runs",
                          lambda r: 0 <= r["final_test_error"] <= 100),
}


def _orphans(tag: str) -> list[str]:
    """Rank processes (`python -m lab.comm.launch`) of the run whose environment carries `tag`
    (ranks inherit it) that still run: other runs on the machine don't count."""
    left = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if "lab.comm.launch" in " ".join(p.info["cmdline"] or []) and p.environ().get("PARALAB_TEST_RUN") == tag:
                left.append(" ".join(p.info["cmdline"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return left


@pytest.mark.parametrize("command", list(STOPPABLE))
def test_ctrl_c_keeps_what_rank_0_finished(command, tmp_path):
    args, marker, key, check = STOPPABLE[command]
    out = tmp_path / "partial.json"
    tag = str(uuid.uuid4())
    rest = stop_at(args, marker, out, {**ENV, "PARALAB_TEST_RUN": tag})
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema(command.split(" --")[0]))
    assert data["partial"] is True and data["stopped"].split(" (")[0] in rest
    assert len(data[key]) >= 1 and check(data[key][0]), data[key][0]
    # the ranks are being killed as the parent exits: wait for that (not a fixed sleep), a hang fails after 60 s
    end = time.monotonic() + 60
    while (left := _orphans(tag)) and time.monotonic() < end:
        time.sleep(0.1)
    assert not left, "rank processes left running after the stop"


def test_a_stopped_benchmark_never_overwrites_its_complete_result():
    """Without --out a stopped benchmark keeps its rows beside the default result, as .partial.json."""
    sys.path.insert(0, str(REPO))
    from lab.cli.base import partial_out

    assert partial_out(False, "collectives-cpu-P4").name == "collectives-cpu-P4.partial.json"
    assert partial_out(True, "collectives-cpu-P4") is None  # --json: the partial result goes to stdout


def test_the_paralab_script_is_the_entry_that_leaves_cleanly():
    """`paralab` runs lab.cli:main (one-line errors for failed ranks, os._exit(130) after a stop), not the bare
    typer app (test_train's CliRunner stop checks that an in-process stop returns 130 and leaves pytest alive),
    through lab.__main__:run, as `python -m lab` and torchrun's `-m lab` do."""
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["paralab"] == "lab.__main__:run"
    assert "main()" in inspect.getsource(importlib.import_module("lab.__main__").run)


def test_the_cli_imports_with_the_garbage_collector_off_and_freezes_what_they_made():
    """A CLI process imports torch, pandas and typer (~2 core-seconds) without a garbage collection, then freezes
    those objects: the collector is on again for the command's own, and its full collections skip the imports'."""
    code = ("import gc, sys\n"
            "starts = []\n"
            "gc.callbacks.append(lambda phase, info: phase == 'start' and starts.append(info['generation']))\n"
            "sys.argv = ['paralab', '--help']\n"
            "import lab.__main__\n"
            "try:\n"
            "    lab.__main__.run()\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(len(starts), starts.count(2), gc.isenabled(), gc.get_freeze_count(), 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    collections, full, enabled, frozen, torch_loaded = p.stdout.split()[-5:]
    assert torch_loaded == "True" and enabled == "True", p.stdout
    assert int(frozen) > 100_000, p.stdout  # torch's, pandas' and the lab's objects
    assert int(full) == 0 and int(collections) < 50, p.stdout  # the default collector ran ~450 times importing
