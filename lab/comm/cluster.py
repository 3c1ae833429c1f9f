"""The two-level machine: nodes × GPUs per node, a fast link inside a node and a slower one between
nodes, and alpha-beta times of an allreduce on it, per level, with a codec per level and its work.

Notation of `lab.comm.cost` (paper 001): L seconds per message, G seconds per byte, m bytes.
A cluster is N nodes of g GPUs (P = N·g). Links are `lab.comm.cost.LINKS` presets (one place per
link); this module adds which level a link serves and how many GPUs (intra) or NICs (inter) one
switch level connects, with data-sheet sources. The inter link is one NIC; a node has
`nics_per_node` of them (DGX H100: 8 ConnectX-7 NDR400, one per GPU), so one GPU's share of the
node's network bandwidth is B_nic · nics / g.

Algorithms (each returns a `CollectiveTime`: transfer, codec work, kernel launches, bytes leaving a
node). Every registered algorithm prices itself on the machine through its `Algorithm.cluster_time`
(`algorithm_time`); one without it runs flat: over all P ranks as if every hop were the slowest one
(latency of the inter link, one GPU's share of the network bandwidth), codec as
`cost.compressed_time` runs it (`flat_time`). This module keeps the machine and the pieces the
plugins price their levels with (a ring reduce-scatter or allgather, an all-to-all on k ranks on one
link, codec seconds); the built-ins' own prices are in their modules:

- ring (`algorithms/ring.py`): flat, but the ring over consecutive ranks crosses each node boundary
  with one flow per direction, which has a whole NIC (`Cluster.ring_link`), and only that one rank's
  sends leave the node.
- hierarchical (`algorithms/hierarchical.py`): intra-node ring reduce-scatter, an allreduce of each
  1/g shard among the N ranks that hold it, intra-node ring allgather; a codec per level.
- alltoall_quantized (`algorithms/alltoall_quantized.py`, ZeRO++ qgZ): encode once, all-to-all,
  owner sums and encodes once, allgather of the encoded sums; hierarchical as ZeRO++ runs it.
- in_network (NVLink SHARP / NCCL NVLS inside a node, InfiniBand SHARP across): a cost model only
  (it needs the switch). NVLS as NCCL implements it (multimem ld_reduce reduce-scatter, multimem
  store allgather; sjeaugey in NVIDIA/nccl#1083): each rank sends m(n+1)/n and receives
  m(n+1)/n, pipelined, instead of the ring's 2m(n−1)/n; SHARP's aggregation tree: send m, receive m.
  nccl-tests still reports busbw = algbw · 2(n−1)/n (doc/PERFORMANCE.md; NVIDIA/nccl-tests#212, #272, #239),
  so an NVLS busbw is 2(n−1)/(n+1) × the bytes per second on the wire: `nvls_explained`.

Codec work (`CodecCost`): seconds per value to encode and to decode (measured or a roofline),
kernels per message and a launch time; each algorithm counts the values encoded and decoded on
its critical path and its codec kernel launches. Codec work adds to the transfers, except where an
algorithm's chunks or pipeline pieces overlap them (`pipelined_hidden`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import cached_property
from numbers import Integral

from . import cost
from .algorithms import get_algorithm
from .cost import Link, get_link

__all__ = ["calibrate", "measured_codec", "predict", "FP32", "INTRA", "INTER", "ALIASES", "ALGORITHMS", "algorithms",
           "IN_NETWORK", "IN_NETWORK_INTRA", "IN_NETWORK_INTER", "LinkLimit",
           "Cluster", "parse_cluster", "make_cluster", "resolve_level_link", "CodecCost", "BF16", "CollectiveTime",
           "flat_time", "algorithm_time", "in_network_time", "in_network_coefficients",
           "in_network_available", "nvls_wire_factor", "nvls_explained", "cluster_allreduce", "pipelined_hidden",
           "chunks_of", "check_values", "zero_time", "codec_seconds", "repeated", "ring_reduce_scatter",
           "ring_allgather", "alltoall_transfer"]


@dataclass(frozen=True)
class LinkLimit:
    """How many endpoints one level of this link type connects: GPUs per node (intra) or NICs of a
    two-tier non-blocking fat tree of the link's switches, radix k: k²/2 (inter)."""

    link: str
    max_endpoints: int
    source: str


