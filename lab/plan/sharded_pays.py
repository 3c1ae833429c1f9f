"""Does compression pay under sharded data parallelism (ZeRO-3 / FSDP)? Every codec × all-gather /
reduce-scatter algorithm, with ZeRO++'s switches (`lab.plan.sharded`), against the best **bf16** FSDP step
(bf16 weights and gradients, the fastest algorithm, hpZ as chosen: hpZ is a layout, not compression, so it
is on both sides), on the same two-level cluster, compute model and codec timing as `lab.plan.pays`.

Rows carry today's `paralab pays` fields plus strategy, zero_pp, the weights' and gradients' codecs, the
speedup against plain bf16 ZeRO-3 (no ZeRO++ switch) and, per collective, the MB that cross a node
boundary and that stay inside a node per step. A codec that cannot carry weights (sign, sparse) keeps
bf16 weights; PowerSGD runs its own allreduces and has no reduce-scatter form, so it is not priced here.

Time to accuracy: the steps penalty `paralab converge` measured is for compressed *gradients*; with qwZ
the weights are quantized too, which no run measured, so those rows are "not measured" (per-step verdict).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from lab.comm import cluster as cl
from lab.comm.cluster import BF16, Cluster, CodecCost
from lab.data.results import results_dirs

from . import accuracy as acc
from . import pays as _p
from . import sharded as sh
from .devices import get_device
from .levels import Candidates, check_candidates
from .wire import wire_codec


def fsdp_candidates() -> list[str]:
    """Every registered codec that compresses and has a reduce-scatter form (PowerSGD does not)."""
    return [n for n in _p.candidate_codecs() if not wire_codec(n).phased]


def _cost(name: str, dev, bench_file) -> CodecCost:
    got = _p.codec_cost(name, dev, bench_file)
    if not isinstance(got, CodecCost):
        raise ValueError(f"codec {name!r} runs its own allreduces (low-rank P and Q); FSDP reduce-scatters shards: "
                         f"pick one of {', '.join(fsdp_candidates())}")
    return got


def _steps(s: _p.Setting, cc: CodecCost, a: str, zp: tuple[str, ...], c: Cluster | None = None,
           weights: CodecCost | None = None, candidates: Candidates | None = None) -> sh.FsdpStep:
    return sh.price_step(s.params, s.fwd, s.bwd, c or s.cluster, cc, a, zp, s.overlap, weights=weights,
                         candidates=candidates)


def fsdp_pays(model: str = "gpt2_small", cluster: str | tuple[int, int] = "8x8", *, gpu: str = "h100",
              intra: str = "nvlink4", inter: str = "ib_ndr", nics_per_node: int | None = None, batch_per_gpu: int = 8,
              overlap: bool = False, codecs: Sequence[str] | None = None, zero_pp: str | Sequence[str] | None =
              sh.ZERO_PP_ALL, algorithms: Sequence[str] | None = None,
              bandwidths: Sequence[float] = _p.DEFAULT_BANDWIDTHS, bench_dir: Path | str | None = None,
              progress: _p.Progress | None = None, converge_task: str | None = None,
              results: Sequence[Path | str] | None = None, weights_codec: str | None = None,
              collectives: Candidates | None = None) -> _p.PaysResult:
    """`lab.plan.pays.pays` for ZeRO-3 / FSDP with ZeRO++ switches `zero_pp` ('qwz,qgz,hpz', any subset,
    'none'): rows per codec × algorithm (ring, hierarchical), summary per codec, sweep over NIC bandwidth,
    the lesson inside one node / here / on 10 Gb/s Ethernet (see the module docstring). model: a preset or
    'gpt-7b' style (`lab.plan.sharded.sized_model`). weights_codec: one codec for the weights (qwZ) on every
    row (ZeRO++: INT8 weights beside INT4 gradients); None: each row's codec where it can carry weights.
    Every collective runs, per level, the fastest registered plugin of its op (`lab.plan.levels`; collectives
    {op: [names]} narrows them); rows name the choice in <collective>_algorithm."""
    spec = sh.sized_model(model)
    dev = get_device(gpu)
    c = sh.check_fsdp_cluster(cl.make_cluster(cluster, intra, inter, nics_per_node))
    zp = sh.parse_zero_pp(zero_pp)
    if isinstance(batch_per_gpu, bool) or not isinstance(batch_per_gpu, int) or batch_per_gpu < 1:
        raise ValueError(f"batch_per_gpu must be an int >= 1, got {batch_per_gpu!r}")
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap must be True or False, got {overlap!r}")
    algos = list(sh.FSDP_ALGORITHMS if algorithms is None else algorithms)
    if not algos:
        raise ValueError(f"algorithms: give at least one of {', '.join(sh.FSDP_ALGORITHMS)}")
    for a in algos:
        sh.check_fsdp_algorithm(a)
    check_candidates(collectives)
    if sum(lay.params for lay in spec.layers) == 0:
        raise ValueError(f"model {spec.name!r} has no parameters to shard")
    bw = np.array(sorted(float(b) for b in bandwidths))
    if len(bw) < 2 or not np.all(np.isfinite(bw)) or bw[0] <= 0:
        raise ValueError("bandwidths: give at least two finite NIC bandwidths > 0 (GB/s)")
    pen = acc.load(spec, converge_task, None if results is None else [Path(r) for r in results])
    names = fsdp_candidates() if codecs is None else list(codecs)
    bench_file = _p.measured_codec_file(dev, bench_dir)
    costs = [_cost(n, dev, bench_file) for n in names if n != _p.BASELINE]
    if not costs:
        raise ValueError(f"codecs: give at least one codec that compresses (bf16 is the baseline); allowed: "
                         f"{', '.join(fsdp_candidates())}")
    s = _p.Setting(spec, c, dev, batch_per_gpu, overlap)
    base_pen = pen.get(_p.BASELINE)
    qwz = "qwz" in zp
    wcc = None
    if weights_codec is not None:
        if not qwz:
            raise ValueError(f"weights codec {weights_codec!r}: weights travel encoded only with qwz in the ZeRO++ "
                             "switches (e.g. --zero-pp qwz,qgz,hpz)")
        wcc = BF16 if weights_codec in (_p.BASELINE, "none") else _cost(weights_codec, dev, bench_file)
        if not sh.carries_weights(wcc):
            raise ValueError(f"codec {weights_codec!r} cannot carry weights on the all-gather (it only sums or "
                             "sparsifies gradients); weights codecs allowed: "
                             + ", ".join(n for n in fsdp_candidates() if sh.carries_weights(_cost(n, dev, None))))

    def accuracy_of(cc: CodecCost) -> dict:
        if qwz and (sh.carries_weights(cc) if wcc is None else not wcc.raw):
            return {"steps_penalty": math.nan, "steps_penalty_ci_low": math.nan, "steps_penalty_ci_high": math.nan,
                    "accuracy": acc.NOT_MEASURED, "penalty_source": None}
        return _p.accuracy_fields(pen, cc.name, base_pen)

    accs = {cc.name: accuracy_of(cc) for cc in costs}
    base_zp = tuple(x for x in zp if x == "hpz")
    clusters = [c.with_inter_bandwidth(b) for b in bw]
    base_here = {a: _steps(s, BF16, a, base_zp, candidates=collectives) for a in algos}
    best_base = min(algos, key=lambda a: base_here[a].seconds)
    base_step = base_here[best_base].seconds
    base_grid = np.array([min(_steps(s, BF16, a, base_zp, cb, candidates=collectives).seconds for a in algos)
                          for cb in clusters])
    zero3 = min(_steps(s, BF16, a, (), candidates=collectives).seconds for a in algos)
    n_params = float(sum(s.params))

    rows, sweep, summary = [], [], []
    for k, cc in enumerate([BF16, *costs]):
        is_base = cc is BF16
        zpc = base_zp if is_base else zp
        per_alg = {}
        for a in algos:
            wt = None if is_base else wcc
            st = _steps(s, cc, a, zpc, weights=wt, candidates=collectives)
            t = st.seconds
            grid = np.array([_steps(s, cc, a, zpc, cb, wt, collectives).seconds for cb in clusters])
            per_alg[a] = (t, grid, st)
            tot = st.total
            w = wt if wt is not None else cc if (qwz and sh.carries_weights(cc)) else BF16
            row = {"strategy": "fsdp", "zero_pp": sh.zero_pp_label(zpc), "codec": cc.name, "algorithm": a,
                   "mode": "one-shot" if ("qgz" in zpc and not is_base) else cc.mode,
                   "weights_codec": st.weights_codec, "grads_codec": cc.name,
                   "bits_per_value": 8.0 * cc.bytes_per_value, "compute_ms": 1e3 * s.compute_s,
                   "comm_ms": 1e3 * tot.seconds, "transfer_ms": 1e3 * tot.transfer_s, "codec_ms": 1e3 * tot.codec_s,
                   "launch_ms": 1e3 * tot.launch_s, "exposed_comm_ms": 1e3 * max(0.0, t - s.compute_s),
                   "step_ms": 1e3 * t, "speedup_vs_bf16": base_step / t,
                   "speedup_vs_bf16_same_algorithm": base_here[a].seconds / t, "speedup_vs_zero3": zero3 / t,
                   **st.fields(),
                   "owned_GB": sh.owned_GB(n_params, c),
                   "hpz_extra_GB": sh.hpz_extra_GB(n_params, c, w) if "hpz" in zpc else 0.0,
                   "break_even_GBps": math.nan if is_base else
                   _p.crossing(bw, grid - base_grid / (1 + _p.PAYS_MARGIN)),
                   "codec_time": cc.source or "none (bf16 baseline)"}
            row["pays_below"] = "baseline" if is_base else _p.pays_below(row["break_even_GBps"])
            row.update(_p.tta_fields(accs.get(cc.name), base_step / t, bw, grid, base_grid))
            rows.append(row)
            sweep += [_p.sweep_row(cc.name, a, float(b), float(g), float(bg), None if is_base else accs[cc.name])
                      for b, g, bg in zip(bw, grid, base_grid)]
        best = min(per_alg, key=lambda a: per_alg[a][0])
        t, _, st = per_alg[best]
        env = np.min(np.stack([g for _, g, _ in per_alg.values()]), axis=0)
        srow = {"strategy": "fsdp", "zero_pp": sh.zero_pp_label(zpc), "codec": cc.name, "best_algorithm": best,
                "weights_codec": st.weights_codec, "grads_codec": cc.name, "bits_per_value": 8.0 * cc.bytes_per_value,
                "step_ms": 1e3 * t, "speedup_vs_bf16": base_step / t, "speedup_vs_zero3": zero3 / t,
                "pays": bool(t < base_step / (1 + _p.PAYS_MARGIN)), **st.fields(),
                "break_even_GBps": math.nan if is_base else _p.crossing(bw, env - base_grid / (1 + _p.PAYS_MARGIN)),
                "codec_time": cc.source or "none (bf16 baseline)"}
        srow["pays_below"] = "baseline" if is_base else _p.pays_below(srow["break_even_GBps"])
        srow.update(_p.tta_fields(accs.get(cc.name), base_step / t, bw, env, base_grid))
        srow["pays_per_step"] = srow["pays"]
        if not is_base and accs[cc.name]["accuracy"] != acc.NOT_MEASURED:
            srow["pays"] = srow["verdict"] == _p.PAYS  # the whole interval clears the margin
        summary.append(srow)
        if progress:
            progress((k + 1) / (len(costs) + 1), cc.name)
    summary_df = pd.DataFrame(summary)
    lesson = _lesson(spec, c, dev, batch_per_gpu, overlap, costs, algos, zp, summary_df, best_base, base_step, accs,
                     wcc, collectives)
    lesson.update(penalty_task=pen.task, penalty_file=str(pen.path) if pen.path else None,
                  measured=sum(a["accuracy"] != acc.NOT_MEASURED for a in accs.values()),
                  strategy="fsdp", zero_pp=sh.zero_pp_label(zp), zero3_step_ms=1e3 * zero3)
    source = (f"measured: {bench_file.name} (roofline for codecs it does not time)" if bench_file is not None
              else f"roofline: {dev.name} memory bandwidth {dev.memory_GBps:g} GB/s (no codecs-*.json measured on a "
                   f"{dev.name} GPU in {', '.join(map(str, results_dirs()))})")
    notes = [f"baseline: bf16 FSDP (weights and gradients in bf16{', hpZ on' if base_zp else ''}) with the fastest "
             f"of {', '.join(algos)} ({best_base}, {1e3 * base_step:.2f} ms per step); plain bf16 ZeRO-3 (no ZeRO++ "
             f"switch): {1e3 * zero3:.2f} ms (speedup_vs_zero3)",
             f"ZeRO++ switches: {sh.zero_pp_label(zp)} (qwz: the codec on the weights' all-gathers where it can "
             "carry weights; qgz: one-shot hierarchical all-to-all reduce-scatter; hpz: backward all-gather inside "
             "the node)",
             "per collective: *_cross_node_MB leave one node per step, *_intra_node_MB are what a node's GPUs send "
             "each other (lab.plan.sharded)",
             f"pays: at least {_p.PAYS_MARGIN:.0%} faster than the best bf16 FSDP step; steps penalties are measured "
             "for compressed gradients only" + ("; qwZ quantizes weights, which no run measured: those rows are "
                                                 f"'{acc.NOT_MEASURED}'" if qwz else "")]
    return _p.PaysResult(pd.DataFrame(rows), summary_df, pd.DataFrame(sweep), lesson, source, notes, pen.describe())


def _paying(s: _p.Setting, costs: list[CodecCost], algos: list[str], zp: tuple[str, ...],
            accs: dict[str, dict], wcc: CodecCost | None = None, collectives: Candidates | None = None
            ) -> list[_p.Standing]:
    """Each codec's `lab.plan.pays.Standing` against the best bf16 FSDP step of s (as `lab.plan.pays._paying`)."""
    base_zp = tuple(x for x in zp if x == "hpz")
    base = min(_steps(s, BF16, a, base_zp, candidates=collectives).seconds for a in algos)
    return [_p.standing(base / min(_steps(s, cc, a, zp, weights=wcc, candidates=collectives).seconds for a in algos),
                        accs.get(cc.name), cc.name) for cc in costs]


