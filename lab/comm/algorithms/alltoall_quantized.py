"""All-to-all quantized allreduce, ZeRO++'s qgZ (Wang et al. 2023, arXiv 2306.10209 §3.3,
"quantized gradient communication"): each rank cuts its vector into P chunks and encodes each
chunk ONCE; one all-to-all sends chunk d to rank d (its owner), which decodes the P payloads and
sums them in fp32, in rank order; the owner encodes its sum once and the owners' payloads are
all-gathered (every rank, the owner included, keeps the decoded sum). Every value of the result
went through exactly two encodings whatever P is, against P for a re-quantising ring: the error
stays flat as P grows, and sign or sparse codecs may use it too (`two_stage`).

The all-to-all is the backend's own (`torch.distributed.all_to_all_single`, Gloo's alltoallv or
NCCL's) on a whole torch.distributed group, one NCCL-safe batch of point-to-point otherwise
(`Comm.alltoall`). `ranks_per_node=k` (1 < k < P) is ZeRO++'s hierarchical form (§3.3,
"hierarchical all-to-all"): an all-to-all inside each node first (to local rank m go the chunks of
the ranks with local index m), a sum in fp32, one re-encode, then an all-to-all across nodes among
the ranks with the same local index; the allgather runs across nodes, then inside. Each value is
then encoded three times (input, node sum, final sum), still independent of P, and the slow links
carry n/k·(N−1)/N per rank instead of n·(P−k)/P.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .. import cluster as cl
from ..base import Comm
from ..channel import Channel
from ..pieces import pieces
from .base import Algorithm
from .hierarchical import check_ranks_per_node, groups, two_level_gather

if TYPE_CHECKING:
    from lab.codecs import Codec


def _configure(P: int, codec: "Codec | None", how: str, *, ranks_per_node: Any = 1) -> dict:
    return {"ranks_per_node": check_ranks_per_node(P, 1 if ranks_per_node is None else ranks_per_node)}


def _units(ch: Channel, n: int) -> int:
    """Elements of a payload for n values in its buffer's dtype: fp32 values raw, bytes with a codec."""
    if ch.codec is None or n == 0:
        return n
    return ch.nbytes(n)


def _payload(ch: Channel, seg: torch.Tensor) -> torch.Tensor:
    if ch.codec is not None and seg.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=seg.device)
    return ch.encode(seg)


def alltoall_sum(comm: Comm, ch: Channel, blocks: list[list[torch.Tensor]], flat: torch.Tensor | None = None) -> None:
    """blocks[d]: the segments this rank contributes to rank d (the same lengths on every rank).
    Every segment is encoded once, one all-to-all delivers them, and this rank's segments
    blocks[comm.rank] become the fp32 sums of the P decoded contributions in rank order (its own
    encoded too, as qgZ does). `flat`: raw mode, the segments in order are exactly this buffer."""
    P, r = comm.size, comm.rank
    lens = [[s.numel() for s in b] for b in blocks]
    in_splits = [sum(_units(ch, m) for m in ls) for ls in lens]
    mine_units = [_units(ch, m) for m in lens[r]]
    width = sum(mine_units)
    if flat is not None and ch.codec is None:
        inp = flat
    else:
        parts = [_payload(ch, s) for b in blocks for s in b]
        dtype = torch.float32 if ch.codec is None else torch.uint8
        inp = torch.cat(parts) if parts else torch.empty(0, dtype=dtype, device=comm.device)
    out = ch.buffer(P * width) if ch.codec is None else torch.empty(P * width, dtype=torch.uint8,
                                                                    device=comm.device)
    comm.alltoall(out, inp, [width] * P, in_splits).wait()
    off = 0
    for seg, u in zip(blocks[r], mine_units):
        ch.decode_sum([out[s * width + off: s * width + off + u] for s in range(P)], seg)
        off += u


