"""Faults in the middle of the work: a rank SIGKILLed half-way through a compressed ring allreduce
and inside a DDP codec hook, through the API (lab.comm.launch.run) and through the CLI. The others
stop within the timeout with a message naming the dead rank, no process is left behind, and the
CLI leaves no result file, whole or partial. (The launcher's own timeouts bound the waits; no test times them.)"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from lab.comm import CommError
from lab.comm.launch import run
from lab.train.run import TrainConfig

import comm_ranks as R
import train_ranks as T

REPO = Path(__file__).resolve().parent.parent
INJECT = Path(__file__).resolve().parent / "fault_inject"
TIMEOUT = 20.0  # seconds a rank may wait on a peer
# Values per compressed allreduce: below lab.codecs.cpu.MIN_COMPILED, so no rank pays torch.compile's start-up
# (seconds of CPU per rank); where the kill lands (the third send) does not depend on the size.
N = 1 << 14
SLACK = 45.0    # start-up of 2-4 rank processes with torch on a loaded machine (a hang guard, not a claim)
DDP_CFG = dict(dataset="digits", train_limit=512, hidden=(32,), dropout=(0.0, 0.0), batch=64, epochs=1.0)


def assert_nothing_left(pid_dir: Path, procs: int) -> None:
    pids = [int(p.read_text()) for p in sorted(pid_dir.glob("rank*.pid"))]
    assert len(pids) == procs, f"only {len(pids)} of {procs} ranks started"
    assert not [p for p in pids if R.alive(p)], "a rank process is still running"
    assert not R.launched_children(), "this process still has launcher or CLI children"


def test_kill_mid_compressed_ring_allreduce(tmp_path):
    with pytest.raises(CommError, match=r"rank 2 died \(killed by SIGKILL\)"):
        run(R.dies_mid_compressed_allreduce, 4, 2, N, tmp_path, timeout=TIMEOUT)
    assert_nothing_left(tmp_path, 4)


def test_kill_inside_ddp_codec_hook(tmp_path):
    cfg = asdict(TrainConfig(codec="dynamic_tree", **DDP_CFG))
    with pytest.raises(CommError, match=r"rank 1 died \(killed by SIGKILL\)"):
        run(T.dies_in_codec_hook, 2, cfg, 1, tmp_path, timeout=TIMEOUT)
    assert_nothing_left(tmp_path, 2)


def test_an_error_raised_inside_the_ddp_hook_names_that_rank_not_its_peer(tmp_path):
    """The peer's report (Gloo: connection closed/reset by peer) is a consequence; the rank that
    raised is named. Before the fix the launcher named rank 0, whose report was not a timeout."""
    cfg = asdict(TrainConfig(codec="dynamic_tree", **DDP_CFG))
    with pytest.raises(CommError, match=r"^rank 1 failed: ValueError: fault injected into rank 1's codec hook"):
        run(T.dies_in_codec_hook, 2, cfg, 1, tmp_path, "raise", timeout=TIMEOUT)
    assert_nothing_left(tmp_path, 2)


def _cli_with_a_dying_rank(tmp_path: Path, args: list[str], rank: int, where: str, at: int, procs: int) -> str:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{INJECT}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1",
           "PARALAB_FAULT_PIDS": str(pid_dir), "PARALAB_FAULT_RANK": str(rank), "PARALAB_FAULT_IN": where,
           "PARALAB_FAULT_AT": str(at)}
    p = subprocess.run([sys.executable, "-m", "lab", *args], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT + 2 * SLACK)  # a hang is a failure (TimeoutExpired), not a timing claim
    assert p.returncode == 1, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert_nothing_left(pid_dir, procs)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    return " ".join(p.stderr.split())  # rich wraps long lines


def test_cli_bench_compressed_with_a_rank_killed_mid_allreduce(tmp_path):
    out = tmp_path / "res" / "compressed.json"
    err = _cli_with_a_dying_rank(tmp_path, ["bench", "compressed", "-p", "3", "--values", str(N), "--codecs",
                                            "dynamic_tree", "--target-s", "0.05", "--timeout", str(TIMEOUT),
                                            "--out", str(out)], rank=1, where="isend", at=3, procs=3)
    assert "error: rank 1 died (killed by SIGKILL)" in err
    assert not out.parent.exists() or not list(out.parent.iterdir()), "a (partial) result file was left"


def test_cli_ddp_with_a_rank_killed_in_the_codec_hook(tmp_path):
    out = tmp_path / "res" / "ddp.json"
    err = _cli_with_a_dying_rank(tmp_path, ["train", "--mode", "ddp", "--procs", "2", "--codec", "dynamic_tree",
                                            "--train-limit", "512", "--hidden", "32", "--dropout", "0,0",
                                            "--batch", "64", "--timeout", str(TIMEOUT), "--out", str(out)],
                                 rank=1, where="ddp_hook", at=3, procs=2)
    assert "error: rank 1 died (killed by SIGKILL)" in err
    assert not out.parent.exists() or not list(out.parent.iterdir()), "a (partial) result file was left"


def test_result_writers_are_all_or_nothing(tmp_path, monkeypatch):
    """The one result writer: a write that fails half-way (disk full) leaves neither the file nor a partial .part."""
    from lab.experiments.results import write_result

    real = Path.write_text

    def disk_full(self, text, *a, **kw):
        real(self, text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_result(tmp_path / "r.json", {"a": list(range(1000))})
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(Path, "write_text", real)
    write_result(tmp_path / "ok.json", {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["ok.json"]
