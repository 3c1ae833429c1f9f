"""Block-scaled encode time on the CPU: lab's MX/NVFP4 codecs vs torchao's to_mx (MXFP8 E4M3, floor
scale) and torch's fp8 cast, 2^22 values, same run. The contestants are timed interleaved (one call
of each per round) so a change in machine load hits all of them alike; medians over the rounds,
after warm-up (torch.compile runs during warm-up). Prints the 1-minute load average before and after,
and with one thread also the ratios of the calling thread's CPU time (time.thread_time), which a
loaded machine distorts far less than wall time (preemption does not count).

Usage: python bench/mx_encode_cpu.py [rounds] [codec ...]   (default: 11 mxfp8_e4m3)
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

from lab.codecs import get_codec


def main(rounds: int = 11, names: tuple[str, ...] = ("mxfp8_e4m3",)) -> None:
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    x = torch.randn(1 << 22, generator=torch.Generator().manual_seed(0))
    fns = {"torchao to_mx": lambda: to_mx(x.view(-1, 32), torch.float8_e4m3fn, 32),
           "torch fp8 cast": lambda: x.to(torch.float8_e4m3fn)}
    for name in names:
        codec = get_codec(name)
        fns[name] = lambda c=codec: c.encode(x)
    load0 = os.getloadavg()[0]
    for fn in fns.values():  # warm-up (compiles)
        fn(), fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpu[k].append(time.thread_time() - c0)
            times[k].append(time.perf_counter() - t0)
    one = torch.get_num_threads() == 1
    print(f"threads={torch.get_num_threads()} n=2^22 rounds={rounds} load(1 min)={load0:.2f}->{os.getloadavg()[0]:.2f}")
    for label, data in (("wall", times), ("thread cpu", cpu)) if one else (("wall", times),):
        med = {k: statistics.median(v) for k, v in data.items()}
        for k, t in med.items():
            print(f"{label:10s} {k:16s} {t * 1e3:8.2f} ms   torchao/this={med['torchao to_mx'] / t:6.2f}   "
                  f"fp8cast/this={med['torch fp8 cast'] / t:5.2f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 11, tuple(args[1:]) or ("mxfp8_e4m3",))
