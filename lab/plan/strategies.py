"""The parallelism planner: predicted step time of data, model, hybrid and pipeline parallelism,
with a compute / communication breakdown, speedup and scaling efficiency against one GPU.

Strategies (Dettmers 2016 §2.1-2.2 and §2.4; Hoefler's slides "model / pipeline / data / hybrid
parallelism"; Wu et al. 2015 §3.1-3.2):

- data: every GPU holds the whole model and b samples; after the backward pass each layer's
  gradient is allreduced (`lab.comm.cost`, any algorithm, optional codec per layer).
- model: every layer is split over the P GPUs; the whole mini-batch passes through all of them.
  Per layer: an allgather of its input in the forward pass and a reduce-scatter of the input's
  error delta in the backward pass (Dettmers §2.2: outputs "stacked or added together"), both on
  the critical path; the last layer's outputs are allgathered for the loss.
- hybrid (Krizhevsky 2014's "one weird trick", Deep Image's model-data parallelism §3.2):
  the "fc" layers model-parallel over all P GPUs on the whole mini-batch, every other layer
  data-parallel.
- fsdp (ZeRO-3 / PyTorch FSDP2, with ZeRO++'s qwZ / qgZ / hpZ switches `zero_pp`): every GPU holds 1/P of
  each layer and b samples; per layer its weights are all-gathered before the forward and the backward
  pass and its gradient reduce-scattered (`lab.plan.sharded`, ring costs; the codec on the gradients, and
  on the weights with qwZ). Without a cluster the P GPUs share one `link`.
- pipeline (GPipe-style): the layers cut into P contiguous stages of near-equal training FLOPs;
  the mini-batch split into M micro-batches; step = (M + P − 1) × the slowest stage's time per
  micro-batch (its compute plus sending its boundary activation forward and the delta back).

Batch: `batch_per_gpu` b fixes a step's mini-batch at P·b samples for every strategy (Deep Image
§3.3's weak scaling, "slices = 64"); `global_batch` B fixes it at B (Dettmers §2.3.2's strong
scaling). Compute time of a layer = 3 × forward FLOPs × samples / the device's achieved FLOP/s
(backward = 2× forward). Speedup = throughput at P / throughput of one GPU on the per-GPU batch
(b) or the whole batch (B); scaling efficiency = speedup / P.

Overlap (Deep Image §3.1's "lazy update"): a layer's gradient allreduce starts as soon as its
backward is done and need only finish before that layer's forward pass in the next step. A small
event simulation (one compute stream, one link, messages in issue order) gives the steady-state
step; with overlap off every allreduce must finish before the next step starts. Activation
traffic of model-parallel layers and pipelines is always on the critical path.

Two-level cluster (`cluster=`, a `lab.comm.cluster.Cluster`: nodes × GPUs per node, an intra- and
an inter-node link): P GPUs fill whole nodes (P <= GPUs per node: one node; else P must be a multiple
of it, up to the cluster's size; other P are infeasible points). Data parallelism's gradient
allreduce then comes from `lab.comm.cluster.cluster_allreduce`: every registered algorithm as it prices
itself on the machine (`Algorithm.cluster_time`: hierarchical with fp32 inside and the codec across
nodes, alltoall_quantized with the codec at both levels, the ring with one flow per node boundary; one
without a price of its own flat over all P ranks on the slower level), or in_network (NVLS / SHARP,
fp32 only). The ones laid out by nodes (`cluster_algorithms`) are planned only on a cluster. Model-parallel and pipeline
traffic runs on the slower level (flat, a ring for the two-level names).

Memory per GPU (rough): 12 bytes per parameter held (fp32 weight, gradient, momentum) plus 4 bytes
per stored activation value.
"""
from __future__ import annotations

from numbers import Integral
from typing import Mapping

import pandas as pd

from lab.comm import cluster as cl
from lab.comm import cost
from lab.comm.algorithms import algorithm_infos
from lab.comm.cost import Link, check_P

