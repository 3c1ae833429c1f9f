"""The benchmarks behind `paralab bench ...`, as experiment functions: the allreduce sweep in nccl-tests'
form (Ben-Nun & Hoefler 2018's algorithms beside the backend's own all_reduce), Dettmers 2016 Figure 2's
transfer experiment, one compressed allreduce per codec, and the codec encode/decode speed. Each
checks its arguments, starts the ranks (local processes, a shaped link or torchrun's ranks) and
returns tidy tables; the UIs only print or plot them."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from lab import backend
from lab.backend import Progress, RowSink
from lab.codecs.registry import split_spec
from lab.comm import bench
from lab.comm.dist import in_torchrun

parse_size = bench.parse_size
size_sweep = bench.size_sweep
format_collectives = bench.format_table


def check_sweep_args(iters: int | None, warmup: int, codec: str | None) -> None:
    """nccl-tests' -n / -w and the codec spec of a sweep, checked before any rank starts."""
    if iters is not None and iters < 1:
        raise ValueError(f"-n/--iters {iters}; allowed: >= 1")
    if warmup < 0:
        raise ValueError(f"-w/--warmup_iters {warmup}; allowed: >= 0")
    if codec:
        from .catalog import check_codec_spec
        check_codec_spec(codec)


def shaped_net(procs: int, rate: str | None, delay_ms: float = 0.0, check: bool = False,
            ranks_per_node: int = 1) -> Any:
    """The network-namespace link for `procs` ranks at `rate` (None: no shaping, plain local ranks);
    ranks_per_node > 1: ranks of a node share a namespace (fast loopback), nodes a shaped link."""
    if rate is None:
        return nullcontext(None)
    from lab.comm.shaped import ShapedLink, available

    if check:
        ok, why = available(delay=delay_ms > 0)
        if not ok:
            raise ValueError(f"--link-rate needs network namespaces: {why}")
    return ShapedLink(procs, rate=rate, delay_ms=delay_ms, ranks_per_node=ranks_per_node)


@dataclass
class CollectivesBenchmark:
    """An allreduce sweep: nccl-tests' table rows (one block per algorithm), busbw ratios against the
    native all_reduce, the fitted link (None when too few rows) and what nccl-tests prints above it."""

    rows: pd.DataFrame
    ratios: pd.DataFrame
    fit: Any
    procs: int
    device: torch.device
    sizes: list[int]
    ranks: list[dict]
    pingpong: Any
    header: str

    def fit_summary(self) -> dict | None:
        """The fitted link as plain numbers (seconds, bytes/s, relative errors), for a result file."""
        f = self.fit
        return None if f is None else {"latency_s": f.link.latency_s, "bandwidth_Bps": f.link.bandwidth_Bps,
                                       "shared": f.link.shared, "median_rel_error": f.median_rel_error,
                                       "max_rel_error": f.max_rel_error,
                                       "left_out": 0 if f.left_out is None else len(f.left_out)}


def collectives_benchmark(minbytes: int, maxbytes: int, stepfactor: int, algorithms: list[str], *, procs: int = 4,
                          backend_name: str = "gloo", codec: str | None = None, iters: int | None = None,
                          warmup: int = 1, check: bool = True, target_s: float = 0.2, link_rate: str | None = None,
                          link_delay_ms: float = 0.0, timeout: float = 300.0,
                          progress: Progress | None = None, on_row: RowSink | None = None,
                          trace: str | None = None) -> CollectivesBenchmark | None:
    """Allreduce of minbytes..maxbytes (x stepfactor) with each algorithm ('native' = the backend's
    all_reduce) on `procs` local ranks, on a shaped link, or on torchrun's ranks (then None on every
    rank but 0). Times are medians per call after a barrier; busbw = algbw * 2(P-1)/P. on_row: each
    finished (algorithm, size) row as rank 0 finishes it (local ranks only). trace: a directory for one
    Chrome trace per rank; each row then gains `split`, every rank's wire/wait/codec/python seconds."""
    from lab.comm.allreduce import check_algorithm
    from lab.comm.dist import TorchComm, check_backend
    from lab.comm.launch import run

    check_backend(backend_name)
    for a in algorithms:
        check_algorithm(a)
    sizes = size_sweep(minbytes, maxbytes, stepfactor)
    check_sweep_args(iters, warmup, codec)
    args = (sizes, algorithms, codec)
    kw = dict(target_s=target_s, iters=iters, warmup=warmup, check=check, trace=trace_dir(trace))
    shared = link_rate is None and not in_torchrun()
    if in_torchrun():
        comm = TorchComm.from_env(backend_name, timeout)
        res = bench.collectives_rank(comm, *args, **kw)
        if comm.rank != 0:
            return None
        P, dev = comm.size, comm.device
    else:
        with shaped_net(procs, link_rate, link_delay_ms, check=True) as net:
            res = run(bench.collectives_rank, procs, *args, backend=backend_name, timeout=timeout, net=net,
                      progress=progress, on_row=on_row, **kw)[0]
        P = procs
        dev = torch.device("cuda") if backend_name == "nccl" else torch.device("cpu")
    df, fit = bench.table(res, shared=shared)
    head = bench.header(res["ranks"], minbytes, maxbytes, stepfactor, warmup, iters, check, target_s, backend_name)
    return CollectivesBenchmark(df, bench.ratios(df), fit, P, dev, sizes, res["ranks"], res["pingpong"], head)