# intra-node links: GPUs one node's link connects (all-to-all through the switch or host bridge)
INTRA: dict[str, LinkLimit] = {x.link: x for x in (
    LinkLimit("nvlink3", 8, "HGX A100: 8 GPUs on 6 NVSwitches (NVIDIA A100 data sheet)"),
    LinkLimit("nvlink4", 8, "HGX H100: 8 GPUs on 4 NVSwitches (NVIDIA H100 data sheet); the 256-GPU NVLink Switch "
                            "System is not modelled"),
    LinkLimit("nvlink5", 72, "GB200 NVL72: 72 GPUs in one NVLink domain (NVIDIA GB200 NVL72 data sheet)"),
    LinkLimit("pcie3", 8, "a two-socket server's PCIe switches: 8 x16 GPUs (Dettmers 2016 §2.3.2's setting)"),
    LinkLimit("pcie3_2gpu", 2, "Dettmers 2016 §2.3.2: two GPUs on one PCIe 3.0 switch"),
    LinkLimit("pcie4_x16", 8, "a two-socket PCIe 4.0 server: 8 x16 GPUs (e.g. 8x A100 PCIe)"),
    LinkLimit("pcie5_x16", 8, "a two-socket PCIe 5.0 server: 8 x16 GPUs (e.g. 8x H100 PCIe)"),
)}

# inter-node links: NICs a two-tier fat tree of the link's switches connects (k²/2 for radix k)
INTER: dict[str, LinkLimit] = {x.link: x for x in (
    LinkLimit("ib_qdr", 648, "InfiniBand QDR, 36-port switches: 36²/2 = 648 NICs in two tiers"),
    LinkLimit("ib_fdr", 648, "InfiniBand FDR, 36-port SX6036 switches: 36²/2 = 648 NICs in two tiers"),
    LinkLimit("ib_hdr", 800, "InfiniBand HDR, 40-port Quantum QM8700 switches: 40²/2 = 800 NICs in two tiers"),
    LinkLimit("ib_ndr", 2048, "InfiniBand NDR400, 64-port Quantum-2 QM9700 switches: 64²/2 = 2048 NICs in two tiers"),
    LinkLimit("eth1g", 1152, "Ethernet 1 Gb/s, 48-port switches: 48²/2 = 1152 NICs in two tiers"),
    LinkLimit("eth10g", 1152, "Ethernet 10 Gb/s, 48-port switches: 48²/2 = 1152 NICs in two tiers"),
    LinkLimit("eth25g", 1152, "Ethernet 25 Gb/s, 48-port switches: 48²/2 = 1152 NICs in two tiers"),
    LinkLimit("eth100g", 2048, "Ethernet 100 Gb/s, 64-port switches: 64²/2 = 2048 NICs in two tiers"),
    LinkLimit("eth200g", 2048, "Ethernet 200 Gb/s, 64-port switches: 64²/2 = 2048 NICs in two tiers"),
    LinkLimit("eth400g", 2048, "Ethernet 400 Gb/s, 64-port switches (e.g. Spectrum-4 at 400G): 64²/2 = 2048 NICs"),
)}

# the names people type (the issue's `--inter ndr400`) for the presets above
ALIASES: dict[str, str] = {"ndr400": "ib_ndr", "ndr": "ib_ndr", "hdr": "ib_hdr", "hdr200": "ib_hdr",
                           "100gbe": "eth100g", "200gbe": "eth200g", "400gbe": "eth400g",
                           "pcie4": "pcie4_x16", "pcie5": "pcie5_x16"}

# links whose switches reduce in the network: NVLink SHARP needs NVSwitch gen 3 (H100) or later;
# InfiniBand SHARP v2+ runs on HDR Quantum and NDR Quantum-2 switches. 16-bit and 32-bit floats only.
IN_NETWORK_INTRA = ("nvlink4", "nvlink5")
IN_NETWORK_INTER = ("ib_hdr", "ib_ndr")