from .devices import Device, get_device
from .layers import ModelSpec, get_model
from .links import resolve_link
from .sharded import parse_zero_pp, plan_fsdp
from .step_plan import (BYTES_PER_ACTIVATION, BYTES_PER_PARAM, Infeasible, StepPlan, check_batches, cluster_codec,
                        sub_cluster)
from .wire import (WireCodec, allgather_seconds, allreduce_seconds, phased_values, phased_work_seconds,
                   reduce_scatter_seconds, transfer_seconds, wire_bytes, wire_codec)
from lab.backend import Progress

STRATEGIES: tuple[str, ...] = ("data", "model", "hybrid", "pipeline", "fsdp")


def cluster_algorithms() -> tuple[str, ...]:
    """Allreduce algorithms planned only on a two-level cluster (`lab.comm.cluster`), read now: the
    registered ones laid out by nodes (they take a `ranks_per_node` option), then in_network."""
    return (*(a.name for a in algorithm_infos() if "ranks_per_node" in a.options), cl.IN_NETWORK)


def __getattr__(name: str):
    if name == "CLUSTER_ALGORITHMS":  # live: `cluster_algorithms()`, so a plugin registered later counts
        return cluster_algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

MODEL_PARALLEL_KINDS = ("fc",)  # what the hybrid splits
# -- input checks

def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    return strategy


def _codec_map(codec, model: ModelSpec, what: str) -> dict[str, WireCodec]:
    """Per-layer WireCodec from None / a name / {layer: name} (unnamed layers: the 'default' key, else none)."""
    names = [lay.name for lay in model.layers]
    if codec is None or isinstance(codec, str):
        wc = wire_codec(codec)
        return {n: wc for n in names}
    if isinstance(codec, Mapping):
        unknown = sorted(set(codec) - set(names) - {"default"})
        if unknown:
            raise ValueError(f"{what}: no layer {unknown[0]!r} in {model.name}; layers: {', '.join(names)}")
        default = codec.get("default")
        return {n: wire_codec(codec.get(n, default)) for n in names}
    raise ValueError(f"{what} must be None, a codec name or {{layer: codec name}}, got {codec!r}")


def _activation_codec(name) -> WireCodec:
    wc = wire_codec(name)
    if wc.mode == "gather" or wc.gradient_only:
        raise ValueError(f"activation codec {name!r} is a gradient compressor: model parallelism needs "
                         "accurate activations (Dettmers 2016 §2.2, §5); use an 8-bit or 16-bit codec")
    return wc


# -- a two-level cluster

def _check_cluster_algorithm(algorithm: str, cluster: cl.Cluster | None) -> None:
    two_level = cluster_algorithms()
    if cluster is not None and algorithm in two_level:
        return
    if cluster is None and algorithm in two_level:  # registered too (flat coefficients), but planned per level
        raise ValueError(f"algorithm {algorithm!r} runs on a two-level cluster: give cluster= (the CLI's "
                         "--cluster NODESxGPUS --intra LINK --inter LINK), or a flat algorithm")
    try:
        cost.check_algorithm(algorithm)
    except ValueError as e:
        if algorithm in two_level:
            raise ValueError(f"algorithm {algorithm!r} runs on a two-level cluster: give cluster= (the CLI's "
                             "--cluster NODESxGPUS --intra LINK --inter LINK), or a registered algorithm") from None
        if cluster is not None:
            raise ValueError(f"{e}; on a two-level cluster also {', '.join(two_level)}") from None
        raise


def _cluster_grad_seconds(c: cl.Cluster, n: float, wc: WireCodec, algorithm: str, dev: Device,
                          matrices: tuple[tuple[int, int], ...] = ()) -> float:
    """Seconds of one gradient allreduce of n fp32 values on the two-level cluster `c`; a phased codec
    (PowerSGD) as its fp32 allreduces (uncompressed, P, Q: `lab.plan.wire.phased_values`) plus its work."""
    if n == 0 or c.P == 1:
        return 0.0
    if wc.phased:
        fp32 = wire_codec(None)
        comm = sum(_cluster_grad_seconds(c, v, fp32, algorithm, dev) for v in phased_values(wc, n, matrices)[:3]
                   if v > 0)
        return comm + phased_work_seconds(n, wc, dev, matrices)
    if algorithm == cl.IN_NETWORK and not wc.raw:
        raise ValueError(f"in_network sums uncompressed gradients in the switch; codec {wc.name!r} is not allowed "
                         "with it: use codec none, or hierarchical / alltoall_quantized / a registered algorithm")
    # every algorithm as it prices itself on the machine; uncompressed values are fp32 here
    return cl.cluster_allreduce(c, n, cluster_codec(wc, dev), algorithm, raw=cl.FP32).seconds


