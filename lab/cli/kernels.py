"""`paralab kernels report`: the kernels' report card without a GPU (ptxas's registers, spills, shared and local
memory per architecture, the occupancy of the launchers' CTA sizes, bytes and SASS instructions per value, the
roofline's ns per value on H100, H200 and B200 and whether memory or instruction issue bounds it)."""
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
    size the launchers choose, DRAM bytes and SASS instructions per value, and the roofline's predicted time per
    value: the slower of bytes / HBM bandwidth and instructions / issue rate, which names the bound."""
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
    for a in [arch] if arch else card["archs"]:
        print_frame(kernel_report_table(card, a).drop(columns="arch"), f"kernel report card: {a} ({card['nvcc']})",
                    floatfmt="{:.4g}")
    gpus = ", ".join(f"{g['name']} {g['hbm_GBps']:g} GB/s and {g['issue_per_ns'] / 1000:.1f} T instructions/s "
                     f"({g['balance_instructions_per_byte']:.1f} per byte)" for g in card["gpus"])
    a = card["assumptions"]
    console.print(f"roofline: {a['roofline']} ({gpus}); instructions: {a['instructions']} of a {a['pass_n']:,}-value "
                  f"call; traffic counted for blocks of {a['block']}, {a['payloads']} payloads, MX {a['mx_bits']}-bit",
                  highlight=False, soft_wrap=True)

