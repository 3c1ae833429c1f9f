"""Collective experiments for the dashboard and CLI (issue: collectives): measured sweeps over
real processes, the error of compressed allreduce at scale on SimComm, and the transfer
experiment of Dettmers 2016 Figure 2. Each returns a tidy DataFrame."""
from __future__ import annotations

from typing import Callable

import pandas as pd
import torch

from lab.codecs.base import check_seed
from lab.comm import bench, cost
from lab.comm.allreduce import allreduce, check_algorithm, resolve_codec, resolve_mode
from lab.comm.launch import run
from lab.comm.sim import MAX_RANKS, simulate

Progress = Callable[[float, str], None]


def collective_sweep(procs: int, algorithms: list[str], sizes: list[int], *, codec: str | None = None,
                     predict_P: list[int] | None = None, target_s: float = 0.1,
                     progress: Progress | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measure every algorithm at every size (bytes) on `procs` local processes; returns
    (measured rows with algbw/busbw and the calibrated model's time, the model's prediction at
    larger P for the same sizes on the fitted link)."""
    result = run(bench.collectives_rank, procs, sizes, algorithms, codec, target_s=target_s, progress=progress)[0]
    df, fit = bench.table(result, shared=True)
    pred = []
    if fit is not None:
        for P in predict_P or [8, 64, 1024]:
            for a in algorithms:
                alg = "ring" if a == "native" else a
                for b in sizes:
                    pred.append({"algorithm": a, "P": P, "nbytes": b,
                                 "model_us": cost.allreduce_time(alg, P, b, fit.link) * 1e6})
    return df, pd.DataFrame(pred)


def error_at_scale(codecs: list[str], algorithms: list[str], ranks: list[int], *, n: int = 4096,
                   mode: str = "auto", seed: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """Relative error of a compressed allreduce against the exact sum, on SimComm, as P grows.

    Rank r holds a seeded normal vector of n values. Columns: codec, algorithm, P, mode,
    rel_error (L2), max_abs_error, ranks_agree (every rank got identical numbers), wire_bytes
    (all ranks together)."""
    check_seed(seed)
    for a in algorithms:
        check_algorithm(a)
    for P in ranks:
        if not isinstance(P, int) or not 1 <= P <= MAX_RANKS:
            raise ValueError(f"P={P!r}; SimComm runs 1..{MAX_RANKS} ranks")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}; allowed: an integer >= 1 values per rank")
    rows, steps, done = [], len(codecs) * len(algorithms) * len(ranks), 0
    for name in codecs:
        codec = resolve_codec(name)
        how = resolve_mode(codec, mode)
        for a in algorithms:
            for P in ranks:
                out = simulate(_error_rank, P, n, a, name, mode, seed)
                exact = sum(_vector(r, n, seed).double() for r in range(P))
                y = out[0][0].double()
                rows.append({"codec": codec.describe() if codec else "fp32", "algorithm": a, "P": P, "mode": how,
                             "rel_error": float((y - exact).norm() / exact.norm()),
                             "max_abs_error": float((y - exact).abs().max()),
                             "ranks_agree": all(torch.equal(o[0], out[0][0]) for o in out),
                             "wire_bytes": sum(o[1] for o in out)})
                done += 1
                if progress:
                    progress(done / steps, f"{name} {a} P={P}")
    return pd.DataFrame(rows)


def _vector(rank: int, n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + rank))


def _error_rank(comm, n: int, algorithm: str, codec: str | None, mode: str, seed: int):
    y = allreduce(comm, _vector(comm.rank, n, seed), algorithm=algorithm, codec=codec, mode=mode)
    return y, comm.bytes_sent


def transfer_sweep(sizes: list[int], codecs: list[str], *, target_s: float = 0.1,
                   progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Dettmers 2016 Figure 2 between two local processes: one-way seconds and speedup over
    fp32 per size (values) and codec, and each codec's crossover size."""
    rows = run(bench.transfer_rank, 2, sizes, [None, *codecs], target_s=target_s, progress=progress)[0]
    df = pd.DataFrame(rows)
    return df, bench.crossover(df)
