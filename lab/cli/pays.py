"""`paralab pays`: does compression pay on a two-level cluster against a bf16 baseline."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .base import app, console, emit, fail, json_option, out_option, print_frame, result
from .names import RegistryHelp


@app.command(cls=RegistryHelp)
def pays(model: str = typer.Option("gpt2-small", help="alexnet | deep_image | vgg16 | resnet50 | gpt2-small; with "
                                                     "--strategy fsdp also a GPT of N billion parameters: gpt-7b"),
         cluster: str = typer.Option("8x8", help="NODESxGPUS, e.g. 8x8: 8 nodes of 8 GPUs"),
         gpu: str = typer.Option("h100", help="GPU preset: gtx_titan | k40m | v100 | a100 | h100 (compute, memory "
                                              "bandwidth for the codec roofline)"),
         intra: str = typer.Option("nvlink4", help="link inside a node: nvlink3 | nvlink4 | nvlink5 | pcie3 | "
                                                   "pcie4_x16 | pcie5_x16 (aliases pcie4, pcie5)"),
         inter: str = typer.Option("ib_ndr", help="one NIC between nodes: ib_hdr | ib_ndr | eth10g | eth25g | eth100g "
                                                  "| eth200g | eth400g ... (aliases hdr, ndr400, 100gbe, ...)"),
         nics: Optional[int] = typer.Option(None, "--nics-per-node", min=1, max=1024, help="NICs per node (default: one per GPU)"),
         batch: int = typer.Option(8, "--batch", min=1, max=1 << 24, help="samples per GPU per step (gpt2-small: 1024-token sequences)"),
         overlap: bool = typer.Option(False, "--overlap/--no-overlap",
                                      help="overlap each layer's allreduce with the rest of the backward pass"),
         codec: Optional[str] = typer.Option(None, "--codecs", help="comma-separated codecs or specs, ef: for "
                                                                     "error feedback (default: every registered codec "
                                                                     "that compresses, and every spec the converge "
                                                                     "result measured)"),
         task: Optional[str] = typer.Option(None, "--task", help="the paralab converge task whose measured steps "
                                                                 "penalties apply: {tasks} (default: the one "
                                                                 "closest to --model)"),
         strategy: str = typer.Option("ddp", "--strategy", help="ddp (allreduce the gradients) | fsdp (ZeRO-3 / "
                                                                "FSDP: weights all-gathered twice, gradients "
                                                                "reduce-scattered, against the best bf16 FSDP step)"),
         zero_pp: str = typer.Option("qwz,qgz,hpz", "--zero-pp", help="with --strategy fsdp: ZeRO++ switches, any of "
                                                                       "qwz (codec on the weights' all-gather), qgz "
                                                                       "(one-shot all-to-all gradients), hpz (backward "
                                                                       "all-gather inside the node), or none"),
         weights_codec: Optional[str] = typer.Option(None, "--weights-codec", help="with --strategy fsdp and qwz: "
                                                     "one codec for the weights on every row (ZeRO++: int8 weights "
                                                     "beside 4-bit gradients); default: each row's codec"),
         all_rows: bool = typer.Option(False, "--all", help="also print every codec × algorithm row"),
         as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Per codec: step-time speedup against bf16 (its best algorithm: flat ring, hierarchical, ZeRO++'s
    alltoall_quantized, in-network), codec time counted, and the NIC bandwidth below which it pays; beside
    it, time to accuracy from the steps penalty `paralab converge` measured (or "not measured")."""
    from lab.experiments import USER_ERRORS, does_compression_pay, pays_takeaway

    codecs = [c.strip() for c in codec.split(",") if c.strip()] if codec else None
    config = {"model": model, "cluster": cluster, "gpu": gpu, "intra": intra, "inter": inter, "nics_per_node": nics,
              "batch": batch, "overlap": overlap, "codecs": codecs, "task": task, "strategy": strategy}
    fsdp = strategy == "fsdp"
    if fsdp:
        config["zero_pp"] = zero_pp
        config["weights_codec"] = weights_codec
    try:
        res = does_compression_pay(model, cluster, gpu=gpu, intra=intra, inter=inter, nics_per_node=nics,
                                   batch_per_gpu=batch, overlap=overlap, codecs=codecs, converge_task=task,
                                   strategy=strategy, zero_pp=zero_pp, weights_codec=weights_codec)
    except USER_ERRORS as e:
        fail(str(e))
        return
    lesson = pays_takeaway(res)
    extra = {"algorithms": res.rows, "lesson": res.lesson, "takeaway": lesson, "codec_time": res.codec_time,
             "notes": res.notes, "accuracy": res.accuracy}
    if emit(result("pays", config, rows=res.summary, **extra), out, as_json):
        return
    from lab.experiments.pays import ranked_summary

    summary = ranked_summary(res.summary)  # best first by what the interval supports
    cols = ["codec", "best_algorithm", "bits_per_value", "step_ms", "speedup_vs_bf16", "steps_penalty",
            "time_to_accuracy_speedup", "verdict", "pays_below", "pays_below_tta"]
    shown = summary[cols].copy()
    shown["steps_penalty"] = [_penalty(r) for r in summary.to_dict(orient="records")]
    shown["time_to_accuracy_speedup"] = [_tta(r) for r in summary.to_dict(orient="records")]
    if fsdp:
        shown.insert(2, "weights_codec", summary["weights_codec"])
        shown["cross_node_MB"] = summary["cross_node_MB"]
    how = f"FSDP, ZeRO++ {res.lesson.get('zero_pp')}" if fsdp else "DDP"
    print_frame(shown.rename(columns={"speedup_vs_bf16": "per_step_speedup", "steps_penalty": "steps_penalty (95% CI)",
                                      "time_to_accuracy_speedup": "time_to_accuracy_speedup (95% interval)"}),
                f"Does compression pay? {model} on {cluster} {gpu} ({intra} inside, {inter} across), {how}, overlap "
                f"{'on' if overlap else 'off'}: speedup vs the best bf16 run, per step and in time to accuracy, "
                "best first by the low end of its interval")
    console.print(res.accuracy, highlight=False, soft_wrap=True)
    console.print("steps penalty: mean (95% CI over seeds); → counted as: a penalty below 1 whose interval reaches 1 "
                  "counts as 1, so time to accuracy never credits a codec with training faster than bf16 from noise; "
                  "verdict: pays where the whole time-to-accuracy interval is at least 1% faster than bf16, within "
                  "noise where it straddles that", highlight=False, soft_wrap=True)
    if all_rows:
        detail = ["codec_time", "penalty_source", "accuracy", "steps_penalty", "steps_penalty_ci_low",
                  "steps_penalty_ci_high", "time_to_accuracy_speedup_ci_low", "time_to_accuracy_speedup_ci_high",
                  "break_even_tta_GBps"]  # per codec in the table above; --json has them per row
        print_frame(res.rows.drop(columns=detail), "every codec × algorithm")
    console.print(f"codec time: {res.codec_time}", highlight=False, soft_wrap=True)
    for n in res.notes:
        console.print(f"note: {n}", highlight=False, soft_wrap=True)
    console.print(lesson, highlight=False, soft_wrap=True)


