"""The wire of a collective: raw fp32 segments, or codec payloads re-encoded at each hop.

Algorithms move *payloads* (what crosses the link) and keep fp32 accumulators locally:
  raw:        the payload is the fp32 segment itself; nothing is approximated.
  requantize: a partial sum is encoded before each send; the receiver decodes and adds
              (decode-add-encode at every hop: error compounds with the hop count). A fully
              reduced piece is encoded once by its owner, who keeps the decoded value, and is
              forwarded unchanged, so every rank ends with the same numbers.
Gather mode (sparse and sign codecs) does not use a Channel: see `allreduce.py`.
Empty segments are never sent: both ends know the lengths, and Gloo rejects zero-size traffic.
Long segments travel as chunks (`Channel.chunks`: at most `CHUNK` values, and at least `PIECES` of
them once a segment holds `PIECES` x `MIN_CHUNK` values), so an algorithm can decode/add/encode one
chunk while the previous one is on the wire (the ring does); `overlap(False)` turns that off (each
chunk's transfer is waited for before the next chunk's codec work starts, the same messages and
the same numbers: the baseline the benchmark times beside it). Payload buffers of a codec, those
received and those sent, are kept on the comm and reused call after call (`Channel.buffer(...,
slot=)`, and `encode`/`reduce`/`finalize` with a slot write the payload into one in place,
`WireFormat.encode_into`/`hop_into`): no allocation per hop.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import torch

from lab.codecs.base import Codec
from lab.codecs.hop import decode_sum, hop_mixed
from lab.codecs.wire import WireFormat

from .base import Batch, Comm
from .pieces import pieces
from .spans import span

#: values per pipelined message: 4 MB of fp32, 1 MB of 8-bit codes; a chunk's codec work then
#: overlaps the next chunk's transfer while per-message overhead (~0.1-1 ms here) stays small
CHUNK = 1 << 20
#: a segment of at least PIECES * MIN_CHUNK values goes as >= PIECES chunks, so its codec work overlaps
#: the wire at moderate sizes too; smaller chunks would pay more per-message overhead than they hide
PIECES = 4
MIN_CHUNK = 1 << 17
_overlap = [True]


@contextlib.contextmanager
def overlap(on: bool) -> Iterator[None]:
    """Within the block, chunks are pipelined (True: one chunk's codec work runs while another is
    on the wire) or not (False: each transfer completes before the next codec work starts; the
    same messages and results). Every rank should choose the same."""
    before = _overlap[0]
    _overlap[0] = bool(on)
    try:
        yield
    finally:
        _overlap[0] = before


def overlapping() -> bool:
    """Whether chunks are pipelined now (`overlap`)."""
    return _overlap[0]


def chunk_count(n: int) -> int:
    """Messages for a segment of n values (the same on every rank for the same n)."""
    if n <= 0:
        return 1
    return max(-(-n // CHUNK), min(PIECES, n // MIN_CHUNK), 1)


class Channel:
    """Send/receive/reduce of fp32 segments over `comm`, through `codec` when one is given."""

    def __init__(self, comm: Comm, codec: Codec | None = None, *, scratch: int = 0,
                 options: dict | None = None) -> None:
        self.comm, self.codec = comm, codec
        #: the algorithm's own options, checked and completed by its `configure` (allreduce.py)
        self.options: dict = dict(options or {})
        self._scratch = None
        if codec is None and scratch:
            # kept on the comm: fresh multi-MB buffers per call would cost page faults every time
            held = comm.channel_scratch
            if held is None or held.numel() < scratch or held.device != comm.device:
                held = comm.channel_scratch = torch.empty(scratch, dtype=torch.float32, device=comm.device)
            self._scratch = held

    def chunks(self, seg: torch.Tensor) -> list[torch.Tensor]:
        """`seg` cut into `chunk_count` near-equal pieces; every rank cuts a segment of the same
        length the same way."""
        return pieces(seg, chunk_count(seg.numel()))

    # -- payloads
    def nbytes(self, n: int) -> int:
        """Wire bytes of a payload for n values."""
        return 4 * n if self.codec is None else self._fmt(n).nbytes

    def _fmt(self, n: int) -> WireFormat:
        assert self.codec is not None
        return WireFormat.of(self.codec, n, torch.float32)

    def encode(self, seg: torch.Tensor, slot: object = None) -> torch.Tensor:
        """The payload of `seg` (raw: `seg` itself, so do not modify it before the send completes).
        With a `slot` (as `buffer`'s: the algorithm knows that slot's last send has completed), it is
        written into that reused buffer: no allocation per hop."""
        if self.codec is None or seg.numel() == 0:
            return seg
        with span("encode"):
            fmt = self._fmt(seg.numel())
            if slot is None:
                return fmt.encode(seg)
            return fmt.encode_into(seg, self.buffer(seg.numel(), slot=("send", slot)))

    def decoded(self, payload: torch.Tensor, n: int) -> torch.Tensor:
        if self.codec is None or n == 0:
            return payload
        with span("decode"):
            return self._fmt(n).decode(payload).float()

    def decode_into(self, payload: torch.Tensor, seg: torch.Tensor) -> None:
        """seg = decode(payload), written in place (no temporary for codecs with a fused path)."""
        if payload is seg or not seg.numel() or (self.codec is None and payload.data_ptr() == seg.data_ptr()
                                                 and payload.shape == seg.shape and payload.stride() == seg.stride()):
            return  # raw, landed in place (the same memory, perhaps through another view)
        with span("decode"):
            if self.codec is None:
                seg.copy_(payload)
            else:
                self.codec.decode_into(self._fmt(seg.numel()).unpack(payload), seg)

    def add_into(self, payload: torch.Tensor, acc: torch.Tensor) -> None:
        """acc += decode(payload); a codec payload is decoded into a float32 buffer kept on the comm
        (one per length: the adds of a rank run one after another on it), not a fresh one."""
        n = acc.numel()
        if not n:
            return
        with span("add"):
            if self.codec is None:
                acc.add_(payload)
                return
            tmp = self._decoded_scratch(n, acc.device)
            self.codec.decode_into(self._fmt(n).unpack(payload), tmp)
            acc.add_(tmp)

    def _decoded_scratch(self, n: int, device: torch.device) -> torch.Tensor:
        """A float32 buffer of n values kept on the comm, for a decoded payload that is used at once
        (one per length: a rank's hops and adds run one after another on it)."""
        pool = payload_pool(self.comm)
        tmp = pool.get(("decoded", n))
        if tmp is None or tmp.device != device:
            tmp = pool[("decoded", n)] = torch.empty(n, dtype=torch.float32, device=device)
        return tmp

    def decode_sum(self, payloads: Sequence[torch.Tensor], seg: torch.Tensor) -> None:
        """seg = the fp32 sum of the decoded payloads, in list order (an owner's reduction; the
        codec's fused `decode_sum` where it has one). Raw: the payloads are fp32 segments."""
        if not seg.numel():
            return
        with span("add"):
            if self.codec is None:
                seg.copy_(payloads[0])
                for p in payloads[1:]:
                    seg.add_(p)
                return
            fmt = self._fmt(seg.numel())
            seg.copy_(decode_sum(self.codec, [fmt.unpack(p) for p in payloads]).reshape(-1))

    def reduce(self, payload: torch.Tensor, local: torch.Tensor, slot: object = None) -> torch.Tensor:
        """One reduction hop: the payload of decode(payload) + local. Raw: adds into `local`.
        `slot`: the result goes into that reused send buffer (as `encode`)."""
        if self.codec is None or local.numel() == 0:
            with span("add"):
                local.add_(payload)
            return local
        with span("hop"):
            fmt = self._fmt(local.numel())
            if slot is None:
                return fmt.pack(hop_mixed(self.codec, fmt.unpack(payload), local))
            return fmt.hop_into(payload, local, self.buffer(local.numel(), slot=("send", slot)),
                                self._decoded_scratch(local.numel(), local.device))

    def finalize(self, acc: torch.Tensor, slot: object = None) -> torch.Tensor:
        """Encode a fully reduced piece once; the owner keeps the decoded value, like its receivers.
        `slot`: as `encode`."""
        payload = self.encode(acc, slot)
        self.decode_into(payload, acc)
        return payload

    # -- buffers and transfers (every transfer is a batch of `Comm.exchange`: NCCL-safe, base.py)
    def buffer(self, n: int, offset: int = 0, slot: object = None) -> torch.Tensor:
        """A buffer for the payload of n values: raw payloads in the scratch buffer at `offset` (or
        a fresh buffer), codec payloads in a byte buffer: with a `slot` (any hashable name the
        algorithm gives a buffer it knows is free again when it asks), the same buffer every
        time that slot and size are asked for on this comm; without one, a fresh buffer."""
        if self.codec is None:
            if self._scratch is not None and self._scratch.numel() >= offset + n:
                return self._scratch[offset:offset + n]
            return torch.empty(n, dtype=torch.float32, device=self.comm.device)
        return self.byte_buffer(self.nbytes(n), slot)

    def byte_buffer(self, nbytes: int, slot: object = None) -> torch.Tensor:
        """A uint8 buffer of `nbytes` (a message of several payloads): with a `slot`, kept on the comm
        as `buffer`'s; without one, a fresh buffer."""
        if slot is None:
            return torch.empty(nbytes, dtype=torch.uint8, device=self.comm.device)
        pool = payload_pool(self.comm)
        key = (slot, nbytes)
        buf = pool.get(key)
        if buf is None or buf.device != self.comm.device:
            buf = pool[key] = torch.empty(nbytes, dtype=torch.uint8, device=self.comm.device)
        return buf

    def final_buffer(self, seg: torch.Tensor, slot: object = None) -> torch.Tensor:
        """Where a final payload for `seg` lands (raw: `seg` itself); `decode_into(payload, seg)`
        completes it once received. `slot`: as `buffer`."""
        return seg if self.codec is None else self.buffer(seg.numel(), slot=slot)

    def post(self, sends: Sequence[tuple[torch.Tensor, int]] = (),
             recvs: Sequence[tuple[torch.Tensor, int]] = ()) -> Batch:
        """One batch of sends (payload, dst) and receives (buffer, src); empty payloads are skipped."""
        return self.comm.exchange(sends, recvs)

    def send(self, payload: torch.Tensor, dst: int) -> None:
        self.comm.exchange([(payload, dst)]).wait()

    def recv(self, n: int, src: int, slot: object = None) -> torch.Tensor:
        """Receive the payload of n values from `src` into a scratch, kept (`slot`, as `buffer`'s) or
        fresh buffer."""
        buf = self.buffer(n, slot=slot)
        self.comm.exchange(recvs=[(buf, src)]).wait()
        return buf

    def recv_into(self, seg: torch.Tensor, src: int, slot: object = None) -> torch.Tensor:
        """Receive a final payload from `src` (into the kept buffer `slot`, when given), decode it
        into `seg`, return the payload."""
        payload = self.final_buffer(seg, slot=slot)
        self.comm.exchange(recvs=[(payload, src)]).wait()
        self.decode_into(payload, seg)
        return payload

    def exchange(self, payload: torch.Tensor, peer: int, n: int, slot: object = None) -> torch.Tensor:
        """Swap payloads with `peer` in one batch; the received payload of n values (in the kept
        buffer `slot`, when given)."""
        got = self.buffer(n, slot=slot)
        self.comm.exchange([(payload, peer)], [(got, peer)]).wait()
        return got


#: payload buffers kept per comm (`Channel.buffer` slots, sent and received); bounded: a ring names
#: 5 per chunk of a segment (3 receive banks, 2 send banks): 1024 entries keep a 200-chunk segment
_POOL_LIMIT = 1024


def payload_pool(comm: Comm) -> dict:
    """The comm's reusable payload buffers, {(slot, nbytes): uint8 tensor; ("decoded", n): float32
    scratch} (emptied when it grows past `_POOL_LIMIT` entries, e.g. after many different sizes)."""
    pool = comm.__dict__.setdefault("_channel_payloads", {})
    if len(pool) > _POOL_LIMIT:
        pool.clear()
    return pool
