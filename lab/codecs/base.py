"""The Codec interface and the Encoded payload (docs/design.md "Core interfaces"); the bottom of
lab/codecs: it imports no other module of the package (the registry, wire format and hops build on it).

A codec turns a tensor into an `Encoded` payload that knows its wire size, and back into a
tensor of the input's dtype and shape. Codecs are stateless; error feedback wraps them.
Rules every codec keeps at the edges (docs/codecs.md, tests/test_codec_edges.py): NaN/Inf is a
ValueError unless nonfinite='saturate'; all-zero in, all-zero out; an empty tensor costs 0 wire
bytes; meta tensors are a ValueError; never NaN/Inf from finite input (unscaled formats saturate
and count it in meta['saturated']).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: the NaN/Inf policies every codec takes (its `nonfinite` option)
NONFINITE = ("raise", "saturate")


def check_nonfinite(policy: str) -> str:
    """The NaN/Inf policy of every codec: 'raise' (ValueError) or 'saturate' (clamp)."""
    if policy not in NONFINITE:
        raise ValueError(f"nonfinite={policy!r}; allowed: 'raise', 'saturate'")
    return policy


@dataclass(frozen=True)
class Field:
    """One tensor of a codec's payload, declared by the codec (`Codec.layout(n)`).

    name: the key in `Encoded.tensors`; dtype and shape: the tensor as it sits in memory for a
    payload of n values; packed_bits > 0: uint8 codes (one per value) that travel packed to that
    many bits (bit planes of ceil(count/8) bytes); wire=False: not sent, the receiver rebuilds it
    as ones (the all-ones scale of a table with scale='none').
    """

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    packed_bits: int = 0
    wire: bool = True

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes this field takes on the wire."""
        if not self.wire:
            return 0
        if self.packed_bits:
            return self.packed_bits * ((self.numel + 7) // 8)
        return self.numel * torch.empty((), dtype=self.dtype).element_size()


Layout = tuple[Field, ...]


def check_layout(layout: Layout, tensors: dict[str, torch.Tensor], codec: str = "codec") -> None:
    """`tensors` are exactly the declared fields, each of its declared dtype and shape (ValueError
    naming the field otherwise)."""
    names = [f.name for f in layout]
    if sorted(names) != sorted(tensors):
        raise ValueError(f"{codec} payload holds fields {sorted(tensors)}, its layout declares {names}")
    for f in layout:
        t = tensors[f.name]
        if t.dtype != f.dtype or tuple(t.shape) != f.shape:
            raise ValueError(f"{codec} payload field {f.name!r} is {t.dtype} of shape {tuple(t.shape)}, "
                             f"its layout declares {f.dtype} of shape {f.shape}")


@dataclass
class Encoded:
    """A compressed tensor.

    `tensors` hold the payload as it sits in memory; `wire_bytes` is what a link would carry
    (codes packed to their bit width plus side information such as scales). `layout`: the
    codec's declared fields (`Codec.layout(n)`); when given, the tensors are checked against it.
    """

    codec: str
    shape: torch.Size
    dtype: torch.dtype
    tensors: dict[str, torch.Tensor]
    wire_bytes: int
    meta: dict[str, Any] = field(default_factory=dict)
    layout: Optional[Layout] = None

    def __post_init__(self) -> None:
        if self.layout is not None:
            check_layout(self.layout, self.tensors, self.codec)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def bits_per_value(self) -> float:
        """Wire bits per input value (side information included)."""
        return 8.0 * self.wire_bytes / self.numel if self.numel else 0.0

    @property
    def device(self) -> torch.device:
        return next(iter(self.tensors.values())).device


class Codec:
    """Encode a tensor to an `Encoded` payload and decode it back.

    `summable`: payloads of several workers can be added on the wire (allreduce);
    otherwise a collective must gather and decode them (allgather).
    `requantize`: the codec codes every value with its own scale, so a collective may decode a
    partial sum, add and re-encode it at every hop (ring, tree); sparse and sign codecs gather.
    """

    name: ClassVar[str] = "codec"
    summable: ClassVar[bool] = False
    requantize: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False

    def encode(self, x: torch.Tensor) -> Encoded:
        raise NotImplementedError

    def decode(self, enc: Encoded) -> torch.Tensor:
        """A new tensor of enc.dtype and enc.shape (codecs that implement `_decode_flat` need
        nothing more; the others override this)."""
        out = torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
        if not self._decode_flat(enc, out.view(-1)):
            raise NotImplementedError(f"{type(self).__name__} implements neither decode nor _decode_flat")
        return out

    def encode_into(self, x: torch.Tensor, out: dict[str, torch.Tensor]) -> Encoded | None:
        """`encode(x)` written into the payload fields `out` (views into a reused wire buffer,
        `WireFormat.encode_into`), bit for bit `encode`; None where the codec has no such path (the
        default: the caller encodes, then copies)."""
        return None

    def decode_into(self, enc: Encoded, out: torch.Tensor) -> torch.Tensor:
        """decode(enc) written into an existing tensor `out` (as many values as the payload, of
        its dtype, on its device; any shape and strides) and returned: for buffers that already
        exist, such as a gradient or an allreduce segment. Codecs with a fused path (`_decode_flat`)
        write a contiguous `out` directly: no temporary, and on a CPU no page faults of a fresh output."""
        check_out(enc, out)
        if not (out.is_contiguous() and self._decode_flat(enc, out.view(-1))):
            out.copy_(self.decode(enc).view(out.shape))
        return out

    def _decode_flat(self, enc: Encoded, flat: torch.Tensor) -> bool:
        """Decode into the contiguous 1-D `flat` (enc's dtype, device and length); False when the
        codec has no such path (the default)."""
        return False

    # -- streams with memory (error feedback) and the wire: every codec answers these the same way

    #: True for codecs with per-key memory (error feedback): a collective cannot re-encode their sums
    stateful: ClassVar[bool] = False

    def encode_as(self, x: torch.Tensor, key: str) -> Encoded:
        """encode(x) as the next step of the stream `key` (a parameter or bucket name); a codec with
        memory compensates x with that stream's residual, a stateless codec ignores the key."""
        return self.encode(x)

    #: fp32 allreduces of the codec's own collective (PowerSGD: 2, P then Q); 0: collectives move its payloads
    phases: ClassVar[int] = 0

    def reduce_phased(self, xs: "list[torch.Tensor]", keys: "list[str]", allreduce: Any,
                      ranks: int) -> "list[torch.Tensor]":
        """A codec with `phases` > 0 runs its collective itself: the sums over `ranks` ranks of the
        tensors xs (streams `keys`), through `allreduce(t)`, an fp32 sum of a flat tensor over the
        ranks (lab/comm/allreduce.py and lab/train/ddp_hook.py both call this)."""
        raise NotImplementedError(f"codec {self.name!r} has no collective of its own; collectives move its payloads")

    @property
    def payload_codec(self) -> "Codec":
        """The codec whose payloads this one writes and reads (itself; memory wrappers: the inner one)."""
        return self

    def layout(self, n: int) -> Layout:
        """The payload's fields for n values (every codec in the library declares its own).
        Default, for plugin codecs that declare none: what encoding n zeros with a copy of the
        codec produces, every field sent as it sits in memory."""
        import copy
        probe = copy.deepcopy(self).encode(torch.zeros(n))
        return tuple(Field(k, t.dtype, tuple(t.shape)) for k, t in sorted(probe.tensors.items()))

    def wire_meta(self, n: int) -> dict[str, Any]:
        """The `Encoded.meta` a receiver needs to decode a payload of n values (block size, k, ...)."""
        return {}

    def payload(self, x: torch.Tensor, tensors: dict[str, torch.Tensor], wire_bytes: int,
                 meta: dict[str, Any] | None = None) -> Encoded:
        """An `Encoded` of x's shape and dtype, its tensors checked against `layout(x.numel())`."""
        return Encoded(self.name, torch.Size(x.shape), x.dtype, tensors, wire_bytes, meta or {},
                       self.layout(x.numel()))

    def roundtrip(self, x: torch.Tensor) -> torch.Tensor:
        """decode(encode(x))."""
        return self.decode(self.encode(x))

    def describe(self) -> str:
        """One line for tables and legends."""
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


def check_out(enc: Encoded, out: torch.Tensor) -> None:
    """`out` can hold decode(enc): a tensor of the payload's length, dtype and device."""
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.numel() != enc.numel:
        raise ValueError(f"out holds {out.numel()} values, the payload {enc.numel} (shape {tuple(enc.shape)})")
    if out.dtype != enc.dtype:
        raise ValueError(f"out is {out.dtype}, the payload decodes to {enc.dtype}")
    if enc.numel and out.device != enc.device:
        raise ValueError(f"out is on {out.device}, the payload on {enc.device}")


def check_seed(seed: int) -> int:
    """Validate a seed: an int in 0..2**63-1."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed={seed!r}; allowed: an int in 0..2**63-1")
    return seed


class SeededGenerator:
    """Mixin for stochastic codecs: one torch.Generator per device, seeded from `self.seed`."""

    seed: int
    _gen: torch.Generator | None = None

    def generator(self, device: torch.device) -> torch.Generator:
        """The codec's generator on `device` (re-seeded from `seed` if the device changes)."""
        if self._gen is None or self._gen.device.type != device.type or (
            device.index is not None and self._gen.device.index != device.index
        ):
            self._gen = torch.Generator(device=device)
            self._gen.manual_seed(self.seed)
        return self._gen


def check_input(x: torch.Tensor, *, nonfinite: str = "raise") -> torch.Tensor:
    """Validate a codec input: a floating tensor (fp32/fp16/bf16), finite unless told to saturate.

    nonfinite='raise' raises ValueError with the count and first index of NaN/Inf values;
    'saturate' maps NaN to 0 and ±Inf to ± the largest finite magnitude.
    Returns a contiguous flat view (a copy only when the input was not contiguous).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"codec input must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"codec input dtype {x.dtype} is not supported; allowed: float32, float16, bfloat16")
    check_nonfinite(nonfinite)
    if x.is_meta:
        raise ValueError("meta tensors are not supported: a codec reads the values; "
                         "pass a CPU or CUDA tensor")
    return x.contiguous().view(-1)


def nonfinite_error(flat: torch.Tensor) -> ValueError:
    """The error for an input holding NaN or Inf: how many and where the first is."""
    bad = ~torch.isfinite(flat)
    count = int(bad.sum())
    first = int(bad.nonzero()[0, 0])
    return ValueError(
        f"input holds {count} non-finite value(s) (NaN or Inf), the first at flat index {first} "
        f"(value {flat[first].item()}); pass nonfinite='saturate' to clamp them instead"
    )


def saturate_nonfinite(flat: torch.Tensor) -> torch.Tensor:
    """NaN -> 0, ±Inf -> ± the largest finite magnitude."""
    finite = torch.isfinite(flat)
    big = flat[finite].abs().max() if bool(finite.any()) else flat.new_zeros(())
    big = float(big)
    return torch.nan_to_num(flat, nan=0.0, posinf=big, neginf=-big)


def all_finite(flat: torch.Tensor) -> bool:
    """No NaN or Inf: one reduction pass (min and max propagate NaN), no Boolean temporary."""
    lo, hi = torch.aminmax(flat)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def prepare(x: torch.Tensor, nonfinite: str) -> torch.Tensor:
    """check_input + the NaN/Inf policy, for codecs that do not fuse the check into their kernel."""
    flat = check_input(x, nonfinite=nonfinite)
    if flat.numel() and not all_finite(flat):
        if nonfinite == "raise":
            raise nonfinite_error(flat)
        flat = saturate_nonfinite(flat)
    return flat


def finite_or_saturated(flat: torch.Tensor, nonfinite: str) -> tuple[torch.Tensor, float]:
    """The NaN/Inf policy on a flat input, and its absmax, from one min/max pass (one sync)."""
    if not flat.numel():
        return flat, 0.0
    lo, hi = (float(v) for v in torch.aminmax(flat))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        if nonfinite == "raise":
            raise nonfinite_error(flat)
        flat = saturate_nonfinite(flat)
        lo, hi = (float(v) for v in torch.aminmax(flat))
    return flat, max(-lo, hi)


def saturating_cast(flat: torch.Tensor, dtype: torch.dtype, absmax: float) -> tuple[torch.Tensor, int]:
    """flat cast to the float `dtype`, values beyond its largest finite value saturated to it
    (the out-of-range rule of the unscaled codecs); returns (values, how many saturated).
    absmax: max |flat| (from `finite_or_saturated`), so the count costs a pass only when needed."""
    if dtype == flat.dtype:
        return flat.clone(), 0
    big = torch.finfo(dtype).max
    if absmax <= big:
        return flat.to(dtype), 0
    count = int((flat.abs() > big).sum())
    return flat.float().clamp(-big, big).to(dtype), count


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack unsigned codes (< 2**bits) into bytes as `bits` bit planes of ceil(n/8) bytes each
    (value i of a plane at bit i % 8 of byte i // 8)."""
    if not 1 <= bits <= 8:
        raise ValueError(f"bits={bits}; allowed 1..8")
    n = codes.numel()
    pad = (-n) % 8
    c = codes.reshape(-1)
    zero_one = c.dtype == torch.bool
    c = c.view(torch.uint8) if zero_one else c.to(torch.uint8)
    if pad:
        c = torch.cat([c, c.new_zeros(pad)])
    if bits == 1:
        planes = [_bits_of_bytes(c if zero_one else c & 1)]
    else:
        planes = [_bits_of_bytes((c >> b) & 1) for b in range(bits)]
    return torch.cat(planes) if len(planes) > 1 else planes[0]


def _bits_of_bytes(p: torch.Tensor) -> torch.Tensor:
    """uint8 values 0/1 (a multiple of 8 of them) -> one byte per 8, value j at bit j.

    Eight 0/1 bytes read as one little-endian int64 hold value j at bit 8j; or-ing the word with
    itself shifted right by 7, 14 and 28 gathers bits 0, 8, ..., 56 into the low byte (one
    pass over n/8 words instead of a sum over a trailing dimension of 8)."""
    p = p.contiguous()
    if sys.byteorder != "little" or p.data_ptr() % 8:
        weights = 1 << torch.arange(8, device=p.device, dtype=torch.uint8)
        return (p.view(-1, 8) * weights).sum(1, dtype=torch.uint8)
    v = p.view(torch.int64)  # non-negative: every byte is 0 or 1
    v = v | (v >> 7)
    v = v | (v >> 14)
    v = v | (v >> 28)
    return (v & 0xFF).to(torch.uint8)


def unpack_bits(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """Inverse of `pack_bits`: uint8 codes of length n."""
    nbytes = (n + 7) // 8
    shifts = torch.arange(8, device=packed.device, dtype=torch.uint8)
    out = None
    for b in range(bits):
        plane = (packed[b * nbytes:(b + 1) * nbytes, None] >> shifts) & 1
        out = plane if out is None else out.bitwise_or_(plane << b)
    if out is None:
        return torch.zeros(n, dtype=torch.uint8, device=packed.device)
    return out.view(-1)[:n]


def packed_bytes(n: int, bits: float) -> int:
    """Bytes of n values at `bits` bits each, packed."""
    return math.ceil(n * bits / 8)
