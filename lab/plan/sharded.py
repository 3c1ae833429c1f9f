"""Sharded data parallelism (ZeRO-3 / PyTorch FSDP2) on the two-level cluster (`lab.comm.cluster`), with
ZeRO++'s three switches (Wang et al. 2023, arXiv 2306.10209 §3) and any codec on the wire.

Per step and per FSDP unit (one layer of `lab.plan.layers` holding n parameters, each of the P = N·g
ranks owning n/P of them): the weights are all-gathered before the forward pass and again before the
backward pass (reshard after forward), and the gradients are reduce-scattered after the backward pass.
Each collective is priced by the registered all-gather / reduce-scatter / all-to-all plugins
(`lab.comm.collectives`), each with its own cost model (`lab.plan.levels`: a·L + b·G per call), the
fastest one chosen per level:

- algorithm "ring" (the flat layout): one collective over all P ranks. On several nodes a plugin that only
  talks to its neighbours (the ring) runs on `Cluster.ring_link` (the slower of the intra link and one
  whole NIC: one flow crosses each node boundary per direction; node egress: one rank's bytes, (P−1)
  pieces of n/P for the ring); any other on one GPU's share of the network (`Cluster.inter_per_gpu`),
  its peers taken as spread evenly over the nodes for the bytes that leave a node.
- algorithm "hierarchical": all-gather across nodes among the N ranks of one local index (one GPU's share
  of the network), then inside the node; reduce-scatter the other way round (bf16 inside the node, the
  gradient codec across nodes, as the lab's hierarchical allreduce). Node egress (N−1)/N of the tensor.

ZeRO++ (§3.1-3.3):

- qwZ: the weights travel encoded by the codec (the paper: block-quantized INT8) on every weight
  all-gather: encoded once by the owner, decoded by every receiver, never re-encoded. Reading chosen
  (the paper's text leaves it open): hpZ's secondary copy is kept encoded too, so the backward
  all-gather inside the node also carries the codec's bytes. A gradient-only codec (sign, sparse,
  PowerSGD) cannot carry weights: its rows keep bf16 weights.
- qgZ: the gradients go through ZeRO++'s hierarchical one-shot all-to-all (the paper: INT4): encode once,
  all-to-all inside the node, decode and sum in fp32, encode the node's partial sums once, all-to-all
  across nodes among the ranks of one local index, decode and sum (`lab.comm.algorithms.alltoall_quantized`
  runs it for real). Without qgZ a gradient codec is re-encoded at every ring hop (`ring_reduce_scatter`).
- hpZ: a secondary partition of the weights inside each node (n/g per GPU, kept from the forward
  all-gather), so the backward all-gather runs on the g GPUs of a node only. It costs memory
  (`hpz_extra_GB`), no bytes across nodes.

Bytes are counted per node: `cross_node_bytes` leave one node (its NICs' egress), `intra_node_bytes` are
what a node's GPUs send each other. With M the model's bf16 bytes, plain ZeRO-3 moves about 3M across
each node boundary per step and ZeRO++ 0.5M + 0 + 0.25M = 0.75M (§3, Table 1; `volume_table`).

The step (`fsdp_step`): without overlap, compute plus every collective; with overlap, one communication
stream that prefetches the next unit's all-gather while the current unit computes (FSDP2's forward and
backward prefetch) and reduce-scatters each unit's gradient after its backward.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import pandas as pd

from lab.comm import cluster as cl
from lab.comm.cluster import BF16, Cluster, CodecCost

from . import levels as lv
from .layers import Layer, ModelSpec, get_model
from .links import resolve_link
from .step_plan import (BYTES_PER_ACTIVATION, BYTES_PER_PARAM, Infeasible, StepPlan, check_batches, cluster_codec,
                        sub_cluster)
from .wire import wire_codec

STRATEGIES = ("ddp", "fsdp")
ZERO_PP = ("qwz", "qgz", "hpz")
ZERO_PP_ALL = "qwz,qgz,hpz"
FSDP_ALGORITHMS = ("ring", "hierarchical")
COLLECTIVES = ("forward_all_gather", "backward_all_gather", "reduce_scatter")
# mixed-precision Adam state per parameter a rank owns: bf16 weight and gradient, fp32 master, two moments
BYTES_PER_OWNED_PARAM = 16.0

#: ZeRO++ §3: cross-node volume per step in model sizes M (bf16 bytes), per collective, ZeRO-3 and ZeRO++
PAPER_VOLUME_M = {"forward_all_gather": (1.0, 0.5), "backward_all_gather": (1.0, 0.0),
                  "reduce_scatter": (1.0, 0.25), "total": (3.0, 0.75)}

#: the paper's codecs, scales ignored as its arithmetic does: INT8 weights (qwZ) and INT4 gradients (qgZ)
PAPER_INT8 = CodecCost("int8 (ZeRO++ qwZ)", 1.0, mode="requantize", source="ZeRO++ §3.1: INT8 weights, scales ignored")
PAPER_INT4 = CodecCost("int4 (ZeRO++ qgZ)", 0.5, mode="requantize", source="ZeRO++ §3.3: INT4 gradients, scales ignored")


def check_strategy(strategy: str) -> str:
    """'ddp' or 'fsdp' (ValueError naming both otherwise)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    return strategy