# -- the event simulation of one steady-state step

def _simulate(fwd, bwd, fwd_comm, bwd_comm, grad_comm, overlap: bool, iters: int = 6) -> float:
    """Steady-state step time: one compute stream, one link (messages in issue order). With overlap
    (lazy update) layer i's allreduce starts when its backward is done and the next forward of layer i
    waits for it; without, all allreduces run after the backward pass."""
    L = len(fwd)
    t = chan = 0.0
    ready = [0.0] * L
    ends = []
    for _ in range(iters):
        for i in range(L):
            if overlap:
                t = max(t, ready[i])
            t += fwd[i]
            if fwd_comm[i]:
                t = chan = max(t, chan) + fwd_comm[i]
        for i in reversed(range(L)):
            t += bwd[i]
            if bwd_comm[i]:
                t = chan = max(t, chan) + bwd_comm[i]
            if grad_comm[i] and overlap:
                chan = max(t, chan) + grad_comm[i]
                ready[i] = chan
        if not overlap:  # synchronous update: every allreduce after the backward pass
            t = chan = max(t, chan) + sum(grad_comm)
        ends.append(t)
    return (ends[-1] - ends[-3]) / 2.0


def _stages(train_flops: list[float], S: int) -> list[int]:
    """Cut points of S contiguous stages minimising the largest stage's FLOPs (DP; layer lists are short)."""
    L = len(train_flops)
    prefix = [0.0]
    for f in train_flops:
        prefix.append(prefix[-1] + f)
    INF = float("inf")
    best = [[INF] * (L + 1) for _ in range(S + 1)]
    cut = [[0] * (L + 1) for _ in range(S + 1)]
    best[0][0] = 0.0
    for s in range(1, S + 1):
        for j in range(s, L - (S - s) + 1):
            for i in range(s - 1, j):
                v = max(best[s - 1][i], prefix[j] - prefix[i])
                if v < best[s][j]:
                    best[s][j], cut[s][j] = v, i
    bounds, j = [], L
    for s in range(S, 0, -1):
        bounds.append(j)
        j = cut[s][j]
    return sorted(bounds)  # exclusive end index of each stage


# -- one step

