"""The kernels' report card (lab.codecs.kernel_card): the committed one (bench/results/kernel_report_card.json)
or one compiled now, and its table: registers, spills, shared and local memory, occupancy per CTA size, bytes per
value and the roofline's predicted ns per value on H100, H200 and B200."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

CARD = Path(__file__).resolve().parents[2] / "bench" / "results" / "kernel_report_card.json"


def kernel_report(fresh: bool = False) -> dict[str, Any]:
    """The card: compiled now with the installed nvcc when `fresh`, else the committed one.
    ValueError (one line) when nvcc is missing or the committed card is not there."""
    from lab.codecs import kernel_card, ptxas

    if fresh:
        if ptxas.nvcc() is None:
            raise ValueError("nvcc is not on the PATH: the report card needs the CUDA toolkit's nvcc "
                             "(without --fresh the committed card is shown)")
        return kernel_card.report_card()
    if not CARD.exists():
        raise ValueError(f"no committed report card at {CARD}; run with --fresh (needs nvcc)")
    return json.loads(CARD.read_text())


def kernel_report_table(card: dict[str, Any], arch: str | None = None) -> pd.DataFrame:
    """One line per kernel and architecture (or of `arch` only): registers, spill bytes, shared bytes, local
    bytes, occupancy at each CTA size (threads: fraction, limiter), bytes per value, predicted ps per value."""
    rows = []
    for r in card["rows"]:
        if arch is not None and r["arch"] != arch:
            continue
        shown = {t: f"{o['occupancy']:.0%}" + ("" if o["limited_by"] == "warps" else f" {o['limited_by']}")
                 for t, o in r["occupancy"].items()}
        occ = (f"{next(iter(shown.values()))} at {'/'.join(shown)}" if len(set(shown.values())) == 1
               else ", ".join(f"{v} at {t}" for t, v in shown.items()))
        rows.append({"kernel": r["kernel"], "arch": r["arch"], "registers": r["registers"],
                     "spills B": r["spill_stores"] + r["spill_loads"], "shared B": r["shared_bytes"],
                     "local B": r["local_bytes"], "occupancy at threads": occ,
                     "bytes/value": r["bytes_per_value"],
                     **{f"{g} ps/value": 1000 * p["ns_per_value"] for g, p in r["predicted"].items()}})
    return pd.DataFrame(rows)


__all__ = ["CARD", "kernel_report", "kernel_report_table"]