#: the cost-model-only algorithm of this module (the switches reduce; no `reduce` runs it)
IN_NETWORK = "in_network"


def algorithms() -> tuple[str, ...]:
    """The allreduce algorithms a cluster prices, read now: every registered algorithm (each as it prices
    itself, `algorithm_time`), then in_network."""
    return (*cost.ALGORITHMS, IN_NETWORK)


def __getattr__(name: str):
    if name == "ALGORITHMS":  # live: `algorithms()`, so a plugin registered later is priced too
        return algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_level_link(name: str | Link, level: str) -> Link:
    """The Link of a preset name (or alias) allowed at `level` ('intra' | 'inter'), or a Link as is."""
    if isinstance(name, Link):
        return name
    table = INTRA if level == "intra" else INTER
    key = ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in table:
        names = [*table, *(a for a, v in ALIASES.items() if v in table)]
        raise ValueError(f"unknown {level}-node link {name!r}; allowed: {', '.join(names)}")
    return get_link(key)


@dataclass(frozen=True)
class Cluster:
    """N nodes × g GPUs per node; `intra` joins a node's GPUs, `inter` is one NIC (bandwidth per
    direction), `nics_per_node` NICs per node (default g: one per GPU)."""

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int | None = None

    def __post_init__(self) -> None:
        for what, v in (("nodes", self.nodes), ("gpus_per_node", self.gpus_per_node)):
            if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
                raise ValueError(f"{what} must be an int >= 1, got {v!r}")
        nics = self.gpus_per_node if self.nics_per_node is None else self.nics_per_node
        if isinstance(nics, bool) or not isinstance(nics, Integral) or nics < 1:
            raise ValueError(f"nics_per_node must be an int >= 1, got {self.nics_per_node!r}")
        object.__setattr__(self, "nics_per_node", int(nics))
        lim = INTRA.get(self.intra.name)
        if lim is not None and self.gpus_per_node > lim.max_endpoints:
            allowed = ", ".join(f"{k}: {v.max_endpoints}" for k, v in INTRA.items())
            raise ValueError(f"{self.gpus_per_node} GPUs per node is more than {self.intra.name} connects "
                             f"({lim.max_endpoints}: {lim.source}); GPUs per node allowed: {allowed}")
        lim = INTER.get(self.inter.name)
        if lim is not None and self.nodes > 1 and self.nodes * self.nics_per_node > lim.max_endpoints:
            raise ValueError(f"{self.nodes} nodes × {self.nics_per_node} NICs = {self.nodes * self.nics_per_node} "
                             f"NICs is more than the {self.inter.name} network model supports "
                             f"({lim.max_endpoints}: {lim.source}); at most "
                             f"{lim.max_endpoints // self.nics_per_node} nodes of {self.nics_per_node} NICs")

    @property
    def P(self) -> int:
        """Ranks (GPUs) in all."""
        return self.nodes * self.gpus_per_node

    @property
    def name(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node} ({self.intra.name} inside, {self.inter.name} across)"

    @cached_property  # a frozen machine's; the cost model asks ~10^4 times a call
    def inter_per_gpu(self) -> Link:
        """One GPU's share of its node's network: the NIC's latency, bandwidth × nics / g."""
        bw = self.inter.bandwidth_Bps * self.nics_per_node / self.gpus_per_node
        return Link(f"{self.inter.name} per GPU", self.inter.latency_s, bw, self.inter.source)

    def _slower(self, e: Link, name: str, source: str) -> Link:
        """The intra link on one node, else the larger latency and the smaller bandwidth of it and `e`."""
        if self.nodes == 1:
            return self.intra
        return Link(name, max(self.intra.L, e.L), min(self.intra.bandwidth_Bps, e.bandwidth_Bps), source)

    @cached_property
    def slowest(self) -> Link:
        """The link a flat algorithm's every hop is modelled on: the slower of the intra link and one GPU's
        share of the network."""
        return self._slower(self.inter_per_gpu, f"slowest of {self.intra.name}, {self.inter.name}",
                            "the slower of the two levels")

    @cached_property
    def ring_link(self) -> Link:
        """The link a single ring over consecutive ranks is modelled on: the slower of the intra link and
        one whole NIC (one flow crosses each node boundary per direction)."""
        return self._slower(self.inter, f"ring over {self.intra.name}, {self.inter.name}",
                            "one flow per node boundary")

    def with_inter_bandwidth(self, GBps: float) -> "Cluster":
        """The same cluster with the NIC's bandwidth set to `GBps` (1e9 bytes/s per direction)."""
        lk = Link(self.inter.name, self.inter.latency_s, GBps * 1e9,
                  f"{self.inter.source}; bandwidth set to {GBps:g} GB/s")
        return replace(self, inter=lk)


