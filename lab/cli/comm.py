"""`paralab scale | bench collectives | bench transfer | bench compressed`: the collectives' error at scale and benchmarks."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pandas as pd
import torch
import typer

from .base import app, bench_app, console, fail, numbers, print_frame, progress_bar, write_bench


@app.command()
def scale(codec: List[str] = typer.Option(["dynamic_tree", "linear", "fp16"], help="codecs (repeat the option)"),
          algorithm: List[str] = typer.Option(["ring", "tree", "rabenseifner"], help="algorithms"),
          ranks: str = typer.Option("2,4,16,64", help="comma-separated virtual rank counts (up to 1024)"),
          values: int = typer.Option(4096, help="values per rank"),
          mode: str = typer.Option("auto", help="auto | requantize | gather"),
          seed: int = typer.Option(0, help="random seed"),
          as_json: bool = typer.Option(False, "--json")) -> None:
    """Error of compressed allreduce against the exact sum as P grows, on SimComm."""
    from lab.experiments import error_at_scale

    try:
        Ps = numbers(ranks, "--ranks", int)
        with progress_bar() as cb:
            df = error_at_scale(codec, algorithm, Ps, n=values, mode=mode, seed=seed, progress=cb)
    except ValueError as e:
        fail(str(e))
    if as_json:
        console.print_json(df.to_json(orient="records"))
        return
    print_frame(df, f"Compressed allreduce error at scale (SimComm, {values} values per rank, seed {seed})")


@bench_app.command("collectives")
def bench_collectives(
    procs: int = typer.Option(4, "--procs", "-p", help="ranks (processes) to start on this machine"),
    backend_name: str = typer.Option("gloo", "--backend", help="gloo (CPU) or nccl (one GPU per rank)"),
    min_size: str = typer.Option("8", "--min", help="smallest message, bytes (K/M/G suffixes)"),
    max_size: str = typer.Option("64M", "--max", help="largest message"),
    factor: int = typer.Option(4, "--factor", "-f", help="size step factor"),
    algorithms: str = typer.Option(",".join(["native", "ring", "rabenseifner", "tree", "recursive_doubling",
                                             "butterfly_sync", "parameter_server"]), "--algorithms",
                                   help="comma-separated; native = the backend's all_reduce"),
    codec: Optional[str] = typer.Option(None, "--codec", help="put this codec on the wire (e.g. dynamic_tree)"),
    rate: Optional[str] = typer.Option(None, "--link-rate",
                                       help="run the ranks in network namespaces on links shaped to this "
                                            "rate, e.g. 1gbit (root; see docs/shaped_link.md)"),
    delay_ms: float = typer.Option(0.0, "--link-delay-ms", help="one-way delay of the shaped link"),
    target_s: float = typer.Option(0.2, "--target-s", help="time budget per point (median of the calls)"),
    timeout: float = typer.Option(300.0, "--timeout", help="seconds a rank may wait on a peer"),
    as_json: bool = typer.Option(False, "--json", help="write bench/results/collectives-<device>-P<P>.json"),
    out: Optional[Path] = typer.Option(None, help="JSON path"),
) -> None:
    """Allreduce sweep in nccl-tests' form (one block per algorithm, native all_reduce included)
    with the calibrated cost model's time; under torchrun it runs on torchrun's ranks."""
    from lab import backend
    from lab.comm import bench
    from lab.comm.allreduce import check_algorithm
    from lab.comm.dist import TorchComm, check_backend, in_torchrun
    from lab.comm.launch import run

    try:
        check_backend(backend_name)
        algs = [a.strip() for a in algorithms.split(",") if a.strip()]
        for a in algs:
            check_algorithm(a)
        sizes = bench.size_sweep(bench.parse_size(min_size), bench.parse_size(max_size), factor)
        if codec:
            from lab.codecs import get_codec
            get_codec(codec)
    except ValueError as e:
        fail(str(e))
    args = (sizes, algs, codec)
    shared = rate is None and not in_torchrun()
    if in_torchrun():
        comm = TorchComm.from_env(backend_name, timeout)
        result = bench.collectives_rank(comm, *args, target_s=target_s)
        if comm.rank != 0:
            return
        P, dev = comm.size, comm.device
    else:
        from contextlib import nullcontext

        net_ctx = nullcontext(None)
        if rate is not None:
            from lab.comm.shaped import ShapedLink, available
            ok, why = available(delay=delay_ms > 0)
            if not ok:
                fail(f"--link-rate needs network namespaces: {why}")
            try:
                net_ctx = ShapedLink(procs, rate=rate, delay_ms=delay_ms)
            except ValueError as e:
                fail(str(e))
        try:
            with net_ctx as net, progress_bar() as cb:
                result = run(bench.collectives_rank, procs, *args, backend=backend_name, timeout=timeout,
                             net=net, progress=cb, target_s=target_s)[0]
        except ValueError as e:
            fail(str(e))
        P = procs
        dev = torch.device("cuda") if backend_name == "nccl" else torch.device("cpu")
    df, fit = bench.table(result, shared=shared)
    console.print(bench.format_table(df), highlight=False, soft_wrap=True)
    if fit is not None:
        model = "shared medium (all ranks on one host)" if fit.link.shared else "per-rank links"
        console.print(f"# model: {model}; fitted L = {fit.link.latency_s * 1e6:.1f} us, "
                      f"1/G = {fit.link.bandwidth_Bps / 1e9:.3f} GB/s; median |error| {fit.median_rel_error:.0%} "
                      f"over {len(fit.rows)} rows >= 64 KB", highlight=False)
    r = bench.ratios(df)
    if len(r):
        print_frame(r, "busbw relative to native all_reduce (sizes >= 16 MB)")
    if as_json or out:
        tag = f"-shaped-{rate}" if rate else ""
        info = {"device": backend.device_name(dev), "backend": backend_name, "procs": P, "versions": backend.versions(),
                "codec": codec, "link_rate": rate, "link_delay_ms": delay_ms, "sizes": sizes,
                "fit": None if fit is None else {"latency_s": fit.link.latency_s, "bandwidth_Bps": fit.link.bandwidth_Bps,
                                                "shared": fit.link.shared, "median_rel_error": fit.median_rel_error,
                                                "max_rel_error": fit.max_rel_error},
                "pingpong": result["pingpong"], "ratios_vs_native": r.to_dict(orient="records"),
                "timing": "median seconds per call after a barrier, mean over ranks; busbw = algbw * 2(P-1)/P"}
        path = write_bench(f"collectives-{backend.device_slug(dev)}-P{P}{tag}", info, df.to_dict(orient="records"), out)
        console.print(f"wrote {path}")


@bench_app.command("transfer")
def bench_transfer(
    min_size: str = typer.Option("1K", "--min", help="fewest values (K/M suffixes)"),
    max_size: str = typer.Option("16M", "--max", help="most values"),
    codecs: str = typer.Option("dynamic_tree,linear,mantissa,static_tree,onebit", "--codecs"),
    rate: Optional[str] = typer.Option(None, "--link-rate", help="between two namespaces on a shaped link"),
    pcie: bool = typer.Option(False, "--pcie", help="on a GPU: over the PCIe link (device -> host -> device)"),
    target_s: float = typer.Option(0.2, "--target-s"),
    as_json: bool = typer.Option(False, "--json", help="write bench/results/transfer-<device>.json"),
    out: Optional[Path] = typer.Option(None, help="JSON path"),
) -> None:
    """Dettmers 2016 Figure 2: compress + transfer + decompress vs 32-bit, between two processes
    (or over a GPU's PCIe link), the speedup per size and the crossover size."""
    from lab import backend
    from lab.comm import bench
    from lab.comm.launch import run

    try:
        sizes = [s // 4 for s in bench.size_sweep(4 * bench.parse_size(min_size), 4 * bench.parse_size(max_size), 4)]
        names: list = [None] + [c.strip() for c in codecs.split(",") if c.strip()]
        from lab.comm.allreduce import resolve_codec
        for c in names:
            resolve_codec(c)
    except ValueError as e:
        fail(str(e))
    if pcie:
        if not backend.gpu_available():
            fail("--pcie needs a CUDA GPU")
        with progress_bar() as cb:
            rows = bench.pcie_transfer(sizes, names, progress=cb)
        dev_name, slug = backend.device_name("cuda"), backend.device_slug("cuda") + "-pcie"
    else:
        from contextlib import nullcontext

        net_ctx = nullcontext(None)
        if rate is not None:
            from lab.comm.shaped import ShapedLink
            net_ctx = ShapedLink(2, rate=rate)
        with net_ctx as net, progress_bar() as cb:
            rows = run(bench.transfer_rank, 2, sizes, names, net=net, progress=cb, target_s=target_s)[0]
        dev_name, slug = backend.device_name("cpu") + ", 2 processes, Gloo", "cpu" + (f"-shaped-{rate}" if rate else "")
    df = pd.DataFrame(rows)
    wide = df.pivot(index="n_values", columns="codec", values="speedup_vs_fp32").drop(columns="fp32")
    print_frame(wide.reset_index(), f"Transfer speedup vs 32-bit (compress + transfer + decompress), {dev_name}")
    cross = bench.crossover(df)
    console.print("crossover (smallest size from which compression wins at every larger size): "
                  + ", ".join(f"{k}: {v if v is not None else 'never'}" for k, v in cross.items()))
    if as_json or out:
        info = {"device": dev_name, "versions": backend.versions(), "link_rate": rate, "crossover": cross,
                "timing": "one-way = half a round trip; median of calls; speedup = fp32 time / codec time"}
        console.print(f"wrote {write_bench(f'transfer-{slug}', info, rows, out)}")


@bench_app.command("compressed")
def bench_compressed(
    procs: int = typer.Option(4, "--procs", "-p"),
    values: str = typer.Option("16M", "--values", help="gradient length in values (K/M suffixes)"),
    algorithm: str = typer.Option("ring", "--algorithm"),
    codecs: str = typer.Option("dynamic_tree,linear,fp16,onebit", "--codecs"),
    mode: str = typer.Option("auto", "--mode", help="auto | requantize | gather; requantize on butterfly_sync or "
                             "parameter_server runs 1-bit SGD two-stage (Seide et al.)"),
    rate: Optional[str] = typer.Option(None, "--link-rate", help="shaped link rate, e.g. 1gbit (root)"),
    target_s: float = typer.Option(1.0, "--target-s"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds a rank may wait on a peer"),
    as_json: bool = typer.Option(False, "--json", help="write bench/results/compressed-<device>-P<P>[-shaped-R].json"),
    out: Optional[Path] = typer.Option(None, help="JSON path"),
) -> None:
    """One allreduce with each codec on the wire vs fp32, same run: time, bytes, error, speedup."""
    from lab import backend
    from lab.comm import bench
    from lab.comm.allreduce import check_algorithm, resolve_codec, resolve_mode
    from lab.comm.launch import run

    try:
        n = bench.parse_size(values)
        check_algorithm(algorithm)
        names: list = [None] + [c.strip() for c in codecs.split(",") if c.strip()]
        for c in names:
            resolve_mode(resolve_codec(c), mode, algorithm)
    except ValueError as e:
        fail(str(e))
    from contextlib import nullcontext

    net_ctx = nullcontext(None)
    if rate is not None:
        from lab.comm.shaped import ShapedLink
        net_ctx = ShapedLink(procs, rate=rate)
    try:
        with net_ctx as net, progress_bar() as cb:
            rows = run(bench.codec_speedup_rank, procs, n, algorithm, names, net=net, progress=cb,
                       target_s=target_s, mode=mode, timeout=timeout)[0]
    except ValueError as e:
        fail(str(e))
    df = pd.DataFrame(rows)
    print_frame(df, f"{algorithm} allreduce of {n} values on {procs} ranks" + (f" over {rate} links" if rate else ""))
    if as_json or out:
        info = {"device": backend.device_name("cpu"), "procs": procs, "link_rate": rate, "mode": mode,
                "versions": backend.versions(),
                "timing": "median seconds per call after a barrier, mean over ranks; speedup = fp32 / codec"}
        tag = (f"-{algorithm}" if algorithm != "ring" else "") + (f"-{mode}" if mode != "auto" else "") + (
            f"-shaped-{rate}" if rate else "")
        console.print(f"wrote {write_bench(f'compressed-cpu-P{procs}{tag}', info, rows, out)}")
