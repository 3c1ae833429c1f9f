"""`bench collectives --op OP`: nccl-tests' sweep for every collective but allreduce (which is
`lab.comm.bench`): each algorithm of the op (`lab.comm.collectives`) beside the backend's own op
(`all_gather_into_tensor`, `reduce_scatter_tensor`, `all_to_all_single`, `broadcast`, `reduce`, a
batched send/recv) in the same run, on the same ranks.

Conventions of nccl-tests (doc/PERFORMANCE.md): size is the op's size in bytes (all_gather and
reduce_scatter: the whole P-shard buffer; alltoall: one rank's send buffer; the others: the buffer),
count = size / 4 fp32 values, algbw = size / time, busbw = algbw · the op's factor, #wrong = values
that differ from the exact result, summed over ranks. Times: median per call after a barrier, the
mean over ranks (as `lab.comm.bench`).
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd
import torch

from lab.backend import Progress, RowSink

from . import collectives as C
from .base import Comm
from .bench import time_loop, pattern, rank_info

NATIVE = "native"
ROOT = 0


def check_algorithms(op: str, algorithms: list[str]) -> None:
    """ValueError naming the op's algorithms for one it does not have."""
    for a in algorithms:
        if a != NATIVE:
            C.get_collective(op, a)


def count_for(op: str, nbytes: int, P: int) -> int:
    """fp32 values of the op's size, rounded down so that P divides it where the op splits by rank."""
    n = nbytes // 4
    return n - n % P if op in ("all_gather", "reduce_scatter", "alltoall") else n