def reduce(comm: Comm, buf: torch.Tensor, ch: Channel) -> None:
    P, r = comm.size, comm.rank
    if P == 1:
        return
    k = ch.options.get("ranks_per_node", 1)
    chunks = pieces(buf, P)
    if k in (1, P):
        alltoall_sum(comm, ch, [[c] for c in chunks], flat=buf)
        payload = _payload(ch, chunks[r])
        ch.decode_into(payload, chunks[r])  # the owner keeps the decoded sum, like its receivers
        others = [(r + d) % P for d in range(1, P)]
        back = [_final(ch, chunks[p]) for p in others]
        ch.post([(payload, p) for p in others], list(zip(back, others))).wait()
        for p, b in zip(others, back):
            ch.decode_into(b, chunks[p])
        return
    N, (node, local) = P // k, divmod(r, k)
    intra_ranks, inter_ranks = groups(P, r, k)
    intra, inter = comm.group(intra_ranks), comm.group(inter_ranks)
    width = -(-buf.numel() // P)
    ich = Channel(intra, ch.codec, scratch=k * N * width)
    xch = Channel(inter, ch.codec, scratch=N * width)
    # inside the node: to local rank m go the chunks of ranks (j, m), all j; then node sums across
    alltoall_sum(intra, ich, [[chunks[j * k + m] for j in range(N)] for m in range(k)])
    alltoall_sum(inter, xch, [[chunks[j * k + local]] for j in range(N)])
    payload = _payload(ch, chunks[r])
    ch.decode_into(payload, chunks[r])
    # allgather across nodes (the chunks of the ranks with my local index), then inside the node
    peers = [(node + d) % N for d in range(1, N)]
    back = {j: _final(ch, chunks[j * k + local]) for j in peers}
    inter.exchange([(payload, j) for j in peers], [(back[j], j) for j in peers]).wait()
    for j in peers:
        ch.decode_into(back[j], chunks[j * k + local])
    have = [payload if j == node else back[j] for j in range(N)]
    mine = torch.cat(have) if ch.codec is not None else torch.cat([chunks[j * k + local] for j in range(N)])
    mates = [(local + d) % k for d in range(1, k)]
    got = {m: torch.empty(sum(_units(ch, chunks[j * k + m].numel()) for j in range(N)), dtype=mine.dtype,
                          device=mine.device) for m in mates}
    intra.exchange([(mine, m) for m in mates], [(got[m], m) for m in mates]).wait()
    for m in mates:
        off = 0
        for j in range(N):
            seg = chunks[j * k + m]
            u = _units(ch, seg.numel())
            ch.decode_into(got[m][off:off + u], seg)
            off += u


def _final(ch: Channel, seg: torch.Tensor) -> torch.Tensor:
    """Where a final payload for `seg` lands (raw: seg itself)."""
    if ch.codec is not None and seg.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=seg.device)
    return ch.final_buffer(seg)


def gather(comm: Comm, rows: torch.Tensor, options: dict | None = None) -> None:
    """Allgather of one payload row per rank: direct (every rank to every rank), or across nodes
    then inside with ranks_per_node."""
    k = (options or {}).get("ranks_per_node", 1)
    two_level_gather(comm, rows, k if k not in (1, comm.size) else 1)


def coefficients(P: int, m: float, ranks_per_node: int = 1) -> tuple[float, float]:
    """Flat links: all-to-all (P−1)(L + mG/P) and allgather (P−1)(L + mG/P), 2(P−1)L + 2mG(P−1)/P;
    hierarchical k: 2(k−1)L + 2(k−1)/k·mG inside, 2(N−1)L + 2(N−1)/P·mG across (same total bytes)."""
    k = check_ranks_per_node(P, ranks_per_node)
    if k in (1, P):
        return 2.0 * (P - 1), 2.0 * m * (P - 1) / P
    lv = level_coefficients(P, m, k)
    return lv["intra"][0] + lv["inter"][0], lv["intra"][1] + lv["inter"][1]


def level_coefficients(P: int, m: float, ranks_per_node: int = 1) -> dict[str, tuple[float, float]]:
    """(a, b) per level for a two-level cluster model: 'intra' (the node all-to-all and the node
    allgather) and 'inter' (the all-to-all and allgather across nodes); flat (k = 1): all 'inter'."""
    k = check_ranks_per_node(P, ranks_per_node)
    if k in (1, P):
        flat = (2.0 * (P - 1), 2.0 * m * (P - 1) / P)
        return {"intra": flat, "inter": (0.0, 0.0)} if k == P else {"intra": (0.0, 0.0), "inter": flat}
    N = P // k
    return {"intra": (2.0 * (k - 1), 2.0 * m * (k - 1) / k), "inter": (2.0 * (N - 1), 2.0 * m * (N - 1) / P)}


def codec_counts(P: int, n: float, ranks_per_node: int = 1) -> tuple[float, float]:
    """Values encoded, decoded per rank: P chunks (n) and the owner's sum (n/P) encoded; the P
    contributions (n), the kept sum and the P−1 arrivals decoded (2n). Hierarchical k adds the node
    sums: n/k encoded and decoded once more."""
    k = check_ranks_per_node(P, ranks_per_node)
    extra = n / k if k not in (1, P) else 0.0
    return n + extra + n / P, 2.0 * n + extra


def encodes_per_value(P: int, ranks_per_node: int = 1) -> int:
    """How many encodings each value of the result went through: 2 flat, 3 hierarchical."""
    k = check_ranks_per_node(P, ranks_per_node)
    return 1 if P == 1 else (2 if k in (1, P) else 3)


