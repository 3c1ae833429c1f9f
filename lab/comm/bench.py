"""Collective benchmarks: an nccl-tests-style allreduce sweep with a calibrated cost model, and
the transfer experiment of Dettmers 2016 Figure 2 (compress + transfer + decompress vs 32-bit).

Rank functions run on every rank of a Comm (launch.run, torchrun or SimComm); rank 0 returns
the rows. Conventions follow nccl-tests, except that time is the median per operation (not the loop
mean: shared cores give rare multi-ms stalls), averaged over ranks; algbw = bytes / time (1e9 B/s); busbw = algbw · 2(P-1)/P; #wrong counts elements
that differ from the exact sum (inputs are small integers, so every summation order is exact).
"""
from __future__ import annotations

import os
import re
import statistics
import time
from typing import Any, Callable

import pandas as pd
import torch

from lab.codecs.registry import get_codec

from . import cost
from .allreduce import NATIVE, allreduce, check_algorithm, resolve_codec, resolve_mode
from .base import Comm
from lab.codecs.wire import WireFormat
from lab.backend import Progress, RowSink

from .timesplit import Tracer

_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "M": 2**20, "MB": 2**20, "G": 2**30, "GB": 2**30}


def parse_size(text: str | int) -> int:
    """'8', '64K', '64M', '1G' -> bytes (binary units, as nccl-tests' -b/-e)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?B?)\s*", str(text).upper())
    if not m:
        raise ValueError(f"size {text!r}; allowed: an integer with an optional K, M or G suffix (e.g. 8, 64K, 64M)")
    return int(m.group(1)) * _UNITS[m.group(2)]


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """min, min·factor, ... up to max (bytes, multiples of 4 for fp32)."""
    if min_bytes < 4 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"sizes {min_bytes}..{max_bytes} B by x{factor}; allowed: 4 <= min <= max, factor >= 2")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s // 4 * 4)
        s *= factor
    return out


def pattern(rank: int, n: int, device: torch.device) -> torch.Tensor:
    """Rank r's input: small integers in -8..8, so sums are exact in fp32 in any order."""
    i = torch.arange(n, device=device)
    return (((i * 7 + rank * 13) % 17) - 8).to(torch.float32)


def expected(P: int, n: int, device: torch.device) -> torch.Tensor:
    acc = torch.zeros(n, device=device)
    for r in range(P):
        acc += pattern(r, n, device)
    return acc


def _sync(comm: Comm) -> None:
    if comm.device.type == "cuda":
        torch.cuda.synchronize(comm.device)


def _agree(comm: Comm, value: Any) -> Any:
    """Rank 0's value on every rank."""
    return comm.allgather_object(value)[0]


def time_calls(comm: Comm, op: Callable[[], Any], target_s: float, max_iters: int, iters: int | None = None,
               warmup: int = 1, min_iters: int = 3) -> list[float]:
    """This rank's seconds of each timed call: each call starts after a barrier. `warmup` untimed calls
    first (nccl-tests' -w); then `iters` timed calls (its -n), or, when None, as many as fit `target_s`
    (min_iters..max_iters, agreed by every rank)."""
    for _ in range(max(1, warmup)):
        op()
    if iters is None:
        comm.barrier()
        t0 = time.perf_counter()
        op()
        _sync(comm)
        once = time.perf_counter() - t0
        iters = _agree(comm, max(min_iters, min(max(max_iters, min_iters), int(target_s / max(once, 1e-6)))))
    times = []
    for _ in range(iters):
        comm.barrier()
        t0 = time.perf_counter()
        op()
        _sync(comm)
        times.append(time.perf_counter() - t0)
    return times


def time_loop(comm: Comm, op: Callable[[], Any], target_s: float, max_iters: int, iters: int | None = None,
               warmup: int = 1, ranks: list[int] | None = None) -> float:
    """Seconds per call (`time_calls`): the median over calls (robust to the scheduler's outliers on shared
    cores), averaged over ranks as nccl-tests does (-a 1), or over `ranks` only (the others idle)."""
    mine = statistics.median(time_calls(comm, op, target_s, max_iters, iters, warmup))
    every = comm.allgather_object(mine)
    if ranks is not None:
        every = [every[r] for r in ranks]
    return sum(every) / len(every)