_CLUSTER = re.compile(r"\s*(\d+)\s*[x×]\s*(\d+)\s*\Z")


def parse_cluster(text: str) -> tuple[int, int]:
    """'8x8' -> (8 nodes, 8 GPUs per node)."""
    m = _CLUSTER.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"cluster {text!r}: give NODESxGPUS, e.g. 8x8 (8 nodes of 8 GPUs)")
    nodes, gpus = int(m.group(1)), int(m.group(2))
    if nodes < 1 or gpus < 1:
        raise ValueError(f"cluster {text!r}: nodes and GPUs per node must be >= 1 (e.g. 8x8), got {nodes}x{gpus}")
    return nodes, gpus


def make_cluster(cluster: str | tuple[int, int] = "8x8", intra: str | Link = "nvlink4", inter: str | Link = "ib_ndr",
                 nics_per_node: int | None = None) -> Cluster:
    """A Cluster from 'NODESxGPUS' (or a tuple) and link preset names (aliases such as ndr400 allowed)."""
    nodes, gpus = parse_cluster(cluster) if isinstance(cluster, str) else cluster
    return Cluster(nodes, gpus, resolve_level_link(intra, "intra"), resolve_level_link(inter, "inter"), nics_per_node)


# -- codec work

@dataclass(frozen=True)
class CodecCost:
    """A codec as the two-level model sees it: wire bytes = bytes_per_value·n + side_bytes per
    encoded message; seconds per value to encode / decode; kernels per encode / decode and the
    launch time of one; mode raw (no codec: the baseline's 16-bit values), requantize or gather;
    where the seconds come from."""

    name: str
    bytes_per_value: float
    side_bytes: float = 0.0
    encode_s_per_value: float = 0.0
    decode_s_per_value: float = 0.0
    encode_kernels: int = 0
    decode_kernels: int = 0
    launch_s: float = 0.0
    mode: str = "raw"
    source: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("raw", "requantize", "gather"):
            raise ValueError(f"codec {self.name!r}: mode {self.mode!r}; allowed: raw, requantize, gather")
        for what in ("bytes_per_value", "side_bytes", "encode_s_per_value", "decode_s_per_value", "launch_s"):
            v = getattr(self, what)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"codec {self.name!r}: {what} must be a finite number >= 0, got {v!r}")

    @property
    def raw(self) -> bool:
        return self.mode == "raw"

    def wire(self, n: float) -> float:
        """Bytes of one encoded message of n values."""
        return self.bytes_per_value * n + (0.0 if self.raw else self.side_bytes)


BF16 = CodecCost("bf16", 2.0, source="bf16 gradients reduced as they are (NCCL sums bf16 natively): no codec work")


@dataclass(frozen=True)
class CollectiveTime:
    """One allreduce on the cluster: seconds of transfer, codec work and codec kernel launches, less the
    seconds hidden by overlapping them (`seconds` = transfer + codec + launch − hidden), and the bytes
    that leave one node (both directions' worth of sends)."""

    algorithm: str
    transfer_s: float
    codec_s: float
    launch_s: float
    node_egress_bytes: float
    hidden_s: float = 0.0

    @property
    def seconds(self) -> float:
        return self.transfer_s + self.codec_s + self.launch_s - self.hidden_s

    def __add__(self, other: "CollectiveTime") -> "CollectiveTime":
        return CollectiveTime(self.algorithm, self.transfer_s + other.transfer_s, self.codec_s + other.codec_s,
                              self.launch_s + other.launch_s, self.node_egress_bytes + other.node_egress_bytes,
                              self.hidden_s + other.hidden_s)


