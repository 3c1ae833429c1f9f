"""One codec for every value-table data type: the paper's four 8-bit types and user layouts.

Dettmers 2016 §3.1-3.2: scale by the absolute maximum (per tensor, as the paper; or per block
of `block_size` values, as bitsandbytes), then code each value by its table entry. Codes are
indices into the sorted table (monotone; for a sign-symmetric table a relabelling of the
paper's sign-magnitude byte). The wire carries `bits` bits per code plus one float32 scale
per block (none when scale='none', the paper's setting for mantissa and static tree).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import torch

from .. import backend
from . import cpu
from .base import Codec, Encoded, Field, Layout, check_input, nonfinite_error, packed_bytes, saturate_nonfinite
from .registry import CodecInfo, OptionSpec, check_nonfinite, nonfinite_option, register
from . import tables
from .rounding import ROUNDINGS, bounds as make_bounds
from .tables import ValueTable

SCALES = ("absmax", "none")
SEARCHES = ("lut", "binary")


@dataclass(frozen=True, eq=False)
class SearchTables:
    """A value table prepared for one rounding and scale: the (normalised) table, its values
    (float32, sorted) and the same padded to 256 entries, the decision bounds between neighbours
    (`rounding.bounds`), the exact prefix-table search of `cpu.search_tables` (lut uint8[65536],
    bpad float32[257+K], K), and the CPU passes' one-load form of it where K = 1 (`cpu.packed_table`,
    int32[65536]; None otherwise)."""

    table: ValueTable
    values: torch.Tensor
    values256: torch.Tensor
    bounds: torch.Tensor
    lut: torch.Tensor
    bpad: torch.Tensor
    K: int
    packed: torch.Tensor | None

    def to(self, device: torch.device) -> "SearchTables":
        """The same tables with every tensor on `device`."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), torch.Tensor)})


@functools.lru_cache(maxsize=64)
def _prepared(table: ValueTable, rounding: str, scale: str) -> SearchTables:
    t = table.normalized() if scale == "absmax" else table
    values = torch.tensor(t.values, dtype=torch.float32)
    bounds = torch.from_numpy(make_bounds(t, rounding)).to(torch.float32)
    lut, bpad, K = cpu.search_tables(bounds)
    values256 = torch.cat([values, values.new_zeros(256 - values.numel())])
    return SearchTables(t, values, values256, bounds, lut, bpad, K, cpu.packed_table(lut, bpad, K))


@functools.lru_cache(maxsize=64)
def search_tables_on(table: ValueTable, rounding: str, scale: str, device: torch.device) -> SearchTables:
    return _prepared(table, rounding, scale).to(device)


