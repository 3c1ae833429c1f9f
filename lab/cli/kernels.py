"""`paralab kernels report`: the kernels' report card without a GPU (ptxas's registers, spills, shared and local
memory per architecture, the occupancy of the launchers' CTA sizes, bytes per value, the roofline's ns per value
on H100, H200 and B200)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .base import app, console, emit, fail, json_option, out_option, print_frame, result

kernels_app = typer.Typer(no_args_is_help=True, help="The CUDA kernels of kernels/*.cu: their report card.")
app.add_typer(kernels_app, name="kernels")


@kernels_app.command("report")
def report(fresh: bool = typer.Option(False, "--fresh", help="compile now with the installed nvcc (default: the "
                                                             "committed bench/results/kernel_report_card.json)"),
           arch: Optional[str] = typer.Option(None, help="show one architecture: sm_80 | sm_90 | sm_100"),
           as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Per kernel and architecture: registers, spills, shared and local memory (ptxas), occupancy of each CTA
    size the launchers choose, DRAM bytes per value and the predicted ns per value (bytes / HBM bandwidth:
    every kernel is memory bound, so a GPU's speed-up is its bandwidth ratio)."""
    from lab.experiments import kernel_report, kernel_report_table

    try:
        card = kernel_report(fresh)
    except (ValueError, RuntimeError) as e:
        fail(str(e))
    if arch is not None and arch not in card["archs"]:
        fail(f"--arch {arch!r}; the card has: {', '.join(card['archs'])}")
    rest = {k: v for k, v in card.items() if k not in ("command", "version", "device", "config", "rows")}
    payload = result("kernels report", {"fresh": fresh, "arch": arch}, device="no GPU: nvcc and ptxas",
                     rows=[r for r in card["rows"] if arch is None or r["arch"] == arch], **rest)
    if emit(payload, out, as_json):
        return
    print_frame(kernel_report_table(card, arch), f"kernel report card ({card['nvcc']})", floatfmt="{:.4g}")
    gpus = ", ".join(f"{g['name']} {g['hbm_GBps']:g} GB/s" for g in card["gpus"])
    console.print(f"memory roof: ns/value = bytes per value / HBM bandwidth ({gpus}); traffic counted for "
                  f"{card['assumptions']}", highlight=False, soft_wrap=True)
