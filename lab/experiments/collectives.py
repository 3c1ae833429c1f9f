"""Collective experiments for the dashboard and CLI (issue: collectives): measured sweeps over
real processes, the error of compressed allreduce at scale on SimComm, and the transfer
experiment of Dettmers 2016 Figure 2. Each returns a tidy DataFrame."""
from __future__ import annotations



import time
from dataclasses import dataclass

import pandas as pd
import torch

from lab.codecs.base import check_seed
from lab.comm import bench, cost
from lab.comm.allreduce import allreduce, check_algorithm, resolve_codec, resolve_mode
from lab.comm.launch import run
from lab.comm.base import CommError
from lab.comm.sim import MAX_RANKS, simulate
from lab.backend import Progress, RowSink

from .transfer_spread import transfer_spread, within_noise



def algorithm_catalog(*, native: bool = False) -> pd.DataFrame:
    """The allreduce algorithms a UI offers, one row each in display order (the registry of
    `lab.comm.algorithms`, plugins included): name, summary, citation, modes (comma-separated:
    requantize, gather, two-stage), gather and two_stage flags, cost_model (True: `lab.comm.cost`
    models it). native=True puts the backend's own all_reduce first (measured only, no codec)."""
    from lab.comm.algorithms import NATIVE, algorithm_infos

    rows = [{"name": a.name, "summary": a.summary, "citation": a.citation, "modes": ",".join(a.modes),
             "gather": a.gather is not None, "two_stage": a.two_stage, "cost_model": True}
            for a in algorithm_infos()]
    if native:
        rows.insert(0, {"name": NATIVE, "summary": "the backend's own all_reduce (Gloo or NCCL), fp32 only",
                        "citation": "torch.distributed.all_reduce", "modes": "", "gather": False,
                        "two_stage": False, "cost_model": False})
    return pd.DataFrame(rows, columns=["name", "summary", "citation", "modes", "gather", "two_stage", "cost_model"])


