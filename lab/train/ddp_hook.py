"""Any codec as a PyTorch DDP communication hook (`ddp.register_comm_hook(state, codec_hook)`).

The contract of `torch.nn.parallel.DistributedDataParallel.register_comm_hook`: the hook gets a
`GradBucket` of un-averaged gradients and returns a Future holding the bucket's averaged
gradient. Here, per bucket:
  - the first `start_iter` iterations run a plain fp32 all_reduce (DDP rebuilds its buckets
    after iteration 1, so residuals keyed by bucket index are only stable from then on);
  - gradients with fewer than `min_numel` values (biases) travel uncompressed in one fp32
    all_reduce;
  - the others are encoded tensor by tensor (per-tensor absmax, as Dettmers 2016 does per
    matrix). Summable payloads (fp16, bf16 casts) are pre-divided by P and all_reduced in their
    own dtype, like torch's fp16_compress_hook; all other payloads are packed into one uint8
    row per rank (`lab.comm.wire`) and all_gathered, and every rank decodes the P rows;
  - with error feedback the residual of each tensor lives in the state, keyed by
    "<bucket index>:<tensor index>";
  - the result is divided by P inside the hook.
`state.bytes_sent` counts what this rank put on the wire, with the ring algorithms' volumes
that Gloo and NCCL use: all_reduce 2(P-1)/P·m, all_gather (P-1)·q.
"""
from dataclasses import dataclass

import torch
import torch.distributed as dist

from lab.codecs.base import Codec, get_codec
from lab.codecs.error_feedback import ErrorFeedback
from lab.comm.wire import WireFormat

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

    def __post_init__(self) -> None:
        if not isinstance(self.codec, Codec):
            raise ValueError(f"CodecHookState needs a Codec, got {type(self.codec).__name__}")
        if isinstance(self.start_iter, bool) or not isinstance(self.start_iter, int) or self.start_iter < 0:
            raise ValueError(f"start_iter={self.start_iter!r}; it must be an int >= 0 (DDP rebuilds "
                             "buckets after iteration 1, so error feedback wants >= 2)")
        if isinstance(self.min_numel, bool) or not isinstance(self.min_numel, int) or self.min_numel < 0:
            raise ValueError(f"min_numel={self.min_numel!r}; it must be >= 0")

    @classmethod
    def of(cls, codec, error_feedback: bool = False, **kw) -> "CodecHookState":
        c = get_codec(codec) if isinstance(codec, str) else codec
        return cls(ErrorFeedback(c) if error_feedback and not isinstance(c, ErrorFeedback) else c, **kw)

    @property
    def world_size(self) -> int:
        return dist.get_world_size(self.process_group)


def _ring_allreduce_bytes(nbytes: int, P: int) -> int:
    return 2 * (P - 1) * nbytes // P


def _allreduce(state: CodecHookState, t: torch.Tensor) -> Future:
    P = state.world_size
    state.bytes_sent += _ring_allreduce_bytes(t.numel() * t.element_size(), P)
    state.fp32_bytes += _ring_allreduce_bytes(t.numel() * 4, P)
    return dist.all_reduce(t, group=state.process_group, async_op=True).get_future()


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
    grads = bucket.gradients()
    small = [i for i, g in enumerate(grads) if g.numel() < state.min_numel]
    big = [i for i, g in enumerate(grads) if g.numel() >= state.min_numel]
    futures: list[Future] = []
    if small:
        flat = torch.cat([grads[i].reshape(-1) for i in small]).div_(P)
        futures.append(_allreduce(state, flat).then(lambda f: _split(f.value()[0], [grads[i] for i in small])))
    if big:
        futures.append(_compressed(state, bucket.index(), [grads[i] for i in big]))

    def assemble(fut: Future) -> torch.Tensor:
        for part, where in zip(fut.value(), [small, big] if small else [big]):
            for i, v in zip(where, part.value()):
                grads[i].copy_(v.view_as(grads[i]))
        return buf

    return torch.futures.collect_all(futures).then(assemble)


def _split(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(flat.split([g.numel() for g in like]))


def _encode(state: CodecHookState, x: torch.Tensor, key: str):
    codec = state.codec
    return codec.encode(x, key) if isinstance(codec, ErrorFeedback) else codec.encode(x)


def _compressed(state: CodecHookState, index: int, grads: list[torch.Tensor]) -> Future:
    """Encode each gradient, then all_reduce (summable payloads) or all_gather (the rest)."""
    codec, P = state.codec, state.world_size
    inner = codec.codec if isinstance(codec, ErrorFeedback) else codec
    state.fp32_bytes += _ring_allreduce_bytes(sum(g.numel() for g in grads) * 4, P)
    if inner.summable:  # a cast: pre-divide, all_reduce in the narrow dtype, decode once
        enc = _encode(state, torch.cat([g.reshape(-1) for g in grads]).float().div_(P), f"{index}")
        (key, payload), = enc.tensors.items()
        state.bytes_sent += _ring_allreduce_bytes(payload.numel() * payload.element_size(), P)
        fut = dist.all_reduce(payload, group=state.process_group, async_op=True).get_future()
        return fut.then(lambda f: _split(inner.decode(enc).reshape(-1).float(), grads))
    fmts = [WireFormat.of(inner, g.numel(), torch.float32, g.device) for g in grads]
    row = torch.cat([f.pack(_encode(state, g.float(), f"{index}:{j}")) for j, (f, g) in enumerate(zip(fmts, grads))])
    rows = [torch.empty_like(row) for _ in range(P)]
    state.bytes_sent += (P - 1) * row.numel()

    def decode(_: Future) -> list[torch.Tensor]:
        from lab.comm.hop import decode_sum

        out, off = [], 0
        for fmt in fmts:
            out.append(decode_sum(inner, [fmt.unpack(r[off:off + fmt.nbytes]) for r in rows]).reshape(-1).div_(P))
            off += fmt.nbytes
        return out

    return dist.all_gather(rows, row, group=state.process_group, async_op=True).get_future().then(decode)


__all__ = ["CodecHookState", "codec_hook"]
