"""One reduction hop of a compressed allreduce, and the sum of gathered payloads.

Dettmers 2016 §3.2: the 8-bit kernel decodes what arrives, adds the local part and encodes
the sum for the next link; ring and tree allreduce do this at every hop. For any codec:
  hop_codes(codec, a, b)        = codec.encode(codec.decode(a).float() + codec.decode(b).float())
  hop_mixed(codec, a, x)        = codec.encode(codec.decode(a).float() + x)
  decode_sum(codec, payloads)   = 0 + decode(p_0).float() + decode(p_1).float() + ...  (in order)
These compositions are the reference (docs/design.md rule 2). For a `TableCodec` on fp32 data with
CUDA tensors they run fused in kernels/collective.cu (`cuda_hop`), bit for bit equal: the
sum is formed in fp32 as decode(a) + decode(b) in that order and encoded like the codec. A
non-finite sum (NaN or Inf in x, or an overflow) takes the composition, so the codec's
nonfinite policy ('raise' or 'saturate') applies unchanged. Results describe fp32 data.
"""
from __future__ import annotations

import torch

from .. import backend
from . import cpu
from .base import Codec, Encoded, packed_bytes
from .cuda import MAX_K
from .cuda_hop import decode_sum_cuda, hop_codes_cuda, hop_mixed_cuda
from .table_codec import SearchTables, TableCodec, inverse_overflows, search_tables_on

__all__ = ["hop_codes", "hop_mixed", "hop_mixed_into", "decode_sum", "fusable",
           "hop_codes_reference", "hop_mixed_reference", "decode_sum_reference"]


def fusable(codec: Codec) -> bool:
    """True when the hop runs as one fused kernel on CUDA: any `TableCodec` (table, rounding,
    scale, block size)."""
    return isinstance(codec, TableCodec)


# ------------------------------------------------------------------ reference (any codec)

def hop_codes_reference(codec: Codec, a: Encoded, b: Encoded) -> Encoded:
    """codec.encode(decode(a) + decode(b)), the sum in float32."""
    return codec.encode(codec.decode(a).float() + codec.decode(b).float())


def hop_mixed_reference(codec: Codec, a: Encoded, x: torch.Tensor) -> Encoded:
    """codec.encode(decode(a) + x), the sum in float32 (or x's dtype if wider)."""
    return codec.encode(codec.decode(a).float() + x)


def decode_sum_reference(codec: Codec, payloads: list[Encoded]) -> torch.Tensor:
    """float32: acc = 0; acc += decode(p).float() for p in order."""
    acc = torch.zeros(payloads[0].shape, dtype=torch.float32, device=payloads[0].device)
    part = torch.empty(payloads[0].shape, dtype=payloads[0].dtype, device=payloads[0].device)
    for p in payloads:
        acc.add_(codec.decode_into(p, part))  # in place: no fresh tensor per payload
    return acc


# ------------------------------------------------------------------ validation

