"""The collectives experiments behind the dashboard and CLI: error at scale on SimComm, the
transfer experiment and the measured sweep over real processes."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from lab.cli import app
from lab.experiments import collective_sweep, error_at_scale, transfer_sweep


def test_error_at_scale_grows_with_hops_and_is_seeded() -> None:
    df = error_at_scale(["dynamic_tree", "topk"], ["ring", "tree"], [2, 16], n=2048, seed=3)
    assert len(df) == 8 and df["ranks_agree"].all()
    ring = df[(df.codec.str.startswith("dynamic_tree")) & (df.algorithm == "ring")].set_index("P")
    assert ring.loc[16, "rel_error"] > ring.loc[2, "rel_error"]
    assert set(df[df.codec.str.startswith("topk")]["mode"]) == {"gather"}
    again = error_at_scale(["dynamic_tree", "topk"], ["ring", "tree"], [2, 16], n=2048, seed=3)
    assert again.equals(df)
    with pytest.raises(ValueError, match="1..1024"):
        error_at_scale(["linear"], ["ring"], [2000])


def test_transfer_sweep_reports_speedups_against_fp32() -> None:
    df, cross = transfer_sweep([1024, 65536], ["linear"], target_s=0.02)
    assert set(df.codec) == {"fp32", "linear[nearest,tensor]"}
    assert (df[df.codec == "fp32"]["speedup_vs_fp32"] == 1.0).all()
    assert (df.wire_bytes[df.codec != "fp32"].values < df.wire_bytes[df.codec == "fp32"].values).all()
    assert set(cross) == {"linear[nearest,tensor]"}
    assert (df.calls >= 5).all() and (df.seconds_lo <= df.seconds).all() and (df.seconds <= df.seconds_hi).all()
    assert (df.speedup_vs_fp32_lo <= df.speedup_vs_fp32).all() and (df.speedup_vs_fp32 <= df.speedup_vs_fp32_hi).all()
    assert "rank_calls_s" not in df


def test_transfer_verdicts_rank_by_what_the_intervals_support() -> None:
    """A codec whose median beats 32-bit but whose interval overlaps 32-bit's is within noise there, and its
    crossover (from which size it wins at every larger size) counts only wins beyond the noise."""
    import pandas as pd

    from lab.experiments import within_noise
    from lab.experiments.collectives import bench, transfer_spread

    def row(n, codec, calls):
        return {"n_values": n, "codec": codec, "seconds": sorted(calls)[len(calls) // 2], "rank_calls_s": [calls, calls]}
    rows = [row(256, "fp32", [1.0, 1.1, 1.2, 1.3, 1.4]), row(256, "q", [0.95, 1.0, 1.05, 1.3, 1.5]),  # overlap
            row(4096, "fp32", [4.0, 4.1, 4.2, 4.3, 4.4]), row(4096, "q", [1.0, 1.1, 1.2, 1.3, 1.4])]  # apart
    df = pd.DataFrame(transfer_spread(rows))
    q = df[df.codec == "q"].set_index("n_values")
    assert q.loc[256, "speedup_vs_fp32"] > 1 and q.loc[256, "speedup_vs_fp32_lo"] < 1 < q.loc[256, "speedup_vs_fp32_hi"]
    assert q.loc[4096, "speedup_vs_fp32_lo"] == pytest.approx(4.0 / 1.4)
    assert within_noise(df) == {"q": [256]}
    assert bench.crossover(df) == {"q": 4096}  # on medians alone it would be 256
    assert bench.crossover(df.drop(columns=["speedup_vs_fp32_lo", "speedup_vs_fp32_hi"])) == {"q": 256}


def test_collective_sweep_measures_and_models() -> None:
    # up to 4 MB: the bandwidth term must stand out of loopback's noise on loaded cores for the fit
    df, pred = collective_sweep(3, ["native", "ring", "tree"], [65536, 1048576, 4194304], target_s=0.02)
    assert (df["wrong"] == 0).all()
    assert {"time_us", "algbw_GBps", "busbw_GBps", "model_us"} <= set(df.columns)
    assert (df["busbw_GBps"] > 0).all()
    assert set(pred["P"]) == {8, 64, 1024}


def test_cli_bench_collectives_prints_nccl_tests_table(tmp_path) -> None:
    res = CliRunner().invoke(app, ["bench", "collectives", "--procs", "2", "-b", "64K", "-e", "1M",
                                   "--algorithms", "native,ring", "--target-s", "0.02",
                                   "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert "# algorithm: ring" in res.output and "busbw (GB/s)" in res.output and "#wrong" in res.output
    assert "# Avg bus bandwidth" in res.output and "# nThread 1 nGpus 0 minBytes 65536 maxBytes 1048576" in res.output
    bad = CliRunner().invoke(app, ["bench", "collectives", "--algorithms", "ring,hypercube"])
    assert bad.exit_code == 2 and "unknown algorithm 'hypercube'" in bad.output


def test_cli_scale() -> None:
    res = CliRunner().invoke(app, ["scale", "--codec", "linear", "--algorithm", "ring", "--ranks", "2,8",
                                   "--values", "512"])
    assert res.exit_code == 0, res.output
    assert "rel_error" in res.output
