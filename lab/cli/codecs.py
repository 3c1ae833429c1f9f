"""`paralab table1 | errors | codecs | bench codecs`: Dettmers 2016 Table 1, codec error tables, codec speed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from .base import REPO, app, bench_app, console, fail, print_frame, progress_bar


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
    cols = ["contestant", "op", "n", "ns_per_value", "gb_per_s", "speed_vs_fp8_cast", "speed_vs_bnb", "speed_vs_bnb_op"]
    if "frac_of_copy_bw" in df:
        cols.append("frac_of_copy_bw")
    print_frame(df[cols], f"Codec speed on {info['device']} (ratios: baseline time / this time)")
    console.print(f"wrote {path}")
