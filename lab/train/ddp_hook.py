"""Any codec as a PyTorch DDP communication hook (`ddp.register_comm_hook(state, codec_hook)`).

The contract of `torch.nn.parallel.DistributedDataParallel.register_comm_hook`: the hook gets a
`GradBucket` of un-averaged gradients and returns a Future holding the bucket's averaged
gradient. Here, per bucket:
  - the first `start_iter` iterations run a plain fp32 all_reduce (a warm-up);
  - gradients with fewer than `min_numel` values (biases) travel uncompressed in one fp32
    all_reduce;
  - the others are encoded tensor by tensor (per-tensor absmax, as Dettmers 2016 does per
    matrix). Summable codecs (fp16/bf16 casts, random-k with the same seed on every rank) are
    fed the gradient pre-divided by P; the floating-point fields of their payloads (values) are
    concatenated and all_reduced in their own dtype, like torch's fp16_compress_hook, and the
    other fields (random-k's index seed) must agree across ranks (checked with one small
    all_reduce, MAX of (v, -v)). All other payloads are packed into one uint8 row per rank
    (`WireFormat.of`) and all_gathered, and every rank decodes the P rows;
  - with error feedback the residual of each tensor lives in the state, keyed by its
    parameter (its name, or "param<n>" in order of first sight), not by bucket: DDP rebuilds its buckets
    after the first iteration, and a residual must follow its parameter into the new bucket;
  - a codec with its own collective (`Codec.phases`, PowerSGD) gets g/P and runs its fp32
    all_reduces itself (`Codec.reduce_phased`: the uncompressed tensors, P, then Q);
  - the result is divided by P inside the hook.
`state.bytes_sent` counts what this rank put on the wire, with the ring algorithms' volumes
that Gloo and NCCL use: all_reduce 2(P-1)/P·m, all_gather (P-1)·q.

`algorithm=` (a registered allreduce algorithm of `lab.comm.algorithms`, plugins included, or
'native'; None, the default, is all of the above, unchanged): every sum of the hook runs through
`lab.comm.allreduce` on the default process group (`lab.comm.dist.TorchComm`) with that algorithm
and its `algorithm_options`, the codec riding the algorithm's own wire (re-quantised per hop or
gathered, as `allreduce` resolves the mode), tensor by tensor, fed g/P; the warm-up, small tensors
and a phased codec's fp32 sums go through the same algorithm uncompressed. `bytes_sent` then counts
what the comm sent.
"""
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.distributed as dist

from lab.codecs import Codec, ErrorFeedback, parse_spec
from lab.codecs.hop import decode_sum
from lab.codecs.wire import WireFormat
from lab.comm.spans import span

Future = torch.futures.Future


@dataclass
class CodecHookState:
    """What the hook keeps between calls: the codec (with its residuals), counters and knobs."""

    codec: Codec
    process_group: dist.ProcessGroup | None = None
    start_iter: int = 2
    min_numel: int = 1024
    iteration: int = 0
    bytes_sent: int = 0
    fp32_bytes: int = 0
    compressed_buckets: int = 0
    compressed_bytes: int = 0  # bytes_sent and fp32_bytes of the compressed steps only (after warm-up)
    compressed_fp32_bytes: int = 0
    algorithm: str | None = None
    algorithm_options: dict[str, Any] = field(default_factory=dict)
    _param_keys: dict[int, str] = field(default_factory=dict, repr=False)
    _comm: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.codec, Codec):
            raise ValueError(f"CodecHookState needs a Codec, got {type(self.codec).__name__}")
        if isinstance(self.start_iter, bool) or not isinstance(self.start_iter, int) or self.start_iter < 0:
            raise ValueError(f"start_iter={self.start_iter!r}; it must be an int >= 0 (iterations of plain "
                             "fp32 all_reduce before the codec takes over)")
        if self.codec.payload_codec.phases and self.codec is not self.codec.payload_codec:
            raise ValueError(f"{self.codec.describe()}: {self.codec.payload_codec.name} runs its own collective with "
                             "its own error feedback (its option error_feedback); use it without ef: / error feedback")
        if isinstance(self.min_numel, bool) or not isinstance(self.min_numel, int) or self.min_numel < 0:
            raise ValueError(f"min_numel={self.min_numel!r}; it must be >= 0")
        if self.algorithm is not None:
            from lab.comm.allreduce import check_algorithm

            if not isinstance(self.algorithm, str):
                raise ValueError(f"algorithm={self.algorithm!r}; give a registered algorithm's name, or None for "
                                 "torch.distributed's own all_reduce / all_gather")
            check_algorithm(self.algorithm)
            if self.process_group is not None:
                raise ValueError(f"algorithm={self.algorithm!r} runs on the default process group "
                                 "(lab.comm.dist.TorchComm); leave process_group None, or algorithm None")
        elif self.algorithm_options:
            raise ValueError("algorithm_options need an algorithm (algorithm=...)")
        if not isinstance(self.algorithm_options, dict):
            raise ValueError(f"algorithm_options must be a dict of the algorithm's options, got "
                             f"{type(self.algorithm_options).__name__}")

    def comm(self):
        """The `lab.comm` Comm the algorithm runs on (this process's rank of the default group), made once."""
        if self._comm is None:
            from lab.comm.dist import TorchComm

            self._comm = TorchComm()
        return self._comm

    @classmethod
    def of(cls, codec, error_feedback: bool = False, model: torch.nn.Module | None = None,
           **kw) -> "CodecHookState":
        """A state for `codec` (a Codec or a spec string), wrapped in error feedback if asked;
        with `model`, residuals are keyed by its parameter names ("0.weight")."""
        c = parse_spec(codec) if isinstance(codec, str) else codec
        state = cls(ErrorFeedback(c) if error_feedback and not c.stateful else c, **kw)
        if model is not None:
            state._param_keys.update((id(p), name) for name, p in model.named_parameters())
        return state

    @property
    def world_size(self) -> int:
        return dist.get_world_size(self.process_group)

    def key(self, param: torch.Tensor) -> str:
        """The error-feedback key of a parameter: its name in the model given to `of`, else
        "param<n>", n in order of first sight (the same on every rank, and the same whichever
        bucket DDP puts the parameter in)."""
        k = self._param_keys.get(id(param))
        if k is None:
            k = self._param_keys[id(param)] = f"param{len(self._param_keys)}"
        return k


