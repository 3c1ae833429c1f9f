"""Codec payloads on the wire: one `Encoded` as one contiguous uint8 buffer, and back.

A receiver must post a buffer of the right size before the bytes arrive, so the layout of a
payload (its fields, dtypes and sizes) has to follow from (codec, n) alone: it is the codec's
declaration `Codec.layout(n)` (`base.Field`: name, dtype, shape, packed_bits, wire), read here
with no knowledge of any codec's field names. Fields travel in declared order; a field with
packed_bits travels as that many bit planes of ceil(count/8) bytes (so up to a few bytes over
`Encoded.wire_bytes`); a field with wire=False is not sent and is rebuilt as ones. The meta a
decoder needs comes from `Codec.wire_meta(n)`. A codec with memory (error feedback) writes its
inner codec's payloads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .base import Codec, Encoded, Field, Layout, pack_bits, unpack_bits

__all__ = ["Field", "WireFormat"]

_CACHE: dict[tuple[int, int, torch.dtype], "WireFormat"] = {}


@dataclass(frozen=True)
class WireFormat:
    """The byte layout of `codec`'s payload for n values of `dtype`."""

    codec: Codec
    n: int
    dtype: torch.dtype
    fields: Layout
    meta: dict[str, Any]
    nbytes: int

    @staticmethod
    def of(codec: Codec, n: int, dtype: torch.dtype = torch.float32,
           device: torch.device | str = "cpu") -> "WireFormat":
        """The format of `codec`'s payloads of n values (`device` is accepted for callers; the
        layout does not depend on it)."""
        codec = codec.payload_codec
        key = (id(codec), n, dtype)
        fmt = _CACHE.get(key)
        if fmt is None or fmt.codec is not codec:
            fields = tuple(codec.layout(n))
            fmt = _CACHE[key] = WireFormat(codec, n, dtype, fields, dict(codec.wire_meta(n)),
                                           sum(f.nbytes for f in fields))
        return fmt

    def _raw_fields(self, enc: Encoded):
        """(field, its bytes) of every wire field of enc, in order, each checked against the format."""
        for f in self.fields:
            if not f.wire:
                continue
            t = enc.tensors[f.name]
            if t.dtype != f.dtype or tuple(t.shape) != f.shape:
                raise ValueError(f"payload field {f.name!r} is {t.dtype} of shape {tuple(t.shape)}, its wire "
                                 f"format {f.dtype} of shape {f.shape}")
            if f.packed_bits:
                t = pack_bits(t, f.packed_bits)
            yield f, t.contiguous().reshape(-1).view(torch.uint8)

    def pack(self, enc: Encoded) -> torch.Tensor:
        """The payload as one uint8 tensor of `nbytes` bytes."""
        parts = [raw for _, raw in self._raw_fields(enc)]
        if not parts:
            return torch.zeros(0, dtype=torch.uint8)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def unpack(self, buf: torch.Tensor) -> Encoded:
        """The `Encoded` held in `buf` (views into it where the layout allows)."""
        if buf.numel() != self.nbytes:
            raise ValueError(f"wire buffer has {buf.numel()} bytes, the format {self.nbytes}")
        tensors, off = {}, 0
        for f in self.fields:
            if not f.wire:
                tensors[f.name] = torch.ones(f.shape, dtype=f.dtype, device=buf.device)
                continue
            raw = buf[off:off + f.nbytes]
            off += f.nbytes
            if f.packed_bits:
                tensors[f.name] = unpack_bits(raw, f.packed_bits, f.numel).view(f.shape)
            else:
                tensors[f.name] = _view(raw, f.dtype, f.shape)
        return Encoded(self.codec.name, torch.Size([self.n]), self.dtype, tensors, self.nbytes,
                       dict(self.meta), self.fields)

    def fields_in(self, buf: torch.Tensor) -> dict[str, torch.Tensor] | None:
        """Views of every field inside `buf` (nbytes uint8), where the payload sits in the buffer
        as in memory: no bit-packed or unsent field, each aligned for its dtype; None otherwise."""
        if buf.dtype != torch.uint8 or buf.dim() != 1 or buf.numel() != self.nbytes or not buf.is_contiguous():
            raise ValueError(f"wire buffer must be {self.nbytes} contiguous uint8 bytes, got {buf.dtype} "
                             f"of shape {tuple(buf.shape)}")
        views, off = {}, 0
        for f in self.fields:
            if f.packed_bits or not f.wire:
                return None
            raw = buf[off:off + f.nbytes]
            off += f.nbytes
            if raw.data_ptr() % torch.empty((), dtype=f.dtype).element_size():
                return None
            views[f.name] = raw.view(f.dtype).view(f.shape)
        return views

    def pack_into(self, enc: Encoded, buf: torch.Tensor) -> torch.Tensor:
        """`pack(enc)` written into `buf` (nbytes uint8); returns buf."""
        if buf.numel() != self.nbytes:
            raise ValueError(f"wire buffer has {buf.numel()} bytes, the format {self.nbytes}")
        off = 0
        for f, raw in self._raw_fields(enc):
            if raw.data_ptr() != buf[off:].data_ptr():  # already in place (written by encode_into)
                buf[off:off + f.nbytes].copy_(raw)
            off += f.nbytes
        return buf

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.pack(self.codec.encode(x))

    def encode_into(self, x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        """The payload of x written into `buf` (a reused nbytes uint8 buffer); returns buf. Codecs with
        an `encode_into(x, fields)` (table, MX and NVFP4 codecs on the CPU) write their fields in place, with no
        allocation of the payload's size; the others encode, then copy."""
        views = self.fields_in(buf)
        if views is not None and self.codec.encode_into(x, views) is not None:
            return buf
        return self.pack_into(self.codec.encode(x), buf)

    def hop_into(self, payload: torch.Tensor, x: torch.Tensor, buf: torch.Tensor,
                 scratch: torch.Tensor | None = None) -> torch.Tensor:
        """The payload of decode(payload) + x (one reduction hop, `hop.hop_mixed`) written into
        `buf`, a reused nbytes uint8 buffer that is not `payload`; returns buf. Table codecs on the
        CPU run it as one pass into buf. Other codecs on the CPU, given `scratch` (float32, n values,
        reused), decode into it, add x there and encode that (`encode_into`): the composition
        `hop.hop_mixed_reference` with no float32 temporaries."""
        from .hop import fusable, hop_mixed, hop_mixed_into
        if buf.data_ptr() == payload.data_ptr():
            raise ValueError("hop_into: the output buffer is the incoming payload; give it a buffer of its own")
        enc, views = self.unpack(payload), self.fields_in(buf)
        if views is not None and hop_mixed_into(self.codec, enc, x, views) is not None:
            return buf
        if (scratch is not None and not fusable(self.codec) and x.device.type == "cpu"
                and x.dtype == torch.float32 and enc.dtype == torch.float32):
            if scratch.dtype != torch.float32 or scratch.numel() != self.n:
                raise ValueError(f"hop_into: scratch must be {self.n} float32 values, got {scratch.dtype} "
                                 f"of {scratch.numel()}")
            self.codec.decode_into(enc, scratch)
            scratch.add_(x.reshape(-1))
            return self.encode_into(scratch, buf)
        return self.pack_into(hop_mixed(self.codec, enc, x), buf)

    def decode(self, buf: torch.Tensor) -> torch.Tensor:
        return self.codec.decode(self.unpack(buf))


def _view(raw: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    if raw.data_ptr() % size:
        raw = raw.clone()
    return raw.view(dtype).view(shape)
