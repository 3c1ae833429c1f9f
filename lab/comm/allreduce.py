"""`allreduce(comm, x, algorithm=..., codec=...)`: the front door of the collectives.

Without a codec the algorithms move fp32 and equal the backend's `all_reduce` up to summation
order. With a codec (Dettmers 2016 §3.3: compress, transfer, decompress) two modes exist:
  requantize: decode-add-encode at every reduction hop (the codec's `requantize` flag; table
              codecs, casts, fp8, int8, QSGD, TernGrad); error grows with the hop count.
  gather:     every rank encodes its vector once, the P payloads are all-gathered in the
              algorithm's pattern, and every rank decodes and adds them in rank order (top-k,
              random-k, 1-bit SGD; also allowed for dense codecs, at P times the bytes). Gather
              mode takes a codec with memory (`ef:<codec>`: the rank's residual, under `key`), and
              `own="exact"`: the paper's scheme, a rank adds its own vector in fp32 and only
              the incoming ones decoded (Dettmers 2016 §3.4).
  phased:     a codec with its own collective (`Codec.phases`; PowerSGD, Vogels et al. 2019) runs
              it (`Codec.reduce_phased`): its fp32 sums (P, then Q) travel raw on the algorithm.
Every rank ends with the same result (for stochastic codecs under recursive doubling, see there;
with own="exact" each rank's sum differs by its own quantisation error).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from lab.codecs import Codec, parse_spec
from lab.codecs.hop import decode_sum
from lab.codecs.wire import WireFormat

from .algorithms import algorithm_infos, get_algorithm
from .algorithms import algorithm_names as _registered
from .base import Comm, CommError
from .channel import Channel
from .spans import span

NATIVE = "native"
MODES = ("auto", "requantize", "gather")
OWN = ("compressed", "exact")


def algorithm_names() -> list[str]:
    """Every algorithm `allreduce` accepts, the backend's own first."""
    return [NATIVE, *_registered()]


def resolve_codec(codec: Codec | str | None) -> Codec | None:
    if codec is None or isinstance(codec, Codec):
        return codec
    if isinstance(codec, str):
        return None if codec in ("", "none") else parse_spec(codec)
    raise ValueError(f"codec={codec!r}; allowed: None, a codec name or a Codec")