class TableCodec(Codec):
    """Code values by a sorted value table after absmax scaling (per tensor or per block).

    rounding: 'nearest' (exact) or 'paper' (the original kernel's bisection, see rounding.py).
    scale: 'absmax' (the table is normalised to max |v| = 1) or 'none' (absolute values).
    block_size: None for one absmax per tensor, else one per block of that many values.
    nonfinite: 'raise' (ValueError with the count and first index) or 'saturate'.
    search: CUDA code search, 'lut' (prefix table + compares) or 'binary' (the paper's).
    """

    summable = False
    requantize = True

    def __init__(self, table: ValueTable, *, rounding: str = "nearest", scale: str = "absmax",
                 block_size: int | None = None, nonfinite: str = "raise", search: str = "lut",
                 name: str | None = None) -> None:
        if rounding not in ROUNDINGS:
            raise ValueError(f"rounding={rounding!r}; allowed: {', '.join(ROUNDINGS)}")
        if scale not in SCALES:
            raise ValueError(f"scale={scale!r}; allowed: {', '.join(SCALES)}")
        if block_size is not None:
            if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
                raise ValueError(f"block_size={block_size!r}; allowed: None (one scale per tensor) "
                                 "or an integer >= 1")
            if scale == "none":
                raise ValueError("block_size needs scale='absmax'; with scale='none' there is no scale")
        check_nonfinite(nonfinite)
        if search not in SEARCHES:
            raise ValueError(f"search={search!r}; allowed: {', '.join(SEARCHES)}")
        self.table, self.rounding, self.scale = table, rounding, scale
        self.block_size, self.nonfinite, self.search = block_size, nonfinite, search
        self.name = name or table.name
        self.bits = table.bits
        _prepared(table, rounding, scale)  # validates rounding against the table now

    def describe(self) -> str:
        sc = "none" if self.scale == "none" else ("tensor" if self.block_size is None else f"block{self.block_size}")
        return f"{self.name}[{self.rounding},{sc}]"

    @property
    def values(self) -> torch.Tensor:
        """The (normalised) value table the codes index, float32."""
        return _prepared(self.table, self.rounding, self.scale).values

    @property
    def bounds(self) -> torch.Tensor:
        """The float32 code thresholds of this rounding mode."""
        return _prepared(self.table, self.rounding, self.scale).bounds

    # ------------------------------------------------------------------ encode

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = check_input(x, nonfinite=self.nonfinite)
        try:
            codes, scales, saturated = self._encode_flat(flat)
        except _NonFinite:
            if self.nonfinite == "raise":
                raise nonfinite_error(flat) from None
            codes, scales, saturated = self._encode_flat(saturate_nonfinite(flat))
        side = 0 if self.scale == "none" else 4 * scales.numel()
        meta: dict[str, Any] = {"block_size": self.block_size}
        if self.scale == "none":
            meta["saturated"] = saturated
        return self.payload(x, {"codes": codes, "scales": scales}, packed_bytes(flat.numel(), self.bits) + side, meta)

    def _encode_flat(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(codes, scales, values saturated): with scale='none' a value beyond the table's largest
        magnitude saturates to it (the out-of-range rule of the unscaled codecs) and is counted."""
        p = search_tables_on(self.table, self.rounding, self.scale, flat.device)
        n = flat.numel()
        if n == 0:
            return flat.new_zeros(0, dtype=torch.uint8), flat.new_zeros(0, dtype=torch.float32), 0
        if self.block_size is None:
            absmax = cpu.absmax(flat).reshape(1)
            if not bool(torch.isfinite(absmax).all()):
                raise _NonFinite
            scales = absmax if self.scale == "absmax" else torch.ones_like(absmax)
            saturated = 0
            if self.scale == "none" and float(absmax) > p.table.absmax:
                saturated = int((flat.abs() > p.table.absmax).sum())
            if on_kernel_device(flat):
                from .cuda import encode_cuda
                codes, _ = encode_cuda(flat, p.bpad, p.lut, p.K, block_size=None,
                                       scale=scales, search=self.search)
            else:
                codes = cpu.encode_scaled(flat, scales[0], p.bounds, p.lut, p.bpad, p.K, p.packed)
            return codes, scales, saturated
        B = self.block_size
        if on_kernel_device(flat):
            from .cuda import encode_cuda
            codes, scales = encode_cuda(flat, p.bpad, p.lut, p.K, block_size=B, scale=None,
                                        search=self.search)
        else:
            full = (n // B) * B
            parts_c, parts_s = [], []
            if full:
                x2d = flat[:full].view(-1, B)
                c2, s = cpu.encode_blocks(x2d, p.bounds, p.lut, p.bpad, p.K, p.packed)
                parts_c.append(c2.reshape(-1))
                parts_s.append(s)
            if full < n:
                c2, s = cpu.encode_blocks_reference(flat[full:].view(1, -1), p.bounds)
                parts_c.append(c2.reshape(-1))
                parts_s.append(s)
            codes = parts_c[0] if len(parts_c) == 1 else torch.cat(parts_c)
            scales = parts_s[0] if len(parts_s) == 1 else torch.cat(parts_s)
        if not bool(torch.isfinite(scales).all()):
            raise _NonFinite
        return codes, scales, 0

    def encode_into(self, x: torch.Tensor, out: dict[str, torch.Tensor]) -> Encoded | None:
        """`encode(x)` written into the payload fields `out` (codes uint8[n], scales float32[blocks]:
        views into a reused wire buffer, `WireFormat.encode_into`), bit for bit `encode`, with no
        allocation of its size. None where this path does not apply (not float32 on the CPU,
        scale='none', a ragged last block, too few values for the compiled pass, NaN/Inf, a
        subnormal scale): the caller then encodes and copies."""
        if (self.scale != "absmax" or not isinstance(x, torch.Tensor) or x.dtype != torch.float32
                or x.device.type != "cpu" or on_kernel_device(x) or not x.is_contiguous() or not x.numel()):
            return None
        flat, codes, scales = x.view(-1), out["codes"], out["scales"]
        n, B = flat.numel(), self.block_size
        if codes.numel() != n or scales.numel() != (1 if B is None else -(-n // B)):
            raise ValueError(f"encode_into: {n} values need codes[{n}] and one scale per "
                             f"{'tensor' if B is None else f'block of {B}'}; got codes[{codes.numel()}], "
                             f"scales[{scales.numel()}]")
        p = search_tables_on(self.table, self.rounding, self.scale, flat.device)
        if B is None:
            absmax = cpu.absmax(flat)
            if not bool(torch.isfinite(absmax)):
                return None
            if not cpu.encode_scaled_into(flat, absmax, p.lut, p.bpad, p.K, p.packed, codes):
                return None
            scales.copy_(absmax.reshape(1))
        else:
            if n % B or not cpu.encode_blocks_into(flat.view(-1, B), p.lut, p.bpad, p.K, p.packed,
                                                   codes.view(-1, B), scales):
                return None
            if not bool(torch.isfinite(scales).all()):
                return None
        return self.payload(x, {"codes": codes, "scales": scales},
                            packed_bytes(n, self.bits) + 4 * scales.numel(), {"block_size": B})

    def layout(self, n: int) -> Layout:
        """uint8 codes[n] (packed to `bits` on the wire when narrower than 8) and float32
        scales[one per block, one per tensor, none when empty]; with scale='none' the all-ones
        scale is not sent."""
        blocks = -(-n // self.block_size) if self.block_size else min(n, 1)
        return (Field("codes", torch.uint8, (n,), packed_bits=self.bits if self.bits < 8 else 0),
                Field("scales", torch.float32, (blocks,), wire=self.scale != "none"))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"block_size": self.block_size}

    # ------------------------------------------------------------------ decode

    def _decode_flat(self, enc: Encoded, flat: torch.Tensor) -> bool:
        """values[code] * scale of its block into `flat`, in one pass (decode and decode_into)."""
        codes, scales = enc.tensors["codes"], enc.tensors["scales"]
        n = codes.numel()
        if n == 0:
            return True
        p = search_tables_on(self.table, self.rounding, self.scale, codes.device)
        B = enc.meta.get("block_size")
        if on_kernel_device(codes):
            from .cuda import decode_cuda
            decode_cuda(codes.reshape(-1), p.values256, scales, block_size=B, dtype=enc.dtype, out=flat)
        elif B is None:
            cpu.decode_into(codes.reshape(-1), p.values256, scales[0], flat)
        else:
            full = (n // B) * B
            if full:
                cpu.decode_into(codes[:full].view(-1, B), p.values256, scales[: full // B, None],
                                flat[:full].view(-1, B))
            if full < n:
                cpu.decode_into(codes[full:], p.values256, scales[-1], flat[full:])
        return True


def on_kernel_device(t: torch.Tensor) -> bool:
    """t lives where kernels/*.cu run (CUDA with CuPy, or the tests' emulator): the same choice as
    the MX and NVFP4 codecs make (`cuda_block.on_kernel_device`)."""
    return t.device.type == backend.KERNEL_DEVICE_TYPE and backend.kernels_available()


def inverse_overflows(absmax: torch.Tensor) -> bool:
    """A subnormal absmax below ~2^-128 makes 1/absmax infinite: such blocks are coded from
    x / absmax (`cpu.scale_to_unit`, and so do the CUDA kernels); the compiled CPU passes multiply
    by the inverse only, so there they take the reference."""
    return cpu.inverse_overflows(absmax)


class _NonFinite(Exception):
    """Internal: the input held NaN or Inf (detected through its absmax)."""


# ------------------------------------------------------------------ registry

def _table_options(scale: str = "absmax") -> tuple[OptionSpec, ...]:
    return (OptionSpec("rounding", str, "nearest", ROUNDINGS, help="nearest (exact) or paper (the original "
                                                                  "kernel's bisection)"),
            OptionSpec("scale", str, scale, SCALES, help="absmax: normalise by the absolute maximum; none: "
                                                         "absolute values"),
            OptionSpec("block_size", int, None, range=(1, None), optional=True,
                       help="values per absmax scale (none: one per tensor)"),
            nonfinite_option(),
            OptionSpec("search", str, "lut", SEARCHES, help="CUDA code search: lut (prefix table) or binary"))


def _offset() -> OptionSpec:
    return OptionSpec("offset", int, 1, range=(-38, 38), help="exponent of the top decade (10^offset)")


def _table(name: str, summary: str, make, extra: tuple[OptionSpec, ...] = (), scale: str = "absmax") -> None:
    register(CodecInfo(name, summary, make, extra + _table_options(scale), table=True))


_table("dynamic_tree", "8-bit dynamic tree (Dettmers 2016 §3.1): absmax scaling, 1e-6..1",
       lambda **kw: TableCodec(tables.dynamic_tree(), **kw))
_table("linear", "8-bit linear quantization (Dettmers 2016 §3.1): absmax scaling, k/127",
       lambda **kw: TableCodec(tables.linear(), **kw))
_table("mantissa", "8-bit mantissa (Dettmers 2016 §3.1): 3-bit exponent + 4-bit integer mantissa; option offset "
       "(default 1: 10^1); unscaled: beyond 15·10^offset saturates (counted)",
       lambda offset=1, **kw: TableCodec(tables.mantissa(offset), name="mantissa", **{"scale": "none", **kw}),
       (_offset(),), scale="none")
_table("static_tree", "8-bit static tree (Dettmers 2016 §3.1): 3-bit exponent + 4-bit bisection tree; option "
       "offset (default 1: 10^1); the lowest pattern codes 0 (docs/codecs.md); unscaled: beyond the top leaf "
       "saturates (counted)",
       lambda offset=1, **kw: TableCodec(tables.static_tree(offset), name="static_tree", **{"scale": "none", **kw}),
       (_offset(),), scale="none")
_table("bnb_dynamic", "bitsandbytes' dynamic map (create_dynamic_map), nearest rounding",
       lambda **kw: TableCodec(tables.bnb_dynamic(), **kw))


def _layout(total_bits: int = 8, signed: bool = True, exponent_bits: int = 0, base: int = 10, offset: int = 0,
            mantissa: str = "tree", dynamic: bool = True, **kw) -> TableCodec:
    layout = tables.BitLayout(total_bits, signed, exponent_bits, base, offset, mantissa, dynamic)
    return TableCodec(layout.table(), **kw)


_table("layout", "any bit layout: total_bits, signed, exponent_bits, base, offset, mantissa, dynamic", _layout,
       (OptionSpec("total_bits", int, 8, range=(2, 8), help="bits per value"),
        OptionSpec("signed", bool, True, help="one sign bit"),
        OptionSpec("exponent_bits", int, 0, range=(0, 7), help="width of a static exponent field (0 if dynamic)"),
        OptionSpec("base", int, 10, (2, 10), help="exponent base"),
        OptionSpec("offset", int, 0, range=(-38, 38), help="exponent of the top decade"),
        OptionSpec("mantissa", str, "tree", ("tree", "linear", "float"),
                   help="bisection tree, linear bins, or a binary float (1.m × 2^e, static exponent, base 2)"),
        OptionSpec("dynamic", bool, True, help="leading zeros give the exponent")))
