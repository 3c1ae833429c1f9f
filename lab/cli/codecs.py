"""`paralab table1 | errors | codecs | bench codecs`: Dettmers 2016 Table 1, codec error tables, codec speed."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from .base import (app, bench_app, bench_out, check_results_dir, console, device_option, deprecated, emit, fail, json_option, out_option, print_frame,
                   result, session)
from .names import RegistryHelp


@app.command()
def table1(samples: int = typer.Option(1_000_000, min=1, max=1 << 30, help="samples per distribution (the paper used 25 M)"),
           rounding: str = typer.Option("both", help="paper | nearest | both"),
           seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
           extended: bool = typer.Option(False, "--extended",
                                         help="also the block-scaled formats (six OCP MX types, NVFP4) as extra "
                                              "rows, with every row's wire bits per value"),
           as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Dettmers 2016 Table 1: the four 8-bit types on U(0,1) and normal distributions, paper vs measured
    (--extended: beside MX and NVFP4)."""
    from lab.experiments import TABLE1_NOTE, table1 as run
    from lab.experiments.codec_table1 import EXTENDED_NOTE as TABLE1_EXTENDED_NOTE

    allowed = {"paper": ("paper",), "nearest": ("nearest",), "both": ("paper", "nearest")}
    if rounding not in allowed:
        fail(f"--rounding {rounding!r}; allowed: paper, nearest, both")
    if samples < 1:
        fail(f"--samples {samples}; need at least 1")
    config = {"samples": samples, "rounding": rounding, "seed": seed, "extended": extended}
    with session("table1", config, out, as_json) as s:
        df = run(samples=samples, roundings=allowed[rounding], seed=seed, extended=extended, progress=s.progress)
    note = TABLE1_NOTE + (" " + TABLE1_EXTENDED_NOTE if extended else "")
    if emit(result("table1", config, rows=df, note=note), out, as_json):
        return
    print_frame(df, f"Table 1 — {samples:,} samples per distribution, seed {seed}")
    console.print(f"[dim]{TABLE1_NOTE}[/dim]")
    if extended:
        console.print(f"[dim]{TABLE1_EXTENDED_NOTE}[/dim]")


