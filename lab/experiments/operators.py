"""The operator level (Ben-Nun & Hoefler 2018, "Computing fully connected / convolutional layers"): work, depth
and average parallelism of a fully connected layer and of each way to compute a convolution, each convolution
method checked against `F.conv2d` and timed here, with µ-cuDNN's micro-batching (the batch split into k) — tidy
tables for the Operators page and `paralab operators`."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd
import torch
import torch.nn.functional as F

from lab.operators import (CONV_METHODS, ConvShape, check_method, conv_multiplications, conv_shape,
                           conv_work_depth, device_threads, fc_work_depth, microbatched)

from .spread import median_interval, separable

TOLERANCE = 1e-4
"""A method matches F.conv2d when its largest error is at most this fraction of F.conv2d's largest |output|
(float32: the four methods sum the same products in different orders, FFT and Winograd through transforms)."""
BASELINE = "F.conv2d"
METHOD_LABELS = {"direct": "direct", "im2col": "im2col (unfold + GEMM)", "fft": "FFT (torch.fft)",
                 "winograd": "Winograd F(2×2, 3×3)", BASELINE: "torch F.conv2d (baseline)"}


def operator_layer(n: int, c_in: int, c_out: int, h: int, w: int, k: int, stride: int = 1,
                   padding: int = 0) -> ConvShape:
    """A checked convolutional layer (batch N, C_in → C_out channels, H x W input, k x k kernel)."""
    return conv_shape(n, c_in, c_out, h, w, k, stride, padding)


def _why_not(method: str, shape: ConvShape) -> str:
    try:
        check_method(method, shape)
    except ValueError as e:
        return str(e)
    return ""


def conv_work_depth_table(shape: ConvShape, m: int = 4, c: float = 1.0) -> pd.DataFrame:
    """One row per method of the survey's convolution table: its W, D and W/D (the survey's formulas; `m` Winograd's
    input tile, `c` FFT's transform constant), the real multiplications the implementation here performs and
    their ratio to direct's; a method that cannot compute the layer has its reason in `not_possible`."""
    rows = []
    direct = conv_multiplications(shape, "direct")
    for method in CONV_METHODS:
        why = _why_not(method, shape)
        if why:
            rows.append({"method": method, "label": METHOD_LABELS[method], "work": float("nan"),
                         "depth": float("nan"), "parallelism": float("nan"), "multiplications": float("nan"),
                         "mults_vs_direct": float("nan"), "not_possible": why})
            continue
        wd = conv_work_depth(shape, method, m=m, c=c)
        mults = conv_multiplications(shape, method)
        rows.append({"method": method, "label": METHOD_LABELS[method], "work": wd.work, "depth": wd.depth,
                     "parallelism": wd.parallelism, "multiplications": mults, "mults_vs_direct": mults / direct,
                     "not_possible": ""})
    return pd.DataFrame(rows)


def fc_work_depth_table(n: int, c_in: int, c_out: int) -> pd.DataFrame:
    """The survey's FC table: forward, ∇w and ∇o of a C_in → C_out layer on a batch of N, W, D, W/D."""
    return pd.DataFrame([{"operator": r.operator, "work": r.work, "depth": r.depth, "parallelism": r.parallelism}
                         for r in fc_work_depth(n, c_in, c_out)])


def depth_growth(shape: ConvShape, method: str = "direct", factors: Sequence[int] = (1, 2, 4, 8)) -> pd.DataFrame:
    """W and D of `method` as C_in grows by `factors`: the survey's "W is linear and D logarithmic" in numbers."""
    rows = []
    for f in factors:
        s = conv_shape(shape.n, shape.c_in * f, shape.c_out, shape.h, shape.w, shape.k, shape.stride, shape.padding)
        wd = conv_work_depth(s, method)
        rows.append({"c_in": s.c_in, "work": wd.work, "depth": wd.depth, "parallelism": wd.parallelism})
    return pd.DataFrame(rows)


def operator_device() -> str:
    """Where the Operators page computes: "cuda" when torch sees a GPU (the methods are plain torch), else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def threads(device: str = "cpu") -> tuple[int, str]:
    """How many threads the device runs at once, and how that was counted (lab.operators.device_threads)."""
    return device_threads(device)


@dataclass
class OperatorTimings:
    """Each method's time per split of the batch (median and its interval over `repeats`), its workspace and its
    error against F.conv2d, F.conv2d's own time as the baseline of the same run; `info`: device, repeats, threads."""

    table: pd.DataFrame
    info: dict = field(default_factory=dict)


