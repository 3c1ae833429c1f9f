"""Soak: many compressed ring allreduces on real ranks; does memory grow, does the result drift?

Default: 200 ring allreduces of 16 M fp32 values (64 MB) per rank with dynamic_tree on the wire,
4 Gloo processes on this machine. Each rank records its resident set size (RSS, /proc/self/statm)
after every iteration; the figure is the growth from iteration `--warm` (20, once buffers and
allocator pools have settled) to the last, which must stay under 5 %, and the last result must
equal the first bit for bit (same input every time). Writes bench/results/soak-cpu.json.

    python bench/soak.py                       # the full soak (minutes)
    python bench/soak.py --iters 60 --values 1M --out /tmp/soak.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

REPO = Path(__file__).resolve().parent.parent
MAX_GROWTH = 0.05


def rss_bytes() -> int:
    """Resident set size of this process in bytes (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def soak_rank(comm, n: int, iters: int, warm: int, codec: str,
              progress: Callable[[float, str], None] | None = None) -> dict:
    """`iters` ring allreduces of this rank's fixed n-value input; RSS after each, times, and
    whether the last result equals the first."""
    from lab.comm import allreduce

    x = torch.randn(n, generator=torch.Generator().manual_seed(1234 + comm.rank))
    first = None
    rss, seconds = [], []
    same, max_diff = True, 0.0
    for i in range(1, iters + 1):
        comm.barrier()
        t = time.perf_counter()
        y = allreduce(comm, x, algorithm="ring", codec=codec, check=i == 1)
        seconds.append(time.perf_counter() - t)
        if first is None:
            first = y
        elif i == iters:
            same = bool(torch.equal(y, first))
            max_diff = float((y - first).abs().max()) if n else 0.0
        del y
        rss.append(rss_bytes())
        if progress:
            progress(i / iters, f"iteration {i}/{iters}, rank 0 RSS {rss[-1] / 2**20:.0f} MiB")
    return dict(rank=comm.rank, rss=rss, rss_warm=rss[warm - 1], rss_end=rss[-1],
                growth=rss[-1] / rss[warm - 1] - 1, seconds_median=statistics.median(seconds[1:] or seconds),
                last_equals_first=same, max_abs_diff=max_diff)


def soak(procs: int = 4, n: int = 16 << 20, iters: int = 200, warm: int = 20, codec: str = "dynamic_tree",
         timeout: float = 600.0, progress: Callable[[float, str], None] | None = None) -> dict:
    """Run the soak on `procs` local Gloo ranks; a JSON-ready summary with every rank's figures."""
    from lab.comm.launch import run

    if not 1 <= warm < iters:
        raise ValueError(f"warm={warm}, iters={iters}; allowed: 1 <= warm < iters")
    if n < 1:
        raise ValueError(f"n={n}; allowed: >= 1 value")
    t = time.perf_counter()
    ranks = run(soak_rank, procs, n, iters, warm, codec, timeout=timeout, progress=progress)
    wall = time.perf_counter() - t
    return {
        "procs": procs, "values": n, "bytes_per_rank": 4 * n, "iters": iters, "warm": warm, "codec": codec,
        "algorithm": "ring", "wall_s": wall,
        "max_growth": max(r["growth"] for r in ranks), "growth_limit": MAX_GROWTH,
        "all_last_equal_first": all(r["last_equals_first"] for r in ranks),
        "seconds_per_iter_median": max(r["seconds_median"] for r in ranks),
        "ranks": [{"rank": r["rank"], f"rss_MiB_at_{warm}": r["rss_warm"] / 2**20,
                   f"rss_MiB_at_{iters}": r["rss_end"] / 2**20, "growth_ratio": r["rss_end"] / r["rss_warm"],
                   "seconds_per_iter_median": r["seconds_median"], "last_equals_first": r["last_equals_first"],
                   "max_abs_diff": r["max_abs_diff"],
                   "rss_MiB_every_10": [v / 2**20 for v in r["rss"][9::10]]} for r in ranks],
    }


def main(argv: list[str] | None = None) -> int:
    from lab import backend
    from lab.comm.bench import parse_size

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--values", default="16M", help="values per rank (K/M suffixes)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--codec", default="dynamic_tree")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "soak-cpu.json")
    a = ap.parse_args(argv)
    shown = [""]

    def show(frac: float, msg: str) -> None:  # the launcher relays progress every 20 ms: print changes only
        if msg != shown[0]:
            shown[0] = msg
            print(f"\r{frac:4.0%} {msg}", end="", file=sys.stderr, flush=True)

    res = soak(a.procs, parse_size(a.values), a.iters, a.warm, a.codec, progress=show)
    print(file=sys.stderr)
    info = {"device": backend.device_name("cpu"), "versions": backend.versions(),
            "timing": "perf_counter per allreduce after a barrier; median over iterations 2..N, slowest rank; "
                      "RSS from /proc/self/statm after each iteration",
            "machine_note": f"{os.cpu_count()} cores shared with other jobs; load average "
                            f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end", **res}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_name(a.out.name + ".part")
    tmp.write_text(json.dumps(info, indent=1))
    tmp.replace(a.out)
    ok = res["max_growth"] < MAX_GROWTH and res["all_last_equal_first"]
    print(f"max RSS growth {res['max_growth']:+.2%} (limit {MAX_GROWTH:.0%}), last == first: "
          f"{res['all_last_equal_first']}, {res['seconds_per_iter_median']:.3f} s per allreduce; wrote {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