def pipelined_hidden(a: float, b: float, pieces: float) -> float:
    """Seconds hidden when two stages of a and b seconds run on `pieces` pieces in a pipeline (stage 2 of
    piece i beside stage 1 of piece i+1): a + b − (max(a, b) + min(a, b)/pieces) = min(a, b)(1 − 1/pieces)."""
    return 0.0 if pieces <= 1 else min(a, b) * (1.0 - 1.0 / pieces)


def chunks_of(values: float, chunk_values: float | None) -> float:
    """Chunks one message of `values` travels in (`lab.comm.channel.CHUNK`); 1 when not chunked."""
    return 1.0 if not chunk_values else float(max(1, math.ceil(values / chunk_values)))


def check_values(n_values: float) -> float:
    """n_values as a float; ValueError unless it is a finite number >= 0."""
    if isinstance(n_values, bool) or not isinstance(n_values, (int, float)) or not math.isfinite(n_values) \
            or n_values < 0:
        raise ValueError(f"n_values must be a finite number >= 0, got {n_values!r}")
    return float(n_values)


def zero_time(name: str) -> CollectiveTime:
    """Nothing to do (one rank, or no values)."""
    return CollectiveTime(name, 0.0, 0.0, 0.0, 0.0)


def codec_seconds(c: CodecCost, E: float, D: float) -> float:
    """Seconds of codec work for E values encoded and D decoded."""
    return E * c.encode_s_per_value + D * c.decode_s_per_value


# -- one level's pieces (ring reduce-scatter / allgather on k ranks; all-to-all on k ranks)

def ring_reduce_scatter(k: int, n: float, link: Link, c: CodecCost) -> tuple[float, float, float]:
    """Ring reduce-scatter of n values on k ranks: (transfer, codec, launch) seconds.
    (k−1)(L + w(n/k)G); requantize: k−1 hops decode-add-encode n/k values, (k−1) × kernels."""
    if k == 1 or n == 0:
        return 0.0, 0.0, 0.0
    t = (k - 1) * (link.L + c.wire(n / k) * link.G)
    if c.raw:
        return t, 0.0, 0.0
    v = (k - 1) * n / k
    return t, codec_seconds(c, v, v), (k - 1) * (c.encode_kernels + c.decode_kernels) * c.launch_s


def ring_allgather(k: int, n: float, link: Link, c: CodecCost, encode: bool = True) -> tuple[float, float, float]:
    """Ring allgather of k pieces of n/k values: (k−1)(L + w(n/k)G); the owner encodes its piece once
    (unless it arrives encoded) and keeps the decoded value, like its receivers (`Channel.finalize`);
    k−1 arrivals are decoded."""
    if k == 1 or n == 0:
        return 0.0, 0.0, 0.0
    t = (k - 1) * (link.L + c.wire(n / k) * link.G)
    if c.raw:
        return t, 0.0, 0.0
    E = n / k if encode else 0.0
    return t, codec_seconds(c, E, (k - 1) * n / k + E), ((c.encode_kernels if encode else 0)
                                                      + (k - 1 + (1 if encode else 0)) * c.decode_kernels) * c.launch_s


def alltoall_transfer(k: int, n: float, link: Link, c: CodecCost) -> float:
    """Transfer of an all-to-all of k chunks of n/k values each (one per rank): (k−1)(L + w(n/k)G)."""
    return 0.0 if k == 1 or n == 0 else (k - 1) * (link.L + c.wire(n / k) * link.G)



def repeated(t: CollectiveTime, k: int) -> CollectiveTime:
    """k runs of t one after the other."""
    return t if k == 1 else CollectiveTime(t.algorithm, k * t.transfer_s, k * t.codec_s, k * t.launch_s,
                                           k * t.node_egress_bytes, k * t.hidden_s)


# -- an algorithm on the machine: its own price (`Algorithm.cluster_time`), or run flat

