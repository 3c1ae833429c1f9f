"""Allreduce over real processes (Gloo): every algorithm on 1..8 ranks against dist.all_reduce and
the exact sum, and fault handling (a killed rank, a hung rank, mismatched lengths, bad input)."""
from __future__ import annotations

import math
import time

import pytest
import torch

from lab.comm import CommError, algorithm_names
from lab.comm.launch import max_procs, run
from lab.comm.sim import simulate

import comm_ranks as R

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

LENGTHS = (0, 1, 5, 1003)


@pytest.mark.parametrize("P", range(1, 9))
def test_every_algorithm_on_real_ranks(P: int) -> None:
    if P > max_procs():
        pytest.skip(f"this machine hosts at most {max_procs()} rank processes")
    out = run(R.every_algorithm, P, LENGTHS, timeout=60)
    tol = 4 * P * 2.0**-24 * 6 * math.sqrt(P) + 1e-6
    for n in LENGTHS:
        exact = sum(R.x_for(r, n).double() for r in range(P)) if n else torch.zeros(0, dtype=torch.float64)
        native = out[0][("native", n)]
        for a in algorithm_names():
            for r in range(P):
                y = out[r][(a, n)]
                assert y.shape == (n,)
                assert torch.allclose(y.double(), exact, rtol=0, atol=tol), (a, P, n, r)
                assert torch.allclose(y, native, rtol=0, atol=tol), (a, P, n, r)
                assert torch.equal(y, out[0][(a, n)]), f"{a} P={P} n={n}: rank {r} differs"
    # every transfer is a batch of Comm.exchange; the summation order is the algorithm's, so Gloo
    # ranks give the simulator's numbers bit for bit, fp32 and 8-bit, and so does NCCL's model
    for strict in (False, True):
        sim = simulate(R.every_algorithm, P, LENGTHS, strict=strict)
        for key in out[0]:
            if key[0] != "native":
                assert all(torch.equal(out[r][key], sim[r][key]) for r in range(P)), (key, P, strict)
    n = max(LENGTHS)
    exact = sum(R.x_for(r, n).double() for r in range(P))
    for key in [(a + "+dynamic_tree", n) for a in algorithm_names()[1:]] + [("tree+topk", n)]:
        assert all(torch.equal(out[r][key], out[0][key]) for r in range(P))
    for a in algorithm_names()[1:]:
        rel = ((out[0][(a + "+dynamic_tree", n)].double() - exact).norm() / exact.norm()).item()
        assert (rel < 0.03) if P > 1 else rel < 1e-6, (a, P, rel)


def test_an_exchange_beyond_any_buffer_completes() -> None:
    """Two ranks that both send and receive 8 MB at once (NCCL's buffer is 4 MB) finish."""
    out = run(R.big_exchange, 2, 1 << 21, timeout=60)
    assert out == [True, True]