def plan_step(model: str | ModelSpec, P: int, *, device: str | Device = "v100", link: str | Link = "pcie3",
              strategy: str = "data", batch_per_gpu: int | None = None, global_batch: int | None = None,
              algorithm: str = "ring", codec=None, activation_codec: str | None = None, overlap: bool = False,
              micro_batches: int | None = None, cluster: cl.Cluster | None = None,
              zero_pp=(), fsdp_collectives=None) -> StepPlan:
    """Predicted time of one training step of `model` on P GPUs (see the module docstring).

    codec: for gradient allreduces, None / a codec name / {layer name: codec, 'default': codec};
    activation_codec: for model-parallel and pipeline activations (no sign/sparse codecs). Pipeline
    stages only send activations point to point: codec, algorithm and overlap do not apply to it.
    cluster: a two-level `lab.comm.cluster.Cluster` instead of `link` (see the module docstring).
    zero_pp: ZeRO++ switches for strategy 'fsdp' ('qwz,qgz,hpz', any subset; `lab.plan.sharded`);
    fsdp_collectives: strategy 'fsdp' only, {op: [algorithm names]} narrowing the registered all_gather /
    reduce_scatter / alltoall plugins it chooses among per level (None: every one registered now)."""
    spec = get_model(model)
    P = check_P(P)
    dev = get_device(device)
    check_strategy(strategy)
    if strategy == "fsdp":
        return plan_fsdp(spec, P, dev, link=link, cluster=cluster, batch_per_gpu=batch_per_gpu,
                         global_batch=global_batch, algorithm=algorithm, codec=codec, overlap=overlap,
                         micro_batches=micro_batches, zero_pp=zero_pp, candidates=fsdp_collectives)
    if fsdp_collectives is not None:
        raise ValueError(f"fsdp_collectives is for strategy 'fsdp' (its all-gathers and reduce-scatters), not "
                         f"{strategy!r}")
    if parse_zero_pp(zero_pp):
        raise ValueError(f"zero_pp {zero_pp!r} is for strategy 'fsdp' (ZeRO++), not {strategy!r}")
    if cluster is not None and not isinstance(cluster, cl.Cluster):
        raise ValueError(f"cluster must be a lab.comm.cluster.Cluster (make_cluster('8x8', 'nvlink4', 'ib_ndr')), "
                         f"got {cluster!r}")
    _check_cluster_algorithm(algorithm, cluster)
    sub = sub_cluster(cluster, P) if cluster is not None else None
    lk = resolve_link(link) if sub is None else sub.slowest
    link_name = lk.name if sub is None else sub.name
    act_algorithm = "ring" if algorithm in cluster_algorithms() else algorithm
    b, B = check_batches(batch_per_gpu, global_batch)
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap must be True or False, got {overlap!r}")
    grad_codecs = _codec_map(codec, spec, "codec")
    act = _activation_codec(activation_codec)
    total = float(P * b) if b is not None else float(B)
    if strategy in ("data", "hybrid") and total < P:
        raise Infeasible(f"a global batch of {total:g} gives some of the {P} GPUs no sample; need >= {P}")
    per_gpu = total / P
    F = dev.flops_per_s
    layers = spec.layers
    if strategy == "pipeline":
        return _pipeline(spec, P, dev, lk, total, per_gpu, act, micro_batches, overlap, algorithm, link_name)
    if micro_batches is not None:
        raise ValueError("micro_batches is for strategy='pipeline'")

    mp = [strategy == "model" or (strategy == "hybrid" and lay.kind in MODEL_PARALLEL_KINDS) for lay in layers]
    fwd, bwd, fc_, bc_, gc_, rows = [], [], [], [], [], []
    mem = 0.0
    for i, lay in enumerate(layers):
        if mp[i]:
            samples, held = total, lay.params / P
            f = lay.flops * total / (P * F)
            first = i == 0
            gather_in = 0.0 if first else allgather_seconds(total * lay.inputs, P, lk, act_algorithm, act, dev)
            last_out = (i == len(layers) - 1) or not mp[i + 1]
            gather_out = allgather_seconds(total * lay.outputs, P, lk, act_algorithm, act, dev) if last_out else 0.0
            rs = 0.0 if first else reduce_scatter_seconds(total * lay.inputs, P, lk, act_algorithm, act, dev)
            fcomm, bcomm, gcomm = gather_in + gather_out, rs, 0.0
            what = "activations" + ("" if first else " + deltas")
            codec_name = act.name
            mbytes = (0.0 if first else 2 * wire_bytes(total * lay.inputs, act)) + (
                wire_bytes(total * lay.outputs, act) if last_out else 0.0)
            mem += held * BYTES_PER_PARAM + total * lay.outputs / P * BYTES_PER_ACTIVATION
        else:
            samples, held = per_gpu, lay.params
            f = lay.flops * per_gpu / F
            wc = grad_codecs[lay.name]
            gcomm = (allreduce_seconds(lay.params, P, lk, algorithm, wc, dev, lay.matrices) if sub is None
                     else _cluster_grad_seconds(sub, lay.params, wc, algorithm, dev, lay.matrices))
            fcomm = bcomm = 0.0
            what = "gradients" if lay.params and P > 1 else "-"
            codec_name = wc.name
            mbytes = wire_bytes(lay.params, wc) if lay.params and P > 1 else 0.0
            mem += held * BYTES_PER_PARAM + per_gpu * lay.outputs * BYTES_PER_ACTIVATION
        if P == 1:
            fcomm = bcomm = gcomm = 0.0
            mbytes = 0.0
        fwd.append(f)
        bwd.append(2 * f)
        fc_.append(fcomm)
        bc_.append(bcomm)
        gc_.append(gcomm)
        rows.append({"layer": lay.name, "kind": lay.kind, "role": "model" if mp[i] else "data",
                     "params": lay.params, "samples": samples, "compute_ms": 3e3 * f,
                     "comm_ms": 1e3 * (fcomm + bcomm + gcomm), "sends": what if P > 1 else "-",
                     "codec": codec_name if P > 1 and what != "-" else "-", "wire_MB": mbytes / 1e6})
    step = _simulate(fwd, bwd, fc_, bc_, gc_, overlap)
    compute = 3.0 * sum(fwd)
    comm = sum(fc_) + sum(bc_) + sum(gc_)
    mem_gb = mem / 1e9
    exposed = step - compute if step - compute > 1e-9 * step else 0.0
    return StepPlan(spec.name, strategy, P, total, per_gpu, dev.name, link_name, algorithm, overlap, compute, comm,
                    exposed, 0.0, step, total / step, mem_gb, mem_gb <= dev.memory_GB, None,
                    pd.DataFrame(rows))