def parse_zero_pp(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """ZeRO++ switches from 'qwz,qgz,hpz' (any subset, any order; '', 'none' or None: plain ZeRO-3 / FSDP),
    in the canonical order qwz, qgz, hpz. ValueError names an unknown switch and the allowed ones."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = set()
    for x in items:
        if not isinstance(x, str):
            raise ValueError(f"ZeRO++ switch {x!r}: allowed {', '.join(ZERO_PP)} (comma-separated) or none")
        k = x.strip().lower()
        if k in ("", "none"):
            continue
        if k not in ZERO_PP:
            raise ValueError(f"unknown ZeRO++ switch {x.strip()!r}; allowed: {', '.join(ZERO_PP)} (comma-separated), "
                             "or none")
        out.add(k)
    return tuple(k for k in ZERO_PP if k in out)


def zero_pp_label(switches: Sequence[str]) -> str:
    """'qwz+qgz+hpz', or 'none' for plain ZeRO-3 / FSDP."""
    return "+".join(switches) if switches else "none"


def check_fsdp_cluster(c: Cluster) -> Cluster:
    """FSDP shards over at least two GPUs."""
    if c.P < 2:
        raise ValueError(f"FSDP shards the model over the GPUs: {c.nodes}x{c.gpus_per_node} is {c.P} GPU; give at "
                         "least 2 (e.g. 1x2 or 8x8), or strategy ddp")
    return c


def check_fsdp_algorithm(algorithm: str) -> str:
    if algorithm not in FSDP_ALGORITHMS:
        raise ValueError(f"unknown FSDP all-gather/reduce-scatter algorithm {algorithm!r}; allowed: "
                         f"{', '.join(FSDP_ALGORITHMS)}")
    return algorithm


@dataclass(frozen=True)
class Traffic:
    """One collective (or the sum of several): seconds of transfer, codec work and kernel launches, bytes
    leaving one node and bytes a node's GPUs send each other, and where it ran."""

    collective: str
    where: str
    codec: str
    transfer_s: float = 0.0
    codec_s: float = 0.0
    launch_s: float = 0.0
    cross_node_bytes: float = 0.0
    intra_node_bytes: float = 0.0
    algorithm: str = ""

    @property
    def seconds(self) -> float:
        return self.transfer_s + self.codec_s + self.launch_s

    def __add__(self, o: "Traffic") -> "Traffic":
        return Traffic(self.collective, self.where, self.codec, self.transfer_s + o.transfer_s,
                       self.codec_s + o.codec_s, self.launch_s + o.launch_s,
                       self.cross_node_bytes + o.cross_node_bytes, self.intra_node_bytes + o.intra_node_bytes,
                       self.algorithm)

    def times(self, k: float) -> "Traffic":
        return replace(self, transfer_s=k * self.transfer_s, codec_s=k * self.codec_s, launch_s=k * self.launch_s,
                       cross_node_bytes=k * self.cross_node_bytes, intra_node_bytes=k * self.intra_node_bytes)


def _piece(c: CodecCost, values: float) -> float:
    return c.wire(values) if values else 0.0


def _two(across: lv.LevelPrice, inside: lv.LevelPrice) -> str:
    return f"across: {across.algorithm}, inside: {inside.algorithm}"


def all_gather(c: Cluster, n: float, codec: CodecCost = BF16, algorithm: str = "ring", *,
               inside_node: bool = False, name: str = "all_gather", candidates: lv.Candidates | None = None
               ) -> Traffic:
    """All-gather of a tensor of n values, each of the P ranks holding n/P (inside_node: hpZ's secondary
    partition, the g ranks of a node holding n/g each and gathering among themselves). A codec encodes
    once at the owner and every receiver decodes (`cl.ring_allgather`'s codec work, the same for every
    algorithm). One level (a node's GPUs, or the N ranks of one local index across nodes): the fastest
    registered all-gather plugin (`lab.plan.levels.best`; `candidates` {op: [names]} narrows them); the
    flat layout over several nodes: the fastest over all P consecutive ranks (`flat_level`)."""
    N, g, P = c.nodes, c.gpus_per_node, c.P
    if n == 0 or P == 1 or (inside_node and g == 1):
        return Traffic(name, "-", codec.name)
    if inside_node or N == 1:
        lev = lv.best("all_gather", g, n, c.intra, codec, candidates=candidates)
        _, w, launch = cl.ring_allgather(g, n, c.intra, codec)
        return Traffic(name, f"inside the node ({g} GPUs)", codec.name, lev.transfer_s, w, launch, 0.0,
                       g * lev.bytes_per_rank, lev.algorithm)
    if algorithm == "ring":
        lev, cross, intra = flat_level("all_gather", c, n, codec, candidates=candidates)
        _, w, launch = cl.ring_allgather(P, n, c.ring_link, codec)  # encode once, decode every row: any algorithm
        return Traffic(name, f"{lev.algorithm} over {P} GPUs", codec.name, lev.transfer_s, w, launch, cross, intra,
                       lev.algorithm)
    across = lv.best("all_gather", N, n / g, c.inter_per_gpu, codec, candidates=candidates)
    inside = lv.best("all_gather", g, n, c.intra, codec, candidates=candidates)
    a = cl.ring_allgather(N, n / g, c.inter_per_gpu, codec)
    b = cl.ring_allgather(g, n, c.intra, codec, encode=False)
    intra = g * lv.bytes_per_rank("all_gather", inside.algorithm, g, P * _piece(codec, n / P))
    return Traffic(name, f"across {N} nodes, then inside", codec.name, across.transfer_s + inside.transfer_s,
                   a[1] + b[1], a[2] + b[2], g * across.bytes_per_rank, intra, _two(across, inside))


def reduce_scatter(c: Cluster, n: float, codec: CodecCost = BF16, algorithm: str = "ring", *,
                   one_shot: bool = False, name: str = "reduce_scatter", raw: CodecCost = BF16,
                   candidates: lv.Candidates | None = None) -> Traffic:
    """Reduce-scatter of n gradient values per rank, leaving each rank the sum of its n/P. one_shot:
    ZeRO++'s qgZ (hierarchical all-to-all: encode once, all-to-all inside the node, sum in fp32, encode the
    node's sums once, all-to-all across nodes, sum; each all-to-all the fastest registered alltoall plugin);
    else the fastest registered reduce-scatter plugin per level (the codec decoded, added and re-encoded at
    every message), the hierarchical form with `raw` (bf16 by default) inside the node and the codec across;
    the flat layout over several nodes: the fastest over all P consecutive ranks (`flat_level`)."""
    N, g, P = c.nodes, c.gpus_per_node, c.P
    if n == 0 or P == 1:
        return Traffic(name, "-", codec.name)
    if one_shot:
        E = D = 0.0
        kernels = 0.0
        inside = lv.best("alltoall", g, n, c.intra, codec, candidates=candidates)  # g chunks of n/g
        across = lv.best("alltoall", N, n / g, c.inter_per_gpu, codec, candidates=candidates)  # N chunks of n/P
        if g > 1:
            E, D, kernels = n, (g - 1) * n / g, codec.encode_kernels + (g - 1) * codec.decode_kernels
        if N > 1:
            E, D = E + n / g, D + (N - 1) * n / P
            kernels += codec.encode_kernels + (N - 1) * codec.decode_kernels
        w = 0.0 if codec.raw else cl.codec_seconds(codec, E, D)
        launch = 0.0 if codec.raw else kernels * codec.launch_s
        return Traffic(name, "one-shot all-to-all (qgZ)", codec.name, inside.transfer_s + across.transfer_s, w,
                       launch, g * across.bytes_per_rank, g * inside.bytes_per_rank,
                       _two(across, inside) if N > 1 and g > 1 else (across if N > 1 else inside).algorithm)
    if N == 1:
        lev = lv.best("reduce_scatter", g, n, c.intra, codec, per_hop=True, candidates=candidates)
        return Traffic(name, f"inside the node ({g} GPUs)", codec.name, lev.transfer_s, lev.codec_s, lev.launch_s,
                       0.0, g * lev.bytes_per_rank, lev.algorithm)
    if algorithm == "ring":
        lev, cross, intra = flat_level("reduce_scatter", c, n, codec, per_hop=True, candidates=candidates)
        return Traffic(name, f"{lev.algorithm} over {P} GPUs", codec.name, lev.transfer_s, lev.codec_s, lev.launch_s,
                       cross, intra, lev.algorithm)
    inside = lv.best("reduce_scatter", g, n, c.intra, raw, per_hop=True, candidates=candidates)
    across = lv.best("reduce_scatter", N, n / g, c.inter_per_gpu, codec, per_hop=True, candidates=candidates)
    return Traffic(name, "inside the node, then across", codec.name, inside.transfer_s + across.transfer_s,
                   inside.codec_s + across.codec_s, inside.launch_s + across.launch_s, g * across.bytes_per_rank,
                   g * inside.bytes_per_rank, _two(across, inside))


def flat_level(op: str, c: Cluster, n: float, codec: CodecCost, *, per_hop: bool = False,
               candidates: lv.Candidates | None = None) -> tuple[lv.LevelPrice, float, float]:
    """The fastest registered plugin of `op` over all P consecutive ranks of several nodes, with the bytes
    that leave one node and those its GPUs send each other. A neighbours-only plugin (the ring) crosses each
    node boundary with one flow on the whole NIC (`Cluster.ring_link`): one rank's bytes leave the node, its
    other g−1 ranks' stay inside. Any other runs on one GPU's share of the network (`Cluster.inter_per_gpu`),
    its peers spread evenly: (P−g)/(P−1) of the node's g ranks' bytes leave it."""
    P, g = c.P, c.gpus_per_node
    best: tuple[lv.LevelPrice, float, float] | None = None
    for coll in lv.candidates_for(op, candidates):
        lev = lv.price(coll, P, n, c.ring_link if coll.neighbours else c.inter_per_gpu, codec, per_hop=per_hop)
        node = g * lev.bytes_per_rank
        cross = lev.bytes_per_rank if coll.neighbours else node * (P - g) / (P - 1)
        if best is None or lev.seconds < best[0].seconds:
            best = (lev, cross, node - cross)
    assert best is not None  # candidates_for names at least one plugin
    return best


def carries_weights(codec: CodecCost | object) -> bool:
    """Whether a codec may carry weights on the all-gather: not a gradient-only compressor (sign, sparse,
    low-rank: `lab.codecs` registry flag), not PowerSGD's own collective."""
    if not isinstance(codec, CodecCost):
        return False
    if codec.raw:
        return True
    try:
        wc = wire_codec(codec.name)
    except (ValueError, KeyError):  # a codec the registry does not know (the paper's INT8): it carries values
        return codec.mode != "gather"
    return not (wc.gradient_only or wc.phased or wc.mode == "gather")


def layer_traffic(c: Cluster, n: float, codec: CodecCost = BF16, algorithm: str = "ring",
                  zero_pp: Sequence[str] = (), *, weights: CodecCost | None = None,
                  raw: CodecCost = BF16, candidates: lv.Candidates | None = None) -> dict[str, Traffic]:
    """The three collectives of one FSDP unit of n parameters: {forward_all_gather, backward_all_gather,
    reduce_scatter}. codec: on the gradients (qgZ one-shot, else per hop), and on the weights when
    qwZ is on and it can carry weights (`carries_weights`); weights: a separate weight codec (the paper's
    INT8 beside INT4 gradients), used when qwZ is on; raw: the uncompressed format (bf16; the planner's fp32).
    Each collective's algorithm per level: the fastest registered plugin (`candidates` {op: [names]} narrows
    them; `Traffic.algorithm` names the choice)."""
    zp = parse_zero_pp(zero_pp)
    w = raw
    if "qwz" in zp:
        w = weights if weights is not None else (codec if carries_weights(codec) else raw)
    return {"forward_all_gather": all_gather(c, n, w, algorithm, name="forward_all_gather", candidates=candidates),
            "backward_all_gather": all_gather(c, n, w, algorithm, inside_node="hpz" in zp,
                                              name="backward_all_gather", candidates=candidates),
            "reduce_scatter": reduce_scatter(c, n, codec, algorithm, one_shot="qgz" in zp, name="reduce_scatter",
                                             raw=raw, candidates=candidates)}


def fsdp_step(fwd: Sequence[float], bwd: Sequence[float], ag_f: Sequence[float], ag_b: Sequence[float],
              rs: Sequence[float], overlap: bool) -> float:
    """Seconds of one FSDP step, units in forward order. No overlap: everything one after another. Overlap:
    one communication stream; the next unit's all-gather is issued when the current unit starts computing
    (forward and backward prefetch), each unit's reduce-scatter when its backward is done."""
    if not overlap:
        return float(sum(fwd) + sum(bwd) + sum(ag_f) + sum(ag_b) + sum(rs))
    L = len(fwd)
    t = chan = 0.0
    done = [0.0] * L
    chan = done[0] = ag_f[0]
    for i in range(L):
        start = max(t, done[i])
        if i + 1 < L:
            chan = done[i + 1] = max(chan, start) + ag_f[i + 1]
        t = start + fwd[i]
    chan = done[L - 1] = max(chan, t) + ag_b[L - 1]
    for i in reversed(range(L)):
        start = max(t, done[i])
        if i > 0:
            chan = done[i - 1] = max(chan, start) + ag_b[i - 1]
        t = start + bwd[i]
        chan = max(chan, t) + rs[i]
    return max(t, chan)


@dataclass
class FsdpStep:
    """One priced FSDP step: seconds, per-collective totals over the model's units, the codecs used."""

    seconds: float
    compute_s: float
    collectives: dict[str, Traffic]
    weights_codec: str
    grads_codec: str
    zero_pp: tuple[str, ...]
    algorithm: str

    @property
    def total(self) -> Traffic:
        out = Traffic("all", "-", self.grads_codec)
        for t in self.collectives.values():
            out = out + t
        return out

    def fields(self) -> dict:
        """The row fields of the step's traffic: per collective MB across nodes / inside a node and ms, the
        totals, and the step in model sizes."""
        out: dict = {}
        for k, t in self.collectives.items():
            out[f"{k}_cross_node_MB"] = t.cross_node_bytes / 1e6
            out[f"{k}_intra_node_MB"] = t.intra_node_bytes / 1e6
            out[f"{k}_ms"] = 1e3 * t.seconds
            out[f"{k}_where"] = t.where
            out[f"{k}_algorithm"] = t.algorithm
        tot = self.total
        out["cross_node_MB"] = tot.cross_node_bytes / 1e6
        out["intra_node_MB"] = tot.intra_node_bytes / 1e6
        return out


def price_step(params: Sequence[float], fwd: Sequence[float], bwd: Sequence[float], c: Cluster,
               codec: CodecCost = BF16, algorithm: str = "ring", zero_pp: Sequence[str] = (), overlap: bool = False,
               *, weights: CodecCost | None = None, raw: CodecCost = BF16,
               candidates: lv.Candidates | None = None) -> FsdpStep:
    """One FSDP step of units with `params` parameters each and forward/backward compute seconds, on `c`;
    each collective's `algorithm` in the totals names the plugins chosen (`chosen`)."""
    check_fsdp_cluster(c)
    check_fsdp_algorithm(algorithm)
    lv.check_candidates(candidates)
    zp = parse_zero_pp(zero_pp)
    memo: dict[float, dict[str, Traffic]] = {}
    per = []
    for n in params:
        if n not in memo:
            memo[n] = layer_traffic(c, n, codec, algorithm, zp, weights=weights, raw=raw, candidates=candidates)
        per.append(memo[n])
    totals = {k: Traffic(k, per[0][k].where if per else "-", per[0][k].codec if per else codec.name,
                         algorithm=chosen([d[k] for d in per]))
              for k in COLLECTIVES}
    for d in per:
        for k in COLLECTIVES:
            totals[k] = totals[k] + replace(d[k], collective=k, where=totals[k].where, codec=totals[k].codec,
                                            algorithm=totals[k].algorithm)
    secs = fsdp_step(fwd, bwd, *[[d[k].seconds for d in per] for k in COLLECTIVES], overlap)
    wname = per[0]["forward_all_gather"].codec if per else BF16.name
    return FsdpStep(secs, float(sum(fwd) + sum(bwd)), totals, wname, codec.name, zp, algorithm)


def chosen(traffic: Sequence[Traffic]) -> str:
    """The algorithms a collective ran with over a model's units: one name when every unit that sends chose
    the same, else each with its count of units ('recursive_doubling (12 units), pat (1 unit)')."""
    counts: dict[str, int] = {}
    for t in traffic:
        if t.algorithm and t.where != "-":
            counts[t.algorithm] = counts.get(t.algorithm, 0) + 1
    if len(counts) <= 1:
        return next(iter(counts), "-")
    return ", ".join(f"{a} ({k} unit{'s' if k > 1 else ''})" for a, k in counts.items())


def hpz_extra_GB(params: float, c: Cluster, weights: CodecCost = BF16) -> float:
    """hpZ's secondary partition: n/g of the weights per GPU, in the weights' wire format (GB)."""
    return weights.wire(params / c.gpus_per_node) / 1e9


def owned_GB(params: float, c: Cluster) -> float:
    """Model state a rank owns under ZeRO-3: n/P parameters × 16 bytes (mixed-precision Adam)."""
    return params / c.P * BYTES_PER_OWNED_PARAM / 1e9


def volume_table(c: Cluster | str = "48x8", n_values: float = 1e9, *, weights: CodecCost = PAPER_INT8,
                 grads: CodecCost = PAPER_INT4, intra: str = "nvlink3", inter: str = "ib_hdr",
                 algorithm: str = "hierarchical", candidates: lv.Candidates | None = None) -> pd.DataFrame:
    """ZeRO++ §3's communication-volume arithmetic with the lab's model: per collective, the bytes that
    leave one node per step for plain ZeRO-3 (bf16) and for ZeRO++ (qwZ with `weights`, hpZ, qgZ with
    `grads`), in model sizes M = 2·n_values bytes and as the fraction (N−1)/N of the tensor a node must
    receive, beside the paper's numbers (`PAPER_VOLUME_M`). One unit of n_values parameters; `candidates`
    {op: [names]} narrows the registered plugins each level may take."""
    if isinstance(c, str):
        c = cl.make_cluster(c, intra, inter)
    check_fsdp_cluster(c)
    M = BF16.wire(n_values)
    base = layer_traffic(c, n_values, BF16, algorithm, (), candidates=candidates)
    zpp = layer_traffic(c, n_values, grads, algorithm, ZERO_PP, weights=weights, candidates=candidates)
    frac = (c.nodes - 1) / c.nodes if c.nodes > 1 else math.nan
    rows = []
    for k in (*COLLECTIVES, "total"):
        b = sum(t.cross_node_bytes for t in base.values()) if k == "total" else base[k].cross_node_bytes
        z = sum(t.cross_node_bytes for t in zpp.values()) if k == "total" else zpp[k].cross_node_bytes
        p0, p1 = PAPER_VOLUME_M[k]
        rows.append({"collective": k, "zero3_M": b / M, "zeropp_M": z / M,
                     "zero3_M_per_node_share": b / M / frac if frac == frac else math.nan,
                     "zeropp_M_per_node_share": z / M / frac if frac == frac else math.nan,
                     "paper_zero3_M": p0, "paper_zeropp_M": p1,
                     "zeropp_codec": zpp[k].codec if k != "total" else "",
                     "where_zeropp": zpp[k].where if k != "total" else ""})
    return pd.DataFrame(rows)


def _layer_algorithms(t: dict[str, Traffic]) -> str:
    """'all-gather ring; backward all-gather ...; reduce-scatter ...': the plugins chosen per collective."""
    f, b, r = (t[k].algorithm for k in COLLECTIVES)
    return (f"all-gather {f}" + (f"; backward all-gather {b}" if b != f else "") + f"; reduce-scatter {r}")


_SIZED = re.compile(r"\s*gpt[_-]?(\d+(?:\.\d+)?)b\s*\Z", re.I)


def sized_model(name):
    """A model by name: 'gpt-7b' / 'gpt_175b' (`transformer` of that many billion parameters), else a preset
    of `lab.plan.layers` (or a ModelSpec as is)."""
    m = _SIZED.match(name) if isinstance(name, str) else None
    if m:
        return transformer(float(m.group(1)))
    return get_model(name.replace("-", "_") if isinstance(name, str) else name)


def transformer(billions: float, *, seq_len: int = 2048, vocab: int = 50257) -> ModelSpec:
    """A GPT-style decoder of about `billions` × 1e9 parameters (GPT-3's shape rule: width d = 128 × layers,
    12·d² weights per block, Brown et al. 2020 Table 2.1), d rounded to a multiple of 128; one FSDP unit
    per block plus the embedding (tied head). A sample is one sequence of seq_len tokens."""
    if isinstance(billions, bool) or not isinstance(billions, (int, float)) or not 0.01 <= billions <= 2000:
        raise ValueError(f"model size {billions!r} billion parameters: give a number in 0.01..2000")
    d = max(128, int(round((billions * 1e9 * 128 / 12) ** (1 / 3) / 128)) * 128)
    n_layer = max(1, int(round(billions * 1e9 / (12 * d * d))))
    T = seq_len
    block = 12 * d * d + 13 * d
    layers = [Layer("embed", "embedding", vocab * d + T * d, 0.0, T, T * d, ((vocab, d), (T, d)))]
    layers += [Layer(f"block{i + 1}", "block", block, T * (24.0 * d * d + 4.0 * T * d), T * d, T * d,
                     ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d))) for i in range(n_layer)]
    layers.append(Layer("lm_head", "head", 2 * d, T * 2.0 * d * vocab, T * d, T * vocab))
    total = sum(lay.params for lay in layers)
    return ModelSpec(f"gpt_{billions:g}b", tuple(layers), f"sequence of {T} tokens",
                     f"GPT-style decoder: {n_layer} blocks, d={d}, {total / 1e9:.2f} B parameters")


