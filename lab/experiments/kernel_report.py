"""The kernels' report card (lab.codecs.kernel_card): the committed one (bench/results/kernel_report_card.json)
or one compiled now, and its table: registers, spills, shared and local memory, occupancy per CTA size, bytes and
SASS instructions per value and the roofline's predicted ps per value on H100, H200 and B200 with its bound
(memory or instruction issue)."""
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
    bytes, occupancy at each CTA size (threads: fraction, limiter), bytes and instructions per value, and per GPU
    of the architecture the predicted ps per value and its bound (memory or issue)."""
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
                     "local B": r["local_bytes"], "occupancy at CTA size": occ,
                     "bytes/value": r["bytes_per_value"], "instr/value": r["instructions_per_value"],
                     **{k: v for g, p in r["predicted"].items()
                        for k, v in ((f"{g} ps/value", 1000 * p["ns_per_value"]), (f"{g} bound", p["bound"]))}})
    return pd.DataFrame(rows)


__all__ = ["CARD", "kernel_report", "kernel_report_table"]


FAMILIES = ("encoder", "decoder", "fused hop", "decode_sum")


def kernel_family(kernel: str) -> str:
    """What a kernel does: 'encoder' (x to codes), 'decoder' (codes to x), 'fused hop' (decode, add, encode: a
    compressed allreduce's reduction step, or its absmax pass) or 'decode_sum' (P payloads decoded and summed)."""
    if kernel == "decode_sum":
        return "decode_sum"
    if kernel.startswith("hop_"):
        return "fused hop"
    return "encoder" if "encode" in kernel else "decoder"


def kernel_card_frame(card: dict[str, Any], gpu: str, arch: str | None = None) -> pd.DataFrame:
    """One line per kernel of `arch` (default: `gpu`'s architecture): family, registers, spill bytes, shared
    bytes, the lowest occupancy over the launchers' CTA sizes and what limits it, bytes and instructions per
    value, instructions per byte, the memory and issue roofs' ps per value on `gpu`, the predicted ps per value,
    its bound and how far the issue roof is from the memory roof (issue / memory time). Another architecture's
    counts are put under `gpu`'s roofs (lab.codecs.kernel_card.predict). ValueError (one line) for a GPU or an
    architecture not on the card."""
    from lab.codecs.kernel_card import GPUS, predict

    gpus = {g["name"]: g for g in card["gpus"]}
    if gpu not in gpus:
        raise ValueError(f"gpu={gpu!r}; the card has: {', '.join(gpus)}")
    arch = arch or gpus[gpu]["arch"]
    if arch not in card["archs"]:
        raise ValueError(f"arch={arch!r}; the card has: {', '.join(card['archs'])}")
    rows = []
    for r in card["rows"]:
        if r["arch"] != arch:
            continue
        low_t, low = min(r["occupancy"].items(), key=lambda kv: (kv[1]["occupancy"], int(kv[0])))
        p = r["predicted"].get(gpu) or predict(next(g for g in GPUS if g.name == gpu), r["bytes_per_value"],
                                                r["instructions_per_value"])
        rows.append({"kernel": r["kernel"], "family": kernel_family(r["kernel"]), "arch": arch,
                     "registers": r["registers"], "spill_bytes": r["spill_stores"] + r["spill_loads"],
                     "shared_bytes": r["shared_bytes"], "cta_sizes": "/".join(r["occupancy"]),
                     "occupancy": low["occupancy"], "occupancy_cta": int(low_t), "limited_by": low["limited_by"],
                     "bytes_per_value": r["bytes_per_value"], "instructions_per_value": r["instructions_per_value"],
                     "instructions_per_byte": r["instructions_per_byte"],
                     "memory_ps": 1000 * p["memory_ns_per_value"], "issue_ps": 1000 * p["issue_ns_per_value"],
                     "predicted_ps": 1000 * p["ns_per_value"], "bound": p["bound"],
                     "issue_over_memory": p["issue_over_memory"], "sass_instructions": r["sass_instructions"],
                     "values_per_thread": r["values_per_thread"], "bytes_counted": r["bytes_counted"]})
    return pd.DataFrame(rows)


def family_distance(frame: pd.DataFrame) -> pd.DataFrame:
    """Per family: kernels, the median and the range of issue / memory time (> 1: the issue roof is the
    slower one), and how many are issue bound; sorted furthest from the memory roof first."""
    g = frame.groupby("family")["issue_over_memory"]
    out = pd.DataFrame({"kernels": g.size(), "median_issue_over_memory": g.median(), "lowest": g.min(),
                        "highest": g.max(), "issue_bound": frame.groupby("family")["bound"].apply(
                            lambda b: int((b == "issue").sum()))})
    return out.sort_values("median_issue_over_memory", ascending=False).reset_index()


def _plural(family: str) -> str:
    return family if family == "decode_sum" else family + "s"


def kernel_takeaway(frame: pd.DataFrame, card: dict[str, Any], gpu: str) -> str:
    """The page's takeaway from the numbers on screen: how many kernels each roof bounds on `gpu`, the machine
    balance (instructions per byte at the ridge), the family furthest from the memory roof and the one closest."""
    g = next(x for x in card["gpus"] if x["name"] == gpu)
    fam = family_distance(frame)
    far, near = fam.iloc[0], fam.iloc[-1]
    issue = int((frame["bound"] == "issue").sum())
    low = frame.loc[frame["occupancy"] < 1]
    worst = frame.loc[frame["occupancy"].idxmin()]
    occ = ("every kernel reaches full occupancy at every CTA size the launchers choose" if low.empty else
           f"{len(low)} kernel(s) run below full occupancy, limited by "
           + ", ".join(f"{k} ({n})" for k, n in low["limited_by"].value_counts().items())
           + f"; the lowest, {worst['kernel']}, keeps {worst['occupancy']:.0%} of the SM's warps at "
           f"{worst['occupancy_cta']} threads per CTA")
    return (f"On {gpu}, the ridge is at {g['balance_instructions_per_byte']:.1f} instructions per byte: "
            f"{issue} of {len(frame)} kernels issue more than that per byte they move and are predicted issue "
            f"bound, {len(frame) - issue} memory bound. The {_plural(far['family'])} sit furthest from the memory roof "
            f"(issue time {far['median_issue_over_memory']:.1f}x the memory time, median), the {_plural(near['family'])} "
            f"closest ({near['median_issue_over_memory']:.2f}x). Occupancy: {occ}.")


__all__ += ["FAMILIES", "kernel_family", "kernel_card_frame", "family_distance", "kernel_takeaway"]


def kernel_measure(n: int = 2**23, repeats: int = 20, card: dict[str, Any] | None = None) -> dict[str, Any]:
    """On a CUDA GPU: every kernel of the card launched alone on n values (lab.codecs.kernel_timing; CUDA events,
    median of `repeats` after warm-up) beside the card's prediction for this GPU where the card has it (H100,
    H200, B200: its architecture's instruction counts under its roofs). Returns {device, arch, gpu (the card's,
    or None), n, rows}; a row: kernel, family, measured ps per value and its fastest and slowest call, and where
    predicted the predicted, memory-roof and issue-roof ps per value, the bound, measured / predicted and the
    share of the HBM bandwidth reached (memory roof / measured). ValueError (one line) without a GPU."""
    import torch

    from lab import backend
    from lab.codecs import kernel_timing

    if not backend.gpu_available():
        raise ValueError("no CUDA GPU here: the kernels are measured on a GPU (the card's prediction needs none: "
                         "`paralab kernels report`)")
    card = kernel_report() if card is None else card
    device = torch.device("cuda")
    name = backend.device_name(device)
    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}"
    measured = kernel_timing.measure(kernel_timing.kernel_calls(n, device), device, n, repeats)
    return {"device": name, "arch": arch, "n": n, "repeats": repeats, **measured_beside_card(measured, card, name, arch)}


