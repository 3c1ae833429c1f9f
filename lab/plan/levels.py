"""One level of a sharded collective priced by the registered collective plugins (`lab.comm.collectives`):
k ranks joined by one kind of link, each op's algorithms priced with their own declarations
(`Collective.coefficients`: a·L + b·G for a buffer of m bytes; `Collective.bytes_per_rank`), and the
cheapest one chosen, as the allreduce planner prices its algorithm plugins. A plugin registered at run
time is a candidate at once; nothing here lists them.

Sizes follow nccl-tests (`lab.comm.collectives.base`): for all-gather and reduce-scatter m is the whole
buffer (k shards), for all-to-all one rank's send buffer (k blocks). With a codec each of the k shards is
one encoded message, m = k · wire(n/k). Codec work:

- gather-type ops (all-gather, all-to-all): the source encodes once and every receiver decodes, whatever
  the algorithm (relaying ranks forward the encoded bytes unchanged), so the codec's seconds are the same
  for every algorithm (`lab.plan.sharded` counts them);
- reduce-scatter, per hop (requantize): a rank decodes, adds and re-encodes what it sends, n·b/m values,
  one encode and one decode kernel set per message (a of them), as `lab.comm.cluster.flat_time` counts an
  allreduce's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from lab.comm.cluster import CodecCost, Link, codec_seconds

#: the ops a sharded step prices through plugins
OPS = ("all_gather", "reduce_scatter", "alltoall")

Candidates = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class LevelPrice:
    """One op on one level by one algorithm: seconds of transfer, codec work and kernel launches; the
    bytes one rank sends (average over the level's ranks)."""

    algorithm: str
    transfer_s: float
    codec_s: float
    launch_s: float
    bytes_per_rank: float

    @property
    def seconds(self) -> float:
        return self.transfer_s + self.codec_s + self.launch_s


NOTHING = LevelPrice("-", 0.0, 0.0, 0.0, 0.0)


def check_candidates(candidates: Candidates | None) -> Candidates | None:
    """None, or {op: [registered algorithm names]} with op one of `OPS`; ValueError naming what is allowed."""
    from lab.comm.collectives import get_collective

    if candidates is None:
        return None
    if not isinstance(candidates, Mapping):
        raise ValueError(f"collective candidates: give {{op: [algorithm names]}} (ops: {', '.join(OPS)}), "
                         f"got {candidates!r}")
    for op, names in candidates.items():
        if op not in OPS:
            raise ValueError(f"collective candidates: op {op!r}; allowed: {', '.join(OPS)}")
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise ValueError(f"candidates for {op}: give a non-empty list of algorithm names, got {names!r}")
        for n in names:
            get_collective(op, n)
    return candidates


def candidates_for(op: str, candidates: Candidates | None = None) -> list:
    """The registered algorithms of `op` (read now), in display order; `candidates` {op: [names]} narrows
    them (ValueError naming the registered ones for a name that is not)."""
    from lab.comm.collectives import collective_infos, get_collective

    if op not in OPS:
        raise ValueError(f"op {op!r}; allowed here: {', '.join(OPS)}")
    names = None if candidates is None else candidates.get(op)
    if names is None:
        return collective_infos(op)
    if isinstance(names, str) or not names:
        raise ValueError(f"candidates for {op}: give a non-empty list of algorithm names, got {names!r}")
    return [get_collective(op, n) for n in names]


def price(coll, k: int, n: float, link: Link, codec: CodecCost, *, per_hop: bool = False) -> LevelPrice:
    """`coll` (a registered Collective) on k ranks over `link`, a buffer of k shards of n/k values each in
    `codec`'s wire format. per_hop: a reduction whose partial sums are decoded, added and re-encoded at
    every message (reduce-scatter with a codec)."""
    if k <= 1 or n == 0:
        return LevelPrice(coll.name, 0.0, 0.0, 0.0, 0.0)
    m = k * codec.wire(n / k)
    a, b = coll.coefficients(k, m)
    t = a * link.L + b * link.G
    w = launch = 0.0
    if per_hop and not codec.raw:
        v = n * b / m  # the values a rank encodes (and decodes) on its way
        w = codec_seconds(codec, v, v)
        launch = a * (codec.encode_kernels + codec.decode_kernels) * codec.launch_s
    return LevelPrice(coll.name, t, w, launch, coll.bytes_per_rank(k, m))


def best(op: str, k: int, n: float, link: Link, codec: CodecCost, *, per_hop: bool = False,
         candidates: Candidates | None = None) -> LevelPrice:
    """The fastest registered algorithm of `op` on this level (ties: the first in display order)."""
    if k <= 1 or n == 0:
        return NOTHING
    got = [price(c, k, n, link, codec, per_hop=per_hop) for c in candidates_for(op, candidates)]
    return min(got, key=lambda p: p.seconds)


def bytes_per_rank(op: str, algorithm: str, k: int, m: float) -> float:
    """Bytes one rank of k sends in `algorithm`'s call of `op` on a buffer of m bytes."""
    from lab.comm.collectives import get_collective

    return 0.0 if k <= 1 or algorithm == "-" else get_collective(op, algorithm).bytes_per_rank(k, m)


__all__ = ["OPS", "LevelPrice", "NOTHING", "Candidates", "check_candidates", "candidates_for", "price", "best",
           "bytes_per_rank"]