def plan_fsdp(spec, P: int, dev, *, link="pcie3", cluster: Cluster | None = None, batch_per_gpu: int | None = None,
              global_batch: int | None = None, algorithm: str = "ring", codec=None, overlap: bool = False,
              micro_batches: int | None = None, zero_pp=(), candidates: lv.Candidates | None = None) -> StepPlan:
    """The planner's strategy 'fsdp' (`lab.plan.strategies.plan_step`): one ZeRO-3 / FSDP step of `spec` on P
    GPUs (of `cluster`, whole nodes, or P GPUs on one `link`). The planner's uncompressed values are fp32
    (`cluster_codec`); codec: one codec name for every layer (the gradients; the weights too with qwZ).
    algorithm: the layout, hierarchical on a cluster when asked, else flat (one level: on one node or one
    link the fastest registered plugin; over several nodes a ring). Per level the fastest registered
    all-gather / reduce-scatter / alltoall plugin (`candidates` {op: [names]} narrows them); the label and
    each layer's `algorithm` name the choice.
    Memory: 12 bytes per owned parameter (n/P), the gathered layer's fp32 weights, activations, hpZ's copy."""
    zp = parse_zero_pp(zero_pp)
    if micro_batches is not None:
        raise ValueError("micro_batches is for strategy='pipeline'")
    if codec is not None and not isinstance(codec, str):
        raise ValueError(f"strategy fsdp takes one codec name for every layer (or none), got {codec!r}")
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap must be True or False, got {overlap!r}")
    b, B = check_batches(batch_per_gpu, global_batch)
    if P < 2:
        raise Infeasible("fsdp shards the model over the GPUs: P must be >= 2")
    if cluster is not None:
        c = sub_cluster(cluster, P)
        where = c.name
    else:
        lk = resolve_link(link)
        flat = replace(lk, name=f"{lk.name} (one link)")
        c = Cluster(1, P, flat, flat)
        where = lk.name
    wc = wire_codec(codec)
    if wc.phased:
        raise ValueError(f"codec {codec!r} runs its own allreduces; FSDP reduce-scatters shards: pick another codec")
    cc = cluster_codec(wc, dev)
    a = "hierarchical" if (algorithm == "hierarchical" and cluster is not None) else "ring"
    total = float(P * b) if b is not None else float(B)
    if total < P:
        raise Infeasible(f"a global batch of {total:g} gives some of the {P} GPUs no sample; need >= {P}")
    per_gpu = total / P
    F = dev.flops_per_s
    params = [float(lay.params) for lay in spec.layers]
    fwd = [lay.flops * per_gpu / F for lay in spec.layers]
    bwd = [2 * f for f in fwd]
    raw = cl.FP32  # the planner's uncompressed weights and gradients are fp32, as its data parallelism's
    st = price_step(params, fwd, bwd, c, cc, a, zp, overlap, raw=raw, candidates=candidates)
    rows, memo = [], {}
    for lay, n, f in zip(spec.layers, params, fwd):
        if n not in memo:
            memo[n] = layer_traffic(c, n, cc, a, zp, raw=raw, candidates=candidates)
        t = memo[n]
        rows.append({"layer": lay.name, "kind": lay.kind, "role": "fsdp", "params": lay.params, "samples": per_gpu,
                     "compute_ms": 3e3 * f, "comm_ms": 1e3 * sum(x.seconds for x in t.values()),
                     "sends": "weights x2 + gradients" if n else "-", "codec": f"{st.weights_codec} / {cc.name}",
                     "algorithm": _layer_algorithms(t) if n else "-",
                     # what one GPU sends, on average: a node's bytes (both levels) over its GPUs
                     "wire_MB": sum(x.cross_node_bytes + x.intra_node_bytes for x in t.values()) / c.gpus_per_node
                     / 1e6 if n else 0.0})
    n_all = sum(params)
    mem = (n_all / P * BYTES_PER_PARAM + 2 * max(params) * 4.0 + per_gpu * sum(lay.outputs for lay in spec.layers)
           * BYTES_PER_ACTIVATION + (hpz_extra_GB(n_all, c) * 1e9 if "hpz" in zp else 0.0))
    compute = 3.0 * sum(fwd)
    comm = st.total.seconds
    exposed = max(0.0, st.seconds - compute)
    layout = "hierarchical" if a == "hierarchical" else "flat"
    label = f"{layout} layout; {_layer_algorithms(st.collectives)}" + (f"; ZeRO++ {zero_pp_label(zp)}" if zp else "")
    return StepPlan(spec.name, "fsdp", P, total, per_gpu, dev.name, where, label, overlap, compute, comm, exposed,
                    0.0, st.seconds, total / st.seconds, mem / 1e9, mem / 1e9 <= dev.memory_GB, None,
                    pd.DataFrame(rows))


__all__ = ["plan_fsdp", "STRATEGIES", "ZERO_PP", "ZERO_PP_ALL", "FSDP_ALGORITHMS", "COLLECTIVES", "PAPER_VOLUME_M", "PAPER_INT8",
           "PAPER_INT4", "check_strategy", "parse_zero_pp", "zero_pp_label", "check_fsdp_cluster", "Traffic",
           "all_gather", "reduce_scatter", "flat_level", "chosen", "carries_weights", "layer_traffic", "fsdp_step", "FsdpStep",
           "price_step",
           "hpz_extra_GB", "owned_GB", "volume_table", "transformer", "sized_model"]