def measured_beside_card(measured: dict[str, dict[str, float]], card: dict[str, Any], device: str,
                         arch: str) -> dict[str, Any]:
    """{gpu, rows}: each kernel's measured ns per value ({kernel: {ns_per_value, low, high}}) beside the card's
    prediction for the card's GPU whose name `device` contains (none: measured only), read with `arch`'s
    instruction counts where the card has that architecture."""
    gpu = next((g for g in card["gpus"] if g["name"].lower() in device.lower()), None)
    pred = {}
    if gpu is not None:
        frame = kernel_card_frame(card, gpu["name"], arch if arch in card["archs"] else None)
        pred = {r["kernel"]: r for r in frame.to_dict("records")}
    rows = []
    for kernel, m in sorted(measured.items()):
        row = {"kernel": kernel, "family": kernel_family(kernel), "measured_ps": 1000 * m["ns_per_value"],
               "fastest_ps": 1000 * m["low"], "slowest_ps": 1000 * m["high"]}
        if kernel in pred:
            p = pred[kernel]
            row.update(predicted_ps=p["predicted_ps"], memory_ps=p["memory_ps"], issue_ps=p["issue_ps"],
                       bound=p["bound"], measured_over_predicted=row["measured_ps"] / p["predicted_ps"],
                       hbm_share=p["memory_ps"] / row["measured_ps"])
        rows.append(row)
    return {"gpu": gpu["name"] if gpu else None, "rows": rows}


__all__ += ["kernel_measure", "measured_beside_card"]
