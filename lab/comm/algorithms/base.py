"""`Algorithm`: one allreduce algorithm as a plugin, and the registry of them (docs/design.md rule 6).

An algorithm is one module that defines `ALGORITHM = Algorithm(...)`: its `reduce` and `gather`
(written once against `Comm`), its cost-model coefficients (paper 001's a·L + b·G), the bytes it
sends and its nccl-tests bus-bandwidth factor. Algorithms are found the way codecs are
(`lab.plugins`): the modules of this package that define `ALGORITHM`, entry points of group
`paralab.algorithms`, modules named in $PARALAB_ALGORITHMS (read, never written), and plugins
registered at run time with `register(algo)` or `register_module("pkg.mod")`, whose modules the rank
processes `lab.comm.launch` starts import too. Nothing lists them.
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

#: modules (comma-separated) imported on first use of the registry, in every process that reads it (read only)
ENV = "PARALAB_ALGORITHMS"
#: the name `allreduce` gives the backend's own all_reduce; no plugin may take it
NATIVE = "native"

ReduceFn = Callable[["Comm", "torch.Tensor", "Channel"], None]
GatherFn = Callable[["Comm", "torch.Tensor"], None]
Coefficients = Callable[[int, float], "tuple[float, float]"]


def allreduce_busbw(P: int) -> float:
    """nccl-tests' allreduce bus-bandwidth factor 2(P−1)/P (docs/PERFORMANCE.md of nccl-tests)."""
    return 2.0 * (P - 1) / P


def raw_scratch(n: int, P: int) -> int:
    """fp32 scratch values a raw (codec-free) reduce needs by default: one full vector."""
    return n


_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


@dataclass(frozen=True, eq=False)
class Algorithm:
    """One allreduce algorithm. Formulas take P >= 2 ranks and m bytes (or n values) per rank;
    P = 1 costs nothing and is handled by the callers (`lab.comm.cost`).

    reduce(comm, buf, channel): in-place allreduce of a flat fp32 buffer, payloads through the
        channel (raw, or decode-add-encode at every hop: requantize mode).
    gather(comm, rows): allgather of one fixed-size payload row per rank (gather mode); None if
        the algorithm has no gather form.
    coefficients(P, m) -> (a, b): allreduce time a·L + b·G on per-rank links (paper 001's notation).
    total_bytes(P, m): bytes all ranks send together (the shared-medium model's bandwidth term).
    codec_counts(P, n) -> (E, D): values encoded and decoded on the critical path in requantize
        mode (`lab.comm.cost.compressed_time`); None: the codec-time model does not cover it.
    gather_coefficients(P, q) -> (a, b): time of its allgather of one q-byte row per rank.
    busbw(P): bus-bandwidth factor, busbw = algbw · busbw(P); nccl-tests' allreduce 2(P−1)/P.
    two_stage: requantize mode encodes every value exactly twice (its part, then the owner's sum),
        so a codec that cannot be re-encoded at every hop (sign, sparse) may still requantize on it
        (Seide et al.'s 1-bit SGD).
    scratch(n, P): fp32 scratch values a raw reduce of n values uses.
    options: names of the keyword options `allreduce(..., **options)` passes it (hierarchical's
        ranks_per_node, inner, outer, intra_codec); its reduce reads them from `channel.options`,
        its gather gets them as `gather(comm, rows, options)`.
    configure(P, codec, mode, **options) -> dict: checks the options for P ranks, the codec and the
        resolved mode ('raw', 'requantize', 'gather'), raising ValueError that names the allowed
        values, and returns them complete (defaults filled in); None: the algorithm takes none.
    order: position in lists (lower first; the built-ins follow paper 001's slide).
    cluster_time(cluster, n_values, codec, *, intra_codec, raw, chunk_values, **options) ->
        `lab.comm.cluster.CollectiveTime`: its time on a two-level machine (`lab.comm.cluster.Cluster`:
        nodes, links, NICs), per level: `codec` (a `CodecCost`) across nodes, `intra_codec` inside (None:
        the algorithm's default), `raw` the uncompressed values, chunk_values the channel's chunk, options
        its own (hierarchical's pipeline); `pays`, the planner and the measured two-level rows price it
        so. None: run flat over all P ranks on the slower level (`lab.comm.cluster.flat_time`).
    hops(P) -> int: the most encodes one element goes through in requantize mode on P ranks (its codec
        error's multiplier: a codec erring by at most e per encode of values below S errs by at most
        hops(P)·e on a sum below S); None: not declared (no error bound is promised).
    """

    name: str
    summary: str
    citation: str
    reduce: ReduceFn
    coefficients: Coefficients
    total_bytes: Callable[[int, float], float]
    gather: Optional[GatherFn] = None
    gather_coefficients: Optional[Coefficients] = None
    codec_counts: Optional[Callable[[int, float], "tuple[float, float]"]] = None
    busbw: Callable[[int], float] = allreduce_busbw
    two_stage: bool = False
    scratch: Callable[[int, int], int] = raw_scratch
    options: tuple[str, ...] = ()
    configure: Optional[Callable[..., dict]] = None
    order: int = 100
    cluster_time: Optional[Callable[..., object]] = None
    hops: Optional[Callable[[int], int]] = None
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name) or self.name == NATIVE:
            raise ValueError(f"algorithm name {self.name!r}: allowed are lower-case identifiers "
                             f"([a-z][a-z0-9_]*) other than {NATIVE!r}")
        for what in ("reduce", "coefficients", "total_bytes", "busbw", "scratch"):
            if not callable(getattr(self, what)):
                raise ValueError(f"algorithm {self.name!r}: {what} must be callable, got {getattr(self, what)!r}")
        for what in ("gather", "gather_coefficients", "codec_counts", "configure", "cluster_time", "hops"):
            v = getattr(self, what)
            if v is not None and not callable(v):
                raise ValueError(f"algorithm {self.name!r}: {what} must be callable or None, got {v!r}")
        if bool(self.options) != (self.configure is not None):
            raise ValueError(f"algorithm {self.name!r}: give options and configure together "
                             "(the option names and their check), or neither")
        if (self.gather is None) != (self.gather_coefficients is None):
            raise ValueError(f"algorithm {self.name!r}: give gather and gather_coefficients together "
                             "(the allgather and its cost model), or neither")
        if not self.module:
            object.__setattr__(self, "module", getattr(self.reduce, "__module__", "") or "")

    @property
    def modes(self) -> tuple[str, ...]:
        """The codec modes it runs: 'requantize' always, 'gather' with a gather form, 'two-stage'."""
        return ("requantize",) + (("gather",) if self.gather is not None else ()) + (
            ("two-stage",) if self.two_stage else ())

    def bytes_per_rank(self, P: int, nbytes: float) -> float:
        """Bytes one rank sends in one allreduce of `nbytes` per rank, averaged over the ranks."""
        return 0.0 if P == 1 else self.total_bytes(P, nbytes) / P

    def busbw_factor(self, P: int) -> float:
        """busbw = algbw · this; 1.0 for P = 1 (busbw = algbw, not 0)."""
        return 1.0 if P == 1 else float(self.busbw(P))


