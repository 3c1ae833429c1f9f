"""Hierarchical two-level allreduce: reduce-scatter inside each node, allreduce of each shard across
the nodes among the ranks that hold it, allgather inside each node (the two-level allreduce of
Horovod's hierarchical mode and of NCCL's tree/NVLS on multi-node jobs; Jia et al. 2018 §3.3,
arXiv 1807.11205, "hierarchical all-reduce").

Ranks are grouped into nodes of `ranks_per_node` = k consecutive ranks (node j holds ranks
jk .. jk+k−1; N = P/k nodes). Rank (j, i) = jk + i:
  1. intra-node reduce-scatter of its vector in k shards: local rank i ends with node j's sum of
     shard i (fp32), through `inner` ('ring': re-quantised per hop; 'butterfly_sync': every part
     sent once to its owner, who adds in fp32);
  2. inter-node allreduce of shard i among the ranks (0, i), (1, i), ... (N−1, i), with `outer`,
     any registered flat algorithm, on the slow network, with `codec`;
  3. intra-node allgather: the owner encodes its shard once (intra codec) and the node shares it.
A codec per level: `codec` across nodes, `intra_codec` inside a node (default: the same; None or
'none': fp32 inside, the usual choice on NVLink). Each level runs on a sub-communicator
(`Comm.group`), so the same code runs on SimComm (strict NCCL rules too) and torch.distributed.

Traffic per rank: 2(k−1)/k·m inside the node and the outer algorithm's bytes for m/k across, so a
ring outer moves 2(N−1)/N·m/k over the slow links, k times less than a flat ring's worst link.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

import torch

from .. import cluster as cl
from .. import cost
from ..base import Comm
from ..channel import Channel
from ..collectives import get_collective
from ..pieces import pieces
from .base import Algorithm, algorithm_infos, get_algorithm

if TYPE_CHECKING:
    from lab.codecs import Codec

#: the intra-node levels: the allreduce algorithms whose halves run here, each as the registered
#: (reduce-scatter, all-gather) collectives whose channel forms it composes (`lab.comm.collectives`)
INNER = {"ring": ("ring", "ring"), "butterfly_sync": ("direct", "direct")}
#: intra_codec's default: the codec of the inter-node level
SAME = "same"
#: the most pieces `pipeline` may cut a vector into
MAX_PIPELINE = 64


def divisors(P: int) -> list[int]:
    """The allowed ranks_per_node for P ranks."""
    return [d for d in range(1, P + 1) if P % d == 0]


def default_ranks_per_node(P: int) -> int:
    """The balanced split when none is given: the largest divisor k of P with k·k <= P (P = 64: 8
    nodes of 8; P = 2: 2 nodes of 1; a prime P: P nodes of 1)."""
    return max(d for d in divisors(P) if d * d <= P)


def check_ranks_per_node(P: int, ranks_per_node: Any) -> int:
    """ranks_per_node checked against P (None: `default_ranks_per_node`); ValueError naming the divisors."""
    if ranks_per_node is None:
        return default_ranks_per_node(P)
    if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1 \
            or P % ranks_per_node:
        shown = divisors(P)
        listing = ", ".join(map(str, shown[:24])) + (" ..." if len(shown) > 24 else "")
        raise ValueError(f"ranks_per_node={ranks_per_node!r} does not divide P={P} ranks into nodes; "
                         f"allowed: the divisors of {P}: {listing}")
    return ranks_per_node


def groups(P: int, r: int, k: int) -> tuple[list[int], list[int]]:
    """Rank r's node (ranks jk..jk+k−1) and its inter-node group (the ranks with local index r % k)."""
    node, local = divmod(r, k)
    return list(range(node * k, node * k + k)), list(range(local, P, k))


