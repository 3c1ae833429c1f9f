"""Codecs on FSDP2's own collectives: `FSDPModule.set_custom_all_gather` / `set_custom_reduce_scatter`.

FSDP2 (torch.distributed.fsdp.fully_shard) all-gathers each parameter group's flat shard before
forward and backward, and reduce-scatters its flat gradient after backward; both go through a
`Comm` object (`_fsdp_api.AllGather` / `ReduceScatter`: `allocate`, then `__call__(output, input,
group, [op,] async_op)`). The two classes here are such objects:

  - `CodecAllGather` (qwZ, ZeRO++ §3.1): every rank encodes its shard once, the packed payloads
    (`lab.codecs.wire.WireFormat`, one uint8 row per rank) are all-gathered with the group's own
    `all_gather_into_tensor`, and every rank decodes all P rows, its own included, so every rank
    computes with the same weights. No re-quantisation. Asked for an async all-gather (FSDP2
    prefetching, `FSDPSettings.overlap`), it encodes, starts the transfer and returns a `Work` whose
    `wait()` decodes: the rows travel while FSDP2 computes the unit before.
  - `CodecReduceScatter` (qgZ's one-shot form, ZeRO++ §3.3): every rank encodes the P chunks of its
    gradient (chunk j goes to rank j), the payloads move with one `all_to_all_single`, and each rank
    decodes the P payloads of its chunk and sums them in fp32 in rank order, in FSDP2's output
    buffer (AVG divides by P).
    Error feedback (an `ef:` spec) keeps one residual per (parameter group, chunk).

With no codec each calls the group's own `all_gather_into_tensor` / `reduce_scatter_tensor` on the
tensors FSDP handed it, unchanged (bit-identical to plain FSDP2).

Either may instead run a registered algorithm of `lab.comm.collectives` (`algorithm=`, any plugin of
that op: ring, recursive_doubling, bruck, pat, ..., or one installed through `paralab.collectives`):
the same collective, written once against `Comm`, over point-to-point messages among the group's
ranks. The all-gather then moves the rows (raw, or the codec's packed payloads) through that
algorithm; the reduce-scatter sums through it, a codec re-encoded at every hop ('requantize') or, on
'direct', encoded once at its source ('oneshot'), as `lab.comm.collectives.reduce_scatter` does.

Either way `WireCounter` records, per call, the bytes this rank passed to the process group for other
ranks (the payload tensors' own sizes: (P-1) rows of an all-gather, the P-1 foreign slots of an
all-to-all or reduce-scatter; with a registered algorithm, what its messages carried),
beside the bytes the uncompressed collective would have passed for the same tensors, keyed by the
phase the training loop set (forward, backward, eval) and the group's ranks.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from lab.codecs import Codec, parse_spec
from lab.codecs.registry import codec_info, split_spec
from lab.codecs.wire import WireFormat
from lab.comm import collectives as coll
from lab.comm.base import Comm
from lab.comm.dist import TorchComm
from lab.comm.spans import span

from .torch_fsdp_private import AllGather, ReduceScatter

OPS = ("all_gather", "reduce_scatter")
NO_CODEC = (None, "", "none", "fp32")
#: the algorithm name of the process group's own collective (all_gather_into_tensor, reduce_scatter_tensor)
NATIVE = "native"
#: the option that picks each op's algorithm, for messages
_OPTION = {"all_gather": "--all-gather", "reduce_scatter": "--reduce-scatter"}
#: the dtypes a registered reduce-scatter sums in without a codec (the input's, as NCCL does)
_ACCUMULATE = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def check_codec(spec: str | None, op: str) -> Codec | None:
    """The codec a spec names for FSDP's `op` ('all_gather': weights, 'reduce_scatter': gradients),
    or None; ValueError naming what may ride that op otherwise."""
    if spec in NO_CODEC:
        return None
    if op not in OPS:
        raise ValueError(f"op={op!r}; allowed: {', '.join(OPS)}")
    if not isinstance(spec, str):
        raise ValueError(f"codec {spec!r}; allowed: a codec spec string, e.g. mxfp8_e4m3")
    ef, name, _ = split_spec(spec)
    info = codec_info(name)
    if op == "all_gather":
        ok = allowed_codecs("all_gather")
        if info.phased or info.gradient_only:
            raise ValueError(f"--weights-codec {spec!r}: {name} is a gradient compressor ("
                             f"{'its own summing collective' if info.phased else 'it drops or signs values'}), "
                             f"it cannot carry weights on an all-gather; allowed: {', '.join(ok)}")
        if ef:
            raise ValueError(f"--weights-codec {spec!r}: error feedback is for gradients; weights are re-sent "
                             f"whole every step: drop 'ef:'")
    elif info.phased:
        raise ValueError(f"--grads-codec {spec!r}: {name} runs its own all-reduce of low-rank factors and cannot "
                         f"ride a reduce-scatter; allowed: {', '.join(allowed_codecs('reduce_scatter'))}")
    return parse_spec(spec)


def algorithm_names(op: str) -> list[str]:
    """The algorithms FSDP's `op` may run: 'native' (the process group's own), then every registered
    `lab.comm.collectives` plugin of that op (read from the registry now)."""
    return [NATIVE, *coll.collective_names(op)]


def check_algorithm(op: str, name: str | None, codec_spec: str | None = None) -> str:
    """The algorithm FSDP's `op` runs ('native' for None), checked against the registry and, for the
    reduce-scatter, against the gradient codec (a registered one re-encodes partial sums, or encodes
    each block once on 'direct'); ValueError naming what is allowed."""
    if op not in OPS:
        raise ValueError(f"op={op!r}; allowed: {', '.join(OPS)}")
    if name is None or name == NATIVE:
        return NATIVE
    names = algorithm_names(op)
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"{_OPTION[op]} {name!r}; allowed: {', '.join(names)}")
    codec = check_codec(codec_spec, op)
    if op == "reduce_scatter" and codec is not None:
        try:
            coll.resolve_mode("reduce_scatter", codec, "auto", name)
        except ValueError as e:
            raise ValueError(f"--grads-codec {codec_spec!r} with {_OPTION[op]} {name}: {e}") from None
    return name


def allowed_codecs(op: str) -> list[str]:
    """The registered codecs that can ride FSDP's `op` (read from the registry now)."""
    from lab.codecs.registry import codec_infos

    if op == "all_gather":
        return [i.name for i in codec_infos() if not (i.phased or i.gradient_only)]
    return [i.name for i in codec_infos() if not i.phased]