def resolve_mode(codec: Codec | None, mode: str, algorithm: str | None = None) -> str:
    """'raw' without a codec, else 'requantize' or 'gather' ('auto' follows the codec). A codec that
    cannot be re-encoded at every hop (sign, sparse) may still requantize on an algorithm that encodes
    each value twice, its part and then the owner's sum (`Algorithm.two_stage`: Seide et al.'s 1-bit SGD)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed: {', '.join(MODES)}")
    if codec is None:
        return "raw"
    if codec.payload_codec.phases:
        return _phased_mode(codec, mode)
    if mode == "requantize" and codec.stateful:
        raise ValueError(f"codec {codec.name!r} keeps an error-feedback residual of its own encoding; "
                         "re-encoded partial sums have none: use mode='gather'")
    if mode == "requantize" and not codec.requantize and not _plugin(algorithm, "two_stage"):
        two = [a.name for a in algorithm_infos() if a.two_stage]
        raise ValueError(f"codec {codec.name!r} cannot be re-encoded at every hop (sparse or sign "
                         f"payloads); use mode='gather', or algorithm {' or '.join(two)}, which "
                         "encode each value twice (its part, then the owner's sum)")
    how = mode if mode != "auto" else ("requantize" if codec.requantize else "gather")
    if how == "gather" and _known(algorithm) and not _plugin(algorithm, "gather"):
        raise ValueError(f"algorithm {algorithm!r} has no gather form, which codec {codec.name!r} in mode "
                         f"'gather' needs; algorithms with one: {', '.join(a.name for a in algorithm_infos() if a.gather)}")
    return how


def _phased_mode(codec: Codec, mode: str) -> str:
    """'phased' for a codec that runs its own collective (`Codec.phases`: PowerSGD's P, then Q, as
    fp32 sums on the algorithm), which neither requantizes nor gathers and keeps its own memory."""
    inner = codec.payload_codec
    if codec is not inner:
        raise ValueError(f"{codec.describe()}: {inner.name} keeps its own error feedback (its option error_feedback, "
                         f"on by default: the residual against the sum over ranks); use {inner.name!r} without ef: "
                         "or --error-feedback")
    if mode != "auto":
        raise ValueError(f"codec {inner.name!r} runs its own collective: {inner.phases} fp32 allreduces "
                         f"(P, then Q) on the chosen algorithm, after one for its uncompressed tensors; modes "
                         f"'requantize' and 'gather' do not apply to it (and neither does scheme='paper'): "
                         "use mode='auto'")
    return "phased"


def check_algorithm(algorithm: str) -> None:
    if algorithm != NATIVE and not _known(algorithm):
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(algorithm_names())}")


def _known(algorithm: str | None) -> bool:
    """A registered algorithm (not native, not None)."""
    try:
        get_algorithm(algorithm)
    except ValueError:
        return False
    return True


def _plugin(algorithm: str | None, what: str) -> bool:
    """Whether the registered `algorithm` has `what` (two_stage, a gather form); False if unknown."""
    return _known(algorithm) and bool(getattr(get_algorithm(algorithm), what))


def configure(algorithm: str, P: int, codec: Codec | None, how: str, options: dict) -> dict:
    """The algorithm's own options checked for P ranks and completed (`Algorithm.configure`); an
    option the algorithm does not take is a ValueError naming the ones it does."""
    takes = () if algorithm == NATIVE else get_algorithm(algorithm).options
    bad = sorted(set(options) - set(takes))
    if bad:
        which = [a.name for a in algorithm_infos() if a.options]
        raise ValueError(f"algorithm {algorithm!r} takes no option {', '.join(bad)}; "
                         + (f"it takes: {', '.join(takes)}" if takes else "it takes none")
                         + (f" (algorithms with options: {', '.join(which)})" if which else ""))
    if not takes:
        return {}
    return get_algorithm(algorithm).configure(P, codec, how, **options)


def describe_options(options: dict) -> tuple:
    """Options as comparable plain values (codecs by their description), for the control check."""
    return tuple(sorted((k, v.describe() if isinstance(v, Codec) else v) for k, v in options.items()))


def allreduce(comm: Comm, x: torch.Tensor, *, algorithm: str = "ring", codec: Codec | str | None = None,
              mode: str = "auto", own: str = "compressed", key: str = "default",
              check: bool = True, watch: Callable[[torch.Tensor], None] | None = None, **options) -> torch.Tensor:
    """The sum over ranks of x (every rank passes a tensor of the same length), as a new tensor
    of x's shape and dtype on the comm's device. check=True first verifies, with a small control
    exchange, that every rank asked for the same length, algorithm, codec, mode and options. With
    one rank nothing crosses a wire and the result is x itself. own="exact" (gather mode) adds the
    rank's own x uncompressed; `key` names the error-feedback residual of an ErrorFeedback codec.
    **options are the algorithm's own (`Algorithm.options`), e.g. for the two-level algorithms
    `ranks_per_node=8`; hierarchical also takes `inner=`/`outer=` (each level's algorithm) and
    `intra_codec=` (the codec inside a node; `codec` is the one across nodes and, by default,
    inside too; None or 'none' = fp32 inside). watch(buf), if given, is called once before any message
    with the flat fp32 buffer the algorithm sums in (raw and requantize modes: it ends as the result),
    for a caller that follows the sum as it forms (the step-through)."""
    check_algorithm(algorithm)
    codec = resolve_codec(codec)
    how = resolve_mode(codec, mode, algorithm)
    opts = configure(algorithm, comm.size, codec, how, options)
    if own not in OWN:
        raise ValueError(f"own={own!r}; allowed: {', '.join(OWN)}")
    if own == "exact" and how != "gather":
        raise ValueError("own='exact' (the rank's own vector in fp32, the others decoded) needs a codec "
                         f"in mode='gather'; this call is mode {how!r}")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"allreduce takes a floating-point torch.Tensor, got {type(x).__name__}"
                         + (f" of {x.dtype}" if isinstance(x, torch.Tensor) else ""))
    if algorithm == NATIVE and codec is not None and how != "phased":
        raise ValueError("the native all_reduce carries fp32 only; pick one of "
                         f"{', '.join(_registered())} to put a codec on the wire")
    if check:
        same = (x.numel(), algorithm, codec.describe() if codec else None, how)
        comm.check_same(same + ((describe_options(opts),) if opts else ()),
                        "(length, algorithm, codec, mode" + (", options)" if opts else ")"))
    buf = x.detach().reshape(-1).to(device=comm.device, dtype=torch.float32, copy=True)
    if watch is not None:
        watch(buf)
    n, P = buf.numel(), comm.size
    if n and P > 1:
        if how == "phased":  # the codec's own collective: its fp32 sums ride the algorithm's raw wire
            buf = codec.reduce_phased([buf.view(x.shape)], [key], _fp32_sum(comm, algorithm), P)[0].reshape(-1)
        elif algorithm == NATIVE:
            comm.native_allreduce(buf)
        elif how == "gather":
            gather = get_algorithm(algorithm).gather
            if opts:
                gather = partial(gather, options=opts)
            buf = _gather_sum(comm, buf, codec, gather, own, key)
        else:
            algo = get_algorithm(algorithm)
            algo.reduce(comm, buf, Channel(comm, codec, scratch=algo.scratch(n, P), options=opts))
    return buf.view(x.shape).to(x.dtype)


def _fp32_sum(comm: Comm, algorithm: str):
    """t -> the sum over ranks of the flat fp32 t, in place, by `algorithm` (or the backend's own)."""
    def total(t: torch.Tensor) -> torch.Tensor:
        if algorithm == NATIVE:
            comm.native_allreduce(t)
        else:
            algo = get_algorithm(algorithm)
            algo.reduce(comm, t, Channel(comm, None, scratch=algo.scratch(t.numel(), comm.size)))
        return t
    return total


def _gather_sum(comm: Comm, buf: torch.Tensor, codec: Codec, gather, own: str, key: str) -> torch.Tensor:
    fmt = WireFormat.of(codec, buf.numel(), torch.float32)
    rows = torch.empty((comm.size, fmt.nbytes), dtype=torch.uint8, device=comm.device)
    with span("encode"):
        rows[comm.rank] = fmt.pack(codec.encode_as(buf, key))
    gather(comm, rows)
    ranks = [p for p in range(comm.size) if own == "compressed" or p != comm.rank]
    with span("add"):
        total = decode_sum(codec, [fmt.unpack(rows[p]) for p in ranks]).reshape(-1).float()
    return total.add_(buf) if own == "exact" else total


__all__ = ["allreduce", "algorithm_names", "resolve_codec", "resolve_mode", "check_algorithm", "configure",
           "CommError", "MODES", "OWN", "NATIVE"]
