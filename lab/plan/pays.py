"""Does compression pay? One data-parallel training step on a two-level cluster (`lab.comm.cluster`)
with every registered codec × allreduce algorithm against a **bf16** baseline (16-bit gradients
reduced as they are, the best bf16 algorithm), the codec's own encode/decode time counted, and
communication optionally overlapped with the backward pass.

Step (DDP's bucketed allreduce, one bucket per layer): compute = 3 × forward FLOPs × batch / the
device's achieved FLOP/s (`lab.plan.devices`). Without overlap every allreduce runs after the
backward pass; with overlap layer i's allreduce starts when its backward is done (on a separate
stream, one after another) and the step ends when the backward and the last allreduce are done.
Codec work runs on the communication stream (its contention with compute kernels is not modelled).

Codec time per value: measured (the `codecs-<device>.json` of a CUDA run whose device name matches the
GPU preset, the user's own in $PARALAB_RESULTS or ./bench/results before the shipped reference ones: the
largest size's encode and decode_into ns/value) when it exists for
that codec, else a roofline of the GPU preset: bytes read + written / memory bandwidth
(`lab.plan.wire`: encode 4 + w (+ extra) bytes, decode w + 4), plus a kernel launch per kernel
(`Device.launch_us`). Each row says which.

Break-even: the NIC bandwidth (GB/s per direction) below which a codec's step is at least 1 %
(`PAYS_MARGIN`) shorter than the best bf16 step (Agarwal et al., MLSys 2022: compression must beat a
tuned 16-bit baseline end to end).

Time to accuracy: step time x steps to the target. The steps penalty of each codec spec is
measured by `paralab converge` on the task closest to the priced model (`lab.plan.accuracy`), relative
to bf16's own penalty when bf16 was measured; time-to-accuracy speedup = per-step speedup / penalty.
A codec that never reached the target never pays; one without a measurement is "not measured" and
keeps its per-step verdict, flagged. Error feedback (`ef:` specs) is priced as its codec plus a local
decode and 12 bytes per value (`lab.plan.wire.with_error_feedback`).

Verdicts by what the interval supports (`standing`): the penalty's t-based 95 % CI over seeds gives the
time-to-accuracy speedup an interval; a codec pays where the whole interval clears PAYS_MARGIN, is
"within noise" where it straddles it, and codecs are ranked by the interval's low end; a codec whose
interval overlaps the best's is tied with it, and the takeaway then names no single best.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from lab.comm import cluster as cl
from lab.comm.algorithms import get_algorithm
from lab.comm.cluster import BF16, FP32, Cluster, CodecCost
from lab.data.results import results_dirs

from . import accuracy as acc
from .devices import Device, get_device
from .layers import ModelSpec, get_model
from .wire import EF_TRAFFIC, WireCodec, compressing_codecs, phased_values, phased_work_seconds, wire_codec

BASELINE = "bf16"
DEFAULT_BANDWIDTHS = tuple(float(x) for x in np.logspace(-2, 3.5, 45))  # GB/s per NIC: 0.01 .. 3162
# a codec "pays" when its step is at least this much faster than the best bf16 step (a model's 0.1 % is no
# win anyone measures; Agarwal et al. 2022 counted wins on measured time)
PAYS_MARGIN = 0.01
Progress = Callable[[float, str], None]


def _model(name: str | ModelSpec) -> ModelSpec:
    if isinstance(name, str):
        name = name.replace("-", "_")
    return get_model(name)


def candidate_codecs() -> list[str]:
    """Every registered codec that compresses a bf16 gradient: not raw fp32, not bf16 (the baseline);
    PowerSGD included (priced from each layer's matrix shapes, `PhasedCost`)."""
    return [n for n in compressing_codecs() if n != BASELINE]


def measured_codec_file(device: Device, bench_dir: Path | str | None = None) -> Path | None:
    """The `codecs-<device>.json` of a CUDA run on the GPU the preset names (e.g. h100 -> an 'NVIDIA H100 ...'
    run), or None. Looked for in `bench_dir`, or (None) in `results_dirs()` order: the user's own
    `paralab bench codecs` results ($PARALAB_RESULTS, else ./bench/results) before the shipped reference ones."""
    for d in results_dirs() if bench_dir is None else [Path(bench_dir)]:
        for p in sorted(d.glob("codecs-*.json")):
            try:
                data = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("device_type") == "cuda" and \
                    device.name.lower() in str(data.get("device", "")).lower().replace(" ", ""):
                return p
    return None


def _measured(path: Path | None, codec: str) -> tuple[float, float] | None:
    """(encode, decode) seconds per value of `codec` at the largest measured size, or None."""
    if path is None:
        return None
    rows = json.loads(path.read_text()).get("rows", [])
    labels = (codec, f"{codec} tensor", f"{codec} (lut)", f"{codec} tensor (lut)")
    for label in labels:
        mine = [r for r in rows if r.get("contestant") == label]
        if not mine:
            continue
        n = max(r["n"] for r in mine)
        ops = {r["op"]: r["ns_per_value"] for r in mine if r["n"] == n}
        dec = ops.get("decode_into", ops.get("decode"))
        if "encode" in ops and dec is not None:
            return ops["encode"] * 1e-9, dec * 1e-9
    return None


@dataclass(frozen=True)
class PhasedCost:
    """A codec that runs its own collective (PowerSGD, Vogels et al. 2019 Algorithm 1): per layer, its
    fp32 allreduces (uncompressed tensors, then P, then Q: `lab.plan.wire.phased_values` from the layer's
    weight shapes) on the cluster, one after another, plus its own work (`phased_work_seconds`: a
    memory roofline of the GPU and a launch per kernel; its orthogonalisation's FLOPs are not counted)."""

    name: str
    wire: WireCodec
    device: Device
    source: str
    mode: str = "phased"
    raw: bool = False

    def layer(self, c: Cluster, n: float, matrices: tuple[tuple[int, int], ...], algorithm: str) -> cl.CollectiveTime:
        """One layer's gradient of n values: the sum of its fp32 allreduces plus its work."""
        out = cl.CollectiveTime(algorithm, 0.0, phased_work_seconds(n, self.wire, self.device, matrices), 0.0, 0.0)
        for v in phased_values(self.wire, n, matrices)[:3]:
            if v > 0:
                out = out + cl.cluster_allreduce(c, v, FP32, algorithm, intra_codec=FP32)
        return out

    def wire_values(self, n: float, matrices: tuple[tuple[int, int], ...]) -> float:
        """fp32 values one rank sends into its allreduces for a layer of n values."""
        return float(sum(phased_values(self.wire, n, matrices)[:3]))


Cost = CodecCost | PhasedCost


def codec_cost(codec: str, device: Device, bench_file: Path | None = None) -> Cost:
    """The cost of a codec name or spec on `device`: wire bytes measured from the codec (`lab.plan.wire`),
    its time per value measured (bench_file) or a roofline of the device; a phased codec (PowerSGD) as a
    `PhasedCost`."""
    if codec == BASELINE:
        return BF16
    if not isinstance(codec, str) or "@" in codec:
        raise ValueError(f"codec {codec!r}: give a codec name or spec ([ef:]name[:option=value,...]); a warm-up "
                         "('@N') is measured by paralab converge, not priced")
    wc = wire_codec(codec)
    if wc.phased:
        return PhasedCost(codec, wc, device, f"roofline: {device.name} {device.memory_GBps:g} GB/s "
                                             "(PowerSGD's matmuls as memory traffic)")
    if wc.raw:
        raise ValueError(f"codec {codec!r} is uncompressed fp32: against a bf16 baseline it only doubles the bytes; "
                         "pick a codec that compresses")
    from lab.codecs.registry import split_spec

    ef, base, _ = split_spec(codec)
    got = _measured(bench_file, base)
    if got is not None:
        enc, dec = got
        source = f"measured: {bench_file.name}"
        if ef:  # the measured codec plus error feedback's local decode and residual traffic (roofline)
            enc += dec + EF_TRAFFIC / (device.memory_GBps * 1e9)
            source += f" + error feedback ({EF_TRAFFIC:g} B/value roofline)"
    else:
        bw = device.memory_GBps * 1e9
        enc, dec = wc.enc_traffic / bw, wc.dec_traffic / bw
        source = f"roofline: {device.name} {device.memory_GBps:g} GB/s" + (
            f" (error feedback: a local decode and {EF_TRAFFIC:g} B/value more)" if ef else "")
    return CodecCost(codec, wc.bytes_per_value, wc.side_bytes, enc, dec, wc.enc_kernels, wc.dec_kernels,
                     device.launch_us * 1e-6, wc.mode, source)


def ddp_step(fwd: Sequence[float], bwd: Sequence[float], comm: Sequence[float], overlap: bool) -> float:
    """Seconds of one step: forward, backward (last layer first), each layer's allreduce after its backward
    (overlap: on its own stream, one at a time, the step ends when both streams are done)."""
    t = float(sum(fwd))
    if not overlap:
        return t + float(sum(bwd)) + float(sum(comm))
    chan = 0.0
    for i in reversed(range(len(bwd))):
        t += bwd[i]
        if comm[i]:
            chan = max(chan, t) + comm[i]
    return max(t, chan)


@dataclass
class Setting:
    """What the step is computed for."""

    model: ModelSpec
    cluster: Cluster
    device: Device
    batch_per_gpu: int
    overlap: bool
    fwd: list[float] = field(default_factory=list)
    bwd: list[float] = field(default_factory=list)
    params: list[float] = field(default_factory=list)
    matrices: list[tuple[tuple[int, int], ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        F = self.device.flops_per_s
        self.fwd = [lay.flops * self.batch_per_gpu / F for lay in self.model.layers]
        self.bwd = [2.0 * f for f in self.fwd]
        self.params = [float(lay.params) for lay in self.model.layers]
        self.matrices = [lay.matrices for lay in self.model.layers]

    @property
    def compute_s(self) -> float:
        return 3.0 * sum(self.fwd)

    def bits_per_value(self, codec: Cost) -> float:
        """Wire bits per gradient value of the model (PowerSGD: from its layers' shapes)."""
        if isinstance(codec, PhasedCost):
            sent = sum(codec.wire_values(n, m) for n, m in zip(self.params, self.matrices))
            return 32.0 * sent / sum(self.params)
        return 8.0 * codec.bytes_per_value


def available(algorithm: str, codec: Cost, c: Cluster) -> bool:
    """in_network: 16-bit values only (no codec), on a cluster whose switches reduce. A codec re-encoded at
    every hop runs on an algorithm whose codec time has a model: it declares its codec counts or prices
    itself on a cluster (a plugin may declare neither: it is then priced without codecs, never a crash)."""
    if algorithm == cl.IN_NETWORK:
        return codec.raw and cl.in_network_available(c)
    if codec.raw or codec.mode != "requantize":
        return True
    algo = get_algorithm(algorithm)
    return algo.codec_counts is not None or algo.cluster_time is not None


def step(s: Setting, codec: Cost, algorithm: str,
         c: Cluster | None = None) -> tuple[float, list[cl.CollectiveTime]]:
    """(step seconds, per-layer allreduce times) of one codec × algorithm."""
    c = c or s.cluster
    memo: dict = {}  # layers of one shape (a transformer's blocks) cost the same
    times = []
    for n, mats in zip(s.params, s.matrices):
        if (n, mats) not in memo:
            memo[n, mats] = (codec.layer(c, n, mats, algorithm) if isinstance(codec, PhasedCost)
                             else cl.cluster_allreduce(c, n, codec, algorithm))
        times.append(memo[n, mats])
    return ddp_step(s.fwd, s.bwd, [t.seconds for t in times], s.overlap), times


def _crossing(bw: np.ndarray, f: np.ndarray) -> float | None:
    """The bandwidth below which f < 0 (pays) on the grid, interpolated in log bandwidth; None: never pays
    on the grid; inf: pays at every bandwidth of the grid."""
    pays = f < 0
    if not pays.any():
        return None
    if pays.all():
        return math.inf
    i = int(np.nonzero(pays)[0].max())
    if i == len(bw) - 1:
        return math.inf
    x0, x1, y0, y1 = math.log(bw[i]), math.log(bw[i + 1]), f[i], f[i + 1]
    return float(math.exp(x0 + (x1 - x0) * (y0 / (y0 - y1)))) if y0 != y1 else float(bw[i])


def pays_below(break_even: float | None) -> str:
    """A break-even bandwidth in words: 'never', 'every bandwidth swept' or '<x> GB/s' (JSON keeps no inf)."""
    if break_even is None or (isinstance(break_even, float) and math.isnan(break_even)):
        return "never"
    return "every bandwidth swept" if math.isinf(break_even) else f"{break_even:.3g} GB/s"


@dataclass
class PaysResult:
    """rows: one per codec × algorithm at the configured cluster; summary: one per codec (its best
    algorithm, speedup against the best bf16 step, break-even NIC bandwidth); sweep: speedup against
    NIC bandwidth; lesson: the same question inside one node and across the network; notes."""

    rows: pd.DataFrame
    summary: pd.DataFrame
    sweep: pd.DataFrame
    lesson: dict
    codec_time: str
    notes: list[str]
    accuracy: str = ""  # which converge task and file the steps penalties come from (or none)


def pays(model: str | ModelSpec = "gpt2_small", cluster: str | tuple[int, int] = "8x8", *, gpu: str | Device = "h100",
         intra: str = "nvlink4", inter: str = "ib_ndr", nics_per_node: int | None = None, batch_per_gpu: int = 8,
         overlap: bool = False, codecs: Sequence[str] | None = None,
         algorithms: Sequence[str] | None = None, bandwidths: Sequence[float] = DEFAULT_BANDWIDTHS,
         bench_dir: Path | str | None = None, progress: Progress | None = None,
         converge_task: str | None = None, results: Sequence[Path | str] | None = None) -> PaysResult:
    """Does compression pay on this cluster? (see the module docstring). algorithms: None, every algorithm
    the cluster prices (`lab.comm.cluster.algorithms`: each registered one as it prices itself, and
    in_network), read now. codecs None: every registered codec that compresses, plus every other spec
    the penalties' result measured (e.g. `ef:randomk`). converge_task: the `paralab converge` task whose
    measured steps penalties apply (None: the one closest to the model); results: folders to look in
    (None: `lab.plan.accuracy.results_dirs`)."""
    spec = _model(model)
    dev = get_device(gpu)
    c = cl.make_cluster(cluster, intra, inter, nics_per_node)
    if isinstance(batch_per_gpu, bool) or not isinstance(batch_per_gpu, int) or batch_per_gpu < 1:
        raise ValueError(f"batch_per_gpu must be an int >= 1, got {batch_per_gpu!r}")
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap must be True or False, got {overlap!r}")
    known = cl.algorithms()
    algos = list(known if algorithms is None else algorithms)
    bad = [a for a in algos if a not in known]
    if bad or not algos:
        raise ValueError(f"unknown algorithm {bad[0] if bad else None!r}; allowed: {', '.join(known)}")
    pen = acc.load(spec, converge_task, None if results is None else [Path(r) for r in results])
    names = default_codecs(model, gpu, converge_task, results, pen) if codecs is None else list(codecs)
    bw = np.array(sorted(float(b) for b in bandwidths))
    if len(bw) < 2 or not np.all(np.isfinite(bw)) or bw[0] <= 0:
        raise ValueError("bandwidths: give at least two finite NIC bandwidths > 0 (GB/s)")
    bench_file = measured_codec_file(dev, bench_dir)
    costs = [codec_cost(n, dev, bench_file) for n in names if n != BASELINE]
    if not costs:
        raise ValueError(f"codecs: give at least one codec that compresses (bf16 is the baseline); registered: "
                         f"{', '.join(candidate_codecs())}")
    s = Setting(spec, c, dev, batch_per_gpu, overlap)
    base_pen = pen.get(BASELINE)
    accs = {cc.name: _accuracy(pen, cc.name, base_pen) for cc in costs}

    # the bf16 baseline at the cluster and at every bandwidth of the grid
    base_algos = [a for a in algos if available(a, BF16, c)]
    clusters = [c.with_inter_bandwidth(b) for b in bw]
    base_here = {a: step(s, BF16, a) for a in base_algos}
    best_base = min(base_algos, key=lambda a: base_here[a][0])
    base_grid = np.array([min(step(s, BF16, a, cb)[0] for a in base_algos) for cb in clusters])
    base_step = base_here[best_base][0]

    rows, sweep, summary = [], [], []
    for k, cc in enumerate([BF16, *costs]):
        per_alg = {}
        for a in algos:
            if not available(a, cc, c):
                continue
            t, layers = step(s, cc, a)
            grid = np.array([step(s, cc, a, cb)[0] for cb in clusters])
            per_alg[a] = (t, grid)
            rows.append({
                "codec": cc.name, "algorithm": a, "mode": cc.mode,
                "bits_per_value": s.bits_per_value(cc),
                "compute_ms": 1e3 * s.compute_s, "comm_ms": 1e3 * sum(x.seconds for x in layers),
                "transfer_ms": 1e3 * sum(x.transfer_s for x in layers),
                "codec_ms": 1e3 * sum(x.codec_s for x in layers), "launch_ms": 1e3 * sum(x.launch_s for x in layers),
                "exposed_comm_ms": 1e3 * max(0.0, t - s.compute_s), "step_ms": 1e3 * t,
                "speedup_vs_bf16": base_step / t,
                "speedup_vs_bf16_same_algorithm": (base_here[a][0] / t) if a in base_here else math.nan,
                "cross_node_MB": sum(x.node_egress_bytes for x in layers) / 1e6,
                "break_even_GBps": _crossing(bw, grid - base_grid / (1 + PAYS_MARGIN)) if cc is not BF16 else math.nan,
                "codec_time": cc.source or "none (bf16 baseline)"})
            rows[-1]["pays_below"] = "baseline" if cc is BF16 else pays_below(rows[-1]["break_even_GBps"])
            rows[-1].update(_tta_fields(accs.get(cc.name), base_step / t, bw, grid, base_grid))
            sweep += [sweep_row(cc.name, a, float(b), float(g), float(bg), accs.get(cc.name))
                      for b, g, bg in zip(bw, grid, base_grid)]
        if per_alg:
            best = min(per_alg, key=lambda a: per_alg[a][0])
            env = np.min(np.stack([g for _, g in per_alg.values()]), axis=0)
            summary.append({"codec": cc.name, "best_algorithm": best, "bits_per_value": s.bits_per_value(cc),
                            "step_ms": 1e3 * per_alg[best][0], "speedup_vs_bf16": base_step / per_alg[best][0],
                            "pays": bool(per_alg[best][0] < base_step / (1 + PAYS_MARGIN)),
                            "break_even_GBps": _crossing(bw, env - base_grid / (1 + PAYS_MARGIN))
                            if cc is not BF16 else math.nan,
                            "codec_time": cc.source or "none (bf16 baseline)"})
            summary[-1]["pays_below"] = "baseline" if cc is BF16 else pays_below(summary[-1]["break_even_GBps"])
            summary[-1].update(_tta_fields(accs.get(cc.name), base_step / per_alg[best][0], bw, env, base_grid))
            summary[-1]["pays_per_step"] = summary[-1]["pays"]
            if cc is not BF16 and accs[cc.name]["accuracy"] != acc.NOT_MEASURED:
                summary[-1]["pays"] = summary[-1]["verdict"] == PAYS
        if progress:
            progress((k + 1) / (len(costs) + 1), cc.name)
    summary_df = pd.DataFrame(summary)
    lesson = _lesson(spec, c, dev, batch_per_gpu, overlap, costs, algos, summary_df, best_base, base_step, accs)
    lesson.update(penalty_task=pen.task, penalty_file=str(pen.path) if pen.path else None,
                  measured=sum(a["accuracy"] != acc.NOT_MEASURED for a in accs.values()))
    source = (f"measured: {bench_file.name} (roofline for codecs it does not time)" if bench_file is not None
              else f"roofline: {dev.name} memory bandwidth {dev.memory_GBps:g} GB/s (no codecs-*.json measured on a "
                   f"{dev.name} GPU in {', '.join(map(str, results_dirs()))})")
    notes = [f"baseline: bf16 gradients with the fastest of {', '.join(base_algos)} ({best_base}, "
             f"{1e3 * base_step:.2f} ms per step)",
             f"pays: at least {PAYS_MARGIN:.0%} faster than the best bf16 step; break_even_GBps: NIC bandwidth "
             "(GB/s per direction) below which it pays (pays_below says it in words: never, every bandwidth swept)",
             "ring: one ring over all GPUs, each node boundary crossed by one flow on one NIC; NCCL's rail-aligned rings move "
             "bytes like the hierarchical model; each algorithm priced as it prices itself on the cluster "
             "(Algorithm.cluster_time), else flat over all GPUs on the slower level",
             "time to accuracy = step time x steps to the target: time_to_accuracy_speedup = speedup_vs_bf16 / "
             "steps_penalty (relative to bf16's measured penalty" + ("" if base_pen is not None else
                                                                      "; bf16 not measured: relative to fp32")
             + "); pays: in time to accuracy where measured, per step where not measured (flagged)",
             "verdict: time_to_accuracy_speedup_ci_low and time_to_accuracy_speedup_ci_high come from the steps "
             f"penalty's 95% interval over seeds; pays where the whole interval is at least {PAYS_MARGIN:.0%} "
             "faster than bf16, does not pay where none of it is, within noise where it straddles that line; "
             "codecs are ranked by the interval's low end, and a codec whose interval overlaps the best's is "
             "tied with it"]
    return PaysResult(pd.DataFrame(rows), summary_df, pd.DataFrame(sweep), lesson, source, notes, pen.describe())


def default_codecs(model: str = "gpt2-small", gpu: str = "h100", converge_task: str | None = None,
                   results: Sequence[str | Path] | None = None, penalties: acc.Penalties | None = None) -> list[str]:
    """What `pays` prices when no codecs are named: every candidate codec, then each spec the model's
    time-to-accuracy result measured that those lack (e.g. 'ef:randomk:ratio=0.01')."""
    pen = penalties if penalties is not None else acc.load(
        _model(model), converge_task, None if results is None else [Path(r) for r in results])
    names = candidate_codecs()
    return names + _measured_specs(pen, names, get_device(gpu))


def _measured_specs(pen: acc.Penalties, names: list[str], dev: Device) -> list[str]:
    """The specs the penalties' result measured that `names` lacks and that can be priced (no fp32, bf16
    or warm-up; not a codec with its own error feedback under 'ef:')."""
    have = set()
    for n in names:
        try:
            have.add(acc.canonical(n))
        except (ValueError, KeyError):
            pass
    out = []
    for sp in pen.specs():
        if acc.canonical(sp) in have or sp in ("fp32", BASELINE) or "@" in sp:
            continue
        try:
            codec_cost(sp, dev)
        except ValueError:
            continue
        out.append(sp)
    return out


def _accuracy(pen: acc.Penalties, name: str, base_pen) -> dict:
    """steps_penalty (relative to bf16's when measured; inf: never reaches the target; nan: not measured),
    its CI, accuracy in words and penalty_source (file, task, seeds; None when not measured)."""
    p = pen.get(name)
    if p is None:
        return {"steps_penalty": math.nan, "steps_penalty_ci_low": math.nan, "steps_penalty_ci_high": math.nan,
                "accuracy": acc.NOT_MEASURED, "penalty_source": None}
    rel, ci = acc.relative(p, base_pen)
    src = pen.source(name)
    src["relative_to"] = BASELINE if base_pen is not None else "fp32"
    return {"steps_penalty": credited_penalty(rel, ci), "steps_penalty_measured": rel,
            "steps_penalty_ci_low": ci[0] if ci else math.nan, "steps_penalty_ci_high": ci[1] if ci else math.nan,
            "accuracy": acc.NEVER if math.isinf(rel) else "measured", "penalty_source": src}


def credited_penalty(rel: float, ci: tuple[float, float] | None) -> float:
    """The steps penalty time to accuracy uses: the measured one, except that a codec is never credited
    with training faster than the baseline from noise: below 1 with a CI that reaches 1 (or no CI) counts
    as 1 ("no difference measured"). A penalty above 1 stands, CI or not: the verdict errs against the codec."""
    if math.isnan(rel) or math.isinf(rel) or rel >= 1.0:
        return rel
    return rel if ci is not None and math.isfinite(ci[1]) and ci[1] < 1.0 else 1.0


def credited_interval(lo: float, hi: float) -> tuple[float, float]:
    """The steps penalty's 95 % interval as time to accuracy credits it (`credited_penalty`'s rule): its part
    below 1 counts as 1 unless the whole interval is below 1, so no codec's time-to-accuracy interval reaches
    past its per-step speedup from noise."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < 1.0:
        return lo, hi
    return max(lo, 1.0), hi


def sweep_row(codec: str, algorithm: str, inter_GBps: float, step_s: float, base_s: float, a: dict | None) -> dict:
    """One point of the bandwidth sweep: the step, its speedup against the best bf16 step there, and the speedup in
    time to accuracy with the interval its penalty's CI gives (`standing`; `a`: accuracy fields, None: bf16)."""
    where = standing(base_s / step_s, a, codec)
    measured = a is not None and a["accuracy"] != acc.NOT_MEASURED
    return {"codec": codec, "algorithm": algorithm, "inter_GBps": inter_GBps, "step_ms": 1e3 * step_s,
            "speedup_vs_bf16": base_s / step_s,
            "time_to_accuracy_speedup": where.point if measured else base_s / step_s if a is None else math.nan,
            "time_to_accuracy_speedup_ci_low": where.lo if measured else math.nan,
            "time_to_accuracy_speedup_ci_high": where.hi if measured else math.nan}


def ranked_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` (a `PaysResult.summary`) best first by what the interval supports (`rank_key`), the baseline
    first."""
    keys = [(r["verdict"] != BASELINE_VERDICT, *rank_key(r)) for r in summary.to_dict(orient="records")]
    order = sorted(range(len(summary)), key=lambda i: keys[i])
    return summary.iloc[order].reset_index(drop=True)


def _tta(speedup: float, rel: float) -> float:
    """Time-to-accuracy speedup from a per-step speedup and a relative steps penalty (0: never; nan: not
    measured)."""
    if math.isnan(rel):
        return math.nan
    return 0.0 if math.isinf(rel) else speedup / rel


# A codec's verdict in time to accuracy, from the interval its steps penalty's 95 % CI gives (`standing`)
PAYS = "pays"
NOISE = "within noise"
NO = "does not pay"
NEVER_VERDICT = "never reaches the target"
PER_STEP_PAYS = "pays per step; accuracy not measured"
PER_STEP_NO = "does not pay per step; accuracy not measured"
BASELINE_VERDICT = "baseline"


@dataclass(frozen=True)
class Standing:
    """Where one codec stands against the bf16 baseline: its time-to-accuracy speedup `point` (per step
    when not measured) and the 95 % interval [lo, hi] its steps penalty's CI gives (lo = hi = point without
    one), the per-step speedup, whether the penalty is measured, and the verdict the interval supports."""

    name: str
    point: float
    lo: float
    hi: float
    per_step: float
    measured: bool
    verdict: str

    @property
    def pays(self) -> bool:
        """Pays beyond the noise (or per step, flagged, where the penalty is not measured)."""
        return self.verdict in (PAYS, PER_STEP_PAYS)


def standing(per_step: float, a: dict | None, name: str = "") -> Standing:
    """The `Standing` of a codec with per-step speedup `per_step` and accuracy fields `a` (`accuracy_fields`;
    None: the baseline). Time to accuracy = per_step / steps penalty, its interval per_step / the penalty's
    CI bounds. pays: the whole interval is at least PAYS_MARGIN above 1; does not pay: none of it is;
    within noise: it straddles that line (the seeds do not say). The penalty's interval is credited as its
    point is (`credited_interval`): no codec trains faster than the baseline from noise. Never reaching the
    target never pays; a codec without a measured penalty keeps its per-step verdict, flagged."""
    line = 1 + PAYS_MARGIN
    if a is None:
        return Standing(name, 1.0, 1.0, 1.0, 1.0, True, BASELINE_VERDICT)
    rel = a["steps_penalty"]
    if a["accuracy"] == acc.NOT_MEASURED or math.isnan(rel):
        return Standing(name, per_step, per_step, per_step, per_step, False,
                        PER_STEP_PAYS if per_step > line else PER_STEP_NO)
    if math.isinf(rel):
        return Standing(name, 0.0, 0.0, 0.0, per_step, True, NEVER_VERDICT)
    point = per_step / rel
    lo_p, hi_p = credited_interval(a.get("steps_penalty_ci_low", math.nan), a.get("steps_penalty_ci_high", math.nan))
    ok = math.isfinite(lo_p) and math.isfinite(hi_p) and lo_p > 0
    lo, hi = (min(point, per_step / hi_p), max(point, per_step / lo_p)) if ok else (point, point)
    verdict = PAYS if lo > line else NO if hi <= line else NOISE
    return Standing(name, point, lo, hi, per_step, True, verdict)


def ranked(standings: list[Standing]) -> list[Standing]:
    """Best first by what the interval supports: the low end of the time-to-accuracy interval (the point
    where there is none), then the point."""
    return sorted(standings, key=lambda t: (-t.lo, -t.point, t.name))


def rank_key(row: dict | pd.Series) -> tuple[float, float]:
    """The sort key `ranked` uses, from a summary row (`verdict`, `time_to_accuracy_speedup`, its CI,
    `speedup_vs_bf16`): sort ascending for best first."""
    if row["verdict"] in (PER_STEP_PAYS, PER_STEP_NO):
        return -float(row["speedup_vs_bf16"]), -float(row["speedup_vs_bf16"])
    point = float(row["time_to_accuracy_speedup"])
    lo = row.get("time_to_accuracy_speedup_ci_low")
    lo = point if lo is None or not math.isfinite(float(lo)) else min(point, float(lo))
    return -lo, -point


def _tta_fields(a: dict | None, speedup: float, bw: np.ndarray, grid: np.ndarray, base_grid: np.ndarray) -> dict:
    """A row's time-to-accuracy columns: the penalty and its source, the speedup (with the CI the
    penalty's CI gives), the break-even NIC bandwidth in time to accuracy."""
    if a is None:  # the bf16 baseline itself
        return {"steps_penalty": 1.0, "steps_penalty_ci_low": math.nan, "steps_penalty_ci_high": math.nan,
                "accuracy": "baseline", "penalty_source": None, "time_to_accuracy_speedup": 1.0,
                "time_to_accuracy_speedup_ci_low": math.nan, "time_to_accuracy_speedup_ci_high": math.nan,
                "verdict": BASELINE_VERDICT, "break_even_tta_GBps": math.nan, "pays_below_tta": "baseline"}
    rel = a["steps_penalty"]
    out = dict(a)
    out["time_to_accuracy_speedup"] = _tta(speedup, rel)
    lo, hi = a["steps_penalty_ci_low"], a["steps_penalty_ci_high"]
    ok = math.isfinite(lo) and math.isfinite(hi) and lo > 0 and math.isfinite(rel)
    where = standing(speedup, a)
    out["time_to_accuracy_speedup_ci_low"] = where.lo if ok else math.nan
    out["time_to_accuracy_speedup_ci_high"] = where.hi if ok else math.nan
    out["verdict"] = where.verdict
    if math.isnan(rel):
        out["break_even_tta_GBps"], out["pays_below_tta"] = math.nan, acc.NOT_MEASURED
    elif math.isinf(rel):
        out["break_even_tta_GBps"], out["pays_below_tta"] = None, f"never ({acc.NEVER})"
    else:
        out["break_even_tta_GBps"] = _crossing(bw, grid * rel - base_grid / (1 + PAYS_MARGIN))
        out["pays_below_tta"] = pays_below(out["break_even_tta_GBps"])
    return out


def _count(summary: pd.DataFrame) -> tuple[int, int]:
    comp = summary[summary["codec"] != BASELINE]
    return int(comp["pays"].sum()), len(comp)


SLOW = "eth10g"  # the slow network of the lesson: 10 Gb/s Ethernet, as in Agarwal et al. 2022's cloud settings


def _paying(s: Setting, costs: list[Cost], algos: list[str], accs: dict[str, dict]) -> list[Standing]:
    """Each codec's `Standing` against the best bf16 step of s: in time to accuracy where its steps penalty
    (`accs`: `accuracy_fields` by codec) is measured, per step where not."""
    ba = [a for a in algos if available(a, BF16, s.cluster)]
    if not ba:
        return []
    base = min(step(s, BF16, a)[0] for a in ba)
    out = []
    for cc in costs:
        ts = [step(s, cc, a)[0] for a in algos if available(a, cc, s.cluster)]
        if ts:
            out.append(standing(base / min(ts), accs.get(cc.name), cc.name))
    return out


def lesson_part(key: str, standings: list[Standing]) -> dict:
    """One place's keys of the lesson (`key`: inside, here or slow): how many codecs pay beyond the noise
    (pay_<key>, pay_inside_node for inside), which are within noise (noise_<key>), the best one by the low end
    of its interval (best_<key>, its point best_speedup_<key>, whether measured best_<key>_measured), the best
    measured one (best_measured_<key>: name, point; its interval best_measured_ci_<key>) and the measured codecs
    whose intervals overlap its own (tied_<key>: the measurement does not separate them), and the codecs that pay
    per step but not in time to accuracy (sunk_<key>: their penalty sinks them), each list best first."""
    paying = ranked([t for t in standings if t.pays])
    noise = ranked([t for t in standings if t.verdict == NOISE])
    sunk = sorted((t for t in standings if not t.pays and t.verdict != NOISE and t.per_step > 1 + PAYS_MARGIN),
                  key=lambda t: -t.per_step)
    best = paying[0] if paying else None
    measured = next((t for t in paying if t.measured), None)
    tied = [t.name for t in ranked([*paying, *noise]) if measured is not None and t.measured and t is not measured
            and t.hi >= measured.lo]
    return {("pay_inside_node" if key == "inside" else f"pay_{key}"): len(paying),
            f"noise_{key}": [t.name for t in noise],
            f"best_{key}": best.name if best else None, f"best_speedup_{key}": best.point if best else None,
            f"best_{key}_measured": bool(best and best.measured),
            f"best_measured_{key}": [measured.name, measured.point] if measured else [None, None],
            f"best_measured_ci_{key}": [measured.lo, measured.hi] if measured else None,
            f"tied_{key}": tied, f"sunk_{key}": [t.name for t in sunk]}


def _lesson(spec: ModelSpec, c: Cluster, dev: Device, batch: int, overlap: bool, costs: list[Cost],
            algos: list[str], summary: pd.DataFrame, best_base: str, base_step: float,
            accs: dict[str, dict] | None = None) -> dict:
    """The same question inside one node of this cluster (no network), at this cluster and at this
    cluster on 10 Gb/s Ethernet (`lesson_part` each: ranked by the low end of the time-to-accuracy interval
    where the steps penalty is measured, `accs`, per step where not); the median break-even bandwidth."""
    accs = accs or {}
    slow_c = c if c.nodes == 1 else Cluster(c.nodes, c.gpus_per_node, c.intra, cl.resolve_level_link(SLOW, "inter"),
                                            c.nics_per_node)
    out = {"codecs": len(costs), "inside_node": f"1x{c.gpus_per_node} {c.intra.name}", "here": c.name,
           "slow": slow_c.name}
    for key, where in (("inside", Cluster(1, c.gpus_per_node, c.intra, c.inter, c.nics_per_node)), ("here", c),
                       ("slow", slow_c)):
        out.update(lesson_part(key, _paying(Setting(spec, where, dev, batch, overlap), costs, algos, accs)))
    comp = summary[summary["codec"] != BASELINE] if len(summary) else summary
    finite = [b for b in comp["break_even_GBps"] if b is not None and np.isfinite(b)] if len(comp) else []
    out.update({"median_break_even_GBps": float(np.median(finite)) if finite else None,
                "nic_GBps": c.inter.bandwidth_Bps / 1e9, "baseline_algorithm": best_base,
                "baseline_step_ms": 1e3 * base_step})
    return out


def _names(names: list[str], k: int = 3) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def measured_words(lesson: dict, key: str) -> str:
    """The best measured codec of one place of the lesson in words, as its interval supports it: 'X, 2.64x in time
    to accuracy (95% interval a-b), ahead of every other codec's interval' when no other measured codec's interval
    overlaps its own; 'no single best: X ranks first by its interval's low end ... but its interval overlaps those
    of Y, Z' when some do; '' when no measured codec pays."""
    name, x = lesson.get(f"best_measured_{key}") or (None, None)
    if not name:
        return ""
    lo, hi = lesson.get(f"best_measured_ci_{key}") or (x, x)
    tied = lesson.get(f"tied_{key}") or []
    ci = f"95% interval {lo:.2f}-{hi:.2f}"
    if not tied:
        return f"{name}, {x:.2f}x in time to accuracy ({ci}), ahead of every other codec's interval"
    return (f"no single best: {name} ranks first by its interval's low end, at least {lo:.2f}x in time to accuracy "
            f"({x:.2f}x, {ci}), but its interval overlaps those of {_names(tied)}")


def best_words(lesson: dict, key: str) -> str:
    """The best codec of one place of the lesson in words (`measured_words`; a codec without a measured penalty
    ranks by its per-step speedup, flagged, with the best measured one beside it); '' when none pays."""
    best, x = lesson[f"best_{key}"], lesson[f"best_speedup_{key}"]
    if not best:
        return ""
    words = measured_words(lesson, key)
    if lesson.get(f"best_{key}_measured"):
        return words if words.startswith("no single best") else f"best {words}"
    if words:
        words = (f"; among the measured ones, {words}" if words.startswith("no single best")
                 else f"; best measured {words}")
    return f"best {best}, {x:.2f}x per step, accuracy {acc.NOT_MEASURED}{words}"


def lesson_sentence(lesson: dict) -> str:
    """The takeaway in one sentence, from the numbers of `PaysResult.lesson`: per place, the codecs that pay
    where the whole interval says so, those within noise, the best as its interval supports it, and those the
    measured penalty sinks."""
    n = lesson["codecs"]

    def part(where: str, key: str) -> str:
        k = lesson["pay_inside_node" if key == "inside" else f"pay_{key}"]
        words = best_words(lesson, key)
        out = f"{where}: {k} of {n}" + (f" ({words})" if words else "")
        noise = lesson.get(f"noise_{key}") or []
        if noise:
            verb = "their intervals straddle" if len(noise) > 1 else "its interval straddles"
            out += f", {len(noise)} more within noise ({_names(noise)}: {verb} {1 + PAYS_MARGIN:g}x)"
        sunk = lesson.get(f"sunk_{key}") or []
        if sunk:
            verb = "pay" if len(sunk) > 1 else "pays"
            out += (f", and {', '.join(sunk[:3])}{' ...' if len(sunk) > 3 else ''} {verb} per step only: the "
                    "measured steps penalty sinks " + ("them" if len(sunk) > 1 else "it"))
        return out

    parts = [part(f"inside one node ({lesson['inside_node']})", "inside"), part(f"on {lesson['here']}", "here")]
    if lesson["slow"] != lesson["here"]:
        parts.append(part(f"on {lesson['slow']}", "slow"))
    be = lesson["median_break_even_GBps"]
    tail = (f"; the median codec pays below {be:.3g} GB/s per NIC per step (this cluster: {lesson['nic_GBps']:g})"
            if be is not None else "")
    task, path = lesson.get("penalty_task"), lesson.get("penalty_file")
    src = (f" Steps penalties measured on the {task} task ({Path(path).name}) for {lesson.get('measured', 0)} of {n} "
           "codecs, with 95% intervals over seeds." if path else
           (f" Steps penalties: no {task} result ({acc.NOT_MEASURED}), so these are per-step verdicts." if task else ""))
    return (f"Codecs at least {PAYS_MARGIN:.0%} faster than the best bf16 run, where the whole 95% interval says so — "
            + "; ".join(parts) + tail + "." + src)


# public names of the pieces `lab.plan.sharded_pays` prices FSDP rows with (the same verdict rules as DDP's)
crossing = _crossing
accuracy_fields = _accuracy
tta = _tta
tta_fields = _tta_fields

__all__ = ["crossing", "accuracy_fields", "tta", "tta_fields", "standing", "Standing", "ranked", "rank_key",
           "lesson_part", "best_words", "measured_words", "credited_interval", "ranked_summary", "sweep_row",
           "PAYS", "NOISE", "NO", "NEVER_VERDICT", "PER_STEP_PAYS", "PER_STEP_NO", "BASELINE_VERDICT", "BASELINE",
           "DEFAULT_BANDWIDTHS", "PAYS_MARGIN", "candidate_codecs", "measured_codec_file", "codec_cost",
           "PhasedCost", "FP32", "ddp_step", "pays_below", "Setting", "available", "step", "PaysResult", "pays",
           "lesson_sentence"]