def _configure(P: int, codec: "Codec | None", how: str, *, ranks_per_node: int | None = None,
               inner: str = "ring", outer: str = "ring", intra_codec: Any = SAME, pipeline: int = 1) -> dict:
    from ..allreduce import resolve_codec, resolve_mode

    k = check_ranks_per_node(P, ranks_per_node)
    if isinstance(pipeline, bool) or not isinstance(pipeline, int) or not 1 <= pipeline <= MAX_PIPELINE:
        raise ValueError(f"pipeline={pipeline!r}: the number of pieces whose levels overlap; allowed: an int "
                         f"from 1 (levels one after the other) to {MAX_PIPELINE}")
    if inner not in INNER:
        raise ValueError(f"inner={inner!r}: the intra-node level runs a reduce-scatter and an allgather; "
                         f"allowed: {', '.join(INNER)}")
    outers = [a.name for a in algorithm_infos() if a.name != "hierarchical"]
    if outer not in outers:
        raise ValueError(f"outer={outer!r}: the inter-node level runs a flat allreduce; allowed: {', '.join(outers)}")
    if intra_codec == SAME:
        ic = codec
    else:
        ic = resolve_codec(None if intra_codec == "fp32" else intra_codec)
    if how != "gather":
        if ic is not None and k > 1:
            if ic.stateful:
                raise ValueError(f"intra_codec {ic.name!r} keeps an error-feedback residual of its own "
                                 "encoding; re-encoded partial sums have none: use mode='gather'")
            if inner == "ring" and not ic.requantize and k > 2:
                raise ValueError(f"intra_codec {ic.name!r} cannot be re-encoded at every hop of the inner "
                                 "ring; use inner='butterfly_sync' (each value encoded twice), another "
                                 "intra_codec, or mode='gather'")
        if codec is not None and P // k > 1:
            resolve_mode(codec, "requantize", outer)  # the outer level re-quantises: its own rules
    return {"ranks_per_node": k, "inner": inner, "outer": outer, "intra_codec": ic, "pipeline": pipeline}


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    o = ch.options or _configure(P, ch.codec, "raw" if ch.codec is None else "requantize")
    k = o["ranks_per_node"]
    N, local = P // k, r % k
    intra_ranks, inter_ranks = groups(P, r, k)
    G = o.get("pipeline", 1) if k > 1 and N > 1 and comm.concurrent else 1
    parts = [pieces(p, k) for p in pieces(buf, G)]  # G pieces, each cut in k shards
    node_rs = node_ag = cross = None
    if k > 1:
        intra = comm.group(intra_ranks)
        ich = Channel(intra, o["intra_codec"], scratch=(k - 1) * max(s.numel() for s in parts[0]))
        node_rs = lambda shards: reduce_scatter(intra, shards, ich, o["inner"])  # noqa: E731
        node_ag = lambda shards: allgather(intra, shards, ich, o["inner"])  # noqa: E731
    if N > 1:
        inter, outer = comm.group(inter_ranks), get_algorithm(o["outer"])
        how = "raw" if ch.codec is None else "requantize"
        och = Channel(inter, ch.codec, scratch=outer.scratch(max(p[local].numel() for p in parts), N),
                      options=outer.configure(N, ch.codec, how) if outer.options else {})
        cross = lambda shards: outer.reduce(inter, shards[local], och)  # noqa: E731
    if G > 1:
        _pipelined(parts, node_rs, cross, node_ag, f"rank{r}-node-level")
        return
    for step in (node_rs, cross, node_ag):
        if step is not None:
            step(parts[0])