def trace_dir(trace: Any) -> str | None:
    """The --trace directory as the ranks get it (absolute: a rank may start elsewhere), made here so a
    directory that cannot be written fails before any rank starts."""
    if trace is None:
        return None
    from pathlib import Path

    d = Path(trace).expanduser().resolve()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--trace {trace}: cannot make that directory ({e.strerror}); allowed: a writable directory")
    if not d.is_dir():
        raise ValueError(f"--trace {trace}: not a directory; allowed: a writable directory")
    return str(d)


def transfer_benchmark(minbytes: int, maxbytes: int, stepfactor: int, codecs: list[str], *,
                       link_rate: str | None = None, pcie: bool = False, target_s: float = 0.2,
                       progress: Progress | None = None,
                       on_row: RowSink | None = None) -> tuple[pd.DataFrame, dict, str, str]:
    """Dettmers 2016 Figure 2: compress + transfer + decompress vs 32-bit between two processes (or over
    a GPU's PCIe link) for messages of minbytes..maxbytes (4 bytes a value). Returns the rows (one per
    size and codec, fp32 the baseline), the crossover size per codec, the device's name and its slug."""
    from lab.comm.allreduce import resolve_codec
    from lab.comm.launch import run

    sizes = [b // 4 for b in size_sweep(minbytes, maxbytes, stepfactor)]
    names: list = [None, *codecs]
    for c in names:
        resolve_codec(c)
    if pcie:
        if not backend.gpu_available():
            raise ValueError("--pcie needs a CUDA GPU")
        rows = bench.pcie_transfer(sizes, names, progress=progress)
        dev_name, slug = backend.device_name("cuda"), backend.device_slug("cuda") + "-pcie"
    else:
        with shaped_net(2, link_rate) as net:
            rows = run(bench.transfer_rank, 2, sizes, names, net=net, progress=progress, on_row=on_row,
                       target_s=target_s)[0]
        dev_name = backend.device_name("cpu") + ", 2 processes, Gloo"
        slug = "cpu" + (f"-shaped-{link_rate}" if link_rate else "")
    from .transfer_spread import transfer_spread

    df = pd.DataFrame(transfer_spread(rows))
    return df, bench.crossover(df), dev_name, slug


def compressed_benchmark(n: int, algorithm: str, codecs: list[str], *, procs: int = 4, mode: str = "auto",
                         link_rate: str | None = None, target_s: float = 1.0, timeout: float = 600.0,
                         progress: Progress | None = None, on_row: RowSink | None = None,
                         ranks_per_node: int | None = None, intra_codec: str | list[str] | None = None,
                         compare: list[str] | None = None, pipeline: int | None = None,
                         trace: str | None = None, baseline: bool = False) -> pd.DataFrame:
    """One allreduce of `n` values with each codec on the wire against fp32, same run: time, bytes,
    error, speedup (requantize on butterfly_sync / parameter_server: 1-bit SGD two-stage, Seide et al.).

    ranks_per_node: ranks per node; with a link rate the machine becomes two-level (the ranks of a
    node share a network namespace and talk over its loopback; nodes talk over one shaped link
    each), and the algorithm gets it when it takes it (hierarchical, alltoall_quantized).
    intra_codec: hierarchical's codec inside a node ('none' = fp32; default: the codec itself); a list:
    every codec runs with each.
    compare: more algorithms timed in the same run, fp32 and every codec (default: the flat ring
    when the algorithm is not the ring); speedups are against `algorithm`'s fp32 time.
    pipeline: hierarchical's pieces whose levels overlap (the fp32 baseline runs pipelined too).
    trace: a directory for one Chrome trace per rank; each row then gains `split`, every rank's
    wire/wait/codec/python seconds of a traced call (lab.comm.timesplit).
    baseline: each codec also timed with chunk pipelining off (rows with overlap False), same run."""
    from lab.comm.algorithms import get_algorithm
    from lab.comm.allreduce import check_algorithm, configure, resolve_codec, resolve_mode
    from lab.comm.launch import run

    check_algorithm(algorithm)
    compare = list(compare) if compare is not None else ([] if algorithm == "ring" else ["ring"])
    for a in compare:
        check_algorithm(a)
    takes = get_algorithm(algorithm).options
    options: dict = {}
    if ranks_per_node is not None:
        if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1 \
                or procs % ranks_per_node:
            raise ValueError(f"--ranks-per-node {ranks_per_node!r} must divide --procs {procs}; allowed: "
                             + ", ".join(str(d) for d in range(1, procs + 1) if procs % d == 0))
        if "ranks_per_node" in takes:
            options["ranks_per_node"] = ranks_per_node
    if pipeline is not None:
        if "pipeline" not in takes:
            raise ValueError(f"--pipeline is hierarchical's (pieces whose levels overlap); algorithm {algorithm!r} "
                             "has one level")
        options["pipeline"] = pipeline
    if intra_codec is not None:
        if "intra_codec" not in takes:
            raise ValueError(f"--intra-codec is hierarchical's (the codec inside a node); algorithm {algorithm!r} "
                             "has one codec")
        options["intra_codec"] = intra_codec
    names: list = [None, *codecs]
    inside = list(intra_codec) if isinstance(intra_codec, (list, tuple)) else [intra_codec]
    variants = [dict(options, intra_codec=ic) for ic in inside] if intra_codec is not None else [options]
    for c in names:
        codec = resolve_codec(c)
        how = resolve_mode(codec, mode, algorithm)
        for v in variants:
            configure(algorithm, procs, codec, how, v)
        for a in compare:
            resolve_mode(codec, mode, a)
    with shaped_net(procs, link_rate, check=True, ranks_per_node=ranks_per_node or 1) as net:
        rows = run(bench.codec_speedup_rank, procs, n, algorithm, names, net=net, progress=progress,
                   on_row=on_row, target_s=target_s, mode=mode, timeout=timeout, options=options,
                   compare=compare, trace=trace_dir(trace), baseline=baseline)[0]
        df = pd.DataFrame(rows)
        if ranks_per_node is not None and procs // ranks_per_node > 1:
            if progress:
                progress(1.0, "the two levels apart (the model's calibration)")
            timed = [*names, *(c for c in inside if c not in (None, "none", "fp32"))]
            levels = run(bench.levels_rank, procs, n, ranks_per_node, timed, net=net, target_s=target_s / 2,
                         timeout=timeout)[0]
            df = two_level_model(df, levels, procs // ranks_per_node, ranks_per_node)
    return df


def two_level_model(df: pd.DataFrame, levels: dict, nodes: int, ranks_per_node: int) -> pd.DataFrame:
    """Each measured row's two-level model (`lab.comm.cluster.predict`) on the machine fitted to the levels
    measured apart in the same run (`cluster.calibrate`): columns model_s and model_error ((model −
    measured) / measured); df.attrs["calibration"] holds the fitted links and codec times."""
    from lab.comm import cluster as cl
    from lab.comm.allreduce import resolve_codec
    from lab.comm.channel import CHUNK

    how = ("intra link fitted to ring allreduces inside every node at once (n/16, n/4, n values); NIC fitted to "
           "ring allreduces across nodes among local rank 0s alone (1/k of those); codec encode/decode of an "
           "n/k shard on every rank at once; then each row's model (lab.comm.cluster.predict: ring messages in "
           "chunks of lab.comm.channel.CHUNK values, each chunk's codec work beside the next one's transfer)")
    machine_name = f"{nodes} nodes x {ranks_per_node} ranks, one NIC per node"
    try:
        machine = cl.calibrate(levels, nodes, ranks_per_node)
    except ValueError as e:  # timings too noisy to separate latency from bandwidth: keep the measured rows
        df = df.copy()
        df.attrs["calibration"] = {"machine": machine_name, "error": f"no model: {e}", "how": how,
                                   "levels": {"intra": levels["intra"], "inter": levels["inter"]}}
        return df
    model = []
    for r in df.to_dict("records"):
        codec = cl.measured_codec(r["codec"], r["mode"], levels["codecs"])
        intra = None  # predict: the codec itself inside (the algorithm's default)
        ic = r.get("intra_codec")
        if r["algorithm"] == "hierarchical":
            if isinstance(ic, str) and ic not in ("none", "fp32"):
                intra = cl.measured_codec(resolve_codec(ic).describe(), "requantize", levels["codecs"])
            elif ic in ("none", "fp32") or codec.raw:
                intra = cl.FP32
        piped = r.get("pipeline")
        model.append(cl.predict(machine, r["algorithm"], r["n_values"], codec, intra, chunk_values=CHUNK,
                                pipeline=int(piped) if isinstance(piped, (int, float)) and piped == piped else 1).seconds)
    df = df.copy()
    df["model_s"] = model
    df["model_error"] = (df["model_s"] - df["seconds"]) / df["seconds"]
    link = {"intra": machine.intra, "nic": machine.inter}
    df.attrs["calibration"] = {
        "machine": machine_name,
        **{f"{k}_latency_us": v.latency_s * 1e6 for k, v in link.items()},
        **{f"{k}_GBps": v.bandwidth_Bps / 1e9 for k, v in link.items()},
        "codecs": levels["codecs"], "levels": {"intra": levels["intra"], "inter": levels["inter"]},
        "max_abs_model_error": float(df["model_error"].abs().max()), "how": how}
    return df


CODEC_BENCH_MAXBYTES = {"cpu": 256 << 20, "cuda": 1 << 30}  # default -e: 2^26 values on a CPU, 2^28 on a GPU


def collective_rows(rows: list[dict], shared: bool = True) -> pd.DataFrame:
    """Finished allreduce rows of a sweep in nccl-tests' columns (algbw, busbw; no model): what a
    stopped `bench collectives` keeps."""
    return bench.table({"rows": rows, "pingpong": []}, link=None, shared=shared)[0] if rows else pd.DataFrame()


def transfer_rows(rows: list[dict]) -> list[dict]:
    """Finished rows of a transfer or compressed-allreduce run with their speedup over fp32 at the same
    size (None where fp32 had not finished): what a stopped run keeps."""
    return bench.speedups([dict(r) for r in rows])


def codec_bench_sizes(device: str | None, minbytes: int, maxbytes: int | None, stepfactor: int = 4,
                      repeats: int = 5) -> tuple[torch.device, list[int], int]:
    """The device (default: the lab's), the value counts of the codec benchmark (fp32 inputs of
    minbytes, minbytes*stepfactor, ... up to maxbytes bytes, nccl-tests' -b/-e/-f; 4 bytes a value)
    and maxbytes (default 256M on a CPU, 1G on a GPU); a bad choice is a ValueError."""
    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not backend.gpu_available():
        raise ValueError("--device cuda needs a GPU and CuPy (pip install -e '.[cuda12]')")
    top = maxbytes if maxbytes is not None else CODEC_BENCH_MAXBYTES.get(dev.type, CODEC_BENCH_MAXBYTES["cpu"])
    if top > 8 << 30:
        raise ValueError(f"-e/--maxbytes {top}; allowed: at most 8G (2^31 fp32 values)")
    if repeats < 1:
        raise ValueError(f"--repeats {repeats}; need >= 1")
    return dev, [b // 4 for b in size_sweep(minbytes, top, stepfactor)], top


def codec_benchmark(n: int, device: torch.device, *, repeats: int = 5, progress: Progress | None = None,
                    codecs: list[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """Encode/decode speed at `n` values on `device` of the codecs `codecs` names (specs; None: every
    registered codec, plugins included) and the baselines, medians of `repeats` timed calls after warm-up,
    with the run's info (device name, versions); ValueError naming a spec that is not a registered codec."""
    from lab.codecs import bench as codec_bench

    for spec in codecs or ():
        split_spec(spec)
    return codec_bench.run([n], device, repeats=repeats, progress=progress, codecs=codecs)


__all__ = ["parse_size", "size_sweep", "format_collectives", "in_torchrun", "CollectivesBenchmark",
           "collectives_benchmark", "collective_rows", "transfer_rows", "transfer_benchmark", "compressed_benchmark", "codec_bench_sizes",
           "codec_benchmark", "CODEC_BENCH_MAXBYTES"]
