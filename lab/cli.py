"""Headless entry point: reproduce the lab's tables and run its benchmarks (`paralab --help`)."""
from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import pandas as pd
import torch
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ParaLab: codecs, collectives and approximate dropout for parallel training.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks; each writes bench/results/<name>-<device>.json.")
app.add_typer(bench_app, name="bench")
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)
REPO = Path(__file__).resolve().parent.parent


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator:
    """A rich progress bar on stderr whose update function fits the experiments' callback."""
    if not enabled:
        yield None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err_console, transient=True) as p:
        task = p.add_task("starting", total=1.0)
        yield lambda frac, msg: p.update(task, completed=frac, description=msg)


def print_frame(df: pd.DataFrame, title: str, floatfmt: str = "{:.4g}") -> None:
    t = Table(title=title)
    for c in df.columns:
        t.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left",
                     overflow="fold")
    for row in df.itertuples(index=False):
        t.add_row(*[floatfmt.format(v) if isinstance(v, float) and math.isfinite(v) else str(v) for v in row])
    console.print(t)


def fail(msg: str) -> None:
    err_console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


@app.command()
def table1(samples: int = typer.Option(1_000_000, help="samples per distribution (the paper used 25 M)"),
           rounding: str = typer.Option("both", help="paper | nearest | both"),
           seed: int = typer.Option(0, help="random seed"),
           as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """Dettmers 2016 Table 1: the four 8-bit types on U(0,1) and normal distributions, paper vs measured."""
    from lab.experiments import TABLE1_NOTE, table1 as run

    allowed = {"paper": ("paper",), "nearest": ("nearest",), "both": ("paper", "nearest")}
    if rounding not in allowed:
        fail(f"--rounding {rounding!r}; allowed: paper, nearest, both")
    if samples < 1:
        fail(f"--samples {samples}; need at least 1")
    with progress_bar(not as_json) as cb:
        df = run(samples=samples, roundings=allowed[rounding], seed=seed, progress=cb)
    if as_json:
        print(json.dumps({"samples": samples, "seed": seed, "note": TABLE1_NOTE,
                          "rows": df.to_dict(orient="records")}, indent=1))
        return
    print_frame(df, f"Table 1 — {samples:,} samples per distribution, seed {seed}")
    console.print(f"[dim]{TABLE1_NOTE}[/dim]")


@app.command()
def errors(codec: List[str] = typer.Option(["dynamic_tree", "linear", "fp8_e4m3", "int8"],
                                           help="codec name (repeatable); see `paralab codecs`"),
           dist: List[str] = typer.Option(["uniform(0,1)", "normal(0,1)"],
                                          help="distribution spec (repeatable), e.g. 'student_t(3)'"),
           samples: int = typer.Option(1_000_000), seed: int = typer.Option(0),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Error table of any codecs on any distributions."""
    from lab.codecs import get_codec
    from lab.experiments import error_table, parse_distribution

    try:
        codecs = [get_codec(c) for c in codec]
        for d in dist:
            parse_distribution(d)
    except ValueError as e:
        fail(str(e))
    with progress_bar(not as_json) as cb:
        df = error_table(codecs, dist, samples=samples, seed=seed, progress=cb)
    if as_json:
        print(df.to_json(orient="records", indent=1))
    else:
        print_frame(df, f"Approximation error — {samples:,} samples, seed {seed}")


@app.command()
def codecs() -> None:
    """List every codec name with its description."""
    from lab.codecs import codec_help

    print_frame(pd.DataFrame(list(codec_help().items()), columns=["name", "description"]), "Codecs")


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
        Ps = _numbers(ranks, "--ranks", int)
        with progress_bar() as cb:
            df = error_at_scale(codec, algorithm, Ps, n=values, mode=mode, seed=seed, progress=cb)
    except ValueError as e:
        fail(str(e))
    if as_json:
        console.print_json(df.to_json(orient="records"))
        return
    print_frame(df, f"Compressed allreduce error at scale (SimComm, {values} values per rank, seed {seed})")


def _numbers(text: str, what: str, cast: type = float, allow_empty: bool = False) -> list:
    """'1, 2,4' -> [1, 2, 4] as `cast`; a bad or (unless allowed) empty list is a one-line error."""
    kind = "integers" if cast is int else "numbers"
    try:
        vals = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        vals = None
    if vals is None or not (vals or allow_empty):
        fail(f"{what} must be comma-separated {kind}, got {text!r}")
    return vals


def _write_result(path: Path, payload: dict) -> None:
    """All or nothing: a run stopped half-way leaves no file (written to a temp file, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(payload, indent=1, default=str))
    tmp.replace(path)


@app.command()
def train(
    mode: str = typer.Option("sim", help="sim: K virtual workers in this process; ddp: real processes, "
                                         "PyTorch DDP with the codec as its communication hook"),
    reproduce: Optional[str] = typer.Option(None, help="Dettmers 2016 §3.4: mnist-dp or mnist-mp "
                                                       "(every type, --seeds seeds, CIs, ANOVA)"),
    seeds: int = typer.Option(3, help="seeds for --reproduce"),
    smoke: bool = typer.Option(False, help="--reproduce on scikit-learn digits with a small MLP, in seconds"),
    dataset: Optional[str] = typer.Option(None, help="auto | mnist | fashion-mnist | digits "
                                                     "(default digits; --reproduce: auto)"),
    data_path: Optional[Path] = typer.Option(None, help="directory of MNIST-format IDX files"),
    train_limit: Optional[int] = typer.Option(None, help="use a seeded subset of this many training samples"),
    model: str = typer.Option("mlp", help="mlp (the paper's 784-1024-1024-10) | cnn"),
    hidden: str = typer.Option("1024,1024", help="hidden layer widths"),
    dropout: Optional[str] = typer.Option(None, help="dropout rates: input, then each hidden layer "
                                                     "(default the paper's 0.2, then 0.3 per hidden layer)"),
    activation: str = typer.Option("relu", help="relu | logistic"),
    parallel: str = typer.Option("data", help="data | model (sim mode)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-k",
                                          help="virtual workers K (default 4; --reproduce: 1, the paper's "
                                               "single-GPU simulation)"),
    procs: int = typer.Option(2, "--procs", "-p", help="processes (ddp mode)"),
    codec: Optional[str] = typer.Option(None, help="codec on the wire (none = 32-bit), e.g. dynamic_tree"),
    error_feedback: bool = typer.Option(False, "--error-feedback", help="keep each worker's residual (1-bit SGD)"),
    scheme: str = typer.Option("all", help="all: every gradient compressed; paper: own gradient 32-bit"),
    algorithm: str = typer.Option("ring", help="allreduce algorithm of the simulated workers"),
    consistency: str = typer.Option("sync", help="sync | ssp | async | easgd"),
    staleness: int = typer.Option(2, help="ssp: staleness bound s (clocks)"),
    delay_ms: float = typer.Option(0.0, help="async: mean random network delay per push, ms"),
    straggler: float = typer.Option(0.2, help="sigma of the log-normal compute-time jitter per worker step"),
    alpha: Optional[float] = typer.Option(None, help="easgd: elastic alpha (default beta/K)"),
    beta: float = typer.Option(0.9, help="easgd: centre moving rate beta"),
    period: int = typer.Option(1, help="easgd: steps between elastic exchanges"),
    optimizer: str = typer.Option("rmsprop", help="rmsprop (the paper's) | sgd (momentum)"),
    lr: float = typer.Option(0.003, help="learning rate"),
    momentum: float = typer.Option(0.9, help="sgd momentum"),
    batch: int = typer.Option(128, help="global mini-batch"),
    epochs: Optional[float] = typer.Option(None, help="epochs, fractions allowed (default 1; --reproduce: 3)"),
    evals: int = typer.Option(4, help="test evaluations per epoch"),
    link: str = typer.Option("eth10g", help="link preset for the modelled clock: pcie3, nvlink4, ib_hdr, "
                                            "eth1g, eth10g, ..."),
    compute_ms: Optional[float] = typer.Option(None, help="modelled compute per worker step (default: measured)"),
    backend_name: str = typer.Option("gloo", "--backend", help="ddp: gloo | nccl"),
    timeout: float = typer.Option(600.0, help="ddp: seconds a rank may wait on a peer"),
    seed: int = typer.Option(0, help="random seed"),
    out: Optional[Path] = typer.Option(None, help="write the result as JSON here (all or nothing)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Train with compressed gradients/activations: simulated K workers (data or model parallel,
    consistency models) or real DDP processes; --reproduce runs Dettmers 2016 §3.4."""
    from dataclasses import asdict

    from lab.train.run import TrainConfig

    rep = reproduce is not None
    dataset = dataset or ("auto" if rep else "digits")
    workers = workers or (1 if rep else 4)
    epochs = epochs or (3.0 if rep else 1.0)
    widths = tuple(int(h) for h in _numbers(hidden, "--hidden", allow_empty=True))
    rates = tuple(_numbers(dropout, "--dropout", allow_empty=True)) if dropout else (0.2,) + (0.3,) * len(widths)
    try:
        cfg = TrainConfig(dataset=dataset, data_path=str(data_path) if data_path else None, train_limit=train_limit,
                          model=model, hidden=widths, dropout=rates, activation=activation, parallel=parallel,
                          workers=procs if mode == "ddp" else workers, codec=codec, algorithm=algorithm,
                          scheme=scheme, error_feedback=error_feedback, consistency=consistency,
                          staleness=staleness, delay_s=delay_ms / 1e3, straggler=straggler, alpha=alpha, beta=beta,
                          period=period, optimizer=optimizer, lr=lr, momentum=momentum, batch=batch, epochs=epochs,
                          evals_per_epoch=evals, link=link, compute_s=compute_ms / 1e3 if compute_ms else None,
                          seed=seed)
        if mode not in ("sim", "ddp"):
            raise ValueError(f"--mode {mode!r}; allowed: sim, ddp")
        if reproduce is not None:
            if mode != "sim":
                raise ValueError("--reproduce runs the simulated workers; drop --mode ddp")
            return _reproduce(reproduce, seeds, cfg, smoke, out, as_json)
        if mode == "ddp":
            result = _train_ddp(cfg, procs, backend_name, timeout)
            if result is None:
                return
        else:
            from lab.train.run import train as run_train

            with progress_bar() as cb:
                result = run_train(cfg, progress=cb)
    except ValueError as e:
        fail(str(e))
        return
    payload = {"config": asdict(cfg), "summary": result.summary, "curve": result.curve.to_dict(orient="records")}
    if out:
        _write_result(out, payload)
    if as_json:
        console.print_json(json.dumps(payload, default=str))
        return
    print_frame(result.curve, f"{result.summary['label']} — {mode}, {cfg.workers} workers, {cfg.dataset}")
    print_frame(pd.DataFrame({"": list(result.summary), "value": list(result.summary.values())}), "summary")
    if out:
        console.print(f"wrote {out}")


def _train_ddp(cfg, procs: int, backend_name: str, timeout: float):
    from dataclasses import asdict

    from lab.comm.dist import TorchComm, in_torchrun
    from lab.train.ddp import assemble, ddp_rank, train_ddp

    if in_torchrun():
        comm = TorchComm.from_env(backend_name, timeout)
        mine = ddp_rank(comm, asdict(cfg))
        every = comm.allgather_object(mine)
        return assemble(cfg, every, backend_name) if comm.rank == 0 else None
    with progress_bar() as cb:
        return train_ddp(cfg, procs, backend=backend_name, timeout=timeout, progress=cb)


def _reproduce(which: str, seeds: int, cfg, smoke: bool, out: Optional[Path], as_json: bool) -> None:
    from lab.train.reproduce import reproduce as run_reproduce

    with progress_bar() as cb:
        rep = run_reproduce(which, seeds=seeds, base=cfg, smoke=smoke, progress=cb)
    payload = {"reproduce": which, "seeds": seeds, "smoke": smoke, "anova": rep.anova,
               "summary": rep.summary.to_dict(orient="records"), "runs": rep.runs.to_dict(orient="records")}
    if out:
        _write_result(out, payload)
    if as_json:
        console.print_json(json.dumps(payload, default=str))
        return
    print_frame(rep.runs, f"Dettmers 2016 §3.4 {which}: every run")
    print_frame(rep.summary, f"{which}: final test error (%) by type, mean and 99% CI over {seeds} seeds")
    a, p = rep.anova, rep.anova["paper"]
    console.print(f"one-way ANOVA across 32-bit and the four 8-bit types: F({a['df_between']}, {a['df_within']}) = "
                  f"{a['F']:.2f}, p = {a['p']:.2f} {a['note']}   (paper, MNIST: F({p['df_between']}, {p['df_within']})"
                  f" = {p['F']}, p = {p['p']})", highlight=False)
    if out:
        console.print(f"wrote {out}")


@bench_app.command("codecs")
def bench_codecs(min_exp: int = typer.Option(16, "--min-exp", help="smallest size 2^k"),
                 max_exp: Optional[int] = typer.Option(None, "--max-exp", help="largest size 2^k (26 CPU, 28 GPU)"),
                 repeats: int = typer.Option(5), device: Optional[str] = typer.Option(None, help="cpu or cuda"),
                 out: Optional[Path] = typer.Option(None, help="JSON path (default bench/results/codecs-<device>.json)")
                 ) -> None:
    """Encode/decode speed of the 8-bit codecs vs torch's fp8 cast and bitsandbytes, same run."""
    import torch

    from lab import backend
    from lab.codecs import bench

    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not backend.gpu_available():
        fail("--device cuda needs a GPU and CuPy (pip install -e '.[cuda12]')")
    top = max_exp if max_exp is not None else (28 if dev.type == "cuda" else 26)
    if not 0 <= min_exp <= top <= 31:
        fail(f"sizes 2^{min_exp}..2^{top}: need 0 <= --min-exp <= --max-exp <= 31")
    sizes = [1 << k for k in range(min_exp, top + 1, 2)]
    with progress_bar() as cb:
        df, info = bench.run(sizes, dev, repeats=repeats, progress=cb)
    path = out or REPO / "bench" / "results" / f"codecs-{backend.device_slug(dev)}.json"
    bench.write_json(df, info, path)
    cols = ["contestant", "op", "n", "ns_per_value", "gb_per_s", "speed_vs_fp8_cast", "speed_vs_bnb"]
    if "frac_of_copy_bw" in df:
        cols.append("frac_of_copy_bw")
    print_frame(df[cols], f"Codec speed on {info['device']} (ratios: baseline time / this time)")
    console.print(f"wrote {path}")


def _write_bench(name: str, info: dict, rows: list[dict], out: Optional[Path]) -> Path:
    from lab.codecs.bench import write_json

    path = out or REPO / "bench" / "results" / f"{name}.json"
    return write_json(pd.DataFrame(rows), info, path)


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
        path = _write_bench(f"collectives-{backend.device_slug(dev)}-P{P}{tag}", info, df.to_dict(orient="records"), out)
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
        console.print(f"wrote {_write_bench(f'transfer-{slug}', info, rows, out)}")


@bench_app.command("compressed")
def bench_compressed(
    procs: int = typer.Option(4, "--procs", "-p"),
    values: str = typer.Option("16M", "--values", help="gradient length in values (K/M suffixes)"),
    algorithm: str = typer.Option("ring", "--algorithm"),
    codecs: str = typer.Option("dynamic_tree,linear,fp16,onebit", "--codecs"),
    rate: Optional[str] = typer.Option(None, "--link-rate", help="shaped link rate, e.g. 1gbit (root)"),
    target_s: float = typer.Option(1.0, "--target-s"),
    as_json: bool = typer.Option(False, "--json", help="write bench/results/compressed-<device>-P<P>[-shaped-R].json"),
    out: Optional[Path] = typer.Option(None, help="JSON path"),
) -> None:
    """One allreduce with each codec on the wire vs fp32, same run: time, bytes, error, speedup."""
    from lab import backend
    from lab.comm import bench
    from lab.comm.allreduce import check_algorithm, resolve_codec
    from lab.comm.launch import run

    try:
        n = bench.parse_size(values)
        check_algorithm(algorithm)
        names: list = [None] + [c.strip() for c in codecs.split(",") if c.strip()]
        for c in names:
            resolve_codec(c)
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
                       target_s=target_s, timeout=600)[0]
    except ValueError as e:
        fail(str(e))
    df = pd.DataFrame(rows)
    print_frame(df, f"{algorithm} allreduce of {n} values on {procs} ranks" + (f" over {rate} links" if rate else ""))
    if as_json or out:
        info = {"device": backend.device_name("cpu"), "procs": procs, "link_rate": rate, "versions": backend.versions(),
                "timing": "median seconds per call after a barrier, mean over ranks; speedup = fp32 / codec"}
        tag = f"-shaped-{rate}" if rate else ""
        console.print(f"wrote {_write_bench(f'compressed-cpu-P{procs}{tag}', info, rows, out)}")


# --- dropout (Approximate Random Dropout, Song et al. 2019) ---
dropout_app = typer.Typer(no_args_is_help=True,
                          help="Approximate Random Dropout (Song et al. 2019): patterns, the pattern-distribution "
                               "search, the MLP and LSTM experiments.")
app.add_typer(dropout_app, name="dropout")


def _dropout_rate_sets(text: str, layers: int) -> list[tuple[float, ...]]:
    """'0.3;0.5,0.6' -> [(0.3,)*layers, (0.5, 0.6)]: groups split by ';', one value = every layer."""
    from lab.dropout import check_rate

    out = []
    for group in (g for g in text.split(";") if g.strip()):
        vals = _numbers(group, "--rates")
        if len(vals) == 1:
            vals = vals * layers
        if len(vals) != layers:
            fail(f"--rates group {group!r} has {len(vals)} rates for {layers} layers (give one or {layers})")
        try:
            out.append(tuple(check_rate(p) for p in vals))
        except ValueError as e:
            fail(f"--rates: {e}")
    if not out:
        fail("--rates is empty")
    return out


def _dropout_kinds(text: str) -> list[str]:
    from lab.experiments.dropout import TRAIN_KINDS

    kinds = [k.strip() for k in text.split(",") if k.strip()]
    for k in kinds:
        if k not in TRAIN_KINDS:
            fail(f"--kinds {k!r}; allowed: {', '.join(TRAIN_KINDS)}")
    if not kinds:
        fail("--kinds is empty")
    return kinds


def _dropout_output(tables, title: str, out: Optional[Path], as_json: bool, info: dict, cols: list[str]) -> None:
    payload = {**info, "table": tables.table.to_dict(orient="records"),
               "curves": tables.curves.to_dict(orient="records")}
    if out:
        _write_result(out, payload)
    if as_json:
        console.print_json(json.dumps(payload, default=str))
        return
    print_frame(tables.table[[c for c in cols if c in tables.table]], title)
    if out:
        console.print(f"wrote {out}")


@dropout_app.command("search")
def dropout_search(p: float = typer.Option(0.5, "--p", "-p", help="target global dropout rate, 0 <= p < 1"),
                   max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n",
                                                        help="N, the largest dp (default ceil(1/(1-p)) + 1)"),
                   lambda1: float = typer.Option(0.9999, help="weight of the rate term (lambda2 = 1 - lambda1)"),
                   lr: float = typer.Option(1.0, help="SGD learning rate on v"),
                   threshold: float = typer.Option(1e-10, help="stop when |loss change| < threshold"),
                   max_steps: int = typer.Option(100_000, help="give up after this many steps"),
                   trace: bool = typer.Option(False, "--trace", help="also print the loss trace"),
                   seed: int = typer.Option(0, help="random seed of v's initialisation"),
                   as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables")) -> None:
    """Algorithm 1: the distribution d over dp = 1..N whose expected dropout rate is p."""
    from lab.experiments.dropout import search_trace

    try:
        t = search_trace(p, max_dp, lambda1=lambda1, lr=lr, threshold=threshold, max_steps=max_steps,
                         trace_every=max(1, max_steps // 2000), seed=seed)
    except ValueError as e:
        fail(str(e))
        return
    if as_json:
        console.print_json(json.dumps({"p": p, "rate": t.rate, "steps": t.steps, "converged": t.converged,
                                       "distribution": t.final.to_dict(orient="records"),
                                       "trace": t.trace.to_dict(orient="records") if trace else None}))
        return
    print_frame(t.final, f"Algorithm 1: d over dp = 1..{len(t.final)} for p = {p}")
    console.print(f"expected rate d.p_u = {t.rate:.6f} (target {p}, |error| {abs(t.rate - p):.1e}); "
                  f"{t.steps} steps, {'converged' if t.converged else 'step limit reached'}")
    if trace:
        print_frame(t.trace, "loss trace")


@dropout_app.command("patterns")
def dropout_patterns(p: float = typer.Option(0.5, "--p", "-p", help="dropout rate"),
                     kinds: str = typer.Option("bernoulli,row,tile", help="bernoulli, row, tile"),
                     batch: int = typer.Option(16, help="rows (samples) shown"),
                     units: int = typer.Option(64, help="units shown"),
                     tile: str = typer.Option("4,8", help="tile rows,cols for the tile pattern"),
                     iterations: int = typer.Option(2000, help="patterns drawn for the drop-frequency check"),
                     max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", help="N, the largest dp"),
                     seed: int = typer.Option(0, help="random seed")) -> None:
    """One sampled mask per kind ('#' kept, '.' dropped) and every unit's drop frequency over many
    sampled patterns against p (the paper's Eq. 2)."""
    from lab.experiments.dropout import drop_frequency, pattern_masks

    tl = tuple(_numbers(tile, "--tile", int))
    if len(tl) != 2:
        fail(f"--tile {tile!r}: give rows,cols")
    ks = [k.strip() for k in kinds.split(",") if k.strip()]
    try:
        masks = pattern_masks(p, ks, samples=1, batch=batch, units=units, tile=tl, max_dp=max_dp, seed=seed)
        freq = drop_frequency(p, ks, iterations=iterations, batch=batch, units=units, tile=tl, max_dp=max_dp,
                              seed=seed)
    except ValueError as e:
        fail(str(e))
        return
    for k, m in masks.groupby("kind", sort=False):
        grid = m.pivot(index="row", columns="unit", values="kept").to_numpy()
        dp = m["dp"].iloc[0]
        head = f"{k}" + (f" (dp={int(dp)}, b={int(m['bias'].iloc[0])})" if pd.notna(dp) else "")
        console.print(head, highlight=False)
        for r in grid:
            console.print("".join("#" if v else "." for v in r), highlight=False)
    summary = freq.assign(abs_z=freq["z"].abs()).groupby("kind", sort=False).agg(
        mean_drop=("drop_freq", "mean"), min_drop=("drop_freq", "min"), max_drop=("drop_freq", "max"),
        max_abs_z=("abs_z", "max"))
    print_frame(summary.reset_index(), f"drop frequency per unit over {iterations} patterns (target p = {p})")


@dropout_app.command("mlp")
def dropout_mlp(dataset: str = typer.Option("auto", help="auto | mnist | fashion-mnist | digits"),
                data_path: Optional[Path] = typer.Option(None, help="directory of MNIST-format IDX files"),
                hidden: str = typer.Option("2048,2048", help="hidden widths (the paper's 784-2048-2048-10)"),
                table1: bool = typer.Option(False, "--table1", help="Table I: hidden 1024x64, 1024x1024, 2048x2048, "
                                                                    "4096x4096 at rates (0.7, 0.7)"),
                rates: str = typer.Option("0.3;0.5;0.7", help="rate sets split by ';', one rate per hidden layer "
                                                              "or one for all, e.g. '0.3;0.5,0.7'"),
                kinds: str = typer.Option("bernoulli,row,tile", help="bernoulli (conventional), row, tile, none"),
                epochs: int = typer.Option(1, help="epochs per run"),
                batch: int = typer.Option(128, help="mini-batch"),
                lr: float = typer.Option(0.01, help="learning rate"),
                momentum: float = typer.Option(0.9, help="SGD momentum"),
                train_samples: Optional[int] = typer.Option(None, help="seeded subset of the training set"),
                test_samples: Optional[int] = typer.Option(None, help="seeded subset of the test set"),
                max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", help="N, the largest dp"),
                smoke: bool = typer.Option(False, help="seconds: digits, hidden 64x64, one epoch"),
                threads: Optional[int] = typer.Option(None, help="torch threads (same for every run)"),
                seed: int = typer.Option(0, help="random seed"),
                out: Optional[Path] = typer.Option(None, help="write table and curves as JSON here"),
                as_json: bool = typer.Option(False, "--json", help="print JSON instead of the table")) -> None:
    """§IV-A/B: MLP test accuracy and time per epoch with conventional dropout, RDP and TDP."""
    from lab.experiments.dropout import TABLE1_HIDDEN, mlp_table

    if smoke:
        dataset, hidden, epochs, batch = "digits", "64,64", 2, 32
        threads = threads or 1
    hs = [tuple(TABLE1_HIDDEN[i]) for i in range(len(TABLE1_HIDDEN))] if table1 else \
        [tuple(_numbers(hidden, "--hidden", int))]
    rs = [(0.7,) * len(hs[0])] if table1 else _dropout_rate_sets(rates, len(hs[0]))
    ks = _dropout_kinds(kinds)
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    try:
        with progress_bar(not as_json) as cb:
            t = mlp_table(dataset, str(data_path) if data_path else None, hidden=hs, rates=rs, kinds=ks, epochs=epochs,
                          batch=batch, lr=lr, momentum=momentum, train_samples=train_samples,
                          test_samples=test_samples, max_dp=max_dp, threads=threads, seed=seed, progress=cb)
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
        return
    ds = t.table["dataset"].iloc[0]
    n_tr, n_te = t.table["train_samples"].iloc[0], t.table["test_samples"].iloc[0]
    _dropout_output(t, f"MLP on {ds} ({n_tr} train / {n_te} test, {epochs} epochs): test accuracy (%), change vs "
                       "conventional (points), time per epoch (s), speedup",
                    out, as_json, {"experiment": "mlp", "dataset": ds, "epochs": epochs, "batch": batch, "lr": lr,
                                   "momentum": momentum, "seed": seed, "threads": torch.get_num_threads()},
                    ["hidden", "rates", "pattern", "test_acc", "acc_change", "epoch_s", "speedup", "paper_acc",
                     "paper_acc_change", "paper_speedup"])


@dropout_app.command("lstm")
def dropout_lstm(corpus: str = typer.Option("auto", help="auto | ptb | fortunes | bible"),
                 path: Optional[Path] = typer.Option(None, help="Penn Treebank directory (ptb.train.txt, ...)"),
                 hidden: int = typer.Option(256, help="units per LSTM layer (the paper: 1500)"),
                 layers: int = typer.Option(2, help="LSTM layers"),
                 rates: str = typer.Option("0.3;0.5;0.7", help="rate sets split by ';' (one rate, or one per layer)"),
                 kinds: str = typer.Option("bernoulli,row,tile", help="bernoulli (conventional), row, tile, none"),
                 epochs: int = typer.Option(1, help="epochs per run"),
                 batch: int = typer.Option(20, help="batch (the paper's 20)"),
                 bptt: int = typer.Option(35, help="truncated-BPTT length (the paper's 35)"),
                 lr: float = typer.Option(1.0, help="learning rate (the paper's 1)"),
                 lr_decay: float = typer.Option(0.8, help="learning-rate factor per epoch after the first"),
                 vocab: int = typer.Option(10_000, help="vocabulary size (PTB's 10k)"),
                 max_tokens: Optional[int] = typer.Option(None, help="use only this many training tokens"),
                 max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", help="N, the largest dp"),
                 smoke: bool = typer.Option(False, help="seconds: 3,000 tokens, 32 units, vocab 500"),
                 threads: Optional[int] = typer.Option(None, help="torch threads (same for every run)"),
                 seed: int = typer.Option(0, help="random seed"),
                 out: Optional[Path] = typer.Option(None, help="write table and curves as JSON here"),
                 as_json: bool = typer.Option(False, "--json", help="print JSON instead of the table")) -> None:
    """§IV-C: LSTM language model, test perplexity / next-word accuracy and time per epoch with
    conventional dropout, RDP and TDP on the non-recurrent connections."""
    from lab.experiments.dropout import lstm_table

    if smoke:
        max_tokens, hidden, vocab, epochs = 3000, 32, 500, 1
        threads = threads or 1
    if layers < 1 or hidden < 1:
        fail(f"--layers {layers}, --hidden {hidden}: both must be >= 1")
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    rs = _dropout_rate_sets(rates, layers)
    ks = _dropout_kinds(kinds)
    try:
        with progress_bar(not as_json) as cb:
            t = lstm_table(corpus, str(path) if path else None, hidden=hidden, layers=layers, rates=rs, kinds=ks,
                           epochs=epochs, batch=batch, bptt=bptt, lr=lr, lr_decay=lr_decay, vocab_size=vocab,
                           max_train_tokens=max_tokens, max_dp=max_dp, threads=threads, seed=seed, progress=cb)
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
        return
    c = t.table["corpus"].iloc[0]
    n_tok = t.table["train_tokens"].iloc[0]
    _dropout_output(t, f"LSTM LM on {c} ({n_tok} training tokens, {layers}x{hidden} units, {epochs} epochs): test "
                       "perplexity, next-word accuracy (%), time per epoch (s), speedup",
                    out, as_json, {"experiment": "lstm", "corpus": c, "hidden": hidden, "layers": layers,
                                   "epochs": epochs, "batch": batch, "bptt": bptt, "lr": lr, "seed": seed,
                                   "threads": torch.get_num_threads()},
                    ["rates", "pattern", "test_ppl", "ppl_change", "test_acc", "acc_change", "epoch_s", "speedup",
                     "paper_acc", "paper_speedup"])


@bench_app.command("dropout")
def bench_dropout(widths: str = typer.Option("1024,2048,4096", help="layer widths w of the pair"),
                  rates: str = typer.Option("0.3,0.5,0.7", help="dropout rates p"),
                  batch: int = typer.Option(128, help="batch (rows of the activation)"),
                  steps: int = typer.Option(16, help="training steps per timed sample"),
                  repeats: int = typer.Option(5, help="timed samples per contestant (median reported)"),
                  max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", help="N, the largest dp"),
                  tile: str = typer.Option("32,32", help="TDP tile rows,cols"),
                  threads: Optional[int] = typer.Option(None, help="torch threads for every contestant"),
                  device: Optional[str] = typer.Option(None, help="cpu or cuda"),
                  seed: int = typer.Option(0, help="random seed"),
                  out: Optional[Path] = typer.Option(None, help="JSON path (default "
                                                                "bench/results/dropout-<device>.json)")
                  ) -> None:
    """Forward+backward of a hidden-layer pair: conventional dropout + full GEMMs vs RDP vs TDP,
    same run; speedup and its ratio to the ceiling 1/(1-p)."""
    from lab import backend
    from lab.dropout import check_rate
    from lab.experiments.dropout import layer_speedup

    ws = _numbers(widths, "--widths", int)
    ps = _numbers(rates, "--rates")
    tl = tuple(_numbers(tile, "--tile", int))
    if len(tl) != 2 or min(tl) < 1:
        fail(f"--tile {tile!r}: give two positive integers rows,cols")
    if min(ws) < 1 or batch < 1 or steps < 1 or repeats < 1:
        fail("--widths, --batch, --steps and --repeats must be >= 1")
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    try:
        for p in ps:
            check_rate(p)
    except ValueError as e:
        fail(f"--rates: {e}")
    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda needs a CUDA GPU")
    try:
        with progress_bar() as cb:
            df = layer_speedup(ws, ps, batch=batch, steps=steps, repeats=repeats, max_dp=max_dp, tile=tl, device=dev,
                               threads=threads, seed=seed, progress=cb)
    except ValueError as e:
        fail(str(e))
        return
    info = df.attrs["info"]
    path = _write_bench(f"dropout-{backend.device_slug(dev)}", info, df.to_dict(orient="records"), out)
    cols = ["width", "p", "contestant", "ms", "speedup", "ceiling", "of_ceiling", "kept_fraction"]
    print_frame(df[cols], f"Layer pair fwd+bwd on {info['device']}, batch {batch} "
                          "(speedup: conventional dropout + full GEMMs time / this time)")
    console.print(f"wrote {path}")
# --- end dropout ---


# --- deep image and planner (Wu et al. 2015; Dettmers 2016 §2; Hoefler's slides) ---
@app.command()
def plan(model: str = typer.Option("alexnet", help="alexnet | deep_image | vgg16 | resnet50 | gpt2_small"),
         gpus: str = typer.Option("1,2,4,8,16,32,64", help="GPU counts P, comma-separated"),
         link: str = typer.Option("pcie3", help="link preset (pcie3, nvlink4, ib_fdr, eth10g, ...) or a "
                                                "bench/results/collectives-*.json with a fitted link"),
         strategy: str = typer.Option("data", help="data | model | hybrid | pipeline, or several comma-separated"),
         device: str = typer.Option("v100", help="gtx_titan | k40m | v100 | a100 | h100"),
         batch: Optional[int] = typer.Option(None, "--batch", help="samples per GPU (default 128); the step's "
                                                                   "mini-batch is P x batch"),
         global_batch: Optional[int] = typer.Option(None, "--global-batch", help="fixed mini-batch split over the "
                                                                                  "GPUs instead of --batch"),
         algorithm: str = typer.Option("ring", help="allreduce: ring | tree | recursive_doubling | rabenseifner | "
                                                    "butterfly_sync | parameter_server"),
         codec: str = typer.Option("none", help="codec for every gradient allreduce (none, dynamic_tree, onebit, ...)"),
         activation_codec: str = typer.Option("none", "--activation-codec",
                                              help="codec for model-parallel / pipeline activations"),
         overlap: bool = typer.Option(False, "--overlap/--no-overlap", help="Deep Image's lazy update: overlap "
                                                                            "each allreduce with later compute"),
         micro_batches: Optional[int] = typer.Option(None, "--micro-batches", help="pipeline micro-batches "
                                                                                   "(default 4P)"),
         layers: bool = typer.Option(False, "--layers", help="also print the per-layer breakdown at the largest P"),
         advice: bool = typer.Option(False, "--advice", help="also print codec advice per layer at the largest P"),
         as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables")) -> None:
    """Predicted step time of data / model / hybrid / pipeline parallelism vs P: compute and communication
    breakdown, speedup and scaling efficiency (lab.plan; communication from lab.comm.cost)."""
    from lab.experiments.plan import planner_advice, planner_breakdown, planner_sweep
    from lab.plan import get_model, resolve_link

    Ps = _numbers(gpus, "--gpus", int)
    strategies = [s.strip() for s in strategy.split(",") if s.strip()]
    if batch is not None and global_batch is not None:
        fail("give --batch or --global-batch, not both")
    kw = dict(device=device, batch_per_gpu=None if global_batch is not None else (128 if batch is None else batch),
              global_batch=global_batch, algorithm=algorithm)
    try:
        spec = get_model(model)
        lk = resolve_link(link)
        df = planner_sweep(spec, Ps, strategies=strategies, link=lk, codec=codec, activation_codec=activation_codec,
                           overlap=overlap, micro_batches=micro_batches, **kw)
        ok = df[df["feasible"]]
        top = {s: int(ok[ok["strategy"] == s]["P"].max()) for s in strategies if (ok["strategy"] == s).any()}
        lay = [(s, top[s], planner_breakdown(spec, top[s], strategy=s, link=lk, codec=codec,
                                             activation_codec=activation_codec, overlap=overlap,
                                             micro_batches=micro_batches if s == "pipeline" else None, **kw))
               for s in top] if layers else []
        adv = [(s, top[s], planner_advice(spec, top[s], strategy=s, link=lk, **kw)) for s in top
               if s != "pipeline"] if advice else []
    except ValueError as e:
        fail(str(e))
        return
    if as_json:
        out = {"model": spec.describe(), "link": lk.name, "device": device, "rows": df.to_dict(orient="records")}
        if lay:
            out["layers"] = {s: {"P": P, "rows": b.layers.to_dict(orient="records")} for s, P, b in lay}
        if adv:
            out["advice"] = {s: {"P": P, "rows": a.to_dict(orient="records")} for s, P, a in adv}
        console.print_json(json.dumps(out, default=str))
        return
    cols = ["strategy", "P", "global_batch", "compute_ms", "comm_ms", "exposed_comm_ms", "idle_ms", "step_ms",
            "images_per_s", "speedup", "efficiency", "memory_GB", "fits", "note"]
    print_frame(df[cols].fillna(""), f"{spec.describe()} on {device} over {lk.name} ({lk.bandwidth_Bps / 1e9:g} GB/s), "
                                     f"{algorithm} allreduce, overlap {'on' if overlap else 'off'}")
    for s, P, b in lay:
        print_frame(b.layers, f"{s} parallelism, P = {P}: per layer")
    for s, P, a in adv:
        print_frame(a, f"codec advice, {s} parallelism, P = {P} (fastest end to end, saving vs fp32)")


@app.command()
def augment(image_size: int = typer.Option(512, "--image-size", help="input image side, px"),
            crop: int = typer.Option(224, help="crop side, px"),
            channels: int = typer.Option(3, help="colour channels"),
            as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """Deep Image Table 1: possible changes per augmentation, computed from the grids the ops draw from."""
    from lab.experiments.deep_image import augmentation_counts

    try:
        df = augmentation_counts(image_size, crop, channels)
    except ValueError as e:
        fail(str(e))
        return
    if as_json:
        console.print_json(json.dumps({"rows": df.to_dict(orient="records")}, default=str))
        return
    shown = df.assign(possible_changes=df["possible_changes"].astype(str),
                      paper=[("" if p is None or p != p else str(int(p))) for p in df["paper"]])
    print_frame(shown.fillna(""),
                f"Wu et al. 2015 Table 1: possible changes ({crop}x{crop} crops of {image_size}x{image_size})")


@app.command()
def fusion(smoke: bool = typer.Option(False, "--smoke", help="digits at 16 and 32 px, seconds on a CPU"),
           dataset: str = typer.Option("auto", help="auto | mnist | fashion-mnist | digits"),
           data_path: Optional[Path] = typer.Option(None, "--data-path", help="directory of MNIST-format IDX files"),
           scales: str = typer.Option("28,56", help="input sizes in px, comma-separated"),
           epochs: int = typer.Option(8, help="epochs per model"),
           train_size: int = typer.Option(10000, "--train-size", help="training images (0 = all)"),
           test_size: int = typer.Option(2000, "--test-size", help="test images (0 = all)"),
           lr: float = typer.Option(3e-3, help="Adam peak learning rate (one-cycle schedule)"),
           seed: int = typer.Option(0, help="random seed"),
           out: Optional[Path] = typer.Option(None, help="write the result as JSON here"),
           as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables")) -> None:
    """Deep Image §4.2: one small CNN per input scale, fused by averaging softmax posteriors; test errors."""
    from lab.experiments.deep_image import multiscale_fusion
    from lab.train.data import DataError

    try:
        with progress_bar(not as_json) as cb:
            r = multiscale_fusion(dataset=dataset, scales=_numbers(scales, "--scales", int), epochs=epochs,
                                  train_size=train_size or None, test_size=test_size or None, lr=lr, seed=seed,
                                  smoke=smoke, data_path=data_path, progress=cb)
    except (ValueError, DataError) as e:
        fail(str(e))
        return
    payload = {"info": r.info, "table": r.table.to_dict(orient="records"),
               "agreement": r.agreement.to_dict(orient="records"), "curves": r.curves.to_dict(orient="records")}
    if out:
        _write_result(out, payload)
    if as_json:
        console.print_json(json.dumps(payload, default=str))
        return
    print_frame(r.table.fillna(""), f"Multi-scale fusion on {r.info['dataset']} ({r.info['train']} train, "
                                    f"{r.info['test']} test, {r.info['epochs']} epochs, seed {seed})")
    print_frame(r.agreement, "Where the two scales agree")
    verdict = "better" if r.info["fused_better_than_each"] else "not better"
    console.print(f"fused model {verdict} than each single-scale model (Wu et al. 2015 §4.2: 6.97% vs 7.96% and "
                  "7.42% top-5)", highlight=False)
    if out:
        console.print(f"wrote {out}")


@bench_app.command("augment")
def bench_augment(batch: int = typer.Option(32, help="images per batch"),
                  image_size: int = typer.Option(512, "--image-size", help="input side, px (uint8 RGB)"),
                  crop: int = typer.Option(224, help="crop side, px"),
                  repeats: int = typer.Option(7, help="timed calls per contestant (median reported)"),
                  device: Optional[str] = typer.Option(None, help="cpu or cuda"),
                  seed: int = typer.Option(0, help="random seed"),
                  out: Optional[Path] = typer.Option(None, help="JSON path (default "
                                                                "bench/results/augment-<device>.json)")) -> None:
    """Deep Image augmentations: images/s batched vs a per-image loop, same run, same parameters."""
    from lab import backend
    from lab.experiments.deep_image import augmentation_throughput

    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda needs a CUDA GPU")
    try:
        with progress_bar() as cb:
            df, info = augmentation_throughput(batch=batch, image_size=image_size, crop_size=crop, device=dev,
                                               repeats=repeats, seed=seed, progress=cb)
    except ValueError as e:
        fail(str(e))
        return
    path = _write_bench(f"augment-{backend.device_slug(dev)}", info, df.to_dict(orient="records"), out)
    print_frame(df, f"Augmentation throughput on {info['device']}, batch {batch}, {crop} of {image_size} px "
                    "(speedup: per-image loop time / batched time)")
    console.print(f"wrote {path}")
# --- end deep image and planner ---


def main() -> None:
    app()


if __name__ == "__main__":
    main()
