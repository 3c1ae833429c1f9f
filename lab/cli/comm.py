"""`paralab scale | bench collectives | bench transfer | bench compressed`: the collectives' error at scale and benchmarks.
The size-range benchmarks take nccl-tests' flags (-b -e -f -n -w -c)."""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from .base import (app, bench_app, bench_out, check_results_dir, partial_out, console, deprecated, emit, fail, json_option, numbers,
                   out_option, print_frame, result, runs_under_torchrun, session)
from .names import RegistryHelp


@app.command()
def scale(codec: List[str] = typer.Option(["dynamic_tree", "linear", "fp16"], help="codecs (repeat the option)"),
          algorithm: List[str] = typer.Option(["ring", "tree", "rabenseifner"], help="algorithms"),
          ranks: str = typer.Option("2,4,16,64", help="comma-separated virtual rank counts (up to 1024)"),
          values: int = typer.Option(4096, min=1, max=1 << 24, help="values per rank"),
          mode: str = typer.Option("auto", help="auto | requantize | gather"),
          seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
          ranks_per_node: Optional[int] = typer.Option(
              None, "--ranks-per-node", min=1, max=1024, help="ranks per node for hierarchical and alltoall_quantized (must "
              "divide every P; default: hierarchical's balanced split, alltoall_quantized flat)"),
          as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Error of compressed allreduce against the exact sum as P grows, on SimComm. --algorithm gather:
    gather mode (each rank's vector encoded once)."""
    from lab.experiments import error_at_scale

    Ps = numbers(ranks, "--ranks", int)
    config = {"codec": list(codec), "algorithm": list(algorithm), "ranks": Ps, "values": values, "mode": mode,
              "seed": seed}
    if ranks_per_node is not None:
        config["ranks_per_node"] = ranks_per_node
    try:
        with session("scale", config, out, as_json) as s:
            for i, P in enumerate(Ps):  # one P at a time: Ctrl-C keeps the finished ones
                part = error_at_scale(codec, algorithm, [P], n=values, mode=mode, seed=seed,
                                      progress=s.part(i, len(Ps)), ranks_per_node=ranks_per_node)
                s.add(part.to_dict(orient="records"), f"P={P}")
    except ValueError as e:
        fail(str(e))
    df = pd.DataFrame(s.rows)
    if not emit(result("scale", config, rows=df), out, as_json):
        print_frame(df, f"Compressed allreduce error at scale (SimComm, {values} values per rank, seed {seed})")


def _size_range(minbytes: str, maxbytes: str, old_min: Optional[str], old_max: Optional[str],
                old_factor: Optional[int], factor: int, values: bool = False) -> tuple[int, int, int]:
    """nccl-tests' -b/-e/-f with the old --min/--max/--factor as deprecated aliases (values=True: the old
    ones counted fp32 values, the new ones count bytes)."""
    from lab.experiments import parse_size

    scale = 4 if values else 1
    lo, hi = parse_size(minbytes), parse_size(maxbytes)
    if old_min is not None:
        deprecated("--min", "-b/--minbytes" + (" (bytes, 4 per value)" if values else ""))
        lo = scale * parse_size(old_min)
    if old_max is not None:
        deprecated("--max", "-e/--maxbytes" + (" (bytes, 4 per value)" if values else ""))
        hi = scale * parse_size(old_max)
    if old_factor is not None:
        deprecated("--factor", "-f/--stepfactor")
        factor = old_factor
    return lo, hi, factor


def _minbytes(default: str) -> typer.models.OptionInfo:
    return typer.Option(default, "-b", "--minbytes", help="smallest message, bytes (K/M/G suffixes), nccl-tests' -b")


def _maxbytes(default: str) -> typer.models.OptionInfo:
    return typer.Option(default, "-e", "--maxbytes", help="largest message, bytes (K/M/G suffixes), nccl-tests' -e")


def _stepfactor(default: int) -> typer.models.OptionInfo:
    return typer.Option(default, "-f", "--stepfactor", min=2, max=1 << 20, help="size step factor, nccl-tests' -f")


def _trace_option() -> typer.models.OptionInfo:
    return typer.Option(None, "--trace", help="write one Chrome/Perfetto trace per rank to this directory "
                        "(DIR/rank<r>.trace.json: encode, decode, hop, add, send, recv-wait, python ranges; open in "
                        "ui.perfetto.dev) and add each rank's split (wire, waiting, codec, Python) to the rows "
                        "(docs/trace.md)")


def _print_split(rows, title: str) -> None:
    """The rows' per-rank split (--trace) as a table, when they carry one."""
    from lab.experiments import split_table

    split = split_table(rows)
    if not len(split):
        return
    keys = [k for k in ("algorithm", "codec", "nbytes") if k in split]
    cols = keys + ["rank", "seconds", "wire_s", "wait_s", "codec_s", "python_s", "of_call"]
    print_frame(split[cols], title)


OLD_MIN = typer.Option(None, "--min", hidden=True, help="deprecated: -b/--minbytes")
OLD_MAX = typer.Option(None, "--max", hidden=True, help="deprecated: -e/--maxbytes")
OLD_FACTOR = typer.Option(None, "--factor", hidden=True, min=2, max=1 << 20, help="deprecated: -f/--stepfactor")


@bench_app.command("collectives")
@runs_under_torchrun("bench collectives")
def bench_collectives(
    procs: int = typer.Option(4, "--procs", "-p", min=1, max=1024, help="ranks (processes) to start on this machine (not under "
                                                       "torchrun: there torchrun's ranks run it)"),
    backend_name: str = typer.Option("gloo", "--backend", help="gloo (CPU) or nccl (one GPU per rank)"),
    minbytes: str = _minbytes("8"),
    maxbytes: str = _maxbytes("64M"),
    stepfactor: int = _stepfactor(4),
    iters: Optional[int] = typer.Option(None, "-n", "--iters", min=1, max=10_000_000, help="timed calls per point, nccl-tests' -n "
                                                                    "(default: as many as fit --target-s)"),
    warmup_iters: int = typer.Option(1, "-w", "--warmup_iters", min=0, max=1_000_000, help="untimed calls first, nccl-tests' -w"),
    check: int = typer.Option(1, "-c", "--check", min=0, max=1, help="1: count values that differ from the exact "
                                                                      "sum (#wrong), nccl-tests' -c"),
    algorithms: Optional[str] = typer.Option(None, "--algorithms",
                                             help="comma-separated; native = the backend's all_reduce "
                                                  "(default: native and every registered algorithm)"),
    codec: Optional[str] = typer.Option(None, "--codec", help="put this codec on the wire (e.g. dynamic_tree)"),
    rate: Optional[str] = typer.Option(None, "--link-rate",
                                       help="run the ranks in network namespaces on links shaped to this "
                                            "rate, e.g. 1gbit (root; see docs/shaped_link.md)"),
    delay_ms: float = typer.Option(0.0, "--link-delay-ms", min=0.0, max=100_000.0, help="one-way delay of the shaped link"),
    target_s: float = typer.Option(0.2, "--target-s", min=0.001, max=3600.0, help="time budget per point when -n is not given"),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, max=604_800.0, help="seconds a rank may wait on a peer"),
    trace: Optional[Path] = _trace_option(),
    as_json: bool = json_option(),
    out: Optional[Path] = out_option(" (default bench/results/collectives-[<op>-]<device>-P<P>.json)"),
    old_min: Optional[str] = OLD_MIN, old_max: Optional[str] = OLD_MAX, old_factor: Optional[int] = OLD_FACTOR,
    op: str = typer.Option("all_reduce", "--op", help="the collective, as nccl-tests' binaries: all_reduce, "
                           "all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv"),
) -> None:
    """Allreduce sweep in nccl-tests' form (its flags, header and table: one block per algorithm, native
    all_reduce included) with the calibrated cost model's time.

    Runs under torchrun too (one process per rank; rank 0 prints and writes the result):
    `torchrun --nproc-per-node 2 -m lab bench collectives -b 1M -e 4M`."""
    from lab import backend
    from lab.experiments import (algorithm_catalog, collective_rows, collectives_benchmark, format_collectives,
                                 in_torchrun, op_names, size_sweep)

    if op not in op_names():
        fail(f"--op {op!r}; allowed: {', '.join(op_names())}")
    if op != "all_reduce":
        try:
            lo, hi, factor = _size_range(minbytes, maxbytes, old_min, old_max, old_factor, stepfactor)
        except ValueError as e:
            fail(str(e))
        _bench_op(op, procs, backend_name, lo, hi, factor, iters, warmup_iters, check, algorithms, codec, rate,
                  delay_ms, target_s, timeout, as_json, out)
        return
    try:
        algs = ([a.strip() for a in algorithms.split(",") if a.strip()] if algorithms is not None
                else algorithm_catalog(native=True).name.tolist())
        lo, hi, factor = _size_range(minbytes, maxbytes, old_min, old_max, old_factor, stepfactor)
    except ValueError as e:
        fail(str(e))
    check_results_dir(out, as_json)
    config = {"procs": procs, "backend": backend_name, "minbytes": lo, "maxbytes": hi, "stepfactor": factor,
              "iters": iters, "warmup_iters": warmup_iters, "check": check, "algorithms": algs, "codec": codec,
              "link_rate": rate, "link_delay_ms": delay_ms, "target_s": target_s, "torchrun": in_torchrun()}
    if trace is not None:
        config["trace"] = str(trace)
    timing = "median seconds per call after a barrier, mean over ranks; busbw = algbw * 2(P-1)/P"
    tag = f"-shaped-{rate}" if rate else ""
    ctx = (nullcontext(None) if in_torchrun() else
           session("bench collectives", config, out or partial_out(
               as_json, f"collectives-{'gpu' if backend_name == 'nccl' else 'cpu'}-P{procs}{tag}"),
               as_json))
    try:
        with ctx as s:
            on_row = None
            if s is not None:  # a stop keeps the finished (algorithm, size) rows, in nccl-tests' columns
                s.shape = lambda rows: {"rows": collective_rows(rows, shared=rate is None)}
                s.extra = {"backend": backend_name, "procs": procs, "versions": backend.versions(),
                           "sizes": size_sweep(lo, hi, factor), "ranks": [], "pingpong": [], "ratios_vs_native": [],
                           "fit": None, "codec": codec, "link_rate": rate, "link_delay_ms": delay_ms, "timing": timing}
                on_row = lambda r: s.add([r], f"{r['algorithm']} {r['nbytes']} B")  # noqa: E731
            res = collectives_benchmark(lo, hi, factor, algs, procs=procs, backend_name=backend_name, codec=codec,
                                        iters=iters, warmup=warmup_iters, check=bool(check), target_s=target_s,
                                        link_rate=rate, link_delay_ms=delay_ms, timeout=timeout,
                                        progress=None if s is None else s.progress, on_row=on_row,
                                        trace=None if trace is None else str(trace))
    except ValueError as e:
        fail(str(e))
    if res is None:  # torchrun rank > 0: rank 0 prints and writes
        return
    config["procs"] = res.procs
    path = bench_out(out, as_json, f"collectives-{backend.device_slug(res.device)}-P{res.procs}{tag}")
    extra = {"backend": backend_name, "procs": res.procs, "versions": backend.versions(), "sizes": res.sizes,
             "ranks": res.ranks, "pingpong": res.pingpong, "ratios_vs_native": res.ratios,
             "fit": res.fit_summary(), "codec": codec, "link_rate": rate, "link_delay_ms": delay_ms,
             "timing": timing}
    if emit(result("bench collectives", config, device=backend.device_name(res.device), rows=res.rows, **extra),
            path, as_json):
        return
    console.print(res.header, highlight=False, soft_wrap=True, markup=False)
    console.print(format_collectives(res.rows), highlight=False, soft_wrap=True, markup=False)
    _print_split(res.rows, f"where the time went per rank (one traced call each; traces in {trace})")
    fit = res.fit
    if fit is not None:
        model = "shared medium (all ranks on one host)" if fit.link.shared else "per-rank links"
        console.print(f"# model: {model}; fitted L = {fit.link.latency_s * 1e6:.1f} us, "
                      f"1/G = {fit.link.bandwidth_Bps / 1e9:.3f} GB/s; median |error| {fit.median_rel_error:.0%} "
                      f"over {len(fit.rows)} rows >= 64 KB"
                      + (f" ({len(fit.left_out)} stalled rows left out)" if fit.left_out is not None else ""),
                      highlight=False)
    if len(res.ratios):
        print_frame(res.ratios, "busbw relative to native all_reduce (sizes >= 16 MB)")


def _bench_op(op: str, procs: int, backend_name: str, lo: int, hi: int, factor: int, iters: Optional[int],
              warmup_iters: int, check: int, algorithms: Optional[str], codec: Optional[str], rate: Optional[str],
              delay_ms: float, target_s: float, timeout: float, as_json: bool, out: Optional[Path]) -> None:
    """`bench collectives --op OP` for every op but all_reduce: each algorithm beside the native op."""
    from lab import backend
    from lab.experiments import format_op_table, in_torchrun, op_benchmark, op_rows, size_sweep

    algs = None if algorithms is None else [a.strip() for a in algorithms.split(",") if a.strip()]
    check_results_dir(out, as_json)
    config = {"op": op, "procs": procs, "backend": backend_name, "minbytes": lo, "maxbytes": hi, "stepfactor": factor,
              "iters": iters, "warmup_iters": warmup_iters, "check": check, "algorithms": algs, "codec": codec,
              "link_rate": rate, "link_delay_ms": delay_ms, "target_s": target_s, "torchrun": in_torchrun()}
    timing = "median seconds per call after a barrier, mean over ranks; busbw = algbw * the op's nccl-tests factor"
    tag = f"-shaped-{rate}" if rate else ""
    dev0 = "gpu" if backend_name == "nccl" else "cpu"
    ctx = (nullcontext(None) if in_torchrun() else
           session("bench collectives", config, out or partial_out(as_json, f"collectives-{op}-{dev0}-P{procs}{tag}"),
                   as_json))
    try:
        with ctx as s:
            on_row = None
            if s is not None:
                s.shape = lambda rows: {"rows": op_rows(rows)}
                s.extra = {"op": op, "backend": backend_name, "procs": procs, "versions": backend.versions(),
                           "sizes": size_sweep(lo, hi, factor), "ranks": [], "pingpong": [], "ratios_vs_native": [],
                           "fit": None, "codec": codec, "link_rate": rate, "link_delay_ms": delay_ms, "timing": timing}
                on_row = lambda r: s.add([r], f"{r['algorithm']} {r['nbytes']} B")  # noqa: E731
            res = op_benchmark(op, lo, hi, factor, algs, procs=procs, backend_name=backend_name, codec=codec,
                               iters=iters, warmup=warmup_iters, check=bool(check), target_s=target_s,
                               link_rate=rate, link_delay_ms=delay_ms, timeout=timeout,
                               progress=None if s is None else s.progress, on_row=on_row)
    except ValueError as e:
        fail(str(e))
    if res is None:
        return
    config["procs"] = res.procs
    path = bench_out(out, as_json, f"collectives-{op}-{backend.device_slug(res.device)}-P{res.procs}{tag}")
    extra = {"op": op, "backend": backend_name, "procs": res.procs, "versions": backend.versions(), "sizes": res.sizes,
             "ranks": res.ranks, "pingpong": [], "ratios_vs_native": res.ratios, "fit": None, "codec": codec,
             "link_rate": rate,
             "link_delay_ms": delay_ms, "timing": timing}
    if emit(result("bench collectives", config, device=backend.device_name(res.device), rows=res.rows, **extra),
            path, as_json):
        return
    console.print(res.header, highlight=False, soft_wrap=True, markup=False)
    console.print(format_op_table(res.rows), highlight=False, soft_wrap=True, markup=False)
    if len(res.ratios):
        print_frame(res.ratios, f"busbw relative to the native {op} (sizes >= 16 MB)")


@bench_app.command("transfer")
def bench_transfer(
    minbytes: str = _minbytes("4K"),
    maxbytes: str = _maxbytes("64M"),
    stepfactor: int = _stepfactor(4),
    codecs: str = typer.Option("dynamic_tree,linear,mantissa,static_tree,onebit", "--codecs",
                               help="comma-separated codecs (fp32 is always the baseline)"),
    rate: Optional[str] = typer.Option(None, "--link-rate", help="between two namespaces on a shaped link"),
    pcie: bool = typer.Option(False, "--pcie", help="on a GPU: over the PCIe link (device -> host -> device)"),
    target_s: float = typer.Option(0.2, "--target-s", min=0.001, max=3600.0, help="time budget per point"),
    as_json: bool = json_option(),
    out: Optional[Path] = out_option(" (default bench/results/transfer-<device>.json)"),
    old_min: Optional[str] = typer.Option(None, "--min", hidden=True, help="deprecated: -b/--minbytes"),
    old_max: Optional[str] = typer.Option(None, "--max", hidden=True, help="deprecated: -e/--maxbytes"),
) -> None:
    """Dettmers 2016 Figure 2: compress + transfer + decompress vs 32-bit, between two processes
    (or over a GPU's PCIe link), the speedup per size and the crossover size."""
    from lab import backend
    from lab.experiments import transfer_benchmark, transfer_rows

    try:
        lo, hi, factor = _size_range(minbytes, maxbytes, old_min, old_max, None, stepfactor, values=True)
    except ValueError as e:
        fail(str(e))
    check_results_dir(out, as_json)
    names = [c.strip() for c in codecs.split(",") if c.strip()]
    config = {"minbytes": lo, "maxbytes": hi, "stepfactor": factor, "codecs": names, "link_rate": rate,
              "pcie": pcie, "target_s": target_s}
    timing = ("one-way = half a round trip; median of calls (seconds_lo..hi: its 95 % interval); "
              "speedup = fp32 time / codec time")
    slug0 = "cuda-pcie" if pcie else "cpu" + (f"-shaped-{rate}" if rate else "")
    try:
        with session("bench transfer", config, out or partial_out(as_json, f"transfer-{slug0}"), as_json) as s:
            # a stop keeps the finished (size, codec) rows, with their speedup where fp32 at that size finished
            s.shape = lambda rows: {"rows": transfer_rows(rows), "crossover": {}}
            s.extra = {"versions": backend.versions(), "link_rate": rate, "timing": timing}
            df, cross, dev_name, slug = transfer_benchmark(
                lo, hi, factor, names, link_rate=rate, pcie=pcie, target_s=target_s, progress=s.progress,
                on_row=lambda r: s.add([r], f"{r['n_values']} values, {r['codec']}"))
    except ValueError as e:
        fail(str(e))
    info = {"versions": backend.versions(), "link_rate": rate, "crossover": cross, "timing": timing}
    if emit(result("bench transfer", config, device=dev_name, rows=df, **info),
            bench_out(out, as_json, f"transfer-{slug}"), as_json):
        return
    wide = df.pivot(index="n_values", columns="codec", values="speedup_vs_fp32").drop(columns="fp32")
    print_frame(wide.reset_index(), f"Transfer speedup vs 32-bit (compress + transfer + decompress), {dev_name}")
    console.print("crossover (smallest size from which compression wins beyond the timings' spread at every larger "
                  "size): "
                  + ", ".join(f"{k}: {v if v is not None else 'never'}" for k, v in cross.items()))


@bench_app.command("compressed", cls=RegistryHelp)
def bench_compressed(
    procs: int = typer.Option(4, "--procs", "-p", min=1, max=1024, help="ranks (processes) to start on this machine"),
    values: str = typer.Option("16M", "--values", help="gradient length in values (K/M suffixes)"),
    algorithm: str = typer.Option("ring", "--algorithm", help="allreduce algorithm: {algorithms}"),
    codecs: str = typer.Option("dynamic_tree,linear,fp16,onebit", "--codecs",
                               help="comma-separated codecs (fp32 is always the baseline)"),
    mode: str = typer.Option("auto", "--mode", help="auto | requantize | gather; requantize on butterfly_sync or "
                             "parameter_server runs 1-bit SGD two-stage (Seide et al.)"),
    rate: Optional[str] = typer.Option(None, "--link-rate", help="shaped link rate, e.g. 1gbit (root)"),
    target_s: float = typer.Option(1.0, "--target-s", min=0.001, max=3600.0, help="time budget per codec"),
    timeout: float = typer.Option(600.0, "--timeout", min=1.0, max=604_800.0, help="seconds a rank may wait on a peer"),
    ranks_per_node: Optional[int] = typer.Option(
        None, "--ranks-per-node", min=1, max=1024, help="ranks per node: with --link-rate, the ranks of a node share a network "
        "namespace (fast loopback) and nodes talk over one shaped link each; hierarchical and "
        "alltoall_quantized get it"),
    intra_codec: Optional[str] = typer.Option(
        None, "--intra-codec", help="hierarchical: the codec inside a node (none = fp32; default: the codec); "
        "comma-separated: every codec runs with each (e.g. none,bf16)"),
    pipeline: Optional[int] = typer.Option(
        None, "--pipeline", min=1, max=64, help="hierarchical: cut the vector into this many pieces and overlap the node level "
        "of one piece with the cross-node level of the next (1..64; the fp32 baseline too)"),
    compare: Optional[str] = typer.Option(
        None, "--compare", help="comma-separated algorithms also timed in the same run, fp32 and every codec "
        "(default: ring when --algorithm is not ring; 'none' for none)"),
    trace: Optional[Path] = _trace_option(),
    baseline: bool = typer.Option(
        False, "--baseline", help="also time every codec with chunk pipelining off (same messages and numbers, "
        "no codec work under the wire): rows with overlap false, the same run"),
    as_json: bool = json_option(),
    out: Optional[Path] = out_option(" (default bench/results/compressed-<device>-P<P>[-shaped-R].json)"),
) -> None:
    """One allreduce with each codec on the wire vs fp32, same run: time, bytes, error, speedup."""
    from lab import backend
    from lab.experiments import compressed_benchmark, parse_size, transfer_rows

    try:
        n = parse_size(values)
    except ValueError as e:
        fail(str(e))
    if not 1 <= n <= 1 << 31:
        fail(f"--values {values!r}; allowed: 1 to 2G values (K/M/G suffixes)")
    check_results_dir(out, as_json)
    names = [c.strip() for c in codecs.split(",") if c.strip()]
    if intra_codec is not None and "," in intra_codec:
        intra_codec = [c.strip() for c in intra_codec.split(",") if c.strip()]
    others = None if compare is None else [a.strip() for a in compare.split(",") if a.strip() and a.strip() != "none"]
    config = {"procs": procs, "values": n, "algorithm": algorithm, "codecs": names, "mode": mode,
              "link_rate": rate, "target_s": target_s}
    for k, v in (("ranks_per_node", ranks_per_node), ("intra_codec", intra_codec), ("pipeline", pipeline),
                 ("compare", others), ("trace", None if trace is None else str(trace)),
                 ("baseline", baseline or None)):
        if v is not None:
            config[k] = v
    import os
    load_before = os.getloadavg()[0]
    info = {"procs": procs, "link_rate": rate, "mode": mode, "versions": backend.versions(),
            "timing": f"median seconds per call after a barrier, mean over ranks; speedup = {algorithm} fp32 / row"}
    if ranks_per_node is not None:
        info["topology"] = (f"{procs // ranks_per_node} nodes x {ranks_per_node} ranks" + (
            f": ranks of a node on one network namespace's loopback, one {rate} tc-shaped link per node"
            if rate else ": local processes, no shaping"))
    tag = (f"-{algorithm}" if algorithm != "ring" else "") + (f"-{mode}" if mode != "auto" else "") + (
        f"-shaped-{rate}" if rate else "") + (f"-pipeline{pipeline}" if pipeline and pipeline > 1 else "")
    try:
        with session("bench compressed", config, out or partial_out(as_json, f"compressed-cpu-P{procs}{tag}"),
                     as_json) as s:
            s.shape, s.extra = (lambda rows: {"rows": transfer_rows(rows)}), info  # fp32 runs first: speedups kept
            df = compressed_benchmark(n, algorithm, names, procs=procs, mode=mode, link_rate=rate, target_s=target_s,
                                      timeout=timeout, progress=s.progress,
                                      on_row=lambda r: s.add([r], f"codec {r['codec']}"),
                                      ranks_per_node=ranks_per_node, intra_codec=intra_codec, compare=others,
                                      pipeline=pipeline, trace=None if trace is None else str(trace),
                                      baseline=baseline)
    except ValueError as e:
        fail(str(e))
    info["load_average_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                               "cores": os.cpu_count()}
    if "calibration" in df.attrs:
        info["calibration"] = df.attrs["calibration"]
    if trace is not None:  # each rank's median traced call, piece by piece: the page's timeline
        from lab.experiments import timeline_table

        info["timeline"] = timeline_table(trace)
    if emit(result("bench compressed", config, device=backend.device_name("cpu"), rows=df, **info),
            bench_out(out, as_json, f"compressed-cpu-P{procs}{tag}"), as_json):
        return
    print_frame(df.drop(columns=["split"], errors="ignore"),
                f"{algorithm} allreduce of {n} values on {procs} ranks" + (f" over {rate} links" if rate else ""))
    _print_split(df, f"where the time went per rank (one traced call each; traces in {trace})")
