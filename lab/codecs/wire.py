"""Codec payloads on the wire: one `Encoded` as one contiguous uint8 buffer, and back.

A receiver must post a buffer of the right size before the bytes arrive, so the layout of a
payload (its fields, dtypes and sizes) has to follow from (codec, n, dtype) alone. Every codec
in the library has fixed-size payloads for a given length; `WireFormat.of` learns the layout
once by encoding zeros with a copy of the codec (the real codec's random state is untouched)
and caches it; how each field travels is the codec's own answer (`Codec.wire_field`): codes of
tables narrower than 8 bits travel packed to their bit width (bit planes of ceil(n/8) bytes, so
up to a few bytes over `Encoded.wire_bytes`); the all-ones scale of a table with scale='none'
is not sent. A codec with memory (error feedback) writes its inner codec's payloads.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch

from .base import Codec, Encoded, pack_bits, unpack_bits

_CACHE: dict[tuple[int, int, torch.dtype, str], "WireFormat"] = {}


@dataclass(frozen=True)
class Field:
    key: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    nbytes: int
    packed_bits: int = 0  # > 0: uint8 codes packed to this many bits
    implied: bool = False  # not sent: a scale of ones (tables with scale='none')


@dataclass(frozen=True)
class WireFormat:
    """The byte layout of `codec`'s payload for n values of `dtype`."""

    codec: Codec
    n: int
    dtype: torch.dtype
    fields: tuple[Field, ...]
    meta: dict[str, Any]
    nbytes: int

    @staticmethod
    def of(codec: Codec, n: int, dtype: torch.dtype = torch.float32,
           device: torch.device | str = "cpu") -> "WireFormat":
        codec = codec.payload_codec
        device = torch.device(device)
        key = (id(codec), n, dtype, device.type)
        fmt = _CACHE.get(key)
        if fmt is None or fmt.codec is not codec:
            fmt = _CACHE[key] = _learn(codec, n, dtype, device)
        return fmt

    def pack(self, enc: Encoded) -> torch.Tensor:
        """The payload as one uint8 tensor of `nbytes` bytes."""
        parts = []
        for f in self.fields:
            if f.implied:
                continue
            t = enc.tensors[f.key]
            if f.packed_bits:
                t = pack_bits(t, f.packed_bits)
            t = t.contiguous().reshape(-1).view(torch.uint8)
            if t.numel() != f.nbytes:
                raise ValueError(f"payload field {f.key!r} has {t.numel()} bytes, its wire format {f.nbytes}: "
                                 f"the codec's payload size changed with the data")
            parts.append(t)
        if not parts:
            return torch.zeros(0, dtype=torch.uint8)
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def unpack(self, buf: torch.Tensor) -> Encoded:
        """The `Encoded` held in `buf` (views into it where the layout allows)."""
        if buf.numel() != self.nbytes:
            raise ValueError(f"wire buffer has {buf.numel()} bytes, the format {self.nbytes}")
        tensors, off = {}, 0
        for f in self.fields:
            if f.implied:
                tensors[f.key] = torch.ones(f.shape, dtype=f.dtype, device=buf.device)
                continue
            raw = buf[off:off + f.nbytes]
            off += f.nbytes
            if f.packed_bits:
                tensors[f.key] = unpack_bits(raw, f.packed_bits, math.prod(f.shape)).view(f.shape)
            else:
                tensors[f.key] = _view(raw, f.dtype, f.shape)
        return Encoded(self.codec.name, torch.Size([self.n]), self.dtype, tensors, self.nbytes, dict(self.meta))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.pack(self.codec.encode(x))

    def decode(self, buf: torch.Tensor) -> torch.Tensor:
        return self.codec.decode(self.unpack(buf))


def _view(raw: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    if raw.data_ptr() % size:
        raw = raw.clone()
    return raw.view(dtype).view(shape)


def _learn(codec: Codec, n: int, dtype: torch.dtype, device: torch.device) -> WireFormat:
    probe = copy.deepcopy(codec).encode(torch.zeros(n, dtype=dtype, device=device))
    fields = []
    for key in sorted(probe.tensors):
        t = probe.tensors[key]
        packed, implied = codec.wire_field(key, t, n)
        if implied:
            fields.append(Field(key, t.dtype, tuple(t.shape), 0, implied=True))
            continue
        nbytes = pack_bits(t, packed).numel() if packed else t.numel() * t.element_size()
        fields.append(Field(key, t.dtype, tuple(t.shape), nbytes, packed))
    return WireFormat(codec, n, dtype, tuple(fields), dict(probe.meta), sum(f.nbytes for f in fields))
