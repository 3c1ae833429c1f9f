"""Tensors of any shape sent point to point through a codec: what pipeline stages, model-parallel shards and
experts send each other, on the same wire format the collectives use (`lab.codecs.wire.WireFormat`)."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from lab.codecs.base import Codec
from lab.comm.base import Batch, Comm, Work
from lab.comm.spans import span

NO_CODEC = (None, "", "none", "fp32")


def activation_codec(spec: str | None, carries: str = "activations") -> Codec | None:
    """The codec `spec` names for values that are new every step (activations and their gradients), or None
    for fp32; ValueError (one line, what is allowed) for a gradient compressor or error feedback."""
    if spec in NO_CODEC:
        return None
    from lab.codecs.registry import codec_infos, codec_info, parse_spec, split_spec

    if not isinstance(spec, str):
        raise ValueError(f"--codec {spec!r}; allowed: a codec spec string, e.g. dynamic_tree")
    ef, name, _ = split_spec(spec)
    info = codec_info(name)
    allowed = ", ".join(i.name for i in codec_infos() if not (i.phased or i.gradient_only))
    if info.phased or info.gradient_only:
        kind = "it runs its own all-reduce of low-rank factors" if info.phased else "it drops or signs values"
        raise ValueError(f"--codec {spec!r}: {name} is a gradient compressor ({kind}); it cannot carry {carries}; "
                         f"allowed: {allowed}")
    if ef:
        raise ValueError(f"--codec {spec!r}: error feedback is for gradients summed step after step; {carries} are "
                         "new every step: drop 'ef:'")
    return parse_spec(spec)


class Wire:
    """Point-to-point sends of fp32 tensors over `comm`, encoded by `codec` (None: raw fp32). Counts what
    went out (`comm.bytes_sent`, as every transfer) and `fp32_bytes`, what the same messages weigh in fp32."""

    def __init__(self, comm: Comm, codec: Codec | None) -> None:
        self.comm, self.codec = comm, codec
        self.fp32_bytes = 0

    def _fmt(self, n: int):
        from lab.codecs.wire import WireFormat

        return WireFormat.of(self.codec, n, torch.float32)

    def isend(self, x: torch.Tensor, dst: int) -> Work:
        """Start sending x (encoded once) to `dst`; the payload stays alive until the Work is waited for."""
        work, _ = self.exchange([(x, dst)])
        work.payload = work.payloads[0]  # type: ignore[attr-defined]
        return work

    def irecv(self, shape: tuple[int, ...], src: int) -> tuple[Work, Callable[[], torch.Tensor]]:
        """Start receiving a tensor of `shape` from `src`: (the Work, a function that returns the decoded
        fp32 tensor once the Work is done)."""
        work, gets = self.exchange(recvs=[(shape, src)])
        return work, gets[0]

    def exchange(self, sends: Sequence[tuple[torch.Tensor, int]] = (),
                 recvs: Sequence[tuple[tuple[int, ...], int]] = ()) -> tuple[Batch, list[Callable[[], torch.Tensor]]]:
        """One batch of `Comm.exchange` (posted together: no order of posting deadlocks on NCCL): send each
        (x, dst), encoded once, and receive each (shape, src). Returns the Batch (`.sends[i]` / `.recvs[i]` each
        operation's Work, `.payloads[i]` what the i-th send put on the wire, alive until waited for) and, per
        receive, a function that returns the decoded fp32 tensor once its Work is done."""
        payloads = [self._encode(x) for x, _ in sends]
        bufs = [self._buffer(shape) for shape, _ in recvs]
        batch = self.comm.exchange([(p, dst) for p, (_, dst) in zip(payloads, sends)],
                                   [(b, src) for (b, _), (_, src) in zip(bufs, recvs)])
        batch.payloads = payloads  # type: ignore[attr-defined]
        return batch, [get for _, get in bufs]

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        x = x.detach().float().contiguous().reshape(-1)
        self.fp32_bytes += 4 * x.numel()
        if self.codec is None or not x.numel():
            return x
        with span("encode"):
            return self._fmt(x.numel()).encode(x)

    def _buffer(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, Callable[[], torch.Tensor]]:
        """A receive buffer for a tensor of `shape` and the function that decodes it."""
        n = 1
        for s in shape:
            n *= int(s)
        if self.codec is None or not n:
            buf = torch.empty(n, dtype=torch.float32, device=self.comm.device)
            return buf, lambda: buf.view(shape)
        fmt = self._fmt(n)
        buf = torch.empty(fmt.nbytes, dtype=torch.uint8, device=self.comm.device)

        def decoded() -> torch.Tensor:
            with span("decode"):
                return fmt.decode(buf).float().view(shape)
        return buf, decoded

    def send(self, x: torch.Tensor, dst: int) -> None:
        self.isend(x, dst).wait()

    def recv(self, shape: tuple[int, ...], src: int) -> torch.Tensor:
        work, get = self.irecv(shape, src)
        work.wait()
        return get()


__all__ = ["Wire", "activation_codec", "NO_CODEC"]