def flat_time(cluster: Cluster, n_values: float, codec: CodecCost = BF16, algorithm: str = "ring",
              chunk_values: float | None = None, *, link: Link | None = None,
              senders_across: int | None = None) -> CollectiveTime:
    """A registered algorithm's own coefficients over all P ranks, every hop on `link` (default
    `cluster.slowest`: the slower of the intra link and one GPU's share of the network); the codec as
    `cost.compressed_time` runs it, plus its kernel launches (requantize: one encode and one decode set per
    message on the critical path; gather: one encode, a decode set per message). Node egress: the bytes one
    rank sends × `senders_across`, the ranks of a node whose sends leave it (default all g of them).
    chunk_values: messages travel in chunks of this many values and each chunk's codec work overlaps the
    next one's transfer (`pipelined_hidden`); None: codec work and transfers add up. The default price of
    an algorithm without a `cluster_time` of its own (`algorithm_time`); the ring's uses it with one NIC."""
    n = check_values(n_values)
    P, lk = cluster.P, link or cluster.slowest
    name = f"flat {algorithm}"
    if P == 1 or n == 0:
        cost.check_algorithm(algorithm)
        return zero_time(name)
    across = 0 if cluster.nodes == 1 else (cluster.gpus_per_node if senders_across is None else senders_across)
    m = codec.wire(n)
    egress = cost.total_bytes(algorithm, P, m) / P * across
    if codec.raw:
        return CollectiveTime(name, cost.allreduce_time(algorithm, P, m, lk), 0.0, 0.0, egress)
    E, D = cost.codec_counts(algorithm, P, int(round(n)), codec.mode)
    if codec.mode == "gather":
        a, b = cost.allgather_coefficients(algorithm, P, m)
        launches = codec.encode_kernels + a * codec.decode_kernels
        egress = b * across
    else:
        a, b = cost.coefficients(algorithm, P, m)
        launches = a * (codec.encode_kernels + codec.decode_kernels)
    t, w = a * lk.L + b * lk.G, codec_seconds(codec, E, D)
    hidden = pipelined_hidden(t, w, chunks_of(n / P, chunk_values))
    return CollectiveTime(name, t, w, launches * codec.launch_s, egress, hidden)


def algorithm_time(cluster: Cluster, algorithm: str, n_values: float, codec: CodecCost = BF16, *,
                   intra_codec: CodecCost | None = None, raw: CodecCost = BF16, chunk_values: float | None = None,
                   **options) -> CollectiveTime:
    """One allreduce of n values per rank by the registered `algorithm` on the machine, as it prices itself
    (`Algorithm.cluster_time`: per level, `codec` across nodes, `intra_codec` inside, `raw` the values
    uncompressed; its own options such as hierarchical's pipeline), else run flat (`flat_time`)."""
    algo = get_algorithm(algorithm)
    if algo.cluster_time is None:  # chunks overlap only where the algorithm says so (the ring's own price)
        return flat_time(cluster, n_values, codec, algorithm)
    got = algo.cluster_time(cluster, n_values, codec, intra_codec=intra_codec, raw=raw, chunk_values=chunk_values,
                            **options)
    if not isinstance(got, CollectiveTime):
        raise ValueError(f"algorithm {algorithm!r}: cluster_time returned {type(got).__name__}, not a CollectiveTime")
    return got


def in_network_coefficients(P: int, m: float, kind: str = "nvls") -> tuple[float, float]:
    """(a, b) of an in-network allreduce, time = a·L + b·G: 'nvls' (NCCL's NVLink SHARP: each rank sends
    and receives m(P+1)/P, pipelined: m to reduce-scatter, m/P to allgather; NVIDIA/nccl#1083),
    'sharp' (an aggregation tree: send m up, receive m down). Two messages' latency (up and down)."""
    P = cost.check_P(P)
    if kind not in ("nvls", "sharp"):
        raise ValueError(f"in-network kind {kind!r}; allowed: nvls, sharp")
    if P == 1:
        return 0.0, 0.0
    return 2.0, m * (P + 1) / P if kind == "nvls" else float(m)


