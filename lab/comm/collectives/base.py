"""`Collective`: one algorithm of one nccl-tests collective as a plugin, and the registry of them.

The allreduce algorithms are plugins of `lab.comm.algorithms`; every other collective a training job
uses (all-gather, reduce-scatter, all-to-all, broadcast, reduce, sendrecv) is one module per
(op, algorithm) in this package, defining `COLLECTIVE = Collective(...)`. They are found as the
allreduce algorithms and the codecs are (`lab.plugins`, kind ``collectives``): the modules of this
package, entry points of group `paralab.collectives`, modules named in $PARALAB_COLLECTIVES, and
`register(c)` at run time. Nothing lists them.

Sizes follow nccl-tests (its doc/PERFORMANCE.md): m is the op's "size" in bytes, the whole
gathered / scattered buffer for all_gather and reduce_scatter (P shards), one rank's send buffer
for alltoall, the buffer for broadcast, reduce and sendrecv. busbw = algbw · factor(P).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from ... import plugins

if TYPE_CHECKING:
    import torch

    from ..base import Comm
    from ..channel import Channel

ENV = "PARALAB_COLLECTIVES"

Coefficients = Callable[[int, float], "tuple[float, float]"]


@dataclass(frozen=True)
class Op:
    """One nccl-tests collective: its name, whether it sums, its bus-bandwidth factor and what m is."""

    name: str
    summary: str
    reduces: bool
    busbw: Callable[[int], float]
    busbw_text: str
    size: str

    def busbw_factor(self, P: int) -> float:
        """busbw = algbw · this (nccl-tests doc/PERFORMANCE.md); 1.0 for P = 1."""
        return 1.0 if P == 1 else float(self.busbw(P))


#: nccl-tests' seven collectives, in its order (all_reduce's algorithms are `lab.comm.algorithms`)
OPS: dict[str, Op] = {o.name: o for o in (
    Op("all_reduce", "every rank gets the sum of every rank's vector", True, lambda P: 2 * (P - 1) / P,
       "2(P-1)/P", "the vector"),
    Op("all_gather", "every rank gets every rank's shard, in rank order", False, lambda P: (P - 1) / P,
       "(P-1)/P", "the gathered buffer (P shards)"),
    Op("reduce_scatter", "rank r gets shard r of the sum", True, lambda P: (P - 1) / P,
       "(P-1)/P", "the input buffer (P shards)"),
    Op("alltoall", "block j of rank i lands as block i of rank j (a transposition)", False,
       lambda P: (P - 1) / P, "(P-1)/P", "one rank's send buffer (P blocks)"),
    Op("broadcast", "every rank gets the root's buffer", False, lambda P: 1.0, "1", "the buffer"),
    Op("reduce", "the root gets the sum of every rank's buffer", True, lambda P: 1.0, "1", "the buffer"),
    Op("sendrecv", "rank r sends to r+1 and receives from r-1", False, lambda P: 1.0, "1", "the buffer"),
)}

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
#: the ops whose algorithms may have a channel form (`Collective.phase`): an allreduce's two halves
PHASE_OPS = ("reduce_scatter", "all_gather")


@dataclass(frozen=True, eq=False)
class Collective:
    """One algorithm of one op, written once against `Comm` (runs on SimComm and on real ranks).

    run: the algorithm; its signature is the op's (`lab.comm.collectives.api` calls it):
        all_gather(comm, rows)               rows (P, k), row r filled; every row filled in place
        reduce_scatter(comm, blocks, wire)   blocks (P, k) of the accumulation dtype; blocks[r] = the sum
        alltoall(comm, inp, out)             (P, k) each; out[i] = rank i's inp[r] (out[r] filled already)
        broadcast(comm, buf, root)           buf = root's buf on every rank
        reduce(comm, buf, wire, root)        buf at the root = the sum
        sendrecv(comm, send, recv)           recv = rank r-1's send
      Gather-type ops (all_gather, alltoall, broadcast, sendrecv) move rows of any dtype, so a codec's
      payload bytes travel unchanged; reductions go through a `Wire` (raw, or decode-add-encode per hop).
    coefficients(P, m) -> (a, b): time a·L + b·G for m bytes (module docstring) on per-rank links.
    total_bytes(P, m): bytes all ranks send together.
    options: keyword options `run` takes (PAT's buffer_bytes), with their defaults.
    phase: the same algorithm as one phase of an allreduce (reduce_scatter and all_gather only), over a
        `lab.comm.channel.Channel`: codecs decoded, added and re-encoded per hop, chunks pipelined, payload
        buffers kept on the comm: phase(comm, shards, ch), shards a list of P tensors of fp32 values, any
        lengths, the same on every rank. reduce_scatter: shards[rank] becomes the sum over the ranks;
        all_gather: its owner encodes shards[rank] once (keeping the decoded value) and every rank gets
        every shard (it may return every shard's final payload: recursive doubling does, for Rabenseifner's
        folded ranks). None: the algorithm has no such form (the ring, rabenseifner, butterfly_sync and
        `lab.comm.algorithms.hierarchical`'s node level compose the ones that do).
    handoff: its phase can hand over at an allreduce's phase boundary (`allreduce_phases`), so the last
        reduce-scatter chunks are completed while the first all-gather chunks already travel:
        reduce_scatter phase(comm, shards, ch, handoff=True) returns, once its last step is posted, an
        iterator that completes shards[rank]'s chunks (`Channel.chunks`) one by one and yields each one's
        final payload (the owner's sum encoded once, its decoded value kept in the shard), then waits for
        its last sends when exhausted (until then its buffers, the channel's raw scratch included, are in
        use); all_gather phase(comm, shards, ch, own=that iterator) sends those payloads instead of encoding
        shards[rank], taking each just before it is sent, and exhausts it.
    neighbours: rank r only talks to r-1 and r+1 (the ring): over consecutive ranks of several nodes one
        flow crosses each node boundary per direction and has the whole NIC (`lab.comm.cluster.Cluster.
        ring_link`); otherwise up to every GPU of a node sends across at once, each with its share of it.
    """

    op: str
    name: str
    summary: str
    citation: str
    run: Callable[..., None]
    coefficients: Coefficients
    total_bytes: Callable[[int, float], float]
    options: dict = field(default_factory=dict)
    neighbours: bool = False
    phase: Optional[Callable[..., object]] = None
    handoff: bool = False
    order: int = 100
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.op not in OPS or self.op == "all_reduce":
            raise ValueError(f"collective {self.name!r}: op {self.op!r}; allowed: "
                             f"{', '.join(o for o in OPS if o != 'all_reduce')} (all_reduce's algorithms are "
                             "lab.comm.algorithms plugins)")
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"collective name {self.name!r}: allowed are lower-case identifiers ([a-z][a-z0-9_]*)")
        for what in ("run", "coefficients", "total_bytes"):
            if not callable(getattr(self, what)):
                raise ValueError(f"collective {self.op}/{self.name}: {what} must be callable")
        if self.phase is not None and (not callable(self.phase) or self.op not in PHASE_OPS):
            raise ValueError(f"collective {self.op}/{self.name}: phase must be callable, on an op of "
                             f"{', '.join(PHASE_OPS)} (an allreduce's halves), or None")
        if self.handoff and self.phase is None:
            raise ValueError(f"collective {self.op}/{self.name}: handoff=True needs a phase")
        if not self.module:
            object.__setattr__(self, "module", getattr(self.run, "__module__", "") or "")

    def bytes_per_rank(self, P: int, nbytes: float) -> float:
        """Bytes one rank sends in one call of size `nbytes`, averaged over the ranks."""
        return 0.0 if P == 1 else self.total_bytes(P, nbytes) / P

    def busbw_factor(self, P: int) -> float:
        """The op's nccl-tests factor (the algorithm does not change it)."""
        return OPS[self.op].busbw_factor(P)

    def time(self, P: int, nbytes: float, L: float, G: float) -> float:
        """a·L + b·G seconds; 0 for P = 1."""
        if P == 1:
            return 0.0
        a, b = self.coefficients(P, nbytes)
        return a * L + b * G


_PACKAGE = __name__.rsplit(".", 1)[0]
#: every collective algorithm found (`lab.plugins`: this package's modules that define COLLECTIVE, entry
#: points `paralab.collectives`, $PARALAB_COLLECTIVES, modules carried from the parent process)
REGISTRY: plugins.Registry[Collective] = plugins.Registry(
    "collectives", _PACKAGE, "paralab.collectives", ENV, Collective, attr="COLLECTIVE", key=lambda c: (c.op, c.name),
    label=lambda c: f"{c.op} algorithm {c.name!r}", order=lambda c: (list(OPS).index(c.op), c.order, c.name))


def register(c: Collective, *, replace: bool = False) -> Collective:
    """Add a collective algorithm (carried to rank processes like the allreduce plugins)."""
    return REGISTRY.register(c, replace)


def register_module(module: str) -> list[Collective]:
    """Import `module` (which defines COLLECTIVE) and register it."""
    return REGISTRY.register_module(module)


def unregister(op: str, name: str) -> None:
    """Remove a plugin (tests); built-ins stay."""
    REGISTRY.remove(get_collective(op, name))


def allreduce_phases(comm: "Comm", shards: list[torch.Tensor], ch: "Channel", reduce_scatter: str,
                     all_gather: str) -> None:
    """An allreduce of `shards` (fp32, any lengths, the same on every rank) as the registered reduce-scatter
    `reduce_scatter` then the registered all-gather `all_gather`, in their channel forms (`Collective.phase`):
    rank r reduces shards[r] and every rank ends with every sum. Both with `handoff`: chained at the boundary
    (the all-gather sends each of shards[r]'s chunks as soon as the reduce-scatter completes it); otherwise
    one after the other, the all-gather encoding shards[r] itself."""
    rs, ag = get_collective("reduce_scatter", reduce_scatter), get_collective("all_gather", all_gather)
    for c in (rs, ag):
        if c.phase is None:
            raise ValueError(f"{c.op} algorithm {c.name!r} has no channel form (phase) to run inside an allreduce")
    if rs.handoff and ag.handoff:
        ag.phase(comm, shards, ch, own=rs.phase(comm, shards, ch, handoff=True))
        return
    rs.phase(comm, shards, ch)
    ag.phase(comm, shards, ch)


def check_op(op: str) -> Op:
    """The Op called `op`; ValueError naming the allowed ones."""
    o = OPS.get(op) if isinstance(op, str) else None
    if o is None:
        raise ValueError(f"unknown op {op!r}; allowed: {', '.join(OPS)}")
    return o


def collective_infos(op: Optional[str] = None) -> list[Collective]:
    """Every registered collective algorithm (of `op`), in display order."""
    if op is not None:
        check_op(op)
    return REGISTRY.ordered(None if op is None else lambda c: c.op == op)


def collective_names(op: str) -> list[str]:
    """The algorithms registered for `op`, in display order."""
    return [c.name for c in collective_infos(op)]


def get_collective(op: str, name: str) -> Collective:
    """The algorithm `name` of `op`; ValueError naming the ones `op` has."""
    check_op(op)
    return REGISTRY.lookup((op, name), "{op} has no algorithm {name!r}; allowed: {known}",
                           lambda c: c.op == op, op=op, name=name)