@app.command()
def errors(codec: List[str] = typer.Option(["dynamic_tree", "linear", "fp8_e4m3", "int8"],
                                           help="codec spec (repeatable), e.g. 'dynamic_tree:rounding=paper'; see `paralab codecs`"),
           dist: List[str] = typer.Option(["uniform(0,1)", "normal(0,1)"],
                                          help="distribution spec (repeatable), e.g. 'student_t(3)'"),
           samples: int = typer.Option(1_000_000, min=1, max=1 << 30, help="samples per distribution"),
           seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
           as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Error table of any codecs on any distributions."""
    from lab.experiments import error_table, get_codec, parse_distribution

    try:
        codecs = [get_codec(c) for c in codec]
        for d in dist:
            parse_distribution(d)
    except ValueError as e:
        fail(str(e))
    config = {"codec": list(codec), "dist": list(dist), "samples": samples, "seed": seed}
    with session("errors", config, out, as_json) as s:
        for i, (name, c) in enumerate(zip(codec, codecs)):  # one codec at a time: Ctrl-C keeps the finished ones
            part = error_table([c], dist, samples=samples, seed=seed, progress=s.part(i, len(codecs)))
            s.add(part.to_dict(orient="records"), f"codec {name}")
    df = pd.DataFrame(s.rows)
    if not emit(result("errors", config, rows=df), out, as_json):
        print_frame(df, f"Approximation error — {samples:,} samples, seed {seed}")


@app.command()
def codecs(as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """List every codec: name, description, options (name=default) and flags."""
    from lab.experiments import codec_catalog

    flags = ("summable", "gather_only", "phased", "gradient_only", "two_stage", "table", "stochastic")
    df = pd.DataFrame([{"name": c.name, "description": c.summary,
                        "options": ", ".join(f"{o.name}={o.default}" for o in c.options),
                        "flags": ", ".join(f for f in flags if getattr(c, f))} for c in codec_catalog()],
                      columns=["name", "description", "options", "flags"])
    if not emit(result("codecs", {}, rows=df), out, as_json):
        print_frame(df, "Codecs")


@bench_app.command("codecs", cls=RegistryHelp)
def bench_codecs(codecs: Optional[str] = typer.Option(None, "--codecs", help="comma-separated codec specs to time "
                                                      "(default: every registered codec): {codecs}"),
                 minbytes: str = typer.Option("256K", "-b", "--minbytes",
                                              help="smallest fp32 input, bytes (K/M/G suffixes), nccl-tests' -b"),
                 maxbytes: Optional[str] = typer.Option(None, "-e", "--maxbytes",
                                                        help="largest fp32 input, bytes (K/M/G suffixes), nccl-tests' "
                                                             "-e (default 256M on a CPU, 1G on a GPU)"),
                 stepfactor: int = typer.Option(4, "-f", "--stepfactor", min=2, max=1 << 20, help="size step factor, nccl-tests' -f"),
                 repeats: int = typer.Option(5, min=1, max=10_000, help="timed calls per contestant (median reported)"),
                 device: Optional[str] = device_option(),
                 as_json: bool = json_option(),
                 out: Optional[Path] = out_option(" (default bench/results/codecs-<device>.json)"),
                 old_min_exp: Optional[int] = typer.Option(None, "--min-exp", hidden=True,
                                                           min=0, max=31, help="deprecated: -b/--minbytes"),
                 old_max_exp: Optional[int] = typer.Option(None, "--max-exp", hidden=True,
                                                           min=0, max=31, help="deprecated: -e/--maxbytes")) -> None:
    """Encode/decode speed of every registered codec (or --codecs) vs torch's fp8 cast, bitsandbytes and
    torchao's to_mx, same run. Sizes in bytes of the fp32 input, as `bench collectives`: -b 256K -e 64M -f 4."""
    from lab import backend
    from lab.experiments import check_codec_spec, codec_bench_sizes, codec_benchmark, parse_size

    try:
        lo = parse_size(minbytes)
        hi = parse_size(maxbytes) if maxbytes is not None else None
        for old, value, new in (("--min-exp", old_min_exp, "-b/--minbytes"),
                                ("--max-exp", old_max_exp, "-e/--maxbytes")):
            if value is None:
                continue
            deprecated(old, f"{new} in bytes of the fp32 input (2^k values = 4*2^k bytes)",
                       why="nccl-tests' names, as `bench collectives`")
            lo, hi = (4 << value, hi) if old == "--min-exp" else (lo, 4 << value)
        dev, sizes, top = codec_bench_sizes(device, lo, hi, stepfactor, repeats)
        selected = None if codecs is None else [c.strip() for c in codecs.split(",") if c.strip()]
        if selected is not None and not selected:
            raise ValueError(f"--codecs {codecs!r} names no codec; allowed: comma-separated codec specs "
                             "(`paralab codecs` lists them), or leave it out for every registered codec")
        for spec in selected or ():
            check_codec_spec(spec)
    except ValueError as e:
        fail(str(e))
    check_results_dir(out, as_json)
    path = bench_out(out, as_json, f"codecs-{backend.device_slug(dev)}")
    config = {"minbytes": lo, "maxbytes": top, "stepfactor": stepfactor, "repeats": repeats, "device": dev.type,
              "codecs": selected}
    info: dict = {}
    notes: list[str] = []
    with session("bench codecs", config, path, as_json, device=backend.device_name(dev)) as s:
        for i, n in enumerate(sizes):  # one size at a time: Ctrl-C keeps the finished sizes
            part, info = codec_benchmark(n, dev, repeats=repeats, progress=s.part(i, len(sizes)), codecs=selected)
            notes += [m for m in info.get("notes", []) if m not in notes]
            s.add(part.to_dict(orient="records"), f"n={n}")
    df = pd.DataFrame(s.rows)
    info = {**info, "sizes": sizes, "notes": notes}
    device_name = info.pop("device")
    if emit(result("bench codecs", config, device=device_name, rows=df, **info), path, as_json):
        return
    cols = ["contestant", "op", "n", "ns_per_value", "gb_per_s", "speed_vs_fp8_cast", "speed_vs_bnb", "speed_vs_bnb_op",
            "speed_vs_torchao_mx"]
    if "frac_of_copy_bw" in df:
        cols.append("frac_of_copy_bw")
    print_frame(df[[c for c in cols if c in df]], f"Codec speed on {device_name} (ratios: baseline time / this time)")
    for m in notes:
        console.print(f"[dim]{m}[/dim]")
