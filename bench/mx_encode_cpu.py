"""MXFP8 (E4M3, floor rule) encode time on the CPU: lab's codec vs torchao's to_mx, 2^22 values,
same run; medians of repeats after warm-up. Usage: python bench/mx_encode_cpu.py [repeats]"""
from __future__ import annotations

import statistics
import sys
import time

import torch

from lab.codecs import get_codec


def median_time(fn, repeats: int) -> float:
    fn()
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(repeats: int = 7) -> None:
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    x = torch.randn(1 << 22, generator=torch.Generator().manual_seed(0))
    codec = get_codec("mxfp8_e4m3")
    ours = median_time(lambda: codec.encode(x), repeats)
    theirs = median_time(lambda: to_mx(x.view(-1, 1024), torch.float8_e4m3fn, 32), repeats)
    print(f"threads={torch.get_num_threads()} n=2^22 lab={ours * 1e3:.1f} ms torchao={theirs * 1e3:.1f} ms "
          f"speedup(torchao/lab)={theirs / ours:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