def _check_payload(codec: Codec, enc: Encoded, name: str) -> None:
    if not isinstance(enc, Encoded):
        raise ValueError(f"{name} must be an Encoded payload, got {type(enc).__name__}")
    names = _names(codec)
    if enc.codec not in names:
        raise ValueError(f"{name} was encoded by codec {enc.codec!r}, not {' or '.join(map(repr, names))}")
    if not isinstance(codec, TableCodec):
        return
    for key in ("codes", "scales"):
        if key not in enc.tensors:
            raise ValueError(f"{name} has no {key!r} tensor; a table codec payload holds codes and scales")
    codes, scales = enc.tensors["codes"], enc.tensors["scales"]
    B = enc.meta.get("block_size")
    if B != codec.block_size:
        raise ValueError(f"{name} was encoded with block_size={B}, the codec has block_size={codec.block_size}")
    n = enc.numel
    if codes.numel() != n:
        raise ValueError(f"{name} holds {codes.numel()} codes for shape {tuple(enc.shape)} ({n} values)")
    if codes.dtype != torch.uint8 or scales.dtype != torch.float32:
        raise ValueError(f"{name} codes/scales have dtypes {codes.dtype}/{scales.dtype}; "
                         "a table codec writes uint8/float32")
    want = 0 if n == 0 else (1 if B is None else -(-n // B))
    if scales.numel() != want:
        raise ValueError(f"{name} holds {scales.numel()} scales; {n} values "
                         f"{'in one tensor' if B is None else f'in blocks of {B}'} need {want}")
    if scales.device != codes.device:
        raise ValueError(f"{name} codes are on {codes.device}, its scales on {scales.device}")


def _names(codec: Codec) -> list[str]:
    """The payload names `codec` decodes: its own, and a wrapped codec's (error feedback)."""
    names = [codec.name]
    inner = getattr(codec, "codec", None)
    while isinstance(inner, Codec) and len(names) < 8:
        names.append(inner.name)
        inner = getattr(inner, "codec", None)
    return names


def _check_same(a: Encoded, b: Encoded, an: str, bn: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{an} has shape {tuple(a.shape)}, {bn} {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"{an} is on {a.device}, {bn} on {b.device}")


def _fused(codec: Codec, *payloads: Encoded) -> bool:
    """Take the CUDA kernels: a table codec, fp32 payloads on CUDA, CuPy present, values to sum."""
    if not isinstance(codec, TableCodec) or not payloads[0].numel:
        return False
    if any(p.dtype != torch.float32 or p.device.type != backend.KERNEL_DEVICE_TYPE for p in payloads):
        return False
    if codec.search == "lut" and _tables(codec, payloads[0].device).K > MAX_K:
        return False  # the codec's own CUDA encoder rejects such a table too: let it say so
    return backend.kernels_available()


def _tables(codec: TableCodec, device: torch.device) -> SearchTables:
    return search_tables_on(codec.table, codec.rounding, codec.scale, device)


def _encoded(codec: TableCodec, shape: torch.Size, codes: torch.Tensor, scales: torch.Tensor) -> Encoded:
    """The payload codec.encode would return for float32 data of `shape` with these codes."""
    side = 0 if codec.scale == "none" else 4 * scales.numel()
    meta = {"block_size": codec.block_size}
    if codec.scale == "none":
        meta["saturated"] = 0  # `_take_reference` sends sums beyond the table's range to the composition
    return Encoded(codec.name, torch.Size(shape), torch.float32, {"codes": codes, "scales": scales},
                   packed_bytes(codes.numel(), codec.bits) + side, meta, codec.layout(codes.numel()))


def _take_reference(codec: TableCodec, absmax: torch.Tensor) -> bool:
    """The fused result is not the codec's: a non-finite sum (its nonfinite policy), or
    (scale='none') a sum beyond the table that saturates and must be counted. One sync, as
    codec.encode's own checks."""
    if not bool(torch.isfinite(absmax).all()):
        return True
    return codec.scale == "none" and absmax.numel() > 0 and float(absmax.max()) > codec.table.absmax


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(-1)


# ------------------------------------------------------------------ public

def hop_codes(codec: Codec, a: Encoded, b: Encoded) -> Encoded:
    """One reduction hop on two payloads: encode(decode(a) + decode(b)) (Dettmers 2016 §3.2 kernel).

    Equal to `hop_codes_reference` (bit for bit for table codecs on CUDA). a and b must come
    from `codec` with the same shape; the result describes float32 data of that shape. A codec
    with memory (error feedback) hops its inner codec's payloads (`payload_codec`).
    """
    codec = codec.payload_codec
    _check_payload(codec, a, "a")
    _check_payload(codec, b, "b")
    _check_same(a, b, "a", "b")
    if not _fused(codec, a, b):
        return hop_codes_reference(codec, a, b)
    p = _tables(codec, a.device)
    codes, scales, absmax = hop_codes_cuda(
        _flat(a.tensors["codes"]), _flat(a.tensors["scales"]), _flat(b.tensors["codes"]), _flat(b.tensors["scales"]),
        p.values256, p.bpad, p.lut, p.K, block_size=codec.block_size, scale=codec.scale,
        search=codec.search)
    if _take_reference(codec, absmax):
        return hop_codes_reference(codec, a, b)
    return _encoded(codec, a.shape, codes, scales)


def hop_mixed(codec: Codec, a: Encoded, x: torch.Tensor) -> Encoded:
    """One reduction hop on a payload and local data: encode(decode(a) + x) (Dettmers 2016 §3.2).

    x: a floating tensor of a's shape on a's device (float32 for the fused kernel). Equal to
    `hop_mixed_reference` (bit for bit for table codecs on CUDA). A codec with memory hops its
    inner codec's payloads (`payload_codec`).
    """
    codec = codec.payload_codec
    _check_payload(codec, a, "a")
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"x must be a floating tensor, got dtype {x.dtype}")
    if x.shape != a.shape:
        raise ValueError(f"x has shape {tuple(x.shape)}, the payload a {tuple(a.shape)}")
    if x.device != a.device:
        raise ValueError(f"x is on {x.device}, the payload a on {a.device}")
    if x.dtype != torch.float32 or not _fused(codec, a):
        fast = _hop_mixed_cpu(codec, a, x) if x.dtype == torch.float32 and x.device.type == "cpu" else None
        return fast if fast is not None else hop_mixed_reference(codec, a, x)
    p = _tables(codec, a.device)
    codes, scales, absmax = hop_mixed_cuda(
        _flat(a.tensors["codes"]), _flat(a.tensors["scales"]), _flat(x), p.values256, p.bpad, p.lut,
        p.K, block_size=codec.block_size, scale=codec.scale, search=codec.search)
    if _take_reference(codec, absmax):
        return hop_mixed_reference(codec, a, x)
    return _encoded(codec, a.shape, codes, scales)


def _hop_mixed_cpu(codec: Codec, a: Encoded, x: torch.Tensor) -> Encoded | None:
    """The CPU hop of an absmax-scaled table codec as one compiled pass per block (`cpu.hop_blocks`),
    bit for bit the composition; None where it does not apply (then the caller composes)."""
    if not isinstance(codec, TableCodec) or codec.scale != "absmax" or a.dtype != torch.float32 or not a.numel:
        return None
    p = _tables(codec, x.device)
    codes, scales = _flat(a.tensors["codes"]), _flat(a.tensors["scales"])
    n, B = codes.numel(), codec.block_size
    if B is not None and n % B:
        return None  # a ragged last block takes the composition
    rows = (1, n) if B is None else (-1, B)  # one row per block, or the tensor as one row
    out = cpu.hop_blocks(codes.view(rows), scales.view(-1, 1), p.values256, _flat(x).view(rows), p.lut,
                         p.bpad, p.K, p.packed)
    if out is None:
        return None
    new_codes, absmax = out
    # non-finite sums take the composition (the codec's nonfinite policy), as do subnormal absmax
    # values whose inverse overflows, as in the codec's own encode
    if not bool(torch.isfinite(absmax).all()) or inverse_overflows(absmax):
        return None
    return _encoded(codec, a.shape, new_codes.view(-1), absmax)


def hop_mixed_into(codec: Codec, a: Encoded, x: torch.Tensor, out: dict[str, torch.Tensor]) -> Encoded | None:
    """`hop_mixed(codec, a, x)` written into the payload fields `out` (views into a reused wire
    buffer, not a's): the CPU pass of an absmax-scaled table codec on float32 data, bit for bit the
    composition. None where that pass does not apply (the caller hops and copies)."""
    codec = codec.payload_codec
    if (not isinstance(codec, TableCodec) or codec.scale != "absmax" or a.dtype != torch.float32
            or not a.numel or x.dtype != torch.float32 or x.device.type != "cpu" or x.shape != a.shape):
        return None
    codes, scales = _flat(a.tensors["codes"]), _flat(a.tensors["scales"])
    n, B = codes.numel(), codec.block_size
    if B is not None and n % B:
        return None
    p = _tables(codec, x.device)
    rows = (1, n) if B is None else (-1, B)
    new_codes, absmax = out["codes"], out["scales"]
    if not cpu.hop_blocks_into(codes.view(rows), scales.view(-1, 1), p.values256, _flat(x).view(rows), p.lut,
                               p.bpad, p.K, p.packed, new_codes.view(rows), absmax):
        return None
    if not bool(torch.isfinite(absmax).all()) or inverse_overflows(absmax):
        return None
    return _encoded(codec, a.shape, new_codes, absmax)


def decode_sum(codec: Codec, payloads: list[Encoded]) -> torch.Tensor:
    """float32 sum of the decoded payloads, added in list order from 0 (an allgather's reduction).

    Equal to `decode_sum_reference` (bit for bit for table codecs on CUDA). Payloads that are
    rows of one gather buffer are read in place; others are stacked first (a copy of the codes).
    """
    codec = codec.payload_codec
    payloads = list(payloads)
    if not payloads:
        raise ValueError("decode_sum needs at least one payload")
    for i, p in enumerate(payloads):
        _check_payload(codec, p, f"payload {i}")
        if i:
            _check_same(payloads[0], p, "payload 0", f"payload {i}")
    if not _fused(codec, *payloads):
        return decode_sum_reference(codec, payloads)
    codes = _rows([_flat(p.tensors["codes"]) for p in payloads])
    scales = _rows([_flat(p.tensors["scales"]) for p in payloads])
    values = _tables(codec, payloads[0].device).values256
    return decode_sum_cuda(codes, scales, values, block_size=codec.block_size).view(payloads[0].shape)


def _rows(ts: list[torch.Tensor]) -> torch.Tensor:
    """[P, n] of equal-length 1-D tensors: a strided view when they are evenly spaced in one
    storage (a gather buffer), else a stacked copy."""
    t0 = ts[0]
    if len(ts) > 1:
        step = ts[1].data_ptr() - t0.data_ptr()
        size = t0.element_size()
        base = t0.untyped_storage().data_ptr()
        if step > 0 and step % size == 0 and all(
                t.untyped_storage().data_ptr() == base and t.data_ptr() - t0.data_ptr() == i * step
                for i, t in enumerate(ts)):
            return t0.as_strided((len(ts), t0.numel()), (step // size, 1))
    return torch.stack(ts)