def nvls_wire_factor(P: int) -> float:
    """nccl-tests' busbw of an NVLS allreduce over the bytes per second on the wire: algbw = wire·P/(P+1)
    (each rank moves m(P+1)/P) and busbw = algbw·2(P−1)/P, so busbw = wire·2(P−1)/(P+1) (the (n−1)/(n+1)
    correction of NVIDIA/nccl-tests#212, #272 and #239, times the convention's 2)."""
    P = cost.check_P(P)
    return 1.0 if P == 1 else 2.0 * (P - 1) / (P + 1)


def nvls_explained(P: int = 8, line_GBps: float = 450.0, ring_busbw_GBps: float = 370.0,
                   nvls_busbw_GBps: float = 480.0) -> dict:
    """Why NVLS busbw exceeds the ring's (NVIDIA/nccl#1374, #1455: 480 vs 370 GB/s on 8x H100): a
    ring's busbw is its wire bandwidth (2m(P−1)/P bytes per rank); NVLS moves m(P+1)/P, so the same wire
    speed would report 2(P−1)/(P+1) × more. Returns the model's factors and the wire bandwidths the
    measured busbw imply (GB/s) with their fraction of the line rate."""
    f = nvls_wire_factor(P)
    ring_bytes, nvls_bytes = 2.0 * (P - 1) / P, (P + 1) / P
    return {"P": P, "line_GBps": line_GBps, "ring_bytes_per_m": ring_bytes, "nvls_bytes_per_m": nvls_bytes,
            "model_speedup_same_wire": ring_bytes / nvls_bytes, "nvls_busbw_per_wire": f,
            "ring_busbw_GBps": ring_busbw_GBps, "nvls_busbw_GBps": nvls_busbw_GBps,
            "measured_speedup": nvls_busbw_GBps / ring_busbw_GBps,
            "ring_wire_GBps": ring_busbw_GBps, "nvls_wire_GBps": nvls_busbw_GBps / f,
            "ring_line_fraction": ring_busbw_GBps / line_GBps, "nvls_line_fraction": nvls_busbw_GBps / f / line_GBps}


def in_network_available(cluster: Cluster) -> bool:
    """True when some level reduces in the network: NVLS inside (nvlink4/5) or SHARP across (InfiniBand
    HDR/NDR); a level without it runs as a ring (inside) or the shards' ring (across)."""
    intra = cluster.gpus_per_node > 1 and cluster.intra.name in IN_NETWORK_INTRA
    inter = cluster.nodes > 1 and cluster.inter.name in IN_NETWORK_INTER
    return intra or inter


def in_network_time(cluster: Cluster, n_values: float, codec: CodecCost = BF16) -> CollectiveTime:
    """In-network allreduce of 16-bit values (switches sum fp16/bf16/fp32, not block-scaled codes; a
    compressed codec is refused). Inside: NVLS (nvlink4/5) or a ring reduce-scatter + allgather;
    across: SHARP on each GPU's n/g shard (InfiniBand HDR/NDR) or a ring of the shards. NVLS inside
    and SHARP across pipeline through the switches: the slower level's bandwidth term counts."""
    n = check_values(n_values)
    if not codec.raw:
        raise ValueError(f"in-network reduction sums 16/32-bit floats in the switch; codec {codec.name!r} is not "
                         "one (allowed: bf16)")
    N, g = cluster.nodes, cluster.gpus_per_node
    name = IN_NETWORK
    if not in_network_available(cluster):
        raise ValueError(f"no in-network reduction on {cluster.name}: it needs NVLink SHARP inside "
                         f"({', '.join(IN_NETWORK_INTRA)}) or InfiniBand SHARP across ({', '.join(IN_NETWORK_INTER)})")
    if cluster.P == 1 or n == 0:
        return zero_time(name)
    m = codec.wire(n)
    a, e = cluster.intra, cluster.inter_per_gpu
    nvls = g > 1 and a.name in IN_NETWORK_INTRA
    sharp = N > 1 and cluster.inter.name in IN_NETWORK_INTER
    egress = 0.0
    if N > 1:
        egress = m if sharp else 2.0 * m * (N - 1) / N  # g shards of m/g sent up once (or the shards' rings)
    if nvls and (sharp or N == 1):
        ia, ib = in_network_coefficients(g, m, "nvls")
        lat, band = ia * a.L, ib * a.G
        if N > 1:
            sa, sb = in_network_coefficients(N, m / g, "sharp")
            lat += sa * e.L
            band = max(band, sb * e.G)
        return CollectiveTime(name, lat + band, 0.0, 0.0, egress)
    if nvls:  # NVLS inside, the shards' ring across (not pipelined with the switch)
        ia, ib = in_network_coefficients(g, m, "nvls")
        t = ia * a.L + ib * a.G + cost.allreduce_time("ring", N, m / g, e)
        return CollectiveTime(name, t, 0.0, 0.0, egress)
    # a ring inside, SHARP on the shards across
    rs, ag = ring_reduce_scatter(g, n, a, codec), ring_allgather(g, n, a, codec)
    sa, sb = in_network_coefficients(N, m / g, "sharp")
    return CollectiveTime(name, rs[0] + ag[0] + sa * e.L + sb * e.G, 0.0, 0.0, egress)


