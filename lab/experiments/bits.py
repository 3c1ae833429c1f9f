"""The bit explorer (Float Toy for the lab's formats): what one code of a value-table codec or of a
block-scaled element format means, bit by bit — its value, its neighbours on the grid and the interval
of inputs that round to it — and one block of a block-scaled format re-quantised with a shared scale
the learner sets. Dettmers 2016 §3.1 (value tables: a code indexes the sorted table); OCP MX v1.0 §5.3
(element formats: sign, exponent, mantissa) and §6.3 (a shared scale per block); NVFP4 (E2M1
elements, E4M3 block scale); IEEE 754 binary32 / binary16, bfloat16 and the OCP 8-bit floats (E4M3, E5M2)
beside them: type a value, see which code it rounds to in every format."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lab.codecs.tables import PAPER_TYPES as _paper_tables


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


@dataclass(frozen=True)
class FloatFormat:
    """A hardware binary float (IEEE 754 style): sign, `ebits` exponent bits with `bias`, `mbits` mantissa bits;
    `inf`: whether the all-ones exponent holds ±∞ (and NaN), else only the all-ones code is NaN and values beyond
    the largest finite one saturate to it (OCP 8-bit E4M3, torch's float8_e4m3fn)."""

    name: str
    ebits: int
    mbits: int
    bias: int
    dtype: torch.dtype
    inf: bool = True
    is_int: bool = False

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits


#: the hardware floats, by their codec names (the fp8 codecs scale by the absmax first; here: the format itself)
FLOATS = {
    "fp32": FloatFormat("fp32", 8, 23, 127, torch.float32),
    "fp16": FloatFormat("fp16", 5, 10, 15, torch.float16),
    "bf16": FloatFormat("bf16", 8, 7, 127, torch.bfloat16),
    "fp8_e4m3": FloatFormat("fp8_e4m3", 4, 3, 7, torch.float8_e4m3fn, inf=False),
    "fp8_e5m2": FloatFormat("fp8_e5m2", 5, 2, 15, torch.float8_e5m2),
}
_INT_OF = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def kind(name: str) -> str:
    """'float' (a hardware float), 'table' (a value-table codec: the code indexes its sorted table) or
    'element' (the element format of a block-scaled codec)."""
    if name in FLOATS:
        return "float"
    from .codec_table1 import EXTENDED_TYPES as BLOCK_SCALED_TYPES

    return "element" if name in BLOCK_SCALED_TYPES else "table"


def explorable() -> list[str]:
    """Every format the explorer can open: the hardware floats (fp32, fp16, bf16, fp8 E4M3 / E5M2), the
    registered value-table codecs and the block-scaled ones."""
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
    return list(FLOATS) + out + [t for t in BLOCK_SCALED_TYPES if t not in out]


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
    if name in FLOATS:
        f = FLOATS[name]
        if f.bits > 16:
            raise ValueError(f"{name} has 2^{f.bits} codes: too many to list (explore one code at a time)")
        return _float_values(f, np.arange(1 << f.bits)), f.bits
    c = _codec(name)
    if _is_table(c):
        return np.asarray(c.values.tolist(), dtype=np.float64), int(c.bits)
    from lab.codecs.block_scaled import value_table

    fmt = element_format(name)
    return value_table(fmt).double().numpy()[: 1 << fmt.bits].copy(), int(fmt.bits)


def code_bits(name: str) -> int:
    """Bits per code of format `name`."""
    return FLOATS[name].bits if name in FLOATS else grid(name)[1]


def check_code(name: str, code) -> int:
    """`code` as an int when it is a whole number in 0..2^bits - 1 of format `name`, else a ValueError naming the
    allowed range."""
    nbits = code_bits(name)
    if isinstance(code, bool) or not isinstance(code, (int, np.integer)) or not 0 <= code < (1 << nbits):
        raise ValueError(f"code={code!r}: allowed 0..{(1 << nbits) - 1} for {name} ({nbits} bits)")
    return int(code)


def explore(name: str, code: int) -> CodeView:
    """What code `code` of format `name` means (see `CodeView`)."""
    code = check_code(name, code)
    if name in FLOATS:
        return _explore_float(FLOATS[name], code)
    values, nbits = grid(name)
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


def _float_values(f: FloatFormat, codes: np.ndarray) -> np.ndarray:
    """float64 value of each code of hardware float `f` (torch's own bit pattern of the format)."""
    c = np.asarray(codes, dtype=np.int64)
    if f.bits > 8:
        c = np.where(c >= 1 << (f.bits - 1), c - (1 << f.bits), c)  # the signed int of the same bits
    return torch.from_numpy(c).to(_INT_OF[f.bits]).view(f.dtype).double().numpy()


def _float_step(f: FloatFormat, code: int, up: bool) -> int | None:
    """The code of the next larger (`up`) or smaller finite value after code `code` (±0 count as one value;
    zero's neighbours are ±the smallest subnormal); None past the largest finite value or from a NaN."""
    sign, mag = code >> (f.bits - 1), code & ((1 << (f.bits - 1)) - 1)
    neg = 1 << (f.bits - 1)
    if np.isnan(_float_values(f, [code])[0]):
        return None
    if np.isinf(_float_values(f, [code])[0]):
        return (code - 1) if (sign == 0) != up else None  # from ±∞ inwards: ±the largest finite value
    if mag == 0:
        return 1 if up else neg | 1
    outward = (sign == 0) == up
    nxt = code + 1 if outward else (0 if mag == 1 else code - 1)
    return nxt if np.isfinite(_float_values(f, [nxt])[0]) else None


def _explore_float(f: FloatFormat, code: int) -> CodeView:
    """One code of a hardware float: sign, exponent and mantissa fields, the value as a formula, the neighbours
    and the rounding interval (round to nearest, ties to even; past the largest finite value: ±∞ where the format
    has it, else saturation)."""
    bits = format(code, f"0{f.bits}b")
    s, e, m = bits[0], bits[1:1 + f.ebits], bits[1 + f.ebits:]
    S, E, M = int(s), int(e, 2), int(m, 2)
    v = float(_float_values(f, [code])[0])
    sign, top = "−" if S else "+", (1 << f.ebits) - 1
    fields = [("sign", s), ("exponent", e), ("mantissa", m)]
    if np.isnan(v):
        why = "exponent all ones, mantissa not 0" if f.inf else "all magnitude bits 1, the format's one NaN"
        return CodeView(f.name, code, f.bits, bits, fields, v, f"NaN ({why}): not a number, no place on the line",
                        None, None, float("nan"), float("nan"), used=False)
    if np.isinf(v):
        last = (top - 1) << f.mbits | ((1 << f.mbits) - 1)  # the largest finite value's code
        big = float(_float_values(f, [last])[0])
        edge = big + (big - float(_float_values(f, [last - 1])[0])) / 2
        formula = f"{sign}∞ (exponent all ones, mantissa 0): what every input past ±{edge:.9g} rounds to"
        return CodeView(f.name, code, f.bits, bits, fields, v, formula, None if S else big, -big if S else None,
                        -np.inf if S else edge, -edge if S else np.inf)
    frac = f"{M}/{1 << f.mbits}" if f.mbits < 16 else f"{M}/2^{f.mbits}"
    if E == 0:
        formula = f"{sign}2^(1 − {f.bias}) × (0 + {frac}) = {v:.9g} (subnormal: exponent field 0, no implicit 1)"
    else:
        formula = f"{sign}2^({E} − {f.bias}) × (1 + {frac}) = {v:.9g}"
    b, a = (_float_step(f, code, up) for up in (False, True))
    below = float(_float_values(f, [b])[0]) if b is not None else None
    above = float(_float_values(f, [a])[0]) if a is not None else None
    lo = (below + v) / 2 if below is not None else (v - (above - v) / 2 if f.inf else -np.inf)
    hi = (v + above) / 2 if above is not None else (v + (v - below) / 2 if f.inf else np.inf)
    return CodeView(f.name, code, f.bits, bits, fields, v + 0.0, formula, below, above, lo, hi)


def round_to_code(name: str, x: float) -> int:
    """The code value `x` rounds to in format `name`, as the lab encodes: hardware floats by torch's cast (round
    to nearest even, in one rounding; ±∞ past the largest finite value, E4M3 saturates), block-scaled elements by
    their encoder's rounding (`round_elements`, x being value / shared scale, saturating), value tables to the
    nearest table value (x being value / absmax for the absmax-scaled ones; ends saturate). Non-finite x: the
    hardware floats only (ValueError for the others)."""
    x = float(x)
    if name in FLOATS:
        from lab.codecs.block_scaled import round_to_odd_f32

        f = FLOATS[name]
        t = torch.tensor([x], dtype=torch.float64)
        y = t.to(torch.float32) if f.bits == 32 else round_to_odd_f32(t).to(f.dtype)
        return int(y.view(_INT_OF[f.bits]).to(torch.int64)[0]) & ((1 << f.bits) - 1)
    if not np.isfinite(x):
        raise ValueError(f"value {x}: {name} codes finite values only (∞ and NaN: the hardware floats "
                         f"{', '.join(FLOATS)})")
    values, _ = grid(name)
    if kind(name) == "element":
        from lab.codecs.block_scaled import round_elements

        fmt = element_format(name)
        return int(round_elements(torch.tensor([x], dtype=torch.float32), fmt)[0])
    ok = np.flatnonzero(np.isfinite(values))
    return int(ok[np.argmin(np.abs(values[ok] - x))])  # nearest; a tie takes the lower code


def _code_of_value(name: str, v: float) -> int:
    """A code of a listed format holding value v (+0 for zero)."""
    values, _ = grid(name)
    hit = np.flatnonzero(values == v)
    pos = [c for c in hit if not np.signbit(values[c])]
    return int((pos or hit)[0])


def digits(name: str) -> int:
    """Significant digits that tell a format's neighbouring values apart: 9 for fp32, else 6."""
    return 9 if name in FLOATS and FLOATS[name].mbits > 16 else 6


def neighbour_code(name: str, code: int, up: bool) -> int | None:
    """The code of the next larger (`up`) or smaller value on the format's line, None past its end."""
    if name in FLOATS:
        return _float_step(FLOATS[name], code, up)
    cv = explore(name, code)
    nxt = cv.above if up else cv.below
    return None if nxt is None else _code_of_value(name, nxt)


def number_line(name: str, code: int, typed: float | None = None, k: int = 3) -> pd.DataFrame:
    """The format's values around code `code`: up to `k` codes each side (value, code, bits, role: 'this code',
    'next below', 'next above' or 'grid'). attrs: value, lo, hi (the rounding interval), typed (or None), fmt and
    digits (`digits`)."""
    cv = explore(name, code)
    if not cv.used or not np.isfinite(cv.value):
        raise ValueError(f"code {code} of {name} ({cv.formula}) has no place on the number line")
    nbits = cv.nbits
    rows = [{"value": cv.value, "code": code, "bits": cv.bits, "role": "this code"}]
    for up in (False, True):
        c = code
        for i in range(k):
            c = neighbour_code(name, c, up)
            if c is None:
                break
            v = explore(name, c).value
            rows.append({"value": v, "code": c, "bits": format(c, f"0{nbits}b"),
                         "role": ("next above" if up else "next below") if i == 0 else "grid"})
    out = pd.DataFrame(rows).sort_values("value", kind="stable").reset_index(drop=True)
    out.attrs.update(value=cv.value, lo=cv.lo, hi=cv.hi, typed=typed, fmt=name, digits=digits(name))
    return out


KIND_WORDS = {"float": "the value", "table": "value / absmax", "element": "value / block scale"}


def compare_formats(x: float, names: list[str] | None = None) -> pd.DataFrame:
    """Where value `x` lands in every format (default: `explorable()` but the layout designer's default): format,
    kind, bits, code, saturated (x beyond the largest value, clipped to it), code_bits (fields apart), stored, error
    (stored − x), rel_error (|error| / |x|), spacing (the gap to the next value up, or down at the top) and the
    rounding interval lo, hi. The formats that code finite
    values only are left out for a non-finite x."""
    rows = []
    for name in names if names is not None else [n for n in explorable() if n != "layout"]:
        try:
            code = round_to_code(name, x)
        except ValueError:
            continue
        cv = explore(name, code)
        nxt = cv.above if cv.above is not None else cv.below
        err = 0.0 if cv.value == x else cv.value - x  # ±∞ where one of them is infinite; NaN: a NaN on either side
        sat = bool(np.isfinite(cv.value) and abs(x) > abs(cv.value)
                   and (cv.hi == np.inf if cv.value > 0 else cv.lo == -np.inf))
        rows.append({"format": name, "kind": KIND_WORDS[kind(name)], "bits": cv.nbits, "code": code, "saturated": sat,
                     "code_bits": " ".join(b for _, b in cv.fields), "stored": cv.value, "error": err,
                     "rel_error": abs(err) / abs(x) if x and np.isfinite(err) and np.isfinite(x) else float("nan"),
                     "spacing": abs(nxt - cv.value) if nxt is not None and np.isfinite(cv.value) else float("nan"),
                     "lo": cv.lo, "hi": cv.hi})
    return pd.DataFrame(rows)


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



# ------------------------------------------------ Figure 1: the paper's bit patterns, field by field

#: the paper's four 8-bit types, whose codes the explorer can take apart as Figure 1 draws them
PAPER_TYPES = tuple(_paper_tables)


@dataclass(frozen=True)
class PaperField:
    """One field of a paper-type bit pattern: its `role` ('sign', 'leading zeros', 'flag', 'tree', 'exponent',
    'mantissa', 'integer'), its `bits`, and `meaning`: what it contributes to the value, with the numbers."""

    role: str
    bits: str
    meaning: str


@dataclass(frozen=True)
class PaperCode:
    """One 8-bit pattern of a paper type (Dettmers 2016 §3.1, Figure 1): its fields, most significant first, the
    value they give (float32, as the table stores it), the interval steps of its bisection tree
    [(lo, hi) after each tree bit] and the `decade` the tree splits (both empty for the integer types and the
    patterns for 0 and 1)."""

    fmt: str
    pattern: int
    fields: tuple
    value: float
    path: tuple = ()
    decade: tuple = ()


def _offset_of(name: str) -> int:
    """The exponent offset the explorer's codec uses (its default option; 0 for the absmax-scaled types)."""
    from lab.codecs.registry import codec_info

    for o in codec_info(name).options:
        if o.name == "offset":
            return int(o.default)
    return 0


def _walk(lower: float, bits: str) -> tuple[float, tuple]:
    """The bisection tree over (lower, 10·lower), walked by `bits`: the first split at 4.5·lower (Dettmers' own
    table, see lab.codecs.tables), then halves; the value is the last interval's midpoint."""
    a, b, path = lower, 10 * lower, []
    for i, bit in enumerate(bits):
        split = 4.5 * lower if i == 0 else (a + b) / 2
        a, b = (split, b) if bit == "1" else (a, split)
        path.append((a, b))
    return (a + b) / 2, tuple(path)


def _zeros(n: int) -> str:
    return "no leading zero" if n == 0 else f"{n} zero{'s' if n != 1 else ''}"


def _f32(v: float) -> float:
    return float(np.float32(v)) + 0.0


def paper_code(name: str, pattern: int) -> PaperCode:
    """Bit pattern `pattern` (0..255, sign first) of paper type `name` taken apart as Figure 1 draws it:
    dynamic tree: sign | n leading zeros (the decade 10^-n) | a flag bit 1 | 6 - n bisection-tree bits (all zeros
    codes 0, zeros ending in the flag codes 1); static tree: sign | 3-bit exponent e (the decade 10^(offset - e))
    | 4 tree bits (its lowest pattern codes 0); mantissa: sign | 3-bit exponent e | 4-bit integer m, m·10^(offset
    - e); linear: sign | 7-bit integer k, k / 127 of the absmax."""
    if name not in PAPER_TYPES:
        raise ValueError(f"{name!r} is not one of the paper's four 8-bit types; allowed: {', '.join(PAPER_TYPES)}")
    if isinstance(pattern, bool) or not isinstance(pattern, (int, np.integer)) or not 0 <= pattern < 256:
        raise ValueError(f"pattern={pattern!r}: allowed a whole number 0..255 (8 bits)")
    bits = format(int(pattern), "08b")
    s, mag = bits[0], bits[1:]
    sign = -1.0 if s == "1" else 1.0
    fields = [PaperField("sign", s, "− (negative)" if s == "1" else "+ (positive)")]
    path: tuple = ()
    o = _offset_of(name)
    if name == "dynamic_tree":
        n = len(mag) - len(mag.lstrip("0"))
        if n == 7:
            fields.append(PaperField("leading zeros", mag, "all seven zeros: the pattern for 0"))
            v = 0.0
        elif n == 6:
            fields += [PaperField("leading zeros", mag[:6], "6 zeros and no tree bits left"),
                       PaperField("flag", "1", "the flag in the last place: the pattern for 1 (the absmax)")]
            v = 1.0
        else:
            lower = 10.0 ** (-1 - n)
            tree = mag[n + 1:]
            v, path = _walk(lower, tree)
            fields += [PaperField("leading zeros", mag[:n], f"{_zeros(n)}: exponent 10^{-n}, "
                                                            f"the decade ({lower:g}, {10 * lower:g})"),
                       PaperField("flag", "1", "1: the exponent ends, the tree bits start"),
                       PaperField("tree", tree, f"{len(tree)} bisection steps in ({lower:g}, {10 * lower:g}) → "
                                                f"({path[-1][0]:.6g}, {path[-1][1]:.6g}), midpoint {v:.6g}")]
    elif name == "static_tree":
        e, tree = int(mag[:3], 2), mag[3:]
        lower = 10.0 ** (o - e - 1)
        v, path = _walk(lower, tree)
        fields.append(PaperField("exponent", mag[:3], f"e = {e}: the decade 10^({o} − {e}) = ({lower:g}, "
                                                      f"{10 * lower:g})"))
        if e == 7 and int(tree, 2) == 0:
            fields.append(PaperField("tree", tree, f"the lowest pattern: codes 0 (it would be {v:.6g})"))
            v, path = 0.0, ()
        else:
            fields.append(PaperField("tree", tree, f"4 bisection steps in ({lower:g}, {10 * lower:g}) → "
                                                   f"({path[-1][0]:.6g}, {path[-1][1]:.6g}), midpoint {v:.6g}"))
    elif name == "mantissa":
        e, m = int(mag[:3], 2), int(mag[3:], 2)
        v = m * 10.0 ** (o - e)
        fields += [PaperField("exponent", mag[:3], f"e = {e}: × 10^({o} − {e}) = × {10.0 ** (o - e):g}"),
                   PaperField("mantissa", mag[3:], f"m = {m} (0..15): value {m} × {10.0 ** (o - e):g} = {v:g}")]
    else:
        k = int(mag, 2)
        v = k / 127
        fields.append(PaperField("integer", mag, f"k = {k}: {k} / 127 = {v:.6g} of the absmax"))
    decade = (lower, 10 * lower) if path else ()  # `lower`: the tree's decade start, set with `path`
    return PaperCode(name, int(pattern), tuple(fields), _f32(sign * v), path, decade)


def paper_codes_of(name: str, code: int) -> list[int]:
    """The paper bit patterns of type `name` that decode to the value of the explorer's code `code` (an index into
    the sorted table): one for most values, two for 0 (±0), several for the mantissa type's repeated values."""
    values, _ = grid(name)
    v = float(values[check_code(name, code)]) if code < len(values) else float("nan")
    return [p for p in range(256) if paper_code(name, p).value == v]


#: Dettmers 2016 §3.1's worked examples: (input, type, the paper's printed approximation)
WORKED_EXAMPLES = ((0.2345678, "dynamic_tree", 0.236719), (0.2345678, "static_tree", 0.23125),
                   (0.2345678, "mantissa", 0.2), (0.0000234, "dynamic_tree", 0.000019))
#: §3.1: "numbers ending in 2 to 2.499 will be approximated by numbers ending in 2 yielding an average relative
#: error of 22.5% in this range" (the mantissa type)
MANTISSA_BAND = (2.0, 2.5, 0.225)


def worked_examples() -> pd.DataFrame:
    """§3.1's worked examples through the lab's tables (rounding to nearest, no scaling: the inputs are already in
    the types' range): input, type, paper (the printed value), ours (the nearest table value), its code (index
    into the sorted table) and paper bit pattern, the relative errors of both, agree (ours equals the paper's
    value to the digits it prints) and why (where they differ: the reading behind the lab's table)."""
    rows = []
    for x, name, paper in WORKED_EXAMPLES:
        code = round_to_code(name, x)
        ours = float(grid(name)[0][code])
        pattern = paper_codes_of(name, code)[0]
        digits = len(f"{paper:.10f}".rstrip("0").split(".")[1].lstrip("0"))
        agree = float(f"{ours:.{digits}g}") == paper
        why = ""
        if not agree and name == "static_tree":
            lo, hi = _walk(0.1, format(pattern, "08b")[4:])[1][-1]
            why = (f"the paper's {paper:g} is 0.1 + 3 × 0.04375, an end of a leaf interval of the lab's 4-bit tree "
                   f"(this leaf: ({lo:.6g}, {hi:.6g})), or a leaf midpoint of a 3-bit tree; the lab's table holds "
                   "the 4-bit tree's midpoints, as Dettmers' own table does and Table 1's errors confirm, so "
                   f"{x:.8g} rounds to {ours:.6g}")
        rows.append(dict(input=x, type=name, paper=paper, ours=ours, code=code, pattern=format(pattern, "08b"),
                         paper_rel_error=abs(paper - x) / x, ours_rel_error=abs(ours - x) / x, agree=agree, why=why))
    return pd.DataFrame(rows)


def mantissa_band(points: int = 100_001) -> pd.DataFrame:
    """§3.1's mantissa example: inputs x uniform over [2, 2.5) (`points` of them) through the mantissa type
    (offset 1: 2.0–2.499 all round to 2, its neighbours being 1 and 3). One row per error measure: the mean of
    |q − x| / x (the relative error Table 1 uses), of |q − x| / q, and the largest |q − x| / x, beside the
    paper's 22.5 %. attrs: stored (the values the band rounds to), paper."""
    lo, hi, paper = MANTISSA_BAND
    x = np.linspace(lo, hi, points, endpoint=False)
    values, _ = grid("mantissa")
    idx = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    left, right = values[idx - 1], values[idx]
    q = np.where(np.abs(x - left) <= np.abs(right - x), left, right)
    err = np.abs(q - x)
    out = pd.DataFrame([
        dict(measure="mean |q − x| / x (Table 1's relative error)", ours=float(np.mean(err / x)), paper=paper),
        dict(measure="mean |q − x| / q", ours=float(np.mean(err / q)), paper=paper),
        dict(measure="largest |q − x| / x", ours=float(np.max(err / x)), paper=paper)])
    out.attrs.update(stored=sorted(set(np.unique(q).tolist())), paper=paper,
                     why=("22.5 % is the mean of (x − 2) / 2 over 2–2.9, i.e. every number 2.x cut to 2, or the "
                          "error of 2.45 against 2; rounding 2–2.499 to the nearest value 2 gives the smaller numbers "
                          "here"))
    return out


__all__ = ["CodeView", "FLOATS", "MANTISSA_BAND", "PAPER_TYPES", "PaperCode", "PaperField", "WORKED_EXAMPLES",
           "mantissa_band", "paper_code", "paper_codes_of", "worked_examples", "FloatFormat", "check_code",
           "code_bits", "compare_formats", "digits", "explorable", "explore",
           "grid", "element_format", "kind", "neighbour_code", "number_line", "requantize_block", "round_to_code"]