def cluster_time(cluster: cl.Cluster, n_values: float, codec: cl.CodecCost = cl.BF16, *,
                 intra_codec: cl.CodecCost | None = None, raw: cl.CodecCost = cl.BF16,
                 chunk_values: float | None = None, hierarchical: bool = True) -> cl.CollectiveTime:
    """On a two-level machine (`lab.comm.cluster`; raw and chunk_values do not change it): ZeRO++ qgZ: encode once, all-to-all, decode and sum in fp32 at the owner, encode the sum once,
    allgather of the encoded sums (decoded on arrival). Flat: one all-to-all over all P ranks (its
    intra- and inter-node messages go out at once: the slower of the two sets), each value encoded
    twice. Hierarchical (ZeRO++'s): all-to-all inside the node (intra_codec, default the same codec),
    decode-sum-encode, all-to-all across nodes among same-local-rank GPUs, decode-sum-encode; the
    encoded sums are allgathered across, then inside the node, as they are. Kernel launches: one encode
    set and one decode set per all-to-all, and per allgather (batched over its chunks)."""
    n = cl.check_values(n_values)
    N, g, P = cluster.nodes, cluster.gpus_per_node, cluster.P
    name = "alltoall_quantized" + ("" if hierarchical else " (flat)")
    if P == 1 or n == 0:
        return cl.zero_time(name)
    if codec.raw:
        intra_codec = intra_codec or codec
    ic = intra_codec or codec
    e, a = cluster.inter_per_gpu, cluster.intra
    k_enc, k_dec = codec.encode_kernels, codec.decode_kernels
    if not hierarchical or N == 1 or g == 1:
        # one all-to-all over P ranks: (g−1) chunks inside, (P−g) across, sent at once
        q = codec.wire(n / P)
        inside = (g - 1) * (a.L + q * a.G)
        across = (P - g) * (e.L + q * e.G) if N > 1 else 0.0
        t = 2.0 * max(inside, across)  # the all-to-all, then the allgather of the encoded sums
        E = n + n / P                   # every chunk once, the owner's sum once
        D = 2.0 * (P - 1) * n / P       # P−1 chunks summed, P−1 sums received
        egress = 2.0 * (P - g) * q * g if N > 1 else 0.0
        launch = 2 * (k_enc + k_dec) * codec.launch_s if not codec.raw else 0.0
        return cl.CollectiveTime(name, t, 0.0 if codec.raw else cl.codec_seconds(codec, E, D), launch, egress)
    shard, piece = n / g, n / P
    t = cl.alltoall_transfer(g, n, a, ic) + cl.alltoall_transfer(N, shard, e, codec)          # reduce-scatter: inside, then across
    t += cl.alltoall_transfer(N, shard, e, codec) + (g - 1) * (a.L + codec.wire(shard) * a.G)  # allgather: across, inside
    codec_s = 0.0
    launch = 0.0
    if not ic.raw:
        codec_s += cl.codec_seconds(ic, n, (g - 1) * shard)     # encode all g chunks; sum g−1 arrivals
        launch += (ic.encode_kernels + ic.decode_kernels) * ic.launch_s
    if not codec.raw:
        codec_s += cl.codec_seconds(codec, shard + piece, (N - 1) * piece)  # encode the shard, its sum; N−1 arrivals
        codec_s += cl.codec_seconds(codec, 0.0, (N - 1) * piece + (g - 1) * shard)  # the encoded sums as they arrive
        launch += (2 * k_enc + 3 * k_dec) * codec.launch_s
    egress = 2.0 * (N - 1) * codec.wire(piece) * g
    return cl.CollectiveTime(name, t, codec_s, launch, egress)


def _gather_coefficients(P: int, q: float) -> tuple[float, float]:
    """Direct allgather: (P−1)(L + qG)."""
    return float(P - 1), (P - 1) * q


def _scratch(n: int, P: int) -> int:
    """The P received contributions to this rank's chunk: P·ceil(n/P) values."""
    return P * -(-n // P)


ALGORITHM = Algorithm(
    name="alltoall_quantized",
    summary="ZeRO++ qgZ: encode each chunk once, all-to-all, owner sums in fp32, encode once, allgather",
    citation="Wang et al. 2023, ZeRO++ (arXiv 2306.10209) §3.3 qgZ: each value quantised twice, any P",
    reduce=reduce, gather=gather, coefficients=lambda P, m: coefficients(P, m),
    total_bytes=lambda P, m: 2.0 * (P - 1) * m, gather_coefficients=_gather_coefficients,
    codec_counts=lambda P, n: codec_counts(P, n), scratch=_scratch, two_stage=True, cluster_time=cluster_time,
    options=("ranks_per_node",), configure=_configure, hops=lambda P: 2, order=55)