def cluster_allreduce(cluster: Cluster, n_values: float, codec: CodecCost = BF16, algorithm: str = "hierarchical",
                      *, intra_codec: CodecCost | None = None, raw: CodecCost = BF16, **options) -> CollectiveTime:
    """One allreduce of n values per rank by `algorithm` (one of `algorithms()`): in_network (the switches
    reduce), or a registered algorithm as it prices itself (`algorithm_time`: hierarchical runs `raw`
    inside unless intra_codec is given, alltoall_quantized the codec at both levels, as ZeRO++)."""
    if algorithm == IN_NETWORK:
        return in_network_time(cluster, n_values, codec)
    try:
        get_algorithm(algorithm)
    except ValueError:
        raise ValueError(f"unknown two-level algorithm {algorithm!r}; allowed: {', '.join(algorithms())}") from None
    return algorithm_time(cluster, algorithm, n_values, codec, intra_codec=intra_codec, raw=raw, **options)


# -- calibration against a measured two-level run (`paralab bench compressed --ranks-per-node`)

FP32 = CodecCost("fp32", 4.0, source="fp32 values reduced as they are")


def calibrate(levels: dict, nodes: int, gpus_per_node: int) -> Cluster:
    """The two-level machine fitted to `lab.comm.bench.levels_rank`'s measurement: the intra link from the
    in-node ring allreduces, the NIC from the one-flow cross-node ones (`cost.fit_link`), one NIC per node
    (the ranks of a node share it, as the namespaces' one shaped link per node does)."""
    intra = cost.fit_link(levels["intra"]).link if levels.get("intra") else get_link("nvlink4")
    inter = cost.fit_link(levels["inter"]).link if levels.get("inter") else intra
    return Cluster(nodes, gpus_per_node, replace(intra, name="fitted intra-node link"),
                   replace(inter, name="fitted NIC"), nics_per_node=1)


def measured_codec(name: str, mode: str, measured: dict) -> CodecCost:
    """A CodecCost from `levels_rank`'s codec timing (name = the codec's describe(); 'fp32' or 'none': raw)."""
    if name in ("fp32", "none", None):
        return FP32
    m = measured[name]
    return CodecCost(name, m["bytes_per_value"], 0.0, m["encode_s_per_value"], m["decode_s_per_value"], mode=mode,
                     source="measured in the run")


def predict(cluster: Cluster, algorithm: str, n_values: float, codec: CodecCost,
            intra_codec: CodecCost | None = None, *, chunk_values: float | None = None,
            pipeline: int = 1) -> CollectiveTime:
    """A measured row's model: the algorithm as it prices itself on the machine (`algorithm_time`), its
    messages chunked as `lab.comm.channel` sends them; the codec at both levels unless intra_codec is given
    (the run's default); `pipeline` (hierarchical's option) when more than 1."""
    options = {"pipeline": pipeline} if pipeline != 1 else {}
    return algorithm_time(cluster, algorithm, n_values, codec, intra_codec=intra_codec or codec,
                          chunk_values=chunk_values, **options)