def _pipelined(parts: list[list[torch.Tensor]], node_rs, cross, node_ag, name: str) -> None:
    """The three steps on several pieces with the levels overlapped, as NCCL pipelines its two-level
    algorithms by chunks: a thread runs the node's reduce-scatters, then its allgathers, in piece order
    (the same on every rank); this one runs piece g's cross-node allreduce as soon as its reduce-scatter
    is done, so piece g crosses the nodes while piece g+1 is reduced inside the node. The two levels
    talk to disjoint peers (`Comm.concurrent`); every value is summed as without the pipeline."""
    reduced, crossed = [threading.Event() for _ in parts], [threading.Event() for _ in parts]
    failed: list[BaseException] = []

    def node_level() -> None:
        try:
            for g, shards in enumerate(parts):
                node_rs(shards)
                reduced[g].set()
            for g, shards in enumerate(parts):
                crossed[g].wait()
                if failed:
                    return
                node_ag(shards)
        except BaseException as e:  # re-raised by the caller's thread below
            failed.append(e)
            for ev in reduced:
                ev.set()

    worker = threading.Thread(target=node_level, name=name, daemon=True)
    worker.start()
    try:
        for g, shards in enumerate(parts):
            reduced[g].wait()
            if failed:
                break
            cross(shards)
            crossed[g].set()
    except BaseException as e:
        failed.append(e)
    finally:
        for ev in crossed:
            ev.set()
        worker.join()
    if failed:
        raise failed[0]


def reduce_scatter(comm: Comm, shards: list[torch.Tensor], ch: Channel, inner: str) -> None:
    """shards[comm.rank] becomes the fp32 sum over the group's ranks of their shards[comm.rank], by the
    registered reduce-scatter `INNER[inner]` names, in its channel form (`Collective.phase`). ring: k−1
    steps, the partial sum re-encoded at each hop (the last one is decoded and added in fp32);
    butterfly_sync (direct): every part sent once to its owner, who adds them in rank order, its own in fp32."""
    get_collective("reduce_scatter", INNER[inner][0]).phase(comm, shards, ch)


def allgather(comm: Comm, shards: list[torch.Tensor], ch: Channel, inner: str) -> None:
    """The owner encodes shards[comm.rank] once (keeping the decoded value, like its receivers) and
    every rank of the group gets every shard, by the registered all-gather `INNER[inner]` names: around
    the ring, or directly (butterfly_sync)."""
    get_collective("all_gather", INNER[inner][1]).phase(comm, shards, ch)


def gather(comm: Comm, rows: torch.Tensor, options: dict | None = None) -> None:
    """Two-level allgather of one payload row per rank: across nodes among the ranks with the same
    local index (each gets N rows), then inside the node (blocks of N rows): the slow links carry
    (N−1) rows per rank instead of a flat allgather's P−k."""
    two_level_gather(comm, rows, check_ranks_per_node(comm.size, (options or {}).get("ranks_per_node")))


def two_level_gather(comm: Comm, rows: torch.Tensor, k: int) -> None:
    """`gather` for k ranks per node (alltoall_quantized's hierarchical form uses it too)."""
    P, r = comm.size, comm.rank
    N, (node, local) = P // k, divmod(r, k)
    intra_ranks, inter_ranks = groups(P, r, k)
    if N > 1:
        inter = comm.group(inter_ranks)
        peers = [(node + d) % N for d in range(1, N)]
        inter.exchange([(rows[r], j) for j in peers], [(rows[j * k + local], j) for j in peers]).wait()
    if k > 1:
        intra = comm.group(intra_ranks)
        peers = [(local + d) % k for d in range(1, k)]
        mine = rows[local::k].contiguous()
        got = {m: torch.empty_like(mine) for m in peers}
        intra.exchange([(mine, m) for m in peers], [(got[m], m) for m in peers]).wait()
        for m in peers:
            rows[m::k] = got[m]


# -- cost model: flat coefficients (every link alike) and the two levels apart for a cluster model

def level_coefficients(P: int, m: float, ranks_per_node: int | None = None, inner: str = "ring",
                       outer: str = "ring") -> dict[str, tuple[float, float]]:
    """(a, b) of time = a·L + b·G per level: 'intra' (reduce-scatter + allgather of m bytes on k
    ranks: 2(k−1)L + 2(k−1)/k·mG, ring or direct alike) and 'inter' (the outer algorithm on N ranks
    with m/k bytes). A two-level cluster model prices each with its own link."""
    k = check_ranks_per_node(P, ranks_per_node)
    N = P // k
    intra = (2.0 * (k - 1), 2.0 * (k - 1) / k * m) if k > 1 else (0.0, 0.0)
    inter = tuple(float(v) for v in get_algorithm(outer).coefficients(N, m / k)) if N > 1 else (0.0, 0.0)
    return {"intra": intra, "inter": inter}


