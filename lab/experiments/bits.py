"""The bit explorer (Float Toy for the lab's formats): what one code of a value-table codec or of a
block-scaled element format means, bit by bit — its value, its neighbours on the grid and the interval
of inputs that round to it — and one block of a block-scaled format re-quantised with a shared scale
the learner sets. Dettmers 2016 §3.1 (value tables: a code indexes the sorted table); OCP MX v1.0 §5.3
(element formats: sign, exponent, mantissa) and §6.3 (a shared scale per block); NVFP4 (E2M1
elements, E4M3 block scale)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class CodeView:
    """One code: `bits` (most significant first), `fields` [(name, bits string)], its `value` (before any
    scale), the `formula` with the numbers in it, the grid neighbours `below`/`above` (None at an end) and
    the rounding interval [`lo`, `hi`] of inputs that round to it (nearest; ends open to ±∞ when they
    saturate); `used`: False for a code the format never produces (a table shorter than 2^bits)."""

    fmt: str
    code: int
    nbits: int
    bits: str
    fields: list
    value: float
    formula: str
    below: float | None
    above: float | None
    lo: float
    hi: float
    used: bool = True


def explorable() -> list[str]:
    """Every format the explorer can open: the registered value-table codecs and the block-scaled ones."""
    from lab.codecs.registry import codec_infos

    from .codec_table1 import EXTENDED_TYPES as BLOCK_SCALED_TYPES

    out = []
    for info in codec_infos():
        try:
            c = _codec(info.name)
        except Exception:  # noqa: BLE001 - a codec that needs options to build is left out
            continue
        if _is_table(c):
            out.append(info.name)
    return out + [t for t in BLOCK_SCALED_TYPES if t not in out]


def _codec(name: str):
    from .errors import get_codec

    return get_codec(name)


def _is_table(c) -> bool:
    from lab.codecs.table_codec import TableCodec

    return isinstance(c, TableCodec)


def element_format(name: str):
    """The element format of a block-scaled codec name (ValueError for any other)."""
    from lab.codecs.mx import MXCodec
    from lab.codecs.nvfp4 import E2M1, NVFP4Codec

    c = _codec(name)
    if isinstance(c, MXCodec):
        return c.fmt
    if isinstance(c, NVFP4Codec):
        return E2M1
    raise ValueError(f"{name!r} is not a block-scaled format")


def grid(name: str) -> tuple[np.ndarray, int]:
    """(value of every code, bits per code) of a format: a table codec's sorted table (the code is its
    index), or an element format's 2^bits codes."""
    c = _codec(name)
    if _is_table(c):
        return np.asarray(c.values.tolist(), dtype=np.float64), int(c.bits)
    from lab.codecs.block_scaled import value_table

    fmt = element_format(name)
    return value_table(fmt).double().numpy()[: 1 << fmt.bits].copy(), int(fmt.bits)


def explore(name: str, code: int) -> CodeView:
    """What code `code` of format `name` means (see `CodeView`)."""
    values, nbits = grid(name)
    if isinstance(code, bool) or not isinstance(code, (int, np.integer)) or not 0 <= code < (1 << nbits):
        raise ValueError(f"code={code!r}: allowed 0..{(1 << nbits) - 1} for {name} ({nbits} bits)")
    code = int(code)
    bits = format(code, f"0{nbits}b")
    c = _codec(name)
    if _is_table(c):
        used = code < len(values)
        fields = [("index into the sorted table", bits)]
        if not used:
            return CodeView(name, code, nbits, bits, fields, float("nan"),
                            f"code {code} is past the table's {len(values)} values: never produced", None, None,
                            float("nan"), float("nan"), used=False)
        v = float(values[code])
        formula = f"table[{code}] = {v:.6g} (× the block's absmax when scaled)"
        grid_sorted = values
    else:
        fmt = element_format(name)
        v = float(values[code])
        fields, formula = _element_fields(fmt, code, v)
        grid_sorted = np.unique(values[np.isfinite(values)] + 0.0)  # + 0.0: one zero, not ±0
        if not np.isfinite(v) or formula.startswith("reserved"):
            return CodeView(name, code, nbits, bits, fields, v, formula, None, None, float("nan"), float("nan"),
                            used=False)
    below = grid_sorted[grid_sorted < v]
    above = grid_sorted[grid_sorted > v]
    b = float(below.max()) if len(below) else None
    a = float(above.min()) if len(above) else None
    lo = (b + v) / 2 if b is not None else -np.inf
    hi = (v + a) / 2 if a is not None else np.inf
    return CodeView(name, code, nbits, bits, fields, v, formula, b, a, lo, hi)