def _input(op: str, comm: Comm, n: int) -> torch.Tensor:
    P = comm.size
    return pattern(comm.rank, n // P if op == "all_gather" else n, comm.device)


def _expected(op: str, comm: Comm, n: int) -> torch.Tensor | None:
    P, r, dev = comm.size, comm.rank, comm.device
    if op == "all_gather":
        return torch.cat([pattern(p, n // P, dev) for p in range(P)])
    if op == "reduce_scatter":
        k = n // P
        return sum(pattern(p, n, dev)[r * k:(r + 1) * k] for p in range(P))
    if op == "alltoall":
        k = n // P
        return torch.cat([pattern(p, n, dev)[r * k:(r + 1) * k] for p in range(P)])
    if op == "broadcast":
        return pattern(ROOT, n, dev)
    if op == "reduce":
        return sum(pattern(p, n, dev) for p in range(P)) if r == ROOT else None
    if op == "sendrecv":
        return pattern((r - 1) % P, n, dev)
    raise ValueError(op)


def native_op(op: str, comm: Comm, x: torch.Tensor) -> Callable[[], torch.Tensor | None]:
    """The backend's own op on x (torch.distributed; the default group), as a callable."""
    import torch.distributed as dist

    P, r = comm.size, comm.rank
    if op == "all_gather":
        out = torch.empty(P * x.numel(), dtype=x.dtype, device=x.device)
        return lambda: (dist.all_gather_into_tensor(out, x), out)[1]
    if op == "reduce_scatter":
        out = torch.empty(x.numel() // P, dtype=x.dtype, device=x.device)
        return lambda: (dist.reduce_scatter_tensor(out, x.clone()), out)[1]
    if op == "alltoall":
        out = torch.empty_like(x)
        return lambda: (dist.all_to_all_single(out, x), out)[1]
    if op == "broadcast":
        buf = x.clone()
        return lambda: (dist.broadcast(buf, ROOT), buf)[1]
    if op == "reduce":
        buf = torch.empty_like(x)

        def red() -> torch.Tensor | None:
            buf.copy_(x)
            dist.reduce(buf, ROOT)
            return buf if r == ROOT else None
        return red
    if op == "sendrecv":
        out = torch.empty_like(x)

        def sr() -> torch.Tensor:
            if P == 1:
                return out.copy_(x)
            ops = [dist.P2POp(dist.irecv, out, (r - 1) % P), dist.P2POp(dist.isend, x, (r + 1) % P)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            return out
        return sr
    raise ValueError(op)


def op_rank(comm: Comm, op: str, sizes: list[int], algorithms: list[str], codec: str | None = None,
            target_s: float = 0.2, max_iters: int = 50, iters: int | None = None, warmup: int = 1,
            check: bool = True, progress: Progress | None = None, on_row: RowSink | None = None) -> dict | None:
    """Time `op` by every algorithm (NATIVE: the backend's own, on torch.distributed only) at every
    size; rank 0 returns {'rows': [...], 'ranks': [...]}, the others None."""
    C.check_op(op)
    check_algorithms(op, algorithms)
    ranks = comm.allgather_object(rank_info(comm))
    P = comm.size
    rows, done, steps = [], 0, len(algorithms) * len(sizes)
    kw: dict[str, Any] = {"root": ROOT} if op in ("broadcast", "reduce") else {}
    for a in algorithms:
        if a == NATIVE and comm.backend not in ("gloo", "nccl"):
            raise ValueError(f"algorithm {NATIVE!r} is the backend's own {op}; it needs torch.distributed ranks "
                             f"(this Comm is {comm.backend!r}); allowed here: {', '.join(C.collective_names(op))}")
        for nbytes in sizes:
            n = count_for(op, nbytes, P)
            x = _input(op, comm, n)
            cc = None if a == NATIVE else codec
            if a == NATIVE:
                call = native_op(op, comm, x)
            else:
                call = (lambda a=a, x=x, cc=cc, chk=True: C.call(op, comm, x, algorithm=a, codec=cc, check=chk, **kw))
            comm.reset_counters()
            y = call()
            sent = comm.bytes_sent
            wrong = rel = None
            if check:
                want = _expected(op, comm, n)
                mine = 0 if want is None else int((y != want).sum())
                err = 0.0 if want is None or not float(want.norm()) else float((y - want).norm() / want.norm())
                every = comm.allgather_object((mine, err))
                wrong, rel = sum(w for w, _ in every), max(e for _, e in every)
            fast = call if a == NATIVE else (lambda a=a, x=x, cc=cc: C.call(op, comm, x, algorithm=a, codec=cc,
                                                                             check=False, **kw))
            t = time_loop(comm, fast, target_s, max_iters, iters, warmup)
            rows.append({"op": op, "algorithm": a, "codec": cc or "fp32", "P": P, "nbytes": n * 4, "count": n,
                         "type": "float", "redop": "sum" if C.OPS[op].reduces else "none",
                         "root": ROOT if op in ("broadcast", "reduce") else -1, "seconds": t,
                         "wire_bytes_rank0": sent if a != NATIVE else None, "wrong": wrong, "rel_error": rel})
            if on_row and comm.rank == 0:
                on_row(rows[-1])
            done += 1
            if progress:
                progress(done / steps, f"{op} {a} {n * 4} B")
    return {"rows": rows, "ranks": ranks} if comm.rank == 0 else None


def op_table(rows: list[dict]) -> pd.DataFrame:
    """Rows with nccl-tests' derived columns: time_us, algbw_GBps, busbw_GBps (the op's factor)."""
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["time_us"] = df["seconds"] * 1e6
    df["algbw_GBps"] = df["nbytes"] / df["seconds"] / 1e9
    df["busbw_GBps"] = df["algbw_GBps"] * [C.OPS[o].busbw_factor(int(p)) for o, p in zip(df["op"], df["P"])]
    return df


def format_op_table(df: pd.DataFrame) -> str:
    """nccl-tests' layout for one op: a block per algorithm (redop / root only where the op has them)."""
    op = df["op"].iloc[0]
    cols = ["size (B)", "count", "type"]
    if C.OPS[op].reduces:
        cols.append("redop")
    if op in ("broadcast", "reduce"):
        cols.append("root")
    cols += ["time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"]
    lines = []
    for a, g in df.groupby("algorithm", sort=False):
        codec = g["codec"].iloc[0]
        lines.append(f"# op: {op}   algorithm: {a}   wire: {codec}   ranks: {int(g['P'].iloc[0])}   "
                     f"busbw = algbw * {C.OPS[op].busbw_text}")
        lines.append("#" + "".join(f"{c:>14}" for c in cols))
        for _, r in g.iterrows():
            wrong = ("N/A" if pd.isna(r["wrong"]) else str(int(r["wrong"])) if codec == "fp32"
                     else f"~{r['rel_error']:.1e}")
            vals = [str(int(r["nbytes"])), str(int(r["count"])), r["type"]]
            if C.OPS[op].reduces:
                vals.append(r["redop"])
            if op in ("broadcast", "reduce"):
                vals.append(str(int(r["root"])))
            vals += [f"{r['time_us']:.1f}", f"{r['algbw_GBps']:.3f}", f"{r['busbw_GBps']:.3f}", wrong]
            lines.append(" " + "".join(f"{v:>14}" for v in vals))
        lines.append(f"# Avg bus bandwidth    : {g['busbw_GBps'].mean():.4f} GB/s")
        lines.append("#")
    return "\n".join(lines)


def op_ratios(df: pd.DataFrame, min_bytes: int = 16 * 2**20) -> pd.DataFrame:
    """busbw of each algorithm / the native op's at the same size, for sizes >= min_bytes."""
    if df.empty or NATIVE not in set(df["algorithm"]):
        return pd.DataFrame(columns=["algorithm", "nbytes", "busbw_GBps", "busbw_vs_native"])
    nat = df[df["algorithm"] == NATIVE].groupby("nbytes")["busbw_GBps"].median()  # repeated natives: their median
    big = df[(df["nbytes"] >= min_bytes) & (df["algorithm"] != NATIVE)].copy()
    big["busbw_vs_native"] = big["busbw_GBps"].values / nat.reindex(big["nbytes"]).values
    return big[["algorithm", "nbytes", "busbw_GBps", "busbw_vs_native"]]