def group_ranks(group: dist.ProcessGroup) -> tuple[int, ...]:
    """The global ranks of a process group."""
    return tuple(dist.get_process_group_ranks(group))


@dataclass
class WireCounter:
    """Bytes this rank passed to process groups, per (op, phase, group ranks): `sent` what went
    for other ranks, `raw` what the uncompressed collective would have passed, `cross` the part of
    `sent` for ranks on other nodes (ranks_per_node contiguous ranks a node); `calls` how many."""

    phase: str = "forward"
    ranks_per_node: int = 1
    sent: dict = field(default_factory=lambda: defaultdict(int))
    raw: dict = field(default_factory=lambda: defaultdict(int))
    cross: dict = field(default_factory=lambda: defaultdict(int))
    calls: dict = field(default_factory=lambda: defaultdict(int))

    def add(self, op: str, group: dist.ProcessGroup, sent: int, raw: int) -> None:
        """One call's bytes: `sent` for the group's other ranks, in equal parts (all-gather rows,
        all-to-all slots); the part for ranks of other nodes (rank // ranks_per_node) is `cross`."""
        ranks = group_ranks(group)
        key = (op, self.phase, ranks)
        me = dist.get_rank() // self.ranks_per_node
        away = sum(1 for r in ranks if r // self.ranks_per_node != me)
        self.sent[key] += int(sent)
        self.raw[key] += int(raw)
        self.cross[key] += int(sent) * away // max(len(ranks) - 1, 1)
        self.calls[key] += 1

    def totals(self, phases: Sequence[str] = ("forward", "backward")) -> dict[str, dict[str, int]]:
        """{collective: {"sent", "raw", "cross" (bytes), "calls": n}} over `phases`, collectives named
        all_gather_forward, all_gather_backward, reduce_scatter."""
        out: dict[str, dict[str, int]] = {}
        for (op, phase, _), b in self.sent.items():
            if phase not in phases:
                continue
            name = f"all_gather_{phase}" if op == "all_gather" else op
            d = out.setdefault(name, {"sent": 0, "raw": 0, "cross": 0, "calls": 0})
            d["sent"] += b
            d["raw"] += self.raw[(op, phase, _)]
            d["cross"] += self.cross[(op, phase, _)]
            d["calls"] += self.calls[(op, phase, _)]
        return out

    def by_group(self) -> list[dict]:
        """One row per (op, phase, group): the group's ranks, calls and bytes."""
        return [dict(op=op, phase=phase, ranks=list(ranks), calls=self.calls[(op, phase, ranks)],
                     sent=b, raw=self.raw[(op, phase, ranks)], cross_node=self.cross[(op, phase, ranks)])
                for (op, phase, ranks), b in sorted(self.sent.items())]


class _Finish(dist.Work):
    """An all-gather in flight, as FSDP2 waits on it (`foreach_all_gather_copy_out` calls `wait()` on a
    `Work`): waits for the transfer (a recv-wait range), then runs `then` (the decode of every row)."""

    def __init__(self, work: dist.Work | None, then: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.work, self.then = work, then

    def wait(self, timeout: Any = None) -> bool:
        if self.work is not None:
            with span("recv-wait"):
                self.work.wait()
            self.work = None
        if self.then is not None:
            then, self.then = self.then, None
            then()
        return True


class _Alloc:
    def allocate(self, size: Sequence[int], *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)


class CodecAllGather(_Alloc, AllGather):
    """FSDP2's all-gather with `codec` on the wire (None: the group's own all_gather_into_tensor).
    full_groups_only: compress only all-gathers over a group of `full` ranks (hpZ: the backward
    all-gather of the secondary partition inside a node carries the already decoded weights as
    they are, as ZeRO++ keeps its secondary copy in full precision)."""

    def __init__(self, codec: Codec | None, counter: WireCounter, full: int | None = None, *,
                 algorithm: str = NATIVE, comm: Comm | None = None) -> None:
        self.codec, self.counter, self.full = codec, counter, full
        self.algorithm, self.comm = check_algorithm("all_gather", algorithm), comm

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 async_op: bool = False) -> dist.Work | None:
        P = group.size()
        raw = input_tensor.numel() * input_tensor.element_size() * (P - 1)
        codec = self.codec
        if codec is None or not input_tensor.is_floating_point() or (self.full is not None and P != self.full):
            if self.algorithm != NATIVE:
                self.counter.add("all_gather", group, self._gather(output_tensor, input_tensor, group), raw)
                return _Finish(None) if async_op else None
            self.counter.add("all_gather", group, raw, raw)
            if async_op:
                return _Finish(dist.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=True))
            with span("recv-wait"):
                return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group)
        n = input_tensor.numel()
        fmt = WireFormat.of(codec, n, input_tensor.dtype)
        with span("encode"):
            row = fmt.pack(codec.encode(input_tensor))
        rows = torch.empty(P * fmt.nbytes, dtype=torch.uint8, device=row.device)

        def decode() -> None:
            out = output_tensor.view(P, n)
            with span("decode"):
                for r, buf in enumerate(rows.view(P, fmt.nbytes)):
                    codec.decode_into(fmt.unpack(buf), out[r])

        if self.algorithm != NATIVE:  # the registered algorithm moves the payloads; decoded when FSDP2 waits
            self.counter.add("all_gather", group, self._gather(rows, row, group), raw)
            if async_op:
                return _Finish(None, decode)
            decode()
            return None
        self.counter.add("all_gather", group, row.numel() * (P - 1), raw)
        if async_op:  # FSDP2 prefetches: the rows travel while it computes; decoded when it waits
            return _Finish(dist.all_gather_into_tensor(rows, row, group=group, async_op=True), decode)
        with span("recv-wait"):
            dist.all_gather_into_tensor(rows, row, group=group)
        decode()
        return None

    def _gather(self, output: torch.Tensor, row: torch.Tensor, group: dist.ProcessGroup) -> int:
        """output = every rank's row in rank order, through the registered algorithm; the bytes this
        rank sent."""
        comm = _group_comm(self, group)
        before = comm.bytes_sent
        full = coll.all_gather(comm, row, algorithm=self.algorithm, check=False)
        output.view(-1).copy_(full.view(-1))
        return comm.bytes_sent - before