def level_bytes(P: int, m: float, ranks_per_node: int | None = None, outer: str = "ring") -> dict[str, float]:
    """Bytes all ranks send together per level ('intra' stays in the nodes, 'inter' crosses them)."""
    k = check_ranks_per_node(P, ranks_per_node)
    N = P // k
    return {"intra": 2.0 * (k - 1) / k * m * P,
            "inter": k * float(get_algorithm(outer).total_bytes(N, m / k)) if N > 1 else 0.0}


def codec_counts(P: int, n: float, ranks_per_node: int | None = None, outer: str = "ring") -> tuple[float, float]:
    """Values encoded and decoded per rank in requantize mode with the inner ring: k−1 hops of n/k,
    the outer algorithm's counts for n/k, the owner's encode and keep, k−1 arrivals."""
    k = check_ranks_per_node(P, ranks_per_node)
    N = P // k
    e = d = 0.0
    if k > 1:
        e += (k - 1) / k * n + n / k
        d += (k - 1) / k * n + n / k + (k - 1) / k * n
    if N > 1:
        counts = get_algorithm(outer).codec_counts
        oe, od = counts(N, n / k) if counts else (n / k, n / k)
        e, d = e + oe, d + od
    return e, d


def cluster_time(cluster: cl.Cluster, n_values: float, codec: cl.CodecCost = cl.BF16, *,
                 intra_codec: cl.CodecCost | None = None, raw: cl.CodecCost = cl.BF16,
                 chunk_values: float | None = None, pipeline: int = 1, outer: str = "ring") -> cl.CollectiveTime:
    """On a two-level machine (`lab.comm.cluster`), g = ranks_per_node: intra-node ring reduce-scatter
    (intra_codec, default `raw`: the values uncompressed), an allreduce of each n/g shard among the N ranks
    that hold it (`outer`, `codec`, on one GPU's share of the network: `cost.compressed_time`), intra-node
    ring allgather (intra_codec). All g shards cross the network at once, one per GPU. chunk_values: the
    cross-node ring's messages travel in chunks whose codec work overlaps the next chunk's transfer
    (`pipelined_hidden`; the node level sends whole shards). pipeline: the vector in this many pieces,
    the node level of one piece beside the cross-node level of another: the two levels' times pipeline too."""
    inter_codec, inter_algorithm = codec, outer
    intra_codec = raw if intra_codec is None else intra_codec
    n = cl.check_values(n_values)
    N, g = cluster.nodes, cluster.gpus_per_node
    cost.check_algorithm(inter_algorithm)
    name = "hierarchical"
    if cluster.P == 1 or n == 0:
        return cl.zero_time(name)
    G = max(1, int(pipeline)) if N > 1 and g > 1 else 1
    piece = n / G  # each level runs G times on a piece
    rs = cl.ring_reduce_scatter(g, piece, cluster.intra, intra_codec)
    ag = cl.ring_allgather(g, piece, cluster.intra, intra_codec)
    # the node level sends whole shards (lab.comm.algorithms.hierarchical.reduce_scatter): nothing overlaps
    node = cl.repeated(cl.CollectiveTime(name, rs[0] + ag[0], rs[1] + ag[1], rs[2] + ag[2], 0.0), G)
    if N == 1:
        return node
    across = cl.repeated(across_nodes(cluster, piece, inter_codec, inter_algorithm, chunk_values), G)
    node = dataclasses.replace(node, hidden_s=node.hidden_s + cl.pipelined_hidden(node.seconds, across.seconds, G))
    return node + across