def _pipeline(spec: ModelSpec, P: int, dev: Device, lk: Link, total: float, per_gpu: float, act: WireCodec,
              micro_batches: int | None, overlap: bool, algorithm: str, link_name: str | None = None) -> StepPlan:
    layers = spec.layers
    if P > len(layers):
        raise Infeasible(f"pipeline: {P} stages but {spec.name} has only {len(layers)} layers")
    M = min(4 * P, int(total)) if micro_batches is None else micro_batches
    if isinstance(M, bool) or not isinstance(M, Integral) or M < 1:
        raise ValueError(f"micro_batches must be an int >= 1, got {micro_batches!r}")
    if M > total:
        raise Infeasible(f"pipeline: {M} micro-batches of a {total:g}-sample batch (need micro_batches <= batch)")
    mb = total / M
    F = dev.flops_per_s
    bounds = _stages([lay.flops for lay in layers], P)
    rows, stage_t, stage_c, start, mem = [], [], [], 0, []
    for s, end in enumerate(bounds):
        comp = 3.0 * sum(lay.flops for lay in layers[start:end]) * mb / F
        boundary = layers[end - 1].outputs * mb
        xfer = 2.0 * transfer_seconds(boundary, lk, act, dev) if end < len(layers) and P > 1 else 0.0
        stage_t.append(comp + xfer)
        stage_c.append(comp)
        held = sum(lay.params for lay in layers[start:end])
        mem.append(held * BYTES_PER_PARAM + total * sum(lay.outputs for lay in layers[start:end]) * BYTES_PER_ACTIVATION)
        for lay in layers[start:end]:
            last = lay is layers[end - 1] and end < len(layers) and P > 1
            rows.append({"layer": lay.name, "kind": lay.kind, "role": f"stage {s + 1}", "params": lay.params,
                         "samples": total, "compute_ms": 3e3 * lay.flops * total / F,
                         "comm_ms": 1e3 * M * (2.0 * transfer_seconds(lay.outputs * mb, lk, act, dev)) if last else 0.0,
                         "sends": "activations + deltas" if last else "-", "codec": act.name if last else "-",
                         "wire_MB": 2 * M * wire_bytes(lay.outputs * mb, act) / 1e6 if last else 0.0})
        start = end
    k = max(range(P), key=lambda s: stage_t[s])
    slot = stage_t[k]
    step = (M + P - 1) * slot
    compute = M * stage_c[k]
    exposed = M * (slot - stage_c[k])
    comm = M * sum(t - c for t, c in zip(stage_t, stage_c)) / P
    mem_gb = max(mem) / 1e9
    return StepPlan(spec.name, "pipeline", P, total, per_gpu, dev.name, link_name or lk.name, algorithm, overlap,
                    compute, comm, exposed, step - compute - exposed, step, total / step, mem_gb,
                    mem_gb <= dev.memory_GB, M, pd.DataFrame(rows))


