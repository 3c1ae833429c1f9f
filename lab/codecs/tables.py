"""Value tables of the low-bit data types: the paper's four 8-bit types and any bit layout.

Dettmers, "8-bit Approximations for Parallelism in Deep Learning" (ICLR 2016), §3.1 and Figure 1.
A data type is a sorted table of the values its codes stand for; one table codec serves them all.

Readings chosen where the paper's text is unclear (each checked against Table 1, see
`lab.experiments.table1`):

* Bisection tree: the mantissa bits walk a binary tree over the decade (L, base·L); the values
  are the midpoints of the leaves' intervals. For base 10 the first split is at 4.5·L, not at
  the midpoint 5.5·L, as in Dettmers' own table (TimDettmers/clusterNet `8bit_floats.hdf5`);
  deeper splits and base 2 use plain midpoints.
* Dynamic tree: after the sign, n leading zero bits give the decade base^(offset-1-n), a 1 flag
  bit follows, the remaining bits walk the tree. The two leftover patterns (all zeros, and
  zeros ending in the flag) stand for 0 and base^offset (1.0 for offset 0): 126 + 2 magnitudes
  for 8 bits, Dettmers' exact table.
* Static tree ("8-bit static tree"): sign, a 3-bit exponent e giving base^(offset-e), and a
  4-bit tree over (0.1, 1) split as above. The paper names no pattern for 0; we read it as the
  dynamic tree does (its all-zero magnitude is 0): the lowest pattern, the smallest exponent's
  first leaf (1.22e-7 for offset 1), stands for 0, for either sign bit, so 255 values and
  all-zero input decodes to zeros. With the kernel's rounding, 25 M samples and five seeds
  (bench/results/table1-25M-cpu.json) it is within 0.01 points of the paper's relative errors
  on U(0,1) and N(0,1), 0.023-0.026 on N(0,10²) and 0.055-0.057 on N(0,0.2²).
* Mantissa ("8-bit mantissa"): sign, 3-bit exponent e, and a 4-bit integer mantissa m:
  value m·base^(offset-e) (§3.1: "the mantissa will hold values between 0 and 15").
  Reproduces the paper's 7.22/6.89/7.19/8.26 % to within about 0.2 points.
* Linear quantization: sign and a 7-bit integer, value k/127 after absmax scaling (the paper's
  "7-bit bisection tree with the range [0,1]", read as the grid that contains 0 and 1).
  With the kernel's rounding it gives 5.95-6.28 % on N(0,1) over five seeds of 25 M samples
  (paper 6.47 %): its error follows the sample's largest |x|, and 6.47 % needs one near 6σ,
  which about 5 % of such draws reach (exact rounding: 5.04-5.34 %).
* Offset: the exponent applied to the top decade: static types cover up to about base^offset
  (tree) or (2^mb - 1)·base^offset (integer mantissa); the paper uses 10^1, and 10^2 for N(0,10²).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class ValueTable:
    """A sorted table of the distinct values a code can stand for (float64, ascending)."""

    name: str
    values: tuple[float, ...]
    bits: int

    def __post_init__(self) -> None:
        v = np.asarray(self.values, dtype=np.float64)
        if v.ndim != 1 or len(v) < 2:
            raise ValueError(f"table {self.name!r} needs at least 2 distinct values, has {len(v)}")
        if len(v) > 256:
            raise ValueError(f"table {self.name!r} has {len(v)} values; a code byte holds at most 256")
        if not np.all(np.diff(v) > 0):
            raise ValueError(f"table {self.name!r} must be strictly ascending")
        if not np.all(np.isfinite(v.astype(np.float32))):
            raise ValueError(f"table {self.name!r} has values outside float32's range")

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    @property
    def symmetric(self) -> bool:
        """Sign-magnitude table: v is in the table exactly when -v is."""
        v = self.array
        return bool(np.array_equal(v, -v[::-1]))

    @property
    def magnitudes(self) -> np.ndarray:
        """Sorted distinct |values|."""
        return np.unique(np.abs(self.array))

    @property
    def absmax(self) -> float:
        return float(np.abs(self.array).max())

    def normalized(self) -> "ValueTable":
        """The table divided by its largest magnitude (for absmax scaling), in float32 steps."""
        v = (self.array / self.absmax).astype(np.float32).astype(np.float64)
        return ValueTable(self.name, tuple(np.unique(v)), self.bits)


def from_magnitudes(name: str, mags: list[float] | np.ndarray, bits: int, signed: bool) -> ValueTable:
    """Table from magnitudes: ± each magnitude when signed (one shared 0), else as is."""
    m = np.unique(np.asarray(mags, dtype=np.float64).astype(np.float32).astype(np.float64))
    v = np.unique(np.concatenate([-m, m])) if signed else m
    return ValueTable(name, tuple(v + 0.0), bits)  # + 0.0: the shared zero is +0, not -0


def tree_leaves(lower: float, base: int, bits: int) -> np.ndarray:
    """Leaf midpoints of a bisection tree with `bits` levels over (lower, base·lower).

    Base 10 splits first at 4.5·lower (Dettmers' table); other splits are midpoints.
    """
    upper = base * lower
    if bits == 0:
        return np.array([(lower + upper) / 2])
    split = 4.5 * lower if base == 10 else (lower + upper) / 2
    half = 2 ** (bits - 1)
    out = []
    for a, b in ((lower, split), (split, upper)):
        edges = np.linspace(a, b, half + 1)
        out.append((edges[1:] + edges[:-1]) / 2)
    return np.concatenate(out)


def linear_leaves(lower: float, base: int, bits: int) -> np.ndarray:
    """Midpoints of 2**bits equal bins over (lower, base·lower)."""
    edges = np.linspace(lower, base * lower, 2 ** bits + 1)
    return (edges[1:] + edges[:-1]) / 2


@dataclass(frozen=True)
class BitLayout:
    """A user bit layout: total bits, sign, exponent and mantissa (paper §3.1, Figure 1).

    total_bits: 2..8. signed: one sign bit. exponent_bits: width of a static exponent field e,
    whose value scales by base^(offset - e). base: 2 or 10. offset: exponent of the top decade.
    mantissa: 'linear' (static: integer m, value m·base^(offset-e), so values repeat across exponents;
    dynamic: equal bins), 'tree' (bisection tree over the decade) or 'float' (static, base 2: an
    IEEE-style float, value (1 + m/2^M)·2^(offset-e) with the implicit leading 1, the lowest exponent
    subnormal m/2^M·2^(offset-e+1): sign + 3 exponent + 2 mantissa bits is the grid of OCP MX's
    mxfp6_e3m2, every code but −0 a distinct value). dynamic: leading zeros give the exponent (then
    exponent_bits must be 0). Every layout codes 0 exactly: the linear mantissa has m = 0, the
    dynamic tree its all-zero pattern, and a static tree gives its lowest pattern (the smallest
    leaf of the smallest exponent) to 0.
    """

    total_bits: int = 8
    signed: bool = True
    exponent_bits: int = 0
    base: int = 10
    offset: int = 0
    mantissa: str = "tree"
    dynamic: bool = True

    def validate(self) -> None:
        """Raise ValueError naming the wrong field and what is allowed."""
        if not isinstance(self.total_bits, int) or not 2 <= self.total_bits <= 8:
            raise ValueError(f"total_bits={self.total_bits!r}: allowed 2..8")
        if self.base not in (2, 10):
            raise ValueError(f"base={self.base!r}: allowed 2 or 10")
        if self.mantissa not in ("linear", "tree", "float"):
            raise ValueError(f"mantissa={self.mantissa!r}: allowed 'linear', 'tree' or 'float'")
        if self.mantissa == "float" and (self.dynamic or self.base != 2 or not self.exponent_bits):
            raise ValueError("mantissa='float' is a binary float (1.m × 2^e): it needs dynamic=False, base=2 and "
                             "at least 1 exponent bit")
        if not isinstance(self.offset, int):
            raise ValueError(f"offset={self.offset!r}: must be an integer exponent")
        k = self.magnitude_bits
        if self.dynamic:
            if self.exponent_bits != 0:
                raise ValueError(
                    f"exponent_bits={self.exponent_bits}: a dynamic exponent is the count of leading "
                    "zeros, so exponent_bits must be 0 when dynamic=True")
            if k < 2:
                raise ValueError(
                    f"total_bits={self.total_bits} with signed={self.signed} leaves {k} magnitude bit(s); "
                    "a dynamic exponent needs at least 2 (flag + one more)")
        else:
            if not isinstance(self.exponent_bits, int) or not 0 <= self.exponent_bits <= k:
                raise ValueError(
                    f"exponent_bits={self.exponent_bits!r}: allowed 0..{k} "
                    f"(total_bits {self.total_bits} minus {int(self.signed)} sign bit)")
            if self.mantissa in ("linear", "float") and k - self.exponent_bits == 0:
                raise ValueError(
                    f"exponent_bits={self.exponent_bits} leaves no mantissa bits; a linear mantissa "
                    f"needs at least 1: allowed exponent_bits 0..{k - 1}")
        lo, hi = self._offset_range()
        if not lo <= self.offset <= hi:
            raise ValueError(f"offset={self.offset}: this layout's values leave float32's range; "
                             f"allowed offsets {lo}..{hi}")

    @property
    def magnitude_bits(self) -> int:
        return self.total_bits - int(self.signed)

    @property
    def mantissa_bits(self) -> int:
        return self.magnitude_bits - (0 if self.dynamic else self.exponent_bits)

    def _magnitudes(self, offset: int) -> np.ndarray:
        base, k = self.base, self.magnitude_bits
        if self.dynamic:
            leaves = tree_leaves if self.mantissa == "tree" else linear_leaves
            mags = [0.0, float(base) ** offset]
            for n in range(k - 1):
                mags.extend(leaves(float(base) ** (offset - 1 - n), base, k - 1 - n))
            return np.asarray(mags)
        mb = k - self.exponent_bits
        if self.mantissa == "float":
            frac = np.arange(2 ** mb) / 2 ** mb
            low = 2 ** self.exponent_bits - 1  # the lowest binade: subnormal, no implicit 1
            mags = [(1 + frac) * float(base) ** (offset - e) for e in range(low)]
            mags.append(frac * float(base) ** (offset - low + 1))
            return np.concatenate(mags)
        mags = []
        for e in range(2 ** self.exponent_bits):
            scale = float(base) ** (offset - e)
            if self.mantissa == "linear":
                mags.extend(np.arange(2 ** mb) * scale)
            else:
                mags.extend(tree_leaves(scale / base, base, mb))
        mags = np.asarray(mags)
        if self.mantissa == "tree":
            mags[np.argmin(mags)] = 0.0  # the lowest pattern stands for 0 (see the module docstring)
        return mags

    def _offset_range(self) -> tuple[int, int]:
        """Offsets whose values stay finite, normal float32 numbers."""
        m = self._magnitudes(0)
        nz = m[m > 0]
        lo_f, hi_f = float(nz.min()), float(nz.max())
        log = math.log(self.base)
        lo = math.ceil((math.log(F32_TINY) - math.log(lo_f)) / log)
        hi = math.floor((math.log(F32_MAX) - math.log(hi_f)) / log)
        return lo, hi

    def table(self, name: str | None = None) -> ValueTable:
        """The layout's sorted value table."""
        self.validate()
        t = from_magnitudes(name or self.describe(), self._magnitudes(self.offset), self.total_bits, self.signed)
        return t

    def describe(self) -> str:
        sign = "s" if self.signed else "u"
        if self.dynamic:
            kind = f"dyn-{self.mantissa}"
        else:
            kind = f"e{self.exponent_bits}-{self.mantissa}{self.mantissa_bits}"
        return f"{self.total_bits}b-{sign}-{kind}-b{self.base}o{self.offset}"


# ------------------------------------------------------------ the paper's four 8-bit types

def linear() -> ValueTable:
    """8-bit linear quantization: sign + 7-bit integer, k/127 after absmax scaling (§3.1)."""
    return BitLayout(8, True, 0, 10, 0, "linear", False).table("linear").normalized()


def mantissa(offset: int = 1) -> ValueTable:
    """8-bit mantissa: sign + 3-bit exponent + 4-bit integer mantissa, m·10^(offset-e) (§3.1)."""
    return BitLayout(8, True, 3, 10, offset, "linear", False).table(f"mantissa(10^{offset})")


def static_tree(offset: int = 1) -> ValueTable:
    """8-bit static tree: sign + 3-bit exponent + 4-bit bisection tree over (0.1, 1) (§3.1)."""
    return BitLayout(8, True, 3, 10, offset, "tree", False).table(f"static_tree(10^{offset})")


def dynamic_tree() -> ValueTable:
    """8-bit dynamic tree: Dettmers' table, 126 magnitudes over 1e-6..1 plus 0 and ±1 (§3.1)."""
    return BitLayout(8, True, 0, 10, 0, "tree", True).table("dynamic_tree")


def bnb_dynamic() -> ValueTable:
    """bitsandbytes' `create_dynamic_map(signed=True)`: decade i=0..6 holds the 2^i bin
    midpoints of linspace(0.1, 1, 2^i+1) scaled by 10^(i-6), both signs, plus 0 and +1 (no -1)."""
    vals = [0.0, 1.0]
    for i in range(7):
        edges = np.linspace(0.1, 1, 2 ** i + 1)
        means = (edges[1:] + edges[:-1]) / 2 * 10.0 ** (i - 6)
        vals.extend(means)
        vals.extend(-means)
    return ValueTable("bnb_dynamic", tuple(np.unique(np.asarray(vals).astype(np.float32).astype(np.float64))), 8)


PAPER_TYPES = {
    "dynamic_tree": dynamic_tree,
    "linear": linear,
    "mantissa": mantissa,
    "static_tree": static_tree,
}