def _lesson(spec, c: Cluster, dev, batch: int, overlap: bool, costs: list[CodecCost], algos: list[str],
            zp: tuple[str, ...], summary: pd.DataFrame, best_base: str, base_step: float,
            accs: dict[str, dict], wcc: CodecCost | None = None, collectives: Candidates | None = None) -> dict:
    """The keys of `lab.plan.pays`'s lesson (so `lesson_sentence` reads it), for FSDP: inside one node (of at
    least 2 GPUs), here, and on 10 Gb/s Ethernet."""
    def at(cc: Cluster):
        return _paying(_p.Setting(spec, cc, dev, batch, overlap), costs, algos, zp, accs, wcc, collectives)

    g = max(2, c.gpus_per_node)
    slow_c = c if c.nodes == 1 else Cluster(c.nodes, c.gpus_per_node, c.intra, cl.resolve_level_link(_p.SLOW, "inter"),
                                            c.nics_per_node)
    comp = summary[summary["codec"] != _p.BASELINE]
    finite = [b for b in comp["break_even_GBps"] if b is not None and np.isfinite(b)]
    out = {"codecs": len(costs), "inside_node": f"1x{g} {c.intra.name}", "here": c.name, "slow": slow_c.name,
           "median_break_even_GBps": float(np.median(finite)) if finite else None,
           "nic_GBps": c.inter.bandwidth_Bps / 1e9, "baseline_algorithm": best_base, "baseline_step_ms": 1e3 * base_step}
    for key, where in (("inside", Cluster(1, g, c.intra, c.inter, c.nics_per_node)), ("here", c), ("slow", slow_c)):
        out.update(_p.lesson_part(key, at(where)))
    return out


__all__ = ["fsdp_candidates", "fsdp_pays"]
