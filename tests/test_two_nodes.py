"""Two nodes for real: docs/cli.md's `torchrun --nnodes 2 ...` run on one machine.

Each "node" is a network namespace of a ShapedLink (lab/comm/shaped.py); one torchrun per
namespace, two ranks each, meets the other over the veth link through a c10d rendezvous on node
0's address. Every address lives inside namespaces the test makes; nothing leaves the machine.
docs/two_nodes.md gives the same commands for two real machines.

Sizes use nccl-tests' flags (`-b 8 -e 128K -f 16384`: 8 B and 128 KB, a ring segment of 8 K values per
rank: the wire path of any size, without the 8 MB row that made the run 3.6x the CPU); the old `--max` was an
ambiguous abbreviation of torchrun's --max-restarts.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.comm.shaped import ShapedLink, available

REPO = Path(__file__).resolve().parent.parent
PORT = 29500        # free in any case: the namespaces are fresh
TIMEOUT_S = 150     # the whole two-node run; each test takes ~15-25 s on 2 loaded cores


@pytest.fixture
def two_nodes(request):
    """A ShapedLink with two hosts (10.231.0.1, 10.231.0.2), deleted by a finalizer in all cases."""
    ok, why = available()
    if not ok:
        pytest.skip(f"two namespaces are needed: {why}")
    link = ShapedLink(2, rate="10gbit")
    request.addfinalizer(link.teardown)
    link.setup()
    return link


def torchrun_two_nodes(link: ShapedLink, args: list[str], tmp: Path, nproc: int = 2) -> list[str]:
    """`torchrun --nnodes 2 --nproc-per-node nproc ... -m lab ARGS` in each namespace; the two
    outputs. Both agents and their ranks are killed when the time runs out."""
    ps, logs = [], []
    for node in range(2):
        env = {**os.environ, **link.env(node), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        cmd = [*link.command_prefix(node), sys.executable, "-m", "torch.distributed.run",
               "--nnodes", "2", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", f"{link.address(0)}:{PORT}", "--rdzv-id", "paralab-test",
               # the store's host is node 0: inside a namespace the hostname does not resolve to
               # 10.231.0.1, so torchrun cannot tell by itself
               "--rdzv-conf", f"is_host={'true' if node == 0 else 'false'}",
               "--local-addr", link.address(node), "-m", "lab", *args]
        log = tmp / f"node{node}.txt"
        logs.append(log)
        ps.append(subprocess.Popen(cmd, env=env, cwd=tmp, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                   start_new_session=True))
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while any(p.poll() is None for p in ps) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        for p in ps:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    out = [log.read_text() for log in logs]
    codes = [p.returncode for p in ps]
    assert codes == [0, 0], f"exit codes {codes}\n--- node 0\n{out[0][-3000:]}\n--- node 1\n{out[1][-3000:]}"
    return out


def test_bench_collectives_across_two_nodes(two_nodes, tmp_path):
    out = tmp_path / "collectives.json"
    torchrun_two_nodes(two_nodes, ["bench", "collectives", "--backend", "gloo", "-b", "8", "-e", "128K",
                                   "-f", str(1 << 14), "--algorithms", "native,ring", "--codec", "dynamic_tree",
                                   "--target-s", "0.05", "--out", str(out)], tmp_path)
    res = json.loads(out.read_text())
    assert res["procs"] == 4 and res["sizes"] == [8, 128 << 10]
    rows = res["rows"]
    assert {(r["algorithm"], r["nbytes"]) for r in rows} == {(a, s) for a in ("native", "ring") for s in res["sizes"]}
    for r in rows:
        assert r["P"] == 4 and r["seconds"] > 0
        if r["algorithm"] == "native":
            assert r["wrong"] == 0
        else:
            assert r["codec"].startswith("dynamic_tree") and r["rel_error"] < 0.03


def test_ddp_with_a_codec_hook_across_two_nodes(two_nodes, tmp_path):
    out = tmp_path / "ddp.json"
    torchrun_two_nodes(two_nodes, ["train", "--mode", "ddp", "--codec", "dynamic_tree", "--epochs", "0.5",
                                   "--train-limit", "512", "--hidden", "64", "--batch", "64", "--out", str(out)],
                       tmp_path)
    res = json.loads(out.read_text())
    s = res["summary"]
    assert s["mode"] == "ddp" and s["procs"] == 4 and res["config"]["workers"] == 4
    assert s["compressed_buckets"] > 0 and 0 < s["bytes_ratio"] < 1
    assert s["final_test_error"] < 90  # 10 classes: it learned something in 4 steps