def _split(tracer: Tracer | None, comm: Comm, label: str, op: Callable[[], Any]) -> list[dict] | None:
    """Every rank's split of one traced call of `op` (lab.comm.timesplit), in rank order; None untraced."""
    return None if tracer is None else comm.allgather_object(tracer.measure(label, op))


def collectives_rank(comm: Comm, sizes: list[int], algorithms: list[str], codec: str | None = None,
                     codec_options: dict | None = None, target_s: float = 0.2, max_iters: int = 50,
                     pingpong: bool = True, progress: Progress | None = None, iters: int | None = None,
                     warmup: int = 1, check: bool = True, on_row: RowSink | None = None,
                     trace: str | None = None) -> dict | None:
    """Time every algorithm at every size (bytes of fp32 input); rank 0 returns
    {'rows': [...], 'pingpong': [...], 'ranks': [...]} and the others None. iters / warmup / check
    are nccl-tests' -n / -w / -c (iters None: as many calls as fit target_s; check False: no
    comparison with the exact sum, #wrong is None). on_row (rank 0): each allreduce row as it finishes.
    trace: a directory: each row gains `split` (every rank's wire/wait/codec/python seconds of a traced
    call, lab.comm.timesplit) and each rank writes its Chrome trace there.
    Each rank takes its share of the cores first (`rank_threads`); the first allreduce of each size
    runs untimed (it compiles the codec passes)."""
    if iters is not None and iters < 1:
        raise ValueError(f"iters={iters}; allowed: >= 1")
    if warmup < 0:
        raise ValueError(f"warmup={warmup}; allowed: >= 0")
    rank_threads(comm)
    ranks = comm.allgather_object(rank_info(comm))
    for a in algorithms:
        check_algorithm(a)
    c = get_codec(codec, **(codec_options or {})) if codec else None
    P, dev = comm.size, comm.device
    tracer = Tracer(comm, trace) if trace else None
    rows, pp = [], []
    steps = len(algorithms) * len(sizes) + (len(sizes) if pingpong and P > 1 else 0)
    done = 0
    for a in algorithms:
        cc = None if a == NATIVE else c
        for nbytes in sizes:
            n = nbytes // 4
            x = pattern(comm.rank, n, dev)
            comm.reset_counters()
            y = allreduce(comm, x, algorithm=a, codec=cc)
            sent = comm.bytes_sent
            wrong = rel = None
            if check:
                want = expected(P, n, dev)
                wrong = int((y != want).sum())
                rel = float((y - want).norm() / want.norm()) if n and float(want.norm()) else 0.0
            op = lambda: allreduce(comm, x, algorithm=a, codec=cc, check=False)  # noqa: E731
            t = time_loop(comm, op, target_s, max_iters, iters, warmup)
            rows.append({"algorithm": a, "codec": cc.describe() if cc else "fp32", "P": P, "nbytes": nbytes,
                         "count": n, "type": "float", "redop": "sum", "seconds": t,
                         "wire_bytes_rank0": sent if a != NATIVE else None, "wrong": wrong, "rel_error": rel})
            if tracer:
                rows[-1]["split"] = _split(tracer, comm, f"allreduce {a} {rows[-1]['codec']} {nbytes} B", op)
            if on_row:
                on_row(rows[-1])
            done += 1
            if progress:
                progress(done / steps, f"{a} {nbytes} B")
    if pingpong and P > 1:
        for nbytes in sizes:
            pp.append({"kind": "pingpong", "algorithm": "pingpong", "P": 2, "nbytes": nbytes,
                       "seconds": _pingpong(comm, nbytes // 4, target_s, max_iters, iters, warmup)})
            done += 1
            if progress:
                progress(done / steps, f"ping-pong {nbytes} B")
    if tracer:
        tracer.save()
    return {"rows": rows, "pingpong": pp, "ranks": ranks} if comm.rank == 0 else None


def rank_info(comm: Comm) -> dict:
    """This rank's line of nccl-tests' '# Using devices' block: rank, pid, host, device."""
    import os
    import socket

    from lab import backend

    dev = comm.device
    return {"rank": comm.rank, "pid": os.getpid(), "host": socket.gethostname(),
            "device_index": dev.index if dev.type == "cuda" and dev.index is not None else 0,
            "device_type": dev.type, "device": backend.device_name(dev)}


def header(ranks: list[dict], min_bytes: int, max_bytes: int, factor: int, warmup: int, iters: int | None,
           check: bool, target_s: float, backend_name: str) -> str:
    """nccl-tests' header lines: the run's parameters, then '# Using devices' with one line per rank."""
    n_gpus = 1 if ranks and ranks[0]["device_type"] == "cuda" else 0
    it = str(iters) if iters is not None else f"auto({target_s:g} s)"
    lines = [f"# nThread 1 nGpus {n_gpus} minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) "
             f"warmup iters: {warmup} iters: {it} agg iters: 1 validation: {int(check)} graph: 0",
             "#", "# Using devices"]
    for r in ranks:
        tag = f"cuda:{r['device_index']}" if r["device_type"] == "cuda" else "cpu"
        lines.append(f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10} device "
                     f"{r['device_index']:2d} [{tag}] {r['device']} ({backend_name})")
    return "\n".join(lines + ["#"])


def _pingpong(comm: Comm, n: int, target_s: float, max_iters: int, iters: int | None = None,
              warmup: int = 1) -> float:
    """One-way time of n fp32 values between ranks 0 and 1 (half the round trip)."""
    buf = torch.zeros(n, device=comm.device)

    def op() -> None:
        if n == 0:
            return
        if comm.rank == 0:
            comm.send(buf, 1)
            comm.recv(buf, 1)
        elif comm.rank == 1:
            comm.recv(buf, 0)
            comm.send(buf, 0)

    return time_loop(comm, op, target_s, max_iters, iters, warmup) / 2


TRIM = 0.25  # a quarter of the calibration rows may be left out as stalled by the host's load (cost.fit_link)


def table(result: dict, link: cost.Link | None = None, shared: bool = False) -> tuple[pd.DataFrame, cost.Fit | None]:
    """The nccl-tests columns plus the cost model's prediction. Without a `link` the model is
    calibrated here: L and G fitted by least squares to the library's own algorithms' times at
    sizes >= 64 KB, rows a loaded host stalled left out (`TRIM`), plus the ping-pong when the ranks
    have links of their own (with shared=True, ranks on one host, the shared-medium model of cost.py
    and no ping-pong, which runs with the other ranks idle)."""
    df = pd.DataFrame(result["rows"])
    P = int(df["P"].iloc[0])
    df["time_us"] = df["seconds"] * 1e6
    df["algbw_GBps"] = df["nbytes"] / df["seconds"] / 1e9
    df["busbw_GBps"] = df["algbw_GBps"] * df["algorithm"].map(  # each algorithm's factor; native: nccl-tests'
        lambda a: cost.busbw_factor(P, None if a == NATIVE else a))
    fit = None
    if link is None and P > 1:
        known = df[df["algorithm"] != NATIVE]
        parts = [known.assign(kind="allreduce")[["kind", "algorithm", "P", "nbytes", "seconds"]]]
        if not shared and result["pingpong"]:
            parts.append(pd.DataFrame(result["pingpong"]))
        calib = pd.concat(parts)
        calib = calib[calib["nbytes"] >= 64 * 1024] if (calib["nbytes"] >= 64 * 1024).sum() >= 2 else calib
        try:
            fit = cost.fit_link(calib, shared=shared, trim=TRIM)
            link = fit.link
        except ValueError:
            link = None
    if link is not None and P > 1:
        model_alg = df["algorithm"].where(df["algorithm"] != NATIVE, "ring")  # Gloo's allreduce is a ring
        df["model_us"] = [cost.allreduce_time(a, P, b, link) * 1e6 for a, b in zip(model_alg, df["nbytes"])]
        df["model_error"] = (df["model_us"] - df["time_us"]) / df["time_us"]
    return df, fit


def format_table(df: pd.DataFrame) -> str:
    """nccl-tests' layout: one block per algorithm, then the average bus bandwidth."""
    cols = ["size (B)", "count", "type", "redop", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"]
    has_model = "model_us" in df
    if has_model:
        cols.append("model (us)")
    lines = []
    for a, g in df.groupby("algorithm", sort=False):
        codec = g["codec"].iloc[0]
        lines.append(f"# algorithm: {a}   wire: {codec}   ranks: {int(g['P'].iloc[0])}")
        lines.append("#" + "".join(f"{c:>14}" for c in cols))
        for _, r in g.iterrows():
            wrong = ("N/A" if pd.isna(r["wrong"]) else str(int(r["wrong"])) if codec == "fp32"
                     else f"~{r['rel_error']:.1e}")
            vals = [f"{int(r['nbytes'])}", f"{int(r['count'])}", r["type"], r["redop"], f"{r['time_us']:.1f}",
                    f"{r['algbw_GBps']:.3f}", f"{r['busbw_GBps']:.3f}", wrong]
            if has_model:
                vals.append(f"{r['model_us']:.1f}")
            lines.append(" " + "".join(f"{v:>14}" for v in vals))
        lines.append(f"# Avg bus bandwidth    : {g['busbw_GBps'].mean():.4f} GB/s")
        lines.append("#")
    return "\n".join(lines)


def ratios(df: pd.DataFrame, min_bytes: int = 16 * 2**20) -> pd.DataFrame:
    """busbw of each algorithm / native busbw at the same size, for sizes >= min_bytes."""
    nat = df[df["algorithm"] == NATIVE].set_index("nbytes")["busbw_GBps"]
    big = df[(df["nbytes"] >= min_bytes) & (df["algorithm"] != NATIVE)].copy()
    big["busbw_vs_native"] = big["busbw_GBps"].values / nat.reindex(big["nbytes"]).values
    return big[["algorithm", "nbytes", "busbw_GBps", "busbw_vs_native"]]


# ------------------------------------------------------------------ transfer (Figure 2)

def transfer_rank(comm: Comm, sizes: list[int], codecs: list[str | None], target_s: float = 0.2,
                  max_iters: int = 50, progress: Progress | None = None,
                  on_row: RowSink | None = None) -> list[dict] | None:
    """Dettmers 2016 §3.3 / Figure 2 between ranks 0 and 1: the one-way time of encode + transfer
    + decode of n values (half of a round trip in which each side encodes and decodes once),
    for each codec (None = 32-bit). Rank 0 returns the rows (and hands each to on_row as it finishes): seconds is
    the median over calls (at least 5) averaged over both ranks, rank_calls_s each rank's one-way seconds per call
    (the repeats its spread comes from)."""
    if comm.size < 2:
        raise ValueError("the transfer experiment needs 2 ranks")
    rows, steps, done = [], len(sizes) * len(codecs), 0
    for n in sizes:
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(comm.device)
        for name in codecs:
            codec = resolve_codec(name)
            fmt = WireFormat.of(codec, n, torch.float32, comm.device) if codec else None
            nbytes = fmt.nbytes if fmt else 4 * n

            def op() -> None:
                if comm.rank > 1:
                    return
                peer = 1 - comm.rank
                buf = torch.empty(nbytes, dtype=torch.uint8, device=comm.device) if fmt else torch.empty_like(x)
                if comm.rank == 0:
                    comm.send(fmt.encode(x) if fmt else x, peer)
                    comm.recv(buf, peer)
                    if fmt:
                        fmt.decode(buf)
                else:
                    comm.recv(buf, peer)
                    y = fmt.decode(buf) if fmt else buf
                    comm.send(fmt.encode(y) if fmt else y, peer)

            calls = comm.allgather_object([c / 2 for c in time_calls(comm, op, target_s, max_iters, min_iters=5)])
            rows.append({"n_values": n, "codec": codec.describe() if codec else "fp32", "wire_bytes": nbytes,
                         "seconds": sum(statistics.median(c) for c in calls) / len(calls), "rank_calls_s": calls})
            if on_row:
                on_row(rows[-1])
            done += 1
            if progress:
                progress(done / steps, f"{n} values, {rows[-1]['codec']}")
    return speedups(rows) if comm.rank == 0 else None


def speedups(rows: list[dict]) -> list[dict]:
    """Each row's speedup over the first fp32 row of its size (None where there is none); rows with the interval
    seconds_lo..seconds_hi also get speedup_vs_fp32_lo..hi: fp32's low over the row's high to fp32's high over its
    low (the speedups both intervals allow)."""
    base: dict = {}
    for r in rows:  # the first fp32 row per size: the benchmarked algorithm's, ahead of --compare's
        if r["codec"] == "fp32":
            base.setdefault(r["n_values"], r)
    for r in rows:
        b = base.get(r["n_values"])
        r["speedup_vs_fp32"] = b["seconds"] / r["seconds"] if b else None
        if b and "seconds_lo" in r and "seconds_lo" in b:
            r["speedup_vs_fp32_lo"] = b["seconds_lo"] / r["seconds_hi"]
            r["speedup_vs_fp32_hi"] = b["seconds_hi"] / r["seconds_lo"]
    return rows


def crossover(df: pd.DataFrame) -> dict[str, int | None]:
    """Per codec: the smallest size from which compression is faster than fp32 at every larger size; with
    speedup intervals (column speedup_vs_fp32_lo), faster beyond the noise: the interval's low end above 1."""
    out: dict[str, int | None] = {}
    col = "speedup_vs_fp32_lo" if "speedup_vs_fp32_lo" in df else "speedup_vs_fp32"
    for codec, g in df[df["codec"] != "fp32"].groupby("codec"):
        g = g.sort_values("n_values")
        faster = list(g[col] > 1)
        first = None
        for i in range(len(faster) - 1, -1, -1):
            if not faster[i]:
                break
            first = int(g["n_values"].iloc[i])
        out[codec] = first
    return out


def pcie_transfer(sizes: list[int], codecs: list[str | None], device: str = "cuda", repeats: int = 7,
                  progress: Progress | None = None) -> list[dict]:
    """Figure 2 over a GPU's real PCIe link: device -> pinned host -> device of the payload, with
    encode before and decode after on the GPU, against the same copies of fp32 (CUDA events)."""
    from lab import backend

    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError("the PCIe transfer needs a CUDA device")
    rows, steps, done = [], len(sizes) * len(codecs), 0
    for n in sizes:
        x = torch.randn(n, device=dev, generator=torch.Generator(device=dev).manual_seed(n))
        for name in codecs:
            codec = resolve_codec(name)
            fmt = WireFormat.of(codec, n, torch.float32, dev) if codec else None
            nbytes = fmt.nbytes if fmt else 4 * n
            host = torch.empty(nbytes if fmt else n, dtype=torch.uint8 if fmt else torch.float32, pin_memory=True)

            def op() -> None:
                payload = fmt.encode(x) if fmt else x
                host.copy_(payload, non_blocking=True)
                back = host.to(dev, non_blocking=True)
                if fmt:
                    fmt.decode(back)

            t = backend.time_fn(op, dev, repeats=repeats).median
            rows.append({"n_values": n, "codec": codec.describe() if codec else "fp32", "wire_bytes": nbytes,
                         "seconds": t, "link": "pcie d2h+h2d"})
            done += 1
            if progress:
                progress(done / steps, f"{n} values, {rows[-1]['codec']}")
    return speedups(rows)


def levels_rank(comm: Comm, n: int, ranks_per_node: int, codecs: list[str | None], target_s: float = 0.5,
                max_iters: int = 20) -> dict | None:
    """The two levels of a two-level machine measured apart, on the same ranks as the run they calibrate
    (`lab.comm.cluster.calibrate`): ring allreduces inside every node at once at n/16, n/4 and n values
    (the intra link), ring allreduces across the nodes among the local-rank-0s alone at 1/k of those (one
    flow per node: a whole NIC), and each codec's encode and decode of one n/k shard on every rank at once (the
    cores shared as in the run). Rank 0 returns {"intra": rows, "inter": rows, "codecs": {describe():
    {encode_s_per_value, decode_s_per_value, bytes_per_value}}} (rows as `cost.fit_link` takes them)."""
    k, P = ranks_per_node, comm.size
    N, (node, local) = P // k, divmod(comm.rank, k)
    out: dict = {"intra": [], "inter": [], "codecs": {}}
    gen = torch.Generator().manual_seed(comm.rank)
    leaders = list(range(0, P, k))
    for m in sorted({max(1, n // 16), max(1, n // 4), n}):
        if k > 1:
            g, x = comm.group(range(node * k, node * k + k)), torch.randn(m, generator=gen).to(comm.device)
            t = time_loop(comm, lambda: allreduce(g, x, algorithm="ring", check=False), target_s, max_iters)
            out["intra"].append({"kind": "allreduce", "algorithm": "ring", "P": k, "nbytes": 4 * m, "seconds": t})
        if N > 1:
            g, x = comm.group(range(local, P, k)), torch.randn(max(1, m // k), generator=gen).to(comm.device)
            op = (lambda: allreduce(g, x, algorithm="ring", check=False)) if local == 0 else (lambda: None)
            t = time_loop(comm, op, target_s, max_iters, ranks=leaders)
            out["inter"].append({"kind": "allreduce", "algorithm": "ring", "P": N, "nbytes": 4 * x.numel(),
                                 "seconds": t})
    x = torch.randn(max(1, n // k), generator=gen).to(comm.device)
    for name in codecs:
        codec = resolve_codec(name)
        if codec is None or codec.payload_codec.phases:
            continue
        enc = codec.encode(x)
        te = time_loop(comm, lambda: codec.encode(x), target_s / 2, max_iters)
        td = time_loop(comm, lambda: codec.decode(enc), target_s / 2, max_iters)
        out["codecs"][codec.describe()] = {"encode_s_per_value": te / x.numel(), "decode_s_per_value": td / x.numel(),
                                           "bytes_per_value": enc.wire_bytes / x.numel()}
    return out if comm.rank == 0 else None


def rank_threads(comm: Comm) -> int:
    """Set this rank's torch threads to its share of the cores: the machine's usable cores (its
    affinity mask) over the ranks on it (LOCAL_WORLD_SIZE under torchrun, else every rank), at
    least 1, so P ranks on C cores do not run P x C threads. Returns the count. Virtual ranks
    (SimComm) share one process and its threads: left as they are."""
    from .sim import SimComm
    if isinstance(comm, SimComm):
        return torch.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", comm.size))
    n = max(1, cores // max(1, local))
    torch.set_num_threads(n)
    return n


def warm_codec(comm: Comm, codec: Any, n: int) -> str:
    """Compile the codec's CPU passes before anything is timed: encode, one hop and decode_into on
    the chunk sizes an allreduce of n values uses (`channel.chunk_count`). Returns
    `lab.codecs.cpu.kernel_status()` (a failed compile is said there, and warned once)."""
    from lab.codecs import cpu
    from lab.codecs.hop import fusable, hop_mixed

    from .channel import chunk_count
    if codec is None or comm.device.type != "cpu" or not fusable(codec):
        return "n/a"  # fp32, other devices, and codecs without these passes (or with memory to keep)
    seg = -(-n // max(1, comm.size))
    for m in sorted({max(1, seg // chunk_count(seg)), min(n, seg)}):
        x = torch.randn(m, generator=torch.Generator().manual_seed(0))
        enc = codec.encode(x)
        hop_mixed(codec, enc, x)
        codec.decode_into(enc, torch.empty_like(x))
    return cpu.kernel_status()


def codec_speedup_rank(comm: Comm, n: int, algorithm: str, codecs: list[str | None], target_s: float = 0.5,
                       max_iters: int = 20, progress: Progress | None = None, mode: str = "auto",
                       on_row: RowSink | None = None, options: dict | None = None,
                       compare: list[str] | tuple = (), trace: str | None = None,
                       baseline: bool = False) -> list[dict] | None:
    """One allreduce of n values with each codec on the wire (None = fp32), timed in the same run:
    seconds, bytes rank 0 sent, error against the exact sum and speedup over fp32 (rank 0 returns).
    mode: as `allreduce` ('requantize' puts 1-bit SGD on butterfly_sync in Seide et al.'s two-stage form).
    options: the algorithm's own (`allreduce(**options)`, e.g. ranks_per_node, intra_codec; the fp32
    row and the reference sum leave intra_codec out: fp32 on every level; a list of intra codecs runs
    every codec with each).
    compare: more algorithms run the same way (fp32 and each codec, no options) in the same run;
    every row's speedup_vs_fp32 is against `algorithm`'s fp32 row.
    trace: a directory: each row gains `split` (every rank's wire/wait/codec/python seconds of a traced
    call, lab.comm.timesplit) and each rank writes its Chrome trace there.
    baseline: every codec row is timed a second time with chunk pipelining off (`channel.overlap`:
    the same messages and numbers, no codec work under the wire), column overlap False.
    Each rank first takes its share of the cores (`rank_threads`, column threads) and compiles its
    codec passes untimed (`warm_codec`, column cpu_kernels)."""
    from .channel import overlap
    check_algorithm(algorithm)
    tracer = Tracer(comm, trace) if trace else None
    threads = rank_threads(comm)
    x = torch.randn(n, generator=torch.Generator().manual_seed(comm.rank)).to(comm.device)
    options = options or {}
    fp32 = {k: v for k, v in options.items() if k != "intra_codec"}  # the baseline is fp32 on every level
    exact = allreduce(comm, x, algorithm=algorithm, **fp32)
    intras = options.get("intra_codec")
    variants = [dict(fp32, intra_codec=ic) for ic in intras] if isinstance(intras, (list, tuple)) else [options]
    runs = [(algorithm, fp32, None)] if None in codecs else []
    runs += [(algorithm, v, name) for v in variants for name in codecs if name is not None]
    runs += [(a, {}, name) for a in compare for name in codecs]
    runs = [(a, o, name, True) for a, o, name in runs]
    if baseline:
        runs += [(a, o, name, False) for a, o, name, _ in runs if name is not None]
    rows = []
    for i, (a, opts, name, pipelined) in enumerate(runs):
        codec = resolve_codec(name)
        kernels = warm_codec(comm, codec, n)
        with overlap(pipelined):
            comm.reset_counters()
            y = allreduce(comm, x, algorithm=a, codec=codec, mode=mode, **opts)
            sent = comm.bytes_sent
            op = lambda: allreduce(comm, x, algorithm=a, codec=codec, mode=mode, check=False, **opts)  # noqa: E731
            t = time_loop(comm, op, target_s, max_iters)
            label = f"allreduce {a} {codec.describe() if codec else 'fp32'}{'' if pipelined else ' unpipelined'}"
            split = _split(tracer, comm, label, op) if tracer else None
        row = {"algorithm": a, "codec": codec.describe() if codec else "fp32",
               "mode": resolve_mode(codec, mode, a), "P": comm.size,
               "n_values": n, "seconds": t, "wire_bytes_rank0": sent,
               "rel_error": float((y - exact).norm() / exact.norm()) if n else 0.0,
               "overlap": pipelined, "threads": threads, "cpu_kernels": kernels}
        for k, v in opts.items():
            row[k] = v if isinstance(v, (int, str, type(None))) else str(v)
        if a == algorithm and "intra_codec" in options and "intra_codec" not in opts:
            row["intra_codec"] = "none"
        if split is not None:
            row["split"] = split
        rows.append(row)
        if on_row:
            on_row(rows[-1])
        if progress:
            progress((i + 1) / len(runs), f"{a} {rows[-1]['codec']}")
    if tracer:
        tracer.save()
    if comm.rank != 0:
        return None
    base = next((r["seconds"] for r in rows if r["algorithm"] == algorithm and r["codec"] == "fp32"), None)
    if base is None:
        return speedups(rows)
    for r in rows:
        r["speedup_vs_fp32"] = base / r["seconds"]
    return rows