class CodecReduceScatter(_Alloc, ReduceScatter):
    """FSDP2's reduce-scatter with `codec` on the wire, one-shot through all-to-all (None: the
    group's own reduce_scatter_tensor). `name`: the parameter group's name (error-feedback keys)."""

    def __init__(self, codec: Codec | None, counter: WireCounter, name: str = "group", *,
                 algorithm: str = NATIVE, comm: Comm | None = None) -> None:
        self.codec, self.counter, self.name = codec, counter, name
        self.algorithm, self.comm = check_algorithm("reduce_scatter", algorithm), comm
        if self.algorithm != NATIVE and codec is not None:  # its codec rules (ValueError naming what is allowed)
            coll.resolve_mode("reduce_scatter", codec, "auto", self.algorithm)

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 op: object, async_op: bool = False) -> dist.Work | None:
        P = group.size()
        n = output_tensor.numel()
        raw = n * input_tensor.element_size() * (P - 1)
        codec = self.codec
        if self.algorithm != NATIVE:
            self._scatter(output_tensor, input_tensor, group, op, raw)
            return _Finish(None) if async_op else None
        if codec is None:
            self.counter.add("reduce_scatter", group, raw, raw)
            with span("recv-wait"):
                return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=group, async_op=async_op)
        if op not in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            raise ValueError(f"a codec's reduce-scatter sums or averages; FSDP asked for {op}")
        fmt = WireFormat.of(codec, n, input_tensor.dtype)
        with span("encode"):
            send = torch.cat([fmt.pack(codec.encode_as(chunk, f"{self.name}/{j}"))
                              for j, chunk in enumerate(input_tensor.view(P, n))])
        recv = torch.empty_like(send)
        with span("recv-wait"):
            dist.all_to_all_single(recv, send, group=group)
        self.counter.add("reduce_scatter", group, fmt.nbytes * (P - 1), raw)
        direct = output_tensor.dtype == torch.float32 and output_tensor.is_contiguous()
        acc = output_tensor.view(-1) if direct else torch.empty(n, dtype=torch.float32, device=output_tensor.device)
        part = torch.empty(n, dtype=input_tensor.dtype, device=output_tensor.device)
        for r, buf in enumerate(recv.view(P, fmt.nbytes)):  # summed in rank order, in fp32, in place
            into = acc if r == 0 and input_tensor.dtype == torch.float32 else part
            with span("decode"):
                codec.payload_codec.decode_into(fmt.unpack(buf), into)
            if into is part:
                with span("add"):
                    if r == 0:
                        acc.copy_(part)
                    else:
                        acc.add_(part)
        if op == dist.ReduceOp.AVG:
            acc /= P
        if not direct:
            output_tensor.copy_(acc.view_as(output_tensor))
        return None

    def _scatter(self, output: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup, op: object,
                 raw: int) -> None:
        """output = this rank's block of the sum (AVG: the mean) through the registered algorithm: raw
        in the input's dtype, or with the codec on its wire (summed in fp32)."""
        if op not in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            raise ValueError(f"{_OPTION['reduce_scatter']} {self.algorithm} sums or averages; FSDP asked for {op}")
        P = group.size()
        comm = _group_comm(self, group)
        before = comm.bytes_sent
        accumulate = "fp32" if self.codec is not None else _ACCUMULATE.get(inp.dtype, "fp32")
        mine = coll.reduce_scatter(comm, inp.reshape(P, -1), algorithm=self.algorithm, codec=self.codec,
                                   accumulate=accumulate, check=False)
        if op == dist.ReduceOp.AVG:
            mine = mine / P
        output.copy_(mine.view_as(output))
        self.counter.add("reduce_scatter", group, comm.bytes_sent - before, raw)


def _group_comm(hook: "CodecAllGather | CodecReduceScatter", group: dist.ProcessGroup) -> Comm:
    """The `Comm` of the group's ranks (global ranks, in the group's order) that a registered algorithm
    runs on: a view of the hook's comm (this process's TorchComm by default)."""
    if hook.comm is None:
        hook.comm = TorchComm()
    return hook.comm.group(group_ranks(group))


__all__ = ["CodecAllGather", "CodecReduceScatter", "WireCounter", "check_codec", "check_algorithm", "algorithm_names",
           "allowed_codecs", "group_ranks", "OPS", "NO_CODEC", "NATIVE"]