# -- a sweep over P

SWEEP_COLUMNS = ["strategy", "P", "global_batch", "batch_per_gpu", "compute_ms", "comm_ms", "exposed_comm_ms",
                 "idle_ms", "step_ms", "images_per_s", "speedup", "efficiency", "memory_GB", "fits", "feasible", "note"]


def plan_sweep(model: str | ModelSpec, gpus, *, strategies=("data",), device: str | Device = "v100",
               link: str | Link = "pcie3", batch_per_gpu: int | None = None, global_batch: int | None = None,
               algorithm: str = "ring", codec=None, activation_codec: str | None = None, overlap: bool = False,
               micro_batches: int | None = None, progress: Progress | None = None,
               cluster: cl.Cluster | None = None, zero_pp=(), fsdp_collectives=None) -> pd.DataFrame:
    """plan_step for every strategy and P in `gpus`: step breakdown (ms), images/s, speedup against
    one GPU and scaling efficiency (speedup / P). Infeasible points are rows with feasible=False.
    zero_pp and fsdp_collectives apply to strategy 'fsdp' (`plan_step`)."""
    gpus = [check_P(P) for P in gpus]
    if not gpus:
        raise ValueError("gpus: give at least one GPU count")
    strategies = [check_strategy(s) for s in ([strategies] if isinstance(strategies, str) else strategies)]
    kw = dict(device=device, link=link, batch_per_gpu=batch_per_gpu, global_batch=global_batch, algorithm=algorithm,
              codec=codec, activation_codec=activation_codec, overlap=overlap, cluster=cluster)
    base = plan_step(model, 1, strategy="data", **kw)
    rows, n, done = [], len(gpus) * len(strategies), 0
    for s in strategies:
        for P in gpus:
            try:
                sp = plan_step(model, P, strategy=s, micro_batches=micro_batches if s == "pipeline" else None,
                               zero_pp=zero_pp if s == "fsdp" else (),
                               fsdp_collectives=fsdp_collectives if s == "fsdp" else None, **kw)
            except Infeasible as e:
                rows.append({"strategy": s, "P": P, "feasible": False, "note": str(e)})
            else:
                speedup = sp.images_per_s / base.images_per_s
                rows.append({"strategy": s, "P": P, "global_batch": sp.global_batch, "batch_per_gpu": sp.batch_per_gpu,
                             "compute_ms": 1e3 * sp.compute_s, "comm_ms": 1e3 * sp.comm_s,
                             "exposed_comm_ms": 1e3 * sp.exposed_comm_s, "idle_ms": 1e3 * sp.idle_s,
                             "step_ms": 1e3 * sp.step_s, "images_per_s": sp.images_per_s, "speedup": speedup,
                             "efficiency": speedup / P, "memory_GB": sp.memory_GB, "fits": sp.fits, "feasible": True,
                             "note": "" if sp.micro_batches is None else f"M={sp.micro_batches}"})
            done += 1
            if progress:
                progress(done / n, f"{s} P={P}")
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def crossover(sweep: pd.DataFrame, a: str, b: str) -> int | None:
    """The smallest P of the sweep from which strategy a is faster than b at every larger P, or None."""
    t = sweep[sweep["feasible"]].pivot(index="P", columns="strategy", values="step_ms").sort_index()
    if a not in t or b not in t:
        raise ValueError(f"the sweep needs both strategies {a!r} and {b!r}")
    faster = (t[a] < t[b]).tolist()
    Ps = list(t.index)
    for i in range(len(Ps)):
        if all(faster[i:]):
            return int(Ps[i])
    return None


__all__ = ["STRATEGIES", "CLUSTER_ALGORITHMS", "cluster_algorithms", "sub_cluster", "cluster_codec", "MODEL_PARALLEL_KINDS", "Infeasible",
           "StepPlan", "plan_step", "plan_sweep", "crossover",
           "check_P", "check_strategy", "SWEEP_COLUMNS"]