def across_nodes(cluster: cl.Cluster, n: float, inter_codec: cl.CodecCost, inter_algorithm: str,
                 chunk_values: float | None) -> cl.CollectiveTime:
    """hierarchical's cross-node level: the allreduce of each n/g shard among the N ranks holding it."""
    name = "hierarchical"
    N, g = cluster.nodes, cluster.gpus_per_node
    shard = n / g
    e = cluster.inter_per_gpu
    m = inter_codec.wire(shard)
    if inter_codec.raw:
        t, codec_s, launch = cost.allreduce_time(inter_algorithm, N, m, e), 0.0, 0.0
        egress = cost.total_bytes(inter_algorithm, N, m) / N * g
    else:
        mode = inter_codec.mode
        full = cost.compressed_time(inter_algorithm, N, max(1, int(round(shard))), e,
                                    wire_bytes_per_value=inter_codec.bytes_per_value,
                                    encode_s_per_value=inter_codec.encode_s_per_value,
                                    decode_s_per_value=inter_codec.decode_s_per_value,
                                    side_bytes=inter_codec.side_bytes, mode=mode)
        E, D = cost.codec_counts(inter_algorithm, N, max(1, int(round(shard))), mode)
        codec_s = cl.codec_seconds(inter_codec, E, D)
        t = full - codec_s
        if mode == "gather":
            a, b = cost.allgather_coefficients(inter_algorithm, N, m)
            launch = (inter_codec.encode_kernels + a * inter_codec.decode_kernels) * inter_codec.launch_s
            egress = b * g
        else:
            a, _ = cost.coefficients(inter_algorithm, N, m)
            launch = a * (inter_codec.encode_kernels + inter_codec.decode_kernels) * inter_codec.launch_s
            egress = cost.total_bytes(inter_algorithm, N, m) / N * g
    hidden = (cl.pipelined_hidden(t, codec_s, cl.chunks_of(shard / N, chunk_values)) if inter_algorithm == "ring"
              else 0.0)
    return cl.CollectiveTime(name, t, codec_s, launch, egress, hidden)


def _coefficients(P: int, m: float) -> tuple[float, float]:
    """Default split (ring inside, ring across): 2(k−1)L + 2(N−1)L + 2mG(P−1)/P, the ring's bandwidth
    term with k+N−2 latency steps instead of P−1."""
    lv = level_coefficients(P, m)
    return lv["intra"][0] + lv["inter"][0], lv["intra"][1] + lv["inter"][1]


def _total_bytes(P: int, m: float) -> float:
    """2(P−1)m with ring levels, like the flat ring; cluster models split it with `level_bytes`."""
    return sum(level_bytes(P, m).values())


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """(N−1)(L + qG) across, then (k−1)(L + N·qG) inside."""
    k = default_ranks_per_node(P)
    N = P // k
    return float((N - 1) + (k - 1)), (N - 1) * q + (k - 1) * N * q


def _scratch(n: int, P: int) -> int:
    return 0  # the levels keep scratch on their sub-communicators


def _hops(P: int) -> int:
    """With the default ranks per node k: the inner ring's k−1 hops, one encode per node across the
    N = P/k nodes, and the node's final encode of the sum."""
    k = default_ranks_per_node(P)
    N = P // k
    return (k - 1) + (N if N > 1 else 0) + (1 if k > 1 else 0)


ALGORITHM = Algorithm(
    name="hierarchical",
    summary="two-level: reduce-scatter in each node, allreduce of each shard across nodes, allgather in the node",
    citation="Jia et al. 2018 (arXiv 1807.11205) §3.3 hierarchical all-reduce; Horovod hierarchical allreduce",
    reduce=reduce, gather=gather, coefficients=_coefficients, total_bytes=_total_bytes,
    gather_coefficients=_gather_coefficients, scratch=_scratch,
    codec_counts=lambda P, n: codec_counts(P, n), cluster_time=cluster_time,
    options=("ranks_per_node", "inner", "outer", "intra_codec", "pipeline"), configure=_configure, hops=_hops, order=60)