def _penalty(r: dict) -> str:
    """A row's measured steps penalty in words: 'x.xx (a-b)', 'x.xx (a-b) → 1.00' where a penalty below 1
    within noise is not credited, 'never reaches the target', 'not measured'."""
    if r["accuracy"] in ("baseline", "not measured", "never reaches the target"):
        return "1" if r["accuracy"] == "baseline" else r["accuracy"]
    measured = r.get("steps_penalty_measured", r["steps_penalty"])
    lo, hi = r["steps_penalty_ci_low"], r["steps_penalty_ci_high"]
    ci = f" ({lo:.2f}-{hi:.2f})" if lo == lo and hi == hi else ""
    counted = f" → {r['steps_penalty']:.2f}" if f"{measured:.2f}" != f"{r['steps_penalty']:.2f}" else ""
    return f"{measured:.2f}{ci}{counted}"


def _tta(r: dict) -> str:
    """A row's time-to-accuracy speedup with its interval ('never' when it never reaches the target)."""
    if r["accuracy"] == "not measured":
        return "not measured"
    if r["accuracy"] == "never reaches the target":
        return "never"
    lo, hi = r.get("time_to_accuracy_speedup_ci_low"), r.get("time_to_accuracy_speedup_ci_high")
    ci = f" ({lo:.2f}-{hi:.2f})" if lo is not None and hi is not None and lo == lo and hi == hi else ""
    return f"{r['time_to_accuracy_speedup']:.2f}x{ci}"