def _ring_allreduce_bytes(nbytes: int, P: int) -> int:
    return 2 * (P - 1) * nbytes // P


def _allreduce(state: CodecHookState, t: torch.Tensor) -> Future:
    P = state.world_size
    state.fp32_bytes += _ring_allreduce_bytes(t.numel() * 4, P)
    if state.algorithm is not None:
        return _done([_through(state, t)])
    state.bytes_sent += _ring_allreduce_bytes(t.numel() * t.element_size(), P)
    return dist.all_reduce(t, group=state.process_group, async_op=True).get_future()


def _through(state: CodecHookState, t: torch.Tensor, codec: Codec | None = None, key: str = "default") -> torch.Tensor:
    """The sum over ranks of t by `state.algorithm` (`lab.comm.allreduce`), codec on its wire; bytes counted."""
    from lab.comm.allreduce import allreduce

    comm = state.comm()
    before = comm.bytes_sent
    out = allreduce(comm, t, algorithm=state.algorithm, codec=codec, key=key, check=False, **state.algorithm_options)
    state.bytes_sent += comm.bytes_sent - before
    return out


def _done(value: torch.Tensor) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


def codec_hook(state: CodecHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients averaged over ranks, through state.codec."""
    buf = bucket.buffer()
    P = state.world_size
    compress = state.iteration >= state.start_iter
    if bucket.is_last():
        state.iteration += 1
    if P == 1:
        return _done(buf)
    if not compress:
        return _allreduce(state, buf.div_(P)).then(lambda f: f.value()[0])
    state.compressed_buckets += 1
    before, before_fp32 = state.bytes_sent, state.fp32_bytes
    grads = bucket.gradients()
    keys = [state.key(p) for p in bucket.parameters()]
    small = [i for i, g in enumerate(grads) if g.numel() < state.min_numel]
    big = [i for i, g in enumerate(grads) if g.numel() >= state.min_numel]
    futures: list[Future] = []
    if small:
        flat = torch.cat([grads[i].reshape(-1) for i in small]).div_(P)
        futures.append(_allreduce(state, flat).then(lambda f: _split(f.value()[0], [grads[i] for i in small])))
    if big:
        futures.append(_compressed(state, [keys[i] for i in big], [grads[i] for i in big]))
    state.compressed_bytes += state.bytes_sent - before  # counted when issued
    state.compressed_fp32_bytes += state.fp32_bytes - before_fp32

    def assemble(fut: Future) -> torch.Tensor:
        for part, where in zip(fut.value(), [small, big] if small else [big]):
            for i, v in zip(where, part.value()):
                grads[i].copy_(v.view_as(grads[i]))
        return buf

    return torch.futures.collect_all(futures).then(assemble)


def algorithm_hook(state: CodecHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook without a codec: the bucket's fp32 gradients averaged over ranks by
    `state.algorithm` (a registered allreduce algorithm), every iteration; `state.codec` is not used."""
    buf = bucket.buffer()
    if bucket.is_last():
        state.iteration += 1
    if state.world_size == 1:
        return _done(buf)
    return _allreduce(state, buf.div_(state.world_size)).then(lambda f: f.value()[0])


def _split(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(flat.split([g.numel() for g in like]))


def _encode(state: CodecHookState, x: torch.Tensor, key: str):
    with span("encode"):
        return state.codec.encode_as(x, key)


def _compressed(state: CodecHookState, keys: list[str], grads: list[torch.Tensor]) -> Future:
    """Encode each gradient, then all_reduce (summable payloads) or all_gather (the rest)."""
    codec, P = state.codec, state.world_size
    inner = codec.payload_codec
    state.fp32_bytes += _ring_allreduce_bytes(sum(g.numel() for g in grads) * 4, P)
    if inner.phases:
        return _phased(state, inner, keys, grads)
    if state.algorithm is not None:  # the codec on the algorithm's wire, tensor by tensor, fed g/P
        return _done([_through(state, g.float().reshape(-1) / P, codec, k).reshape(-1) for g, k in zip(grads, keys)])
    if inner.summable:
        return _summed(state, inner, keys, grads)
    fmts = [WireFormat.of(codec, g.numel(), torch.float32) for g in grads]
    row = torch.cat([f.pack(_encode(state, g.float(), k)) for f, g, k in zip(fmts, grads, keys)])
    rows = [torch.empty_like(row) for _ in range(P)]
    state.bytes_sent += (P - 1) * row.numel()

    def decode(_: Future) -> list[torch.Tensor]:
        with span("add"):  # decode and add the P rows (on the thread that completes the gather)
            return _decode_rows()

    def _decode_rows() -> list[torch.Tensor]:
        out, off = [], 0
        for fmt in fmts:
            out.append(decode_sum(codec, [fmt.unpack(r[off:off + fmt.nbytes]) for r in rows]).reshape(-1).div_(P))
            off += fmt.nbytes
        return out

    return dist.all_gather(rows, row, group=state.process_group, async_op=True).get_future().then(decode)


def _phased(state: CodecHookState, codec: Codec, keys: list[str], grads: list[torch.Tensor]) -> Future:
    """A codec with its own collective (PowerSGD: P, then Q): it gets g/P, like the summable
    codecs, and sums through dist.all_reduce (uncompressed part, P, Q), so its result is the average."""
    P, group = state.world_size, state.process_group

    def allreduce(t: torch.Tensor) -> torch.Tensor:
        if state.algorithm is not None:
            return t.copy_(_through(state, t))
        state.bytes_sent += _ring_allreduce_bytes(t.numel() * t.element_size(), P)
        dist.all_reduce(t, group=group)
        return t

    # g/P in the bucket itself: the codec works there, like torch's powerSGD_hook (same alignment)
    out = codec.reduce_phased([g.div_(P) if g.dtype == torch.float32 else g.float() / P for g in grads],
                              keys, allreduce, P)
    return _done([o.reshape(-1) for o in out])


def _summed(state: CodecHookState, inner: Codec, keys: list[str], grads: list[torch.Tensor]) -> Future:
    """Summable payloads: encode g/P per tensor, all_reduce the floating-point fields of all of
    them as one tensor per field, check the other fields agree across ranks, decode each sum."""
    P, group = state.world_size, state.process_group
    encs = [_encode(state, g.float() / P, k) for g, k in zip(grads, keys)]
    names = list(encs[0].tensors)
    summed = [n for n in names if encs[0].tensors[n].is_floating_point()]
    fixed = [n for n in names if n not in summed]
    futures = []
    for n in summed:
        flat = torch.cat([e.tensors[n].reshape(-1) for e in encs])
        state.bytes_sent += _ring_allreduce_bytes(flat.numel() * flat.element_size(), P)
        futures.append(dist.all_reduce(flat, group=group, async_op=True).get_future())
    if fixed:  # must be equal on every rank: MAX of (v, -v) gives (max, -min)
        v = torch.cat([e.tensors[n].reshape(-1).to(torch.int64) for e in encs for n in fixed])
        both = torch.cat([v, -v])
        state.bytes_sent += _ring_allreduce_bytes(both.numel() * 8, P)
        futures.append(dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group, async_op=True).get_future())

    def decode(fut: Future) -> list[torch.Tensor]:
        results = [f.value()[0] for f in fut.value()]
        if fixed:
            both = results.pop()
            if not torch.equal(both[:v.numel()], v) or not torch.equal(-both[v.numel():], v):
                raise ValueError(f"{inner.describe()}: the payload fields {fixed} differ across ranks, so the "
                                 "payloads cannot be summed; build the codec with the same options (seed) on "
                                 "every rank and encode the same tensors in the same order")
        out = []
        parts = [flat.split([e.tensors[n].numel() for e in encs]) for n, flat in zip(summed, results)]
        for j, e in enumerate(encs):
            tensors = dict(e.tensors)
            for n, p in zip(summed, parts):
                tensors[n] = p[j].view_as(e.tensors[n])
            out.append(inner.decode(replace(e, tensors=tensors)).reshape(-1).float())
        return out

    return torch.futures.collect_all(futures).then(decode)


__all__ = ["CodecHookState", "codec_hook", "algorithm_hook"]