def _timer(device: str) -> Callable[[Callable[[], object]], float]:
    if device.startswith("cuda"):
        def cuda_ms(fn: Callable[[], object]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
        return cuda_ms

    def cpu_ms(fn: Callable[[], object]) -> float:
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return cpu_ms


def time_conv_methods(shape: ConvShape, methods: Sequence[str] = CONV_METHODS, splits: Sequence[int] = (1,),
                      repeats: int = 5, device: str = "cpu", seed: int = 0,
                      progress: Callable[[float, str], None] | None = None) -> OperatorTimings:
    """Time each method that can compute `shape` with the batch split into each k of `splits` (µ-cuDNN's
    micro-batches), F.conv2d beside as the baseline, on `device`: the median over `repeats` runs after one
    warm-up (CUDA events on a GPU, perf_counter on a CPU; runs interleaved across methods), its 95 % interval
    (lab.experiments.spread), the time against F.conv2d's, whether the two are separable, the workspace (bytes of
    the intermediates held at the peak, not known for F.conv2d; on a GPU also the allocator's peak above the
    inputs and output), and the largest
    error against F.conv2d relative to its largest |output| (TOLERANCE)."""
    if int(repeats) != repeats or not 3 <= repeats <= 100:
        raise ValueError(f"repeats = {repeats!r}: allowed a whole number from 3 to 100")
    bad = [m for m in methods if m not in CONV_METHODS]
    if bad:
        raise ValueError(f"conv method {bad[0]!r}: allowed {', '.join(CONV_METHODS)}")
    ks = sorted({int(k) for k in splits})
    if not ks or ks[0] < 1 or ks[-1] > shape.n:
        raise ValueError(f"micro-batches {list(splits)}: allowed whole numbers from 1 to the batch N = {shape.n}")
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape.n, shape.c_in, shape.h, shape.w, generator=gen).to(dev)
    w = (torch.randn(shape.c_out, shape.c_in, shape.k, shape.k, generator=gen) / (shape.c_in * shape.k ** 2) ** 0.5
         ).to(dev)
    ref = F.conv2d(x, w, stride=shape.stride, padding=shape.padding)
    scale = float(ref.abs().max()) or 1.0
    cases: list[tuple[str, int]] = [(BASELINE, 1)]
    cases += [(m, k) for m in methods if not _why_not(m, shape) for k in ks]
    cuda = dev.type == "cuda"

    def run(method: str, k: int):
        if method == BASELINE:
            return F.conv2d(x, w, stride=shape.stride, padding=shape.padding), 0
        return microbatched(method, x, w, k, shape.stride, shape.padding)

    first: dict[tuple[str, int], dict] = {}
    for method, k in cases:  # the warm-up run: the error, the workspace
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(dev)
            before = torch.cuda.memory_allocated(dev)
        y, held = run(method, k)
        peak = (torch.cuda.max_memory_allocated(dev) - before - y.nbytes) if cuda else float("nan")
        first[(method, k)] = {"error": float((y - ref).abs().max()) / scale, "held": held, "peak": peak}
        del y
    timer = _timer(str(dev))
    times: dict[tuple[str, int], list[float]] = {c: [] for c in cases}
    total = repeats * len(cases)
    for r in range(repeats):
        for i, case in enumerate(cases):
            times[case].append(timer(lambda: run(*case)))
            if progress is not None:
                progress((r * len(cases) + i + 1) / total, f"run {r + 1} of {repeats}: {case[0]}, {case[1]} split(s)")
    base_lo, base_hi, _ = median_interval(times[(BASELINE, 1)])
    base = float(pd.Series(times[(BASELINE, 1)]).median())
    rows = []
    for method, k in cases:
        lo, hi, cover = median_interval(times[(method, k)])
        med = float(pd.Series(times[(method, k)]).median())
        f = first[(method, k)]
        rows.append({"method": method, "label": METHOD_LABELS[method], "splits": k,
                     "micro_batch": -(-shape.n // k), "median_ms": med, "low_ms": lo, "high_ms": hi,
                     "coverage": cover, "vs_conv2d": med / base,
                     "separable_from_conv2d": method != BASELINE and separable((lo, hi), (base_lo, base_hi)),
                     "workspace_bytes": float("nan") if method == BASELINE else f["held"],
                     "allocator_peak_bytes": f["peak"],
                     "max_rel_error": f["error"], "matches_conv2d": f["error"] <= TOLERANCE})
    n_threads, how = device_threads(str(dev))
    return OperatorTimings(pd.DataFrame(rows), {"device": str(dev), "repeats": repeats, "threads": n_threads,
                                                "threads_counted": how, "tolerance": TOLERANCE,
                                                "isa": torch.backends.cpu.get_cpu_capability()})


def microbatch_choice(timings: OperatorTimings, limit_bytes: float) -> dict | None:
    """µ-cuDNN's choice (Oyama et al. 2018): of the (method, micro-batches k) measured, the fastest whose
    workspace fits in `limit_bytes` (a row of the timing table as a dict), or None when none fits."""
    if not limit_bytes > 0:
        raise ValueError(f"workspace limit = {limit_bytes!r}: allowed a number of bytes above 0")
    t = timings.table
    fits = t[(t["method"] != BASELINE) & (t["workspace_bytes"] <= limit_bytes)]
    return None if fits.empty else fits.loc[fits["median_ms"].idxmin()].to_dict()


def fewest_multiplications(table: pd.DataFrame) -> str:
    """The method (its label) with the fewest multiplications in a conv_work_depth_table."""
    ok = table.dropna(subset=["multiplications"])
    return str(ok.loc[ok["multiplications"].idxmin(), "label"])


def people_number(x: float) -> str:
    """`x` to 3 significant figures as people write it: 33,600,000 rather than 3.36e+07."""
    v = float(f"{x:.3g}")
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def operators_takeaway(wd: pd.DataFrame, threads_n: int, timings: OperatorTimings | None = None) -> str:
    """The takeaway from the numbers: the method with the fewest multiplications and by how much, W/D against
    the device's threads, and, after a timing run, the fastest method against F.conv2d and what splitting the
    batch did to time and workspace."""
    ok = wd.dropna(subset=["multiplications"])
    best = ok.loc[ok["multiplications"].idxmin()]
    direct = ok[ok["method"] == "direct"].iloc[0]
    least_par = ok["parallelism"].min()
    text = (f"{best['label']} does the fewest multiplications here, {best['mults_vs_direct']:.2f}x direct's "
            f"({people_number(best['multiplications'])} against {people_number(direct['multiplications'])}). Every "
            f"method's average parallelism W/D is at least {people_number(least_par)}, "
            f"{people_number(least_par / max(threads_n, 1))}x the "
            f"{threads_n:,} thread{'s' if threads_n != 1 else ''} this device runs at once: ")
    if least_par >= threads_n:
        text += ("the layer has parallelism to spare, so how fast it runs is a matter of memory traffic and "
                 "arithmetic, not of depth.")
    else:
        text += ("too little to fill the device: a larger batch (or fusing layers) is what would, not a "
                 "different method.")
    if timings is None:
        return text
    t = timings.table
    one = t[(t["splits"] == t["splits"].min()) & (t["method"] != BASELINE)]
    fast = one.loc[one["median_ms"].idxmin()]
    noise = "" if fast["separable_from_conv2d"] else " (within the noise of it)"
    text += (f" Measured: the fastest of the methods timed is {fast['label']} at {fast['median_ms']:.3g} ms, "
             f"{fast['vs_conv2d']:.2f}x the time of F.conv2d{noise}")
    if fast["method"] != best["method"] and best["method"] in set(one["method"]):
        slow = one[one["method"] == best["method"]].iloc[0]
        text += (f", while {best['label']}, with the fewest multiplications, takes {slow['median_ms']:.3g} ms: "
                 "fewer multiplications do not make a method faster when its transforms and memory traffic cost "
                 "more.")
    else:
        text += "."
    ks = sorted(t["splits"].unique())
    if len(ks) > 1:
        m = fast["method"]
        a = t[(t["method"] == m) & (t["splits"] == ks[0])].iloc[0]
        b = t[(t["method"] == m) & (t["splits"] == ks[-1])].iloc[0]
        shrink = b["workspace_bytes"] / max(a["workspace_bytes"], 1)
        same = not separable((a["low_ms"], a["high_ms"]), (b["low_ms"], b["high_ms"]))
        text += (f" Split into {ks[-1]} micro-batches, its workspace falls to {shrink:.2f}x "
                 f"and its time is {b['median_ms'] / a['median_ms']:.2f}x" + (" (within the noise)" if same else "")
                 + ": a smaller workspace per micro-batch is what lets µ-cuDNN fit a faster algorithm under a "
                 "memory limit.")
    return text


__all__ = ["BASELINE", "METHOD_LABELS", "OperatorTimings", "TOLERANCE", "conv_work_depth_table", "depth_growth",
           "fc_work_depth_table", "fewest_multiplications", "people_number", "microbatch_choice", "operator_device", "operator_layer",
           "operators_takeaway", "threads", "time_conv_methods"]
