"""The front door of every collective but allreduce (`lab.comm.allreduce`): one function per op,
each taking a Comm (SimComm or torch.distributed), a tensor, an algorithm (a plugin of this package)
and a codec.

Shapes follow torch.distributed: all_gather concatenates along dim 0 (`all_gather_into_tensor`),
reduce_scatter and alltoall split dim 0 into P equal shards (`reduce_scatter_tensor`,
`all_to_all_single`). A codec rides where it makes sense:
  all_gather, alltoall, broadcast, sendrecv: the source encodes once, the bytes travel unchanged
    (through relaying ranks too) and every receiver decodes: no re-quantisation. all_gather decodes
    the rank's own row too (every rank ends with the same tensor, as FSDP needs); alltoall and
    broadcast keep the source's own data exact (it never crosses a wire).
  reduce_scatter, reduce: mode 'requantize' decodes, adds and re-encodes the partial sum at every
    hop (ring, recursive_halving, pat, binomial); reduce_scatter on 'direct' encodes each block once
    at its source and its owner decodes and sums (mode 'oneshot', ZeRO++'s qgZ).
  accumulate='fp32'|'bf16'|'fp16': the dtype reductions sum in (NCCL sums in the input's dtype):
    the raw wire carries it, and every addition rounds to it.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from lab.codecs import Codec, parse_spec
from lab.codecs.wire import WireFormat

from ..base import Comm
from .base import OPS, Collective, collective_names, get_collective
from .wire import ACCUMULATE, Wire

MODES = ("auto", "requantize", "oneshot")
#: watch(buf), if given, is called once before any message with the buffer the algorithm works in, holding this
#: rank's input (rows of values, or of a codec's bytes; slots still to arrive hold garbage, which the caller may
#: mark): for a caller that follows the collective as it runs (the step-through)
Watch = Callable[[torch.Tensor], None] | None
ONESHOT = "direct"  # the reduce-scatter algorithm whose blocks cross one hop, from source to owner


def _codec(codec: Codec | str | None) -> Codec | None:
    if codec is None or isinstance(codec, Codec):
        return codec
    if isinstance(codec, str):
        return None if codec in ("", "none", "fp32") else parse_spec(codec)
    raise ValueError(f"codec={codec!r}; allowed: None, a codec spec string or a Codec")


def _check_codec(op: str, codec: Codec | None) -> None:
    """Codecs that cannot ride any collective but allreduce: summing-only and error-feedback ones."""
    if codec is None:
        return
    if codec.payload_codec.phases:
        raise ValueError(f"codec {codec.name!r} only sums (it runs its own allreduce: {codec.payload_codec.phases} "
                         f"phases); {op} allows codecs whose payloads can be decoded alone (e.g. fp16, bf16, "
                         "dynamic_tree, mxfp8_e4m3, int8, topk)")
    if codec.stateful:
        raise ValueError(f"codec {codec.describe()!r} keeps an error-feedback residual of a sum's compression; "
                         f"{op} allows codecs without memory (drop the ef: prefix)")


def _algorithm(op: str, algorithm: str, options: dict) -> tuple[Collective, dict]:
    c = get_collective(op, algorithm)
    bad = sorted(set(options) - set(c.options))
    if bad:
        raise ValueError(f"{op} algorithm {algorithm!r} takes no option {', '.join(bad)}; "
                         + (f"it takes: {', '.join(c.options)}" if c.options else "it takes none"))
    opts = {**c.options, **options}
    for k, v in opts.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{op} algorithm {algorithm!r}: {k}={v!r}; allowed: an integer >= 1")
    return c, opts


def _tensor(op: str, x: Any, floating: bool) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or (floating and not x.is_floating_point()):
        raise ValueError(f"{op} takes a {'floating-point ' if floating else ''}torch.Tensor, got "
                         + (f"{x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__))
    return x


def _shards(op: str, x: torch.Tensor, P: int) -> int:
    """Rows of dim 0 per shard; ValueError unless P divides dim 0."""
    rows = x.shape[0] if x.dim() else 1
    if rows % P:
        raise ValueError(f"{op}: dim 0 of the input has {rows} rows, which {P} ranks cannot split equally; "
                         f"allowed: a multiple of {P} (pad it)")
    return rows // P


def _accumulate(accumulate: str) -> torch.dtype:
    if accumulate not in ACCUMULATE:
        raise ValueError(f"accumulate={accumulate!r}; allowed: {', '.join(ACCUMULATE)}")
    return ACCUMULATE[accumulate]


def _check_root(root: int, P: int) -> None:
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < P:
        raise ValueError(f"root={root!r}; allowed: a rank 0..{P - 1}")


def _same(comm: Comm, check: bool, *what: Any) -> None:
    if check and comm.size > 1:
        comm.check_same(what, "(op, length, algorithm, codec, options)")


def _watch(watch: Watch, buf: torch.Tensor) -> None:
    if watch is not None:
        watch(buf)


def _encode_rows(codec: Codec, flat: torch.Tensor, parts: int,
                 skip: int | None = None) -> tuple[torch.Tensor, WireFormat]:
    """flat cut into `parts` equal rows, each encoded once: (parts, nbytes) uint8 and the format. Row `skip`
    (one that never crosses a wire) is left zero, not encoded."""
    n = flat.numel() // parts
    fmt = WireFormat.of(codec, n, torch.float32)
    rows = torch.empty((parts, fmt.nbytes), dtype=torch.uint8, device=flat.device)
    for i in range(parts):
        if i == skip:
            rows[i].zero_()
        else:
            rows[i] = fmt.encode(flat[i * n:(i + 1) * n].float())
    return rows, fmt


def all_gather(comm: Comm, x: torch.Tensor, *, algorithm: str = "ring", codec: Codec | str | None = None,
               check: bool = True, watch: Watch = None, **options: int) -> torch.Tensor:
    """Every rank's x concatenated along dim 0 in rank order (P·x.shape[0] rows; a scalar gives P
    values). With a codec each rank encodes x once and every rank decodes all P payloads."""
    x, codec = _tensor("all_gather", x, False), _codec(codec)
    _check_codec("all_gather", codec)
    c, opts = _algorithm("all_gather", algorithm, options)
    P = comm.size
    _same(comm, check, "all_gather", tuple(x.shape), str(x.dtype), algorithm, codec.describe() if codec else None,
          tuple(sorted(opts.items())))
    flat = x.detach().reshape(-1).to(comm.device)
    shape = (P * x.shape[0], *x.shape[1:]) if x.dim() else (P,)
    if codec is None:
        rows = torch.empty((P, flat.numel()), dtype=x.dtype, device=comm.device)
        rows[comm.rank] = flat
        _watch(watch, rows)
        if flat.numel():
            c.run(comm, rows, **opts)
        return rows.view(shape)
    mine, fmt = _encode_rows(codec, flat, 1)
    rows = torch.empty((P, fmt.nbytes), dtype=torch.uint8, device=comm.device)
    rows[comm.rank] = mine[0]
    _watch(watch, rows)
    if fmt.nbytes:
        c.run(comm, rows, **opts)
    out = torch.stack([fmt.decode(rows[p]).reshape(-1) for p in range(P)]) if flat.numel() else \
        torch.empty((P, 0), device=comm.device)
    return out.to(x.dtype).view(shape)


def alltoall(comm: Comm, x: torch.Tensor, *, algorithm: str = "pairwise", codec: Codec | str | None = None,
             check: bool = True, watch: Watch = None, **options: int) -> torch.Tensor:
    """x's dim 0 cut into P blocks; block j goes to rank j, and the result's block i is rank i's block
    for this rank (`all_to_all_single`). With a codec every block is encoded once at its source."""
    x, codec = _tensor("alltoall", x, False), _codec(codec)
    _check_codec("alltoall", codec)
    c, opts = _algorithm("alltoall", algorithm, options)
    P, r = comm.size, comm.rank
    _shards("alltoall", x, P)
    _same(comm, check, "alltoall", tuple(x.shape), str(x.dtype), algorithm, codec.describe() if codec else None,
          tuple(sorted(opts.items())))
    flat = x.detach().reshape(-1).to(comm.device)
    k = flat.numel() // P
    if codec is None:
        inp = flat.view(P, k)
        out = torch.empty_like(inp)
        out[r] = inp[r]
        _watch(watch, out)
        if k:
            c.run(comm, inp.contiguous(), out, **opts)
        return out.view(x.shape)
    inp, fmt = _encode_rows(codec, flat, P, skip=None if watch is not None else r)  # own block: no wire, no encode
    out = torch.empty_like(inp)
    out[r] = inp[r]
    _watch(watch, out)
    if fmt.nbytes:
        c.run(comm, inp, out, **opts)
    res = torch.empty((P, k), dtype=torch.float32, device=comm.device)
    for p in range(P):
        res[p] = flat[p * k:(p + 1) * k] if p == r else fmt.decode(out[p]).reshape(-1)
    return res.to(x.dtype).view(x.shape)


def broadcast(comm: Comm, x: torch.Tensor, *, root: int = 0, algorithm: str = "binomial",
              codec: Codec | str | None = None, check: bool = True, watch: Watch = None,
              **options: int) -> torch.Tensor:
    """The root's x on every rank (the root keeps its own exact; with a codec it encodes once and
    every other rank decodes the same payload)."""
    x, codec = _tensor("broadcast", x, False), _codec(codec)
    _check_codec("broadcast", codec)
    c, opts = _algorithm("broadcast", algorithm, options)
    _check_root(root, comm.size)
    _same(comm, check, "broadcast", tuple(x.shape), str(x.dtype), root, algorithm,
          codec.describe() if codec else None, tuple(sorted(opts.items())))
    flat = x.detach().reshape(-1).to(comm.device).clone()
    if codec is None:
        _watch(watch, flat)
        if flat.numel():
            c.run(comm, flat, root, **opts)
        return flat.view(x.shape)
    fmt = WireFormat.of(codec, flat.numel(), torch.float32)
    payload = fmt.encode(flat.float()) if comm.rank == root else torch.empty(fmt.nbytes, dtype=torch.uint8,
                                                                              device=comm.device)
    _watch(watch, payload)
    if fmt.nbytes:
        c.run(comm, payload, root, **opts)
    if comm.rank == root:
        return flat.view(x.shape)
    return fmt.decode(payload).reshape(-1).to(x.dtype).view(x.shape)


def sendrecv(comm: Comm, x: torch.Tensor, *, algorithm: str = "ring", codec: Codec | str | None = None,
             check: bool = True, watch: Watch = None, **options: int) -> torch.Tensor:
    """Rank r-1's x (each rank sends x to r+1), nccl-tests' sendrecv. With a codec: encoded once, decoded once."""
    x, codec = _tensor("sendrecv", x, False), _codec(codec)
    _check_codec("sendrecv", codec)
    c, opts = _algorithm("sendrecv", algorithm, options)
    _same(comm, check, "sendrecv", tuple(x.shape), str(x.dtype), algorithm, codec.describe() if codec else None,
          tuple(sorted(opts.items())))
    flat = x.detach().reshape(-1).to(comm.device).contiguous()
    if codec is None:
        out = torch.empty_like(flat)
        _watch(watch, out)
        if flat.numel():
            c.run(comm, flat, out, **opts)
        return out.view(x.shape)
    fmt = WireFormat.of(codec, flat.numel(), torch.float32)
    got = torch.empty(fmt.nbytes, dtype=torch.uint8, device=comm.device)
    _watch(watch, got)
    if fmt.nbytes:
        c.run(comm, fmt.encode(flat.float()), got, **opts)
    return fmt.decode(got).reshape(-1).to(x.dtype).view(x.shape)


def resolve_mode(op: str, codec: Codec | None, mode: str, algorithm: str) -> str:
    """'raw' without a codec, else 'requantize' (decode-add-encode per hop) or 'oneshot' (each block
    encoded once at its source: reduce_scatter's 'direct'); ValueError naming what is allowed."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed: {', '.join(MODES)}")
    if codec is None:
        return "raw"
    _check_codec(op, codec)
    if algorithm == ONESHOT and op == "reduce_scatter":
        if mode == "requantize":
            raise ValueError(f"reduce_scatter algorithm {ONESHOT!r} crosses one hop: each block is encoded once "
                             "(mode 'oneshot' or 'auto'); requantize runs on "
                             + ", ".join(a for a in collective_names(op) if a != ONESHOT))
        return "oneshot"
    if mode == "oneshot":
        raise ValueError(f"mode='oneshot' (each block encoded once at its source, qgZ) runs on {op} algorithm "
                         + (f"{ONESHOT!r}" if op == "reduce_scatter" else "none: reduce has no one-hop form")
                         + f"; {algorithm!r} re-encodes partial sums (mode 'requantize')")
    if not codec.requantize:
        alt = f"; or algorithm {ONESHOT!r} (each block encoded once, qgZ's one-shot)" if op == "reduce_scatter" else ""
        raise ValueError(f"codec {codec.name!r} cannot be re-encoded at every hop (sparse or sign payloads), which "
                         f"{op} algorithm {algorithm!r} needs; allowed: a codec that requantizes (e.g. fp16, bf16, "
                         f"dynamic_tree, mxfp8_e4m3, int8){alt}")
    return "requantize"


def reduce_scatter(comm: Comm, x: torch.Tensor, *, algorithm: str = "ring", codec: Codec | str | None = None,
                   mode: str = "auto", accumulate: str = "fp32", check: bool = True, watch: Watch = None,
                   **options: int) -> torch.Tensor:
    """Shard r (dim 0 cut into P equal parts) of the sum over ranks of x, in x's dtype, summed in
    `accumulate`. With a codec: mode 'requantize' (per hop) or, on algorithm 'direct', 'oneshot'."""
    x, codec = _tensor("reduce_scatter", x, True), _codec(codec)
    c, opts = _algorithm("reduce_scatter", algorithm, options)
    dt = _accumulate(accumulate)
    how = resolve_mode("reduce_scatter", codec, mode, algorithm)
    P, r = comm.size, comm.rank
    rows = _shards("reduce_scatter", x, P)
    _same(comm, check, "reduce_scatter", tuple(x.shape), algorithm, codec.describe() if codec else None, how,
          accumulate, tuple(sorted(opts.items())))
    blocks = x.detach().reshape(P, -1).to(device=comm.device, dtype=dt, copy=True)
    _watch(watch, blocks)
    if blocks.shape[1]:
        c.run(comm, blocks, Wire(comm, codec, dt), **opts)
    return blocks[r].to(x.dtype).view((rows, *x.shape[1:]) if x.dim() else ())


def reduce(comm: Comm, x: torch.Tensor, *, root: int = 0, algorithm: str = "binomial",
           codec: Codec | str | None = None, mode: str = "auto", accumulate: str = "fp32", check: bool = True,
           watch: Watch = None, **options: int) -> torch.Tensor | None:
    """The sum over ranks of x at the root (None on the other ranks), summed in `accumulate`; with a
    codec the partial sums are re-encoded at every hop."""
    x, codec = _tensor("reduce", x, True), _codec(codec)
    c, opts = _algorithm("reduce", algorithm, options)
    dt = _accumulate(accumulate)
    _check_root(root, comm.size)
    how = resolve_mode("reduce", codec, mode, algorithm)
    _same(comm, check, "reduce", tuple(x.shape), root, algorithm, codec.describe() if codec else None, how,
          accumulate, tuple(sorted(opts.items())))
    buf = x.detach().reshape(-1).to(device=comm.device, dtype=dt, copy=True)
    _watch(watch, buf)
    if buf.numel():
        c.run(comm, buf, Wire(comm, codec, dt), root, **opts)
    return buf.to(x.dtype).view(x.shape) if comm.rank == root else None


def call(op: str, comm: Comm, x: torch.Tensor, **kwargs: Any) -> torch.Tensor | None:
    """The op by name (`OPS`): all_reduce goes to `lab.comm.allreduce.allreduce`."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; allowed: {', '.join(OPS)}")
    if op == "all_reduce":
        from ..allreduce import allreduce
        return allreduce(comm, x, **kwargs)
    return _FUNCS[op](comm, x, **kwargs)


_FUNCS = {"all_gather": all_gather, "reduce_scatter": reduce_scatter, "alltoall": alltoall, "broadcast": broadcast,
          "reduce": reduce, "sendrecv": sendrecv}

__all__ = ["all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", "call", "resolve_mode",
           "MODES", "ACCUMULATE"]