def test_ring_in_chunks_on_real_ranks() -> None:
    """Segments of 512 K values cross Gloo as PIECES (4) pipelined chunks each (channel.chunk_count); the
    unpipelined run gives the same numbers, the payload buffers are reused, threads = cores // P."""
    import os

    from lab.comm.channel import MIN_CHUNK, PIECES, chunk_count

    P, n = 2, 2 * PIECES * MIN_CHUNK
    assert chunk_count(n // P) == PIECES
    out = run(R.chunked_ring, P, n, timeout=120)
    exact = sum(R.x_for(r, n).double() for r in range(P))
    share = max(1, len(os.sched_getaffinity(0)) // P)
    for r in range(P):
        assert torch.equal(out[r]["ring+linear serial"], out[r]["ring+linear"])
        assert out[r]["buffers reused"] and out[r]["threads"] == (share, share)
        assert torch.equal(out[r]["ring"], out[0]["ring"]) and torch.equal(out[r]["ring+linear"], out[0]["ring+linear"])
        assert torch.allclose(out[r]["ring"], out[r]["native"], rtol=0, atol=1e-5)
    S = sum(float(R.x_for(r, n).abs().max()) for r in range(P))
    assert 0 < (out[0]["ring+linear"].double() - exact).abs().max().item() <= P * S / 254 * (1 + 1e-5)


def _launched() -> set[int]:
    return set(R.launched_children())


def _no_rank_processes(before: set[int]) -> bool:
    """No launcher process that was not there `before` is left (a moment allowed for the reaping)."""
    deadline = time.monotonic() + 5
    while (_launched() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not (_launched() - before)


def test_a_killed_rank_is_named_and_nothing_is_left_running() -> None:
    before = _launched()
    with pytest.raises(CommError, match=r"rank 2 died \(killed by SIGKILL\)|receive from rank 2|send to rank 2"):
        run(R.dies, 4, 2, timeout=20)
    assert _no_rank_processes(before)


def test_a_hung_rank_is_named_within_the_timeout() -> None:
    """The peers' own 5 s transfer timeout names the hung rank (not the launcher's last-resort deadline of
    timeout + 60 s, whose message is 'timed out after 65 s'): said by the message, not timed here."""
    before = _launched()
    with pytest.raises(CommError, match=r"rank 1 hung: it was still running after the ranks waiting on it timed "
                                        r"out \(5 s\)"):
        run(R.hangs, 3, 1, timeout=5)
    assert _no_rank_processes(before)


def test_the_hung_rank_is_named_once_every_other_rank_gave_up_on_it(tmp_path, monkeypatch) -> None:
    """The launcher waits up to a timeout to see which rank is at fault, and stops waiting once the only rank still
    running is the one the others' failed transfers name: the message came ~7 s after the peers' own timeout
    with nobody left to hear from. Counted in the launcher's waits on a fake clock, not timed."""
    from lab.comm import launch

    class Exited:
        def __init__(self, code: int | None) -> None:
            self.code = code

        def poll(self) -> int | None:
            return self.code

    waits: list[float] = []
    monkeypatch.setattr(launch.time, "sleep", waits.append)
    monkeypatch.setattr(launch.time, "monotonic", iter(range(0, 10**6, 100)).__next__)  # 100 s a look
    (tmp_path / "error0.txt").write_text("rank 0: receive from rank 1 failed; rank 1 may have died or hung "
                                         "(RuntimeError: Timed out waiting 5000ms for recv operation to complete)")
    (tmp_path / "error2.txt").write_text("rank 2: send to rank 0 failed; rank 0 may have died or hung "
                                         "(RuntimeError: Connection closed by peer)")
    ps = [Exited(1), Exited(None), Exited(1)]
    assert launch._diagnose(ps, tmp_path, timeout=3600).startswith("rank 1 hung: it was still running after")
    assert waits == [0.3]  # the first look only

    ps[0] = Exited(None)  # two running (rank 0 waiting on rank 1): it may yet fail, so the launcher looks on
    (tmp_path / "error0.txt").unlink()
    assert "hung" in launch._diagnose(ps, tmp_path, timeout=3600)
    assert len(waits) > 2


def test_lengths_that_differ_are_refused_before_traffic() -> None:
    with pytest.raises(CommError, match="ranks disagree on \\(length, algorithm, codec, mode\\)"):
        run(R.mismatched, 2, timeout=20)


def test_bad_launch_arguments() -> None:
    with pytest.raises(ValueError, match="unknown backend 'mpi'; known: gloo, nccl"):
        run(R.mismatched, 2, backend="mpi")
    with pytest.raises(ValueError, match="more than this machine can host"):
        run(R.mismatched, 10_000)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="0 GPU\\(s\\) visible"):
            run(R.mismatched, 2, backend="nccl")
    with pytest.raises(ValueError, match="module-level function"):
        run(lambda comm: 0, 2)


def test_compressed_allreduce_over_a_shaped_link() -> None:
    """The shaped-link mode: ranks in network namespaces on a 100 Mbit/s link; 8-bit on the wire carries a
    quarter of fp32's bytes, and its speedup is the ratio of the two times (Dettmers 2016 §3.3)."""
    from lab.comm import bench
    from lab.comm.shaped import ShapedLink, available

    ok, why = available()
    if not ok:
        pytest.skip(why)
    with ShapedLink(2, rate="100mbit") as net:
        rows = run(bench.codec_speedup_rank, 2, 1 << 20, "ring", [None, "dynamic_tree"], net=net,
                   timeout=60, target_s=0.3, max_iters=3)[0]
    fp32, q = rows
    assert fp32["wire_bytes_rank0"] == 4 * (1 << 20)  # P=2: half the vector each way, twice
    assert q["wire_bytes_rank0"] <= fp32["wire_bytes_rank0"] / 4 * 1.01  # 8 bits a value (and the scales)
    assert q["rel_error"] < 0.03
    assert fp32["speedup_vs_fp32"] == 1.0 and q["speedup_vs_fp32"] == pytest.approx(fp32["seconds"] / q["seconds"])
    # the link is shaped: 1M fp32 values cannot cross 100 Mbit/s (~11.9 MB/s of TCP payload) in under 0.3 s, however
    # idle the machine (a lower bound; how much 8 bits gains is `paralab bench compressed --link-rate`'s ratio,
    # bench/results/compressed-cpu-P2-shaped-1gbit.json, checked by tests/test_bench_results.py)
    assert fp32["seconds"] > 0.3