def _element_fields(fmt, code: int, v: float) -> tuple[list, str]:
    """Sign, exponent and mantissa fields of an element code, and its value as a formula (OCP MX §5.3)."""
    bits = format(code, f"0{fmt.bits}b")
    if fmt.is_int:  # MXINT8: two's complement with 6 fraction bits
        signed = code - 256 if code >= 128 else code
        return [("two's complement", bits)], f"{signed} / 64 = {v:.6g}"
    s, e, m = bits[0], bits[1:1 + fmt.ebits], bits[1 + fmt.ebits:]
    S, E, M = int(s), int(e, 2), int(m, 2) if m else 0
    sign = "−" if S else "+"
    want = (-1) ** S * (2.0 ** (1 - fmt.bias) * M / (1 << fmt.mbits) if E == 0
                        else 2.0 ** (E - fmt.bias) * (1 + M / (1 << fmt.mbits)))
    if not np.isclose(want, v):
        return ([("sign", s), ("exponent", e), ("mantissa", m)],
                f"reserved code (NaN or ∞ in OCP MX §5.3: {sign}2^({E} − {fmt.bias}) × (1 + {M}/{1 << fmt.mbits}) "
                f"would be {want:g}); rounding never produces it, and it decodes to {v:g} here")
    if E == 0:
        formula = (f"{sign}2^(1 − {fmt.bias}) × (0 + {M}/{1 << fmt.mbits}) = {v:.6g} (subnormal: exponent field 0, "
                   "no implicit 1)")
    else:
        formula = f"{sign}2^({E} − {fmt.bias}) × (1 + {M}/{1 << fmt.mbits}) = {v:.6g}"
    return [("sign", s), ("exponent", e), ("mantissa", m)], formula


def requantize_block(x: np.ndarray, name: str, scale: float) -> pd.DataFrame:
    """One block of values `x` through format `name`'s elements with the shared `scale`: each value / scale
    rounded to the nearest element (clipped to the largest), times scale; its fate as `block_view` names it."""
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale={scale!r}: allowed a finite number > 0")
    values, _ = grid(name)
    g = np.unique(values[np.isfinite(values)] + 0.0)
    top, tiny = float(g.max()), float(g[g > 0].min())
    x = np.asarray(x, dtype=np.float64)
    q = x / scale
    idx = np.clip(np.searchsorted(g, q), 1, len(g) - 1)
    left, right = g[idx - 1], g[idx]
    near = np.where(np.abs(q - left) <= np.abs(right - q), left, right)
    near = np.clip(near, -top, top) + 0.0
    y = near * scale
    fate = np.where(x == 0, "zero", np.where(np.abs(q) > top, "saturated",
                                             np.where((y == 0) & (x != 0), "flushed to zero",
                                                      np.where(y == x, "exact", "rounded"))))
    out = pd.DataFrame({"value": x, "value / scale": q, "element": near, "decoded": y, "fate": fate})
    out.attrs.update(scale=scale, largest=top * scale, smallest=tiny * scale)
    return out


__all__ = ["CodeView", "explorable", "explore", "grid", "element_format", "requantize_block"]
