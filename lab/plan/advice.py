"""Codec advice per layer: which codec the cost model predicts is fastest end to end (codec work +
the collective) for each layer's traffic at this P, link and device, and what it saves.

Dettmers 2016 §3.3 and §5 (Fig. 2): compression loses on small messages, where kernel launches
and latency dominate (8-bit is slower than 32-bit below ~50k values on his GTX Titans), 8-bit
wins on mid-sized layers, and 1-bit quantisation wins on large ones (>300k values) in data
parallelism; 1-bit does not work for model-parallel activations. The same structure falls out of
`lab.plan.wire`'s model: a fixed cost per message for codec kernels against a per-byte saving.
Data-parallel layers are advised on their gradient allreduce, model-parallel layers on their
activations and deltas (sign/sparse codecs excluded).
"""
from __future__ import annotations

import math

import pandas as pd

from lab.comm.cost import Link

from .devices import Device, get_device
from .links import resolve_link
from .layers import ModelSpec, get_model
from .strategies import MODEL_PARALLEL_KINDS, check_P, plan_step
from .wire import (allgather_seconds, allreduce_seconds, compressing_codecs, reduce_scatter_seconds, transfer_seconds,
                   wire_bytes, wire_codec)

CANDIDATES: tuple[str, ...] = ("none", "dynamic_tree", "onebit")


def _layer_time(role: str, lay, P: int, total: float, lk: Link, algorithm: str, codec, dev: Device,
                first: bool, last_out: bool) -> float:
    if role == "data":
        return allreduce_seconds(lay.params, P, lk, algorithm, codec, dev, lay.matrices)
    t = 0.0 if first else (allgather_seconds(total * lay.inputs, P, lk, algorithm, codec, dev)
                           + reduce_scatter_seconds(total * lay.inputs, P, lk, algorithm, codec, dev))
    return t + (allgather_seconds(total * lay.outputs, P, lk, algorithm, codec, dev) if last_out else 0.0)


def codec_advice(model: str | ModelSpec, P: int, *, device: str | Device = "v100", link: str | Link = "pcie3",
                 strategy: str = "data", batch_per_gpu: int | None = None, global_batch: int | None = None,
                 algorithm: str = "ring", candidates=CANDIDATES) -> pd.DataFrame:
    """Per layer: role (data | model), values sent, each candidate's predicted time (ms) and, for
    gradients, its payload (MB, one rank, before the collective's own factor), the fastest codec
    and its saving against uncompressed fp32 (ms and %). Strategy: data, model or hybrid.
    candidates: codec names or spec strings, or "all" (every registered codec)."""
    spec = get_model(model)
    P = check_P(P)
    dev = get_device(device)
    lk = resolve_link(link)
    if strategy not in ("data", "model", "hybrid"):
        raise ValueError(f"codec advice covers strategies data, model, hybrid; got {strategy!r}")
    if candidates == "all":
        candidates = ("none", *compressing_codecs())
    elif isinstance(candidates, str):
        candidates = (candidates,)
    cands = [wire_codec(c) for c in candidates]
    if not cands:
        raise ValueError("candidates: give at least one codec name")
    if "none" not in [c.name for c in cands]:
        cands.insert(0, wire_codec("none"))
    sp = plan_step(spec, P, device=dev, link=lk, strategy=strategy, batch_per_gpu=batch_per_gpu,
                   global_batch=global_batch, algorithm=algorithm)
    total = sp.global_batch
    layers = spec.layers
    mp = [strategy == "model" or (strategy == "hybrid" and lay.kind in MODEL_PARALLEL_KINDS) for lay in layers]
    rows = []
    for i, lay in enumerate(layers):
        role = "model" if mp[i] else "data"
        last_out = mp[i] and (i == len(layers) - 1 or not mp[i + 1])
        values = lay.params if role == "data" else (0 if i == 0 else 2 * total * lay.inputs) + (
            total * lay.outputs if last_out else 0)
        row = {"layer": lay.name, "kind": lay.kind, "role": role,
               "sends": "gradients" if role == "data" else "activations + deltas", "values": values}
        times = {}
        for c in cands:
            if role == "model" and (c.mode == "gather" or c.gradient_only):
                row[f"{c.name}_ms"] = math.nan
                continue
            times[c.name] = _layer_time(role, lay, P, total, lk, algorithm, c, dev, i == 0, last_out)
            row[f"{c.name}_ms"] = 1e3 * times[c.name]
            if role == "data":  # one rank's gradient payload (PowerSGD: from the layer's matrix shapes)
                row[f"{c.name}_MB"] = wire_bytes(values, c, lay.matrices) / 1e6
        best = min(times, key=lambda k: (times[k], k != "none"))
        base = times["none"]
        row.update({"best": best if values and P > 1 else "none", "saving_ms": 1e3 * (base - times[best]),
                    "saving_pct": 100.0 * (base - times[best]) / base if base > 0 else 0.0})
        rows.append(row)
    return pd.DataFrame(rows)


def _crossing(f, lo: float = 1.0, hi: float = 1e11, points: int = 221) -> float | None:
    """The size (to 1%) from which f(n) < 0 for every larger n on a log grid over [lo, hi]:
    lo if f < 0 everywhere, None if f(hi) >= 0."""
    grid = [lo * (hi / lo) ** (k / (points - 1)) for k in range(points)]
    neg = [f(n) < 0 for n in grid]
    if not neg[-1]:
        return None
    i = max((k for k, v in enumerate(neg) if not v), default=None)
    if i is None:
        return lo
    a, b = grid[i], grid[i + 1]
    while b / a > 1.01:
        mid = math.sqrt(a * b)
        a, b = (a, mid) if f(mid) < 0 else (mid, b)
    return b


def codec_thresholds(P: int = 2, *, device: str | Device = "gtx_titan", link: str | Link = "pcie3",
                     algorithm: str = "ring", eight_bit: str = "dynamic_tree", one_bit: str = "onebit",
                     point_to_point: bool = False) -> dict:
    """Message sizes (values) where 8-bit starts to beat fp32 and where 1-bit starts to beat 8-bit,
    for one allreduce on P ranks (or one point-to-point transfer, Dettmers 2016 Fig. 2's setting)."""
    P = check_P(P)
    dev = get_device(device)
    lk = resolve_link(link)
    none, c8, c1 = wire_codec("none"), wire_codec(eight_bit), wire_codec(one_bit)

    def t(n: float, c) -> float:
        if point_to_point:
            return transfer_seconds(n, lk, c, dev)
        return allreduce_seconds(n, P, lk, algorithm, c, dev)

    return {"P": P, "device": dev.name, "link": lk.name, "point_to_point": point_to_point,
            f"{eight_bit}_beats_fp32_from": _crossing(lambda n: t(n, c8) - t(n, none)),
            f"{one_bit}_beats_{eight_bit}_from": _crossing(lambda n: t(n, c1) - t(n, c8))}


__all__ = ["CANDIDATES", "codec_advice", "codec_thresholds"]