def collective_sweep(procs: int, algorithms: list[str], sizes: list[int], *, codec: str | None = None,
                     predict_P: list[int] | None = None, target_s: float = 0.1,
                     progress: Progress | None = None,
                     on_row: RowSink | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measure every algorithm at every size (bytes) on `procs` >= 2 local processes; returns
    (measured rows with algbw/busbw and the calibrated model's time, the model's prediction at
    larger P for the same sizes on the fitted link). The link is fitted to these measurements by
    least squares (`lab.comm.cost.fit_link`); the first table's `.attrs['fit']` holds its
    latency_us, bandwidth_GBps and median/max relative error (empty when no fit was possible). on_row:
    each raw (algorithm, size) row as rank 0 finishes it (seconds per call), so a stopped run keeps them."""
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < 2:
        raise ValueError(f"P={procs!r}: an allreduce on one process moves no data; measure with P >= 2 processes")
    result = run(bench.collectives_rank, procs, sizes, algorithms, codec, target_s=target_s, progress=progress,
                 on_row=on_row)[0]
    df, fit = bench.table(result, shared=True)
    df.attrs["fit"] = {} if fit is None else {
        "latency_us": fit.link.L * 1e6, "bandwidth_GBps": fit.link.bandwidth_Bps / 1e9,
        "median_rel_error": fit.median_rel_error, "max_rel_error": fit.max_rel_error, "rows": len(fit.rows),
        "left_out": 0 if fit.left_out is None else len(fit.left_out)}
    pred = []
    if fit is not None:
        for P in predict_P or [8, 64, 1024]:
            for a in algorithms:
                alg = "ring" if a == "native" else a
                for b in sizes:
                    pred.append({"algorithm": a, "P": P, "nbytes": b,
                                 "model_us": cost.allreduce_time(alg, P, b, fit.link) * 1e6})
    return df, pd.DataFrame(pred)


#: the pseudo-algorithm of `error_at_scale`: gather mode (every rank's vector encoded once, the P
#: payloads all-gathered and summed after decoding; the same numbers on every algorithm, run on the ring)
GATHER = "gather"


def error_at_scale(codecs: list[str], algorithms: list[str], ranks: list[int], *, n: int = 4096,
                   mode: str | list[str] = "auto", seed: int = 0, progress: Progress | None = None,
                   on_row: RowSink | None = None,
                   ranks_per_node: int | None = None) -> pd.DataFrame:
    """Relative error of a compressed allreduce against the exact sum, on SimComm, as P grows.

    Rank r holds a seeded normal vector of n values. Columns: codec (described), spec (as given), algorithm, P, mode,
    rel_error (L2), max_abs_error, ranks_agree (every rank got identical numbers), wire_bytes
    (all ranks together). `mode` is one of auto/requantize/gather, or a list of them to compare
    (requantize: decode-add-re-encode at every hop; gather: each rank's message decoded once); with
    a list, a (codec, algorithm, mode) the codec cannot run is left out and named in
    `.attrs['skipped']`. Runs P in ascending order (every curve at one P before the next P), each
    finished row streamed through `on_row`, so a stopped run has every curve up to the same P; the
    table comes back ordered by codec, algorithm, mode, P. `algorithms` may include "gather" (GATHER):
    gather mode on the ring, the codec applied once per rank. `ranks_per_node` goes to the algorithms
    that take it (hierarchical, alltoall_quantized's two-level form; it must divide every P); None:
    hierarchical's balanced default, alltoall_quantized flat."""
    from lab.comm.algorithms import get_algorithm
    from lab.comm.allreduce import configure

    check_seed(seed)
    for a in algorithms:
        if a != GATHER:
            check_algorithm(a)
    for P in ranks:
        if isinstance(P, bool) or not isinstance(P, int) or not 1 <= P <= MAX_RANKS:
            raise ValueError(f"P={P!r}; SimComm runs 1..{MAX_RANKS} ranks")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}; allowed: an integer >= 1 values per rank")
    many = not isinstance(mode, str)
    wanted = list(mode) if many else [mode]
    if not wanted:
        raise ValueError("mode: give at least one of auto, requantize, gather")
    resolved = {name: resolve_codec(name) for name in codecs}

    def plan(a: str, m: str) -> tuple[str, str, dict]:
        """(algorithm run, mode asked, its options)."""
        if a == GATHER:
            return "ring", "gather", {}
        takes = "ranks_per_node" in get_algorithm(a).options
        return a, m, ({"ranks_per_node": ranks_per_node} if takes and ranks_per_node is not None else {})

    combos, skipped = [], []
    for i, name in enumerate(codecs):
        for j, a in enumerate(algorithms):
            for k, m in enumerate(wanted):
                run_a, run_m, opts = plan(a, m)
                try:
                    how = resolve_mode(resolved[name], run_m, run_a)
                    for P in ranks:  # bad options fail before any run
                        configure(run_a, P, resolved[name], how, opts)
                    combos.append(((i, j, k), name, a, m, how))
                except ValueError as e:
                    if not many:
                        raise
                    skipped.append(f"{name} ({m}): {e}")
    if not combos:
        raise ValueError("no codec can run in the chosen mode(s): " + "; ".join(skipped))
    rows, steps, done = [], len(combos) * len(ranks), 0
    for P in sorted(ranks):
        exact = sum(_vector(r, n, seed).double() for r in range(P))
        for order, name, a, m, how in combos:
            codec = resolved[name]
            tick = _Ticker(progress, done / steps, f"{name} {a} {how} P={P}") if progress else None
            try:  # progress also reports (and can be stopped) during one long simulation, not only after it
                run_a, run_m, opts = plan(a, m)
                out = simulate(_error_rank, P, n, run_a, name, run_m, seed, tick, **opts)
            except CommError as e:
                if tick is not None and tick.raised is not None:
                    raise tick.raised from None
                raise
            y = out[0][0].double()
            row = {"codec": codec.describe() if codec else "fp32", "spec": name, "algorithm": a, "P": P, "mode": how,
                   "rel_error": float((y - exact).norm() / exact.norm()),
                   "max_abs_error": float((y - exact).abs().max()),
                   "ranks_agree": all(torch.equal(o[0], out[0][0]) for o in out),
                   "wire_bytes": sum(o[1] for o in out)}
            rows.append(dict(row, _order=order))
            done += 1
            if on_row:
                on_row(row)
            if progress:
                progress(done / steps, f"{name} {a} {how} P={P}")
    df = pd.DataFrame(rows)
    df = df.assign(_P=df.P).sort_values(["_order", "_P"], kind="stable").drop(columns=["_order", "_P"])
    df = df.reset_index(drop=True)
    df.attrs["skipped"] = skipped
    return df


def _vector(rank: int, n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + rank))


class _Ticker:
    """Calls progress(frac, msg) from rank 0's sends at most every `every_s` seconds; an exception the
    callback raises (a UI's Stop) is kept, so the run can re-raise it after SimComm wraps it."""

    def __init__(self, progress: Progress, frac: float, msg: str, every_s: float = 0.25) -> None:
        self.progress, self.frac, self.msg, self.every_s = progress, frac, msg, every_s
        self.last, self.raised = time.monotonic(), None

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            try:
                self.progress(self.frac, self.msg)
            except BaseException as e:  # noqa: BLE001 - re-raised by error_at_scale as it was
                self.raised = e
                raise


def _error_rank(comm, n: int, algorithm: str, codec: str | None, mode: str, seed: int, tick=None, **options):
    if tick is not None and comm.rank == 0:
        send0 = comm.isend_unchecked

        def isend(t, dst):
            tick()
            return send0(t, dst)
        comm.isend_unchecked = isend
    y = allreduce(comm, _vector(comm.rank, n, seed), algorithm=algorithm, codec=codec, mode=mode, **options)
    return y, comm.bytes_sent


def transfer_sweep(sizes: list[int], codecs: list[str], *, target_s: float = 0.1,
                   progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Dettmers 2016 Figure 2 between two local processes: one-way seconds and speedup over
    fp32 per size (values) and codec, with their spreads (`transfer_spread`), and each codec's crossover size
    beyond the noise (`bench.crossover`)."""
    rows = run(bench.transfer_rank, 2, sizes, [None, *codecs], target_s=target_s, progress=progress)[0]
    df = pd.DataFrame(transfer_spread(rows))
    return df, bench.crossover(df)


# --- dashboard: modelled transfer and collectives, and a step-by-step trace of one allreduce ---

# Dettmers 2016 §3.2: the paper's GPU kernels took ~1 ns per number to compress, ~0.5 ns to decompress.
PAPER_CODEC_NS = (1.0, 0.5)


def _wire_bytes(codec, n: int) -> float:
    """Wire bytes of n values: codes scale linearly, side information (scales) is fixed; fitted
    from two small encodes so huge n need no encode."""
    if codec is None:
        return 4.0 * n
    a, b = 4096, 8192
    wa = codec.encode(torch.randn(a, generator=torch.Generator().manual_seed(0))).wire_bytes
    wb = codec.encode(torch.randn(b, generator=torch.Generator().manual_seed(0))).wire_bytes
    per = (wb - wa) / (b - a)
    return max(0.0, wa - per * a) + per * n


def transfer_model(sizes: list[int], codecs: list[str], link: str | cost.Link = "pcie3", *,
                   codec_ns: dict[str, tuple[float, float]] | tuple[float, float] | str = PAPER_CODEC_NS,
                   kernel: str | None = None) -> pd.DataFrame:
    """Dettmers 2016 Figure 2 from the cost model: one-way time of encode + transfer + decode of
    n values over `link`, and the speedup over 32-bit, per size and codec. `codec_ns` is
    (encode, decode) ns per value for every codec, a dict per codec name, or "measured" (timed
    here on 2^18 values with `errors.codec_speed`); default: the paper's GPU kernels, 1 and
    0.5 ns. `kernel`: a GPU preset of `lab.plan` (gtx_titan, k40m, v100, a100, h100, dettmers2016)
    whose codec kernels are modelled instead, as the planner does (`lab.plan.wire`): memory-bound
    (bytes read + written / the GPU's memory bandwidth) plus the GPU's launch time per kernel
    (dynamic_tree: 2 encode + 1 decode kernels), which `codec_ns` then does not set. `link`: a preset
    of `lab.comm.cost` or of `lab.plan` (dettmers2016), or a Link. Columns as `transfer_sweep`'s, plus
    link and source='model'; `.attrs['crossover']` is each codec's crossover size on the grid, `.attrs['breakeven']`
    the size where its time equals 32-bit's (the model is affine in n; None: never faster), `.attrs['codec_ns']`
    the per-value speeds used, `.attrs['launch_us']` each codec's fixed kernel time per message and
    `.attrs['per_value_ns']` each line's cost per value, {codec: {"wire": ns on the link, "codec": encode +
    decode ns}} (fp32 included): compression wins on large messages when its wire + codec ns are below fp32's
    wire ns. Measured speeds (`errors.codec_speed`: medians of round-robin timings) add
    `.attrs['codec_ns_range']`, {codec: ((encode low, high), (decode low, high))}: each median's 95 % interval, ns
    per value, over `.attrs['repeats']` timings, and `.attrs['load']`, (the higher 1-minute load average before
    and after timing, CPU count)."""
    from lab.plan.links import resolve_link

    lk = resolve_link(link) if isinstance(link, str) else cost.get_link(link)
    for n in sizes:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"size {n!r}: sizes are integer value counts >= 1")
    device = None
    if kernel is not None:
        from lab.plan.devices import get_device
        from lab.plan.wire import wire_codec

        device = get_device(kernel)
        works = {name: wire_codec(name) for name in codecs}
        codec_ns = {name: (w.enc_traffic / device.memory_GBps, w.dec_traffic / device.memory_GBps)
                    for name, w in works.items()}
        launch = {name: (w.enc_kernels + w.dec_kernels) * device.launch_us for name, w in works.items()}
    else:
        launch = {name: 0.0 for name in codecs}
    if isinstance(codec_ns, str):
        if codec_ns != "measured":
            raise ValueError(f"codec_ns={codec_ns!r}; allowed: (encode_ns, decode_ns), a dict, or 'measured'")
        from .errors import codec_speed
        sp = codec_speed([c for c in codecs], 1 << 18)

        def of(col: str, name: str, op: str) -> float:
            return float(sp[(sp.codec == resolve_codec(name).describe()) & (sp.op == op)][col].iloc[0])
        codec_ns = {name: (of("ns_per_value", name, "encode"), of("ns_per_value", name, "decode")) for name in codecs}
        measured = {"codec_ns_range": {name: ((of("ns_lo", name, "encode"), of("ns_hi", name, "encode")),
                                              (of("ns_lo", name, "decode"), of("ns_hi", name, "decode")))
                                       for name in codecs},
                    "repeats": int(sp.repeats.min()),
                    "load": (max(sp.attrs["load_before"], sp.attrs["load_after"]), int(sp.attrs["cores"]))}
    else:
        measured = {}
    rows, lines, per_value = [], {}, {}
    for name in [None, *codecs]:
        codec = resolve_codec(name)
        ns = (0.0, 0.0) if codec is None else (codec_ns.get(name, PAPER_CODEC_NS) if isinstance(codec_ns, dict)
                                               else codec_ns)
        fixed = 0.0 if codec is None else launch.get(name, 0.0) * 1e-6

        def seconds(n: int, codec=codec, ns=ns, fixed=fixed) -> tuple[float, float]:
            wire = _wire_bytes(codec, n)
            return wire, cost.compressed_transfer_time(n, lk, wire_bytes_per_value=wire / n,
                                                       encode_s_per_value=ns[0] * 1e-9,
                                                       decode_s_per_value=ns[1] * 1e-9) + fixed
        for n in sizes:
            wire, t = seconds(n)
            rows.append({"n_values": n, "codec": codec.describe() if codec else "fp32", "wire_bytes": wire,
                         "seconds": t, "link": lk.name, "source": "model"})
        a, b = seconds(1 << 20)[1], seconds(1 << 21)[1]  # time is affine in n: intercept and slope
        label = codec.describe() if codec else "fp32"
        lines[label] = (2 * a - b, (b - a) / (1 << 20))
        per_value[label] = {"wire": (_wire_bytes(codec, 1 << 21) - _wire_bytes(codec, 1 << 20)) / (1 << 20)
                            / lk.bandwidth_Bps * 1e9, "codec": float(ns[0] + ns[1])}
    df = pd.DataFrame(rows)
    base = df[df.codec == "fp32"].set_index("n_values")["seconds"]
    df["speedup_vs_fp32"] = [base[n] / s for n, s in zip(df.n_values, df.seconds)]
    df.attrs["crossover"] = bench.crossover(df)
    df.attrs["codec_ns"] = codec_ns if isinstance(codec_ns, dict) else {c: tuple(codec_ns) for c in codecs}
    df.attrs["launch_us"] = launch
    df.attrs["per_value_ns"] = per_value
    df.attrs.update(measured)
    c0, s0 = lines["fp32"]
    df.attrs["breakeven"] = {c: (int(round((c1 - c0) / (s0 - s1))) if s1 < s0 and c1 > c0 else 1 if s1 < s0 else None)
                             for c, (c1, s1) in lines.items() if c != "fp32"}
    df.attrs["kernel"] = kernel
    return df


def collective_model(algorithms: list[str], P: int, sizes: list[int], link: str | cost.Link = "ib_fdr") -> pd.DataFrame:
    """Modelled allreduce time per algorithm and message size (bytes per rank) on P ranks over
    `link` (paper 001's formulas), with the lower bound, and nccl-tests' algbw and busbw
    (busbw = algbw · the algorithm's factor, 2(P−1)/P for every built-in) for the model and for the bound."""
    lk = cost.get_link(link)
    P = cost.check_P(P)
    for a in algorithms:
        cost.check_algorithm(a)
    rows = []
    f = cost.busbw_factor(P)  # the bound's: nccl-tests' allreduce factor
    for b in sizes:
        bound = cost.lower_bound(P, b, lk)
        for a in algorithms:
            t = cost.allreduce_time(a, P, b, lk)
            rows.append({"algorithm": a, "P": P, "nbytes": b, "model_s": t, "lower_bound_s": bound,
                         "busbw_GBps": b / t * cost.busbw_factor(P, a) / 1e9 if t > 0 else float("nan"),
                         "bound_busbw_GBps": b / bound * f / 1e9 if bound > 0 else float("nan"),
                         "link": lk.name})
    return pd.DataFrame(rows)


def allreduce_trace(algorithm: str = "ring", P: int = 4, n: int = 16, *, codec: str | None = None,
                    seed: int = 0) -> pd.DataFrame:
    """Every message of one allreduce of n values on P SimComm ranks, in order: step (a Lamport
    round: a message sent after receiving one from step s is in step s+1 or later), src, dst,
    bytes. `.attrs['rel_error']` is the result's relative L2 error against the exact sum. The same
    tracer as the step-through (`step_through.lamport_trace`), which adds buffers and errors per hop."""
    from .step_through import lamport_trace

    check_algorithm(algorithm)
    if isinstance(P, bool) or not isinstance(P, int) or not 2 <= P <= 64:
        raise ValueError(f"P={P!r}: the step-by-step view shows 2..64 ranks")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: need an integer >= 1")
    xs = [_vector(r, n, seed) for r in range(P)]
    df, out = lamport_trace(algorithm, xs, codec=codec)
    exact = sum(x.double() for x in xs)
    df.attrs["rel_error"] = float((out[0].double() - exact).norm() / exact.norm())
    df.attrs["steps"] = int(df.step.max()) + 1 if len(df) else 0
    return df


# -- every nccl-tests collective (lab.comm.collectives)

def op_catalog(op: str | None = None) -> pd.DataFrame:
    """The collectives a UI offers: one row per (op, algorithm) of `lab.comm.collectives` (plugins
    included), op 'all_reduce' from `lab.comm.algorithms`: op, name, summary, citation, busbw factor text."""
    from lab.comm import collectives as C

    rows = []
    for o, info in C.OPS.items():
        if op is not None and o != op:
            continue
        if o == "all_reduce":
            for _, a in algorithm_catalog().iterrows():
                rows.append({"op": o, "name": a["name"], "summary": a["summary"], "citation": a["citation"],
                             "busbw": info.busbw_text, "size": info.size})
            continue
        for c in C.collective_infos(o):
            rows.append({"op": o, "name": c.name, "summary": c.summary, "citation": c.citation,
                         "busbw": info.busbw_text, "size": info.size})
    if op is not None and not rows:
        C.check_op(op)
    return pd.DataFrame(rows, columns=["op", "name", "summary", "citation", "busbw", "size"])


def op_names() -> list[str]:
    """nccl-tests' collectives, in its order."""
    from lab.comm.collectives import OPS

    return list(OPS)


def op_model(op: str, algorithms: list[str], P: int, sizes: list[int],
             link: str | cost.Link = "ib_fdr") -> pd.DataFrame:
    """Modelled time of `op` per algorithm and size (nccl-tests' size of the op, bytes) on P ranks over
    `link`, with algbw and busbw (the op's factor), each algorithm's bytes sent per rank, and a lower
    bound: ceil(log2 P) latency rounds (sendrecv: one) plus the op's factor × size over the link
    (allreduce: `cost.lower_bound`)."""
    from lab.comm import collectives as C

    lk = cost.get_link(link)
    P = cost.check_P(P)
    C.check_op(op)
    F = cost.op_busbw_factor(op, P)
    rounds = 0 if P == 1 else 1 if op == "sendrecv" else (P - 1).bit_length()
    rows = []
    for a in algorithms:
        per_rank = (cost.total_bytes(a, P, 1.0) / P if op == "all_reduce"
                    else C.get_collective(op, a).total_bytes(P, 1.0) / P) if P > 1 else 0.0
        for b in sizes:
            t = cost.collective_time(op, a, P, b, lk)
            bound = 0.0 if P == 1 else (cost.lower_bound(P, b, lk) if op == "all_reduce"
                                        else rounds * lk.L + F * b * lk.G)
            rows.append({"op": op, "algorithm": a, "P": P, "nbytes": b, "model_s": t, "lower_bound_s": bound,
                         "bound_busbw_GBps": b / bound * F / 1e9 if bound > 0 else float("nan"),
                         "bytes_per_rank": per_rank * b,
                         "algbw_GBps": b / t / 1e9 if t > 0 else float("nan"),
                         "busbw_GBps": b / t * cost.op_busbw_factor(op, P) / 1e9 if t > 0 else float("nan"),
                         "link": lk.name})
    return pd.DataFrame(rows)


@dataclass
class OpBenchmark:
    """`bench collectives --op OP`: nccl-tests' rows (a block per algorithm, native first), busbw
    ratios against the native op at sizes >= 16 MB, and nccl-tests' header."""

    op: str
    rows: pd.DataFrame
    ratios: pd.DataFrame
    procs: int
    device: torch.device
    sizes: list[int]
    ranks: list[dict]
    header: str


def op_benchmark(op: str, minbytes: int, maxbytes: int, stepfactor: int, algorithms: list[str] | None = None, *,
                 procs: int = 4, backend_name: str = "gloo", codec: str | None = None, iters: int | None = None,
                 warmup: int = 1, check: bool = True, target_s: float = 0.2, link_rate: str | None = None,
                 link_delay_ms: float = 0.0, timeout: float = 300.0, progress: Progress | None = None,
                 on_row: RowSink | None = None) -> OpBenchmark | None:
    """`op` (not all_reduce: that is `collectives_benchmark`) at minbytes..maxbytes (x stepfactor) by
    each algorithm (default: 'native', the backend's own op, then every registered one) on `procs`
    local ranks, a shaped link, or torchrun's ranks (then None on every rank but 0)."""
    from lab.comm import collectives as C
    from lab.comm import op_bench
    from lab.comm.dist import TorchComm, check_backend, in_torchrun

    from .benchmarks import check_sweep_args, shaped_net

    C.check_op(op)
    if op == "all_reduce":
        raise ValueError("op all_reduce is collectives_benchmark's (bench collectives without --op)")
    check_backend(backend_name)
    algs = list(algorithms) if algorithms else [op_bench.NATIVE, *C.collective_names(op)]
    op_bench.check_algorithms(op, algs)
    sizes = bench.size_sweep(minbytes, maxbytes, stepfactor)
    check_sweep_args(iters, warmup, codec)
    kw = dict(codec=codec, target_s=target_s, iters=iters, warmup=warmup, check=check)
    if in_torchrun():
        comm = TorchComm.from_env(backend_name, timeout)
        res = op_bench.op_rank(comm, op, sizes, algs, **kw)
        if comm.rank != 0:
            return None
        P, dev = comm.size, comm.device
    else:
        with shaped_net(procs, link_rate, link_delay_ms, check=True) as net:
            res = run(op_bench.op_rank, procs, op, sizes, algs, backend=backend_name, timeout=timeout, net=net,
                      progress=progress, on_row=on_row, **kw)[0]
        P = procs
        dev = torch.device("cuda") if backend_name == "nccl" else torch.device("cpu")
    df = op_bench.op_table(res["rows"])
    head = bench.header(res["ranks"], minbytes, maxbytes, stepfactor, warmup, iters, check, target_s, backend_name)
    return OpBenchmark(op, df, op_bench.op_ratios(df), P, dev, sizes, res["ranks"], head)


def format_op_table(df: pd.DataFrame) -> str:
    """nccl-tests' text table of an `op_benchmark` (a block per algorithm)."""
    from lab.comm.op_bench import format_op_table as fmt

    return fmt(df)


def op_rows(rows: list[dict]) -> pd.DataFrame:
    """Finished rows of an op sweep with nccl-tests' derived columns: what a stopped run keeps."""
    from lab.comm.op_bench import op_table

    return op_table(rows)
