"""`paralab trace`: the Collectives page's step-through as tables (docs/design.md rule 3): one
allreduce on 2..8 simulated ranks, every message, bytes per link and rank against 2(P−1)/P·n, algbw/busbw."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .base import app, console, emit, fail, json_option, out_option, print_frame, result
from .names import RegistryHelp


@app.command(cls=RegistryHelp)
def trace(algorithm: str = typer.Option("ring", "--algorithm", help="a registered allreduce algorithm: {algorithms}"),
          ranks: int = typer.Option(4, "-P", "--ranks", min=2, max=8, help="simulated ranks, 2..8"),
          codec: str = typer.Option("fp32", "--codec", help="codec on the wire, re-encoded at every hop (fp32: "
                                    "none), e.g. dynamic_tree, fp16, mxfp8_e4m3 or a spec dynamic_tree:rounding=paper"),
          values: int = typer.Option(24, "--values", min=1, max=4096, help="values per rank, 1..4096 (840 splits evenly for every P)"),
          seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="seed of the N(0,1) data the codec error is measured on"),
          link: str = typer.Option("nvlink4", "--link", help="link the algbw/busbw rows are timed on: nvlink4 | "
                                   "ib_ndr | pcie4_x16 | eth100g ... (the Collectives page's link presets)"),
          size: str = typer.Option("256M", "--size", help="bytes per rank for algbw/busbw (K/M/G suffixes): the "
                                   "traced steps scaled to this message size"),
          as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """One allreduce traced message by message (SimComm): each message's step, ranks, bytes, what it
    carries and its error against the exact partial sum; bytes per link and per rank against nccl-tests'
    2(P−1)/P·n; algbw and busbw = algbw·2(P−1)/P on a link."""
    from lab.experiments import USER_ERRORS, parse_size, trace_tables

    try:
        size_bytes = parse_size(size)
        res = trace_tables(algorithm, ranks, values, codec=codec, seed=seed, link=link, size_bytes=size_bytes)
    except USER_ERRORS as e:
        fail(str(e))
        return
    config = {"algorithm": algorithm, "ranks": ranks, "codec": res.summary["codec"], "values": values, "seed": seed,
              "link": link, "size_bytes": size_bytes}
    payload = result("trace", config, rows=res.messages, links=res.links, ranks=res.ranks, busbw=res.busbw,
                     final=res.final, traffic=res.summary, takeaway=res.takeaway)
    if emit(payload, out, as_json):
        return
    s = res.summary
    print_frame(res.messages, f"{algorithm} allreduce on {ranks} ranks, {values} values per rank, codec {s['codec']}: "
                              "every message (step = round; error = max |decoded − exact partial sum|)")
    print_frame(res.links, f"bytes per directed link (× n = {s['n_bytes']} B, one rank's fp32 vector) against "
                           f"2(P−1)/P·n = {s['nccl_share']:.3g}·n")
    print_frame(res.ranks, "bytes per rank (fp32 and on the wire)")
    print_frame(res.busbw,
                f"algbw and busbw on {s['link']} at {size} per rank (busbw = algbw × 2(P−1)/P)")
    console.print(res.takeaway, highlight=False, soft_wrap=True, markup=False)