_PACKAGE = __name__.rsplit(".", 1)[0]
#: every algorithm found (`lab.plugins`: this package's modules that define ALGORITHM, entry points
#: `paralab.algorithms`, $PARALAB_ALGORITHMS, modules carried from the parent process)
REGISTRY: plugins.Registry[Algorithm] = plugins.Registry(
    "algorithms", _PACKAGE, "paralab.algorithms", ENV, Algorithm, attr="ALGORITHM", key=lambda a: a.name,
    label=lambda a: f"algorithm {a.name!r}", order=lambda a: (a.order, a.name))


def register(algo: Algorithm, *, replace: bool = False) -> Algorithm:
    """Add an algorithm to the registry (every list, the cost model, `allreduce` and the CLI see it).
    Its module (where `reduce` is defined) is carried to the rank processes `lab.comm.launch` starts
    (`lab.plugins`; nothing is written to the environment); an algorithm defined in `__main__` is only
    known to this process."""
    return REGISTRY.register(algo, replace)


def register_module(module: str) -> Algorithm:
    """Import `module` (which defines ALGORITHM, or calls `register` itself) and register it."""
    found = REGISTRY.register_module(module)
    if not found:
        raise ValueError(f"module {module!r} defines no ALGORITHM and registered none")
    return found[0]


def unregister(name: str) -> None:
    """Remove a plugin (tests); built-ins stay."""
    REGISTRY.remove(get_algorithm(name))


def algorithm_infos() -> list[Algorithm]:
    """Every registered algorithm, in display order (the built-ins as paper 001's slide, then by name)."""
    return REGISTRY.ordered()


def algorithm_names() -> list[str]:
    """The names of `algorithm_infos()`, in the same order."""
    return REGISTRY.names()


def get_algorithm(name: str) -> Algorithm:
    """The registered algorithm called `name`; ValueError naming the known ones otherwise."""
    return REGISTRY.lookup(name, "unknown algorithm {key!r}: known are {known}")
