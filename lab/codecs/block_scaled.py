"""Shared parts of the block-scaled formats (OCP MX v1.0, NVFP4): element formats, their
round-to-nearest-even (or stochastic) coding, E8M0 scale rules, and sub-byte packing.

OCP Microscaling Formats (MX) v1.0 §5 (element types) and §6.3 (conversion): a block of k values
shares a scale X = 2^(floor(log2 amax) - emax_elem) (rule 'floor', the spec's); elements are
the format's RNE of v/X, saturating to the largest normal. Rule 'rceil' (NVIDIA Transformer
Engine / cuBLAS, torchao's RCEIL) rounds the scale up, X = 2^ceil(log2(amax / max_normal)), so
no element saturates. Element codes are sign-magnitude bytes (E4M3 is the 'fn' variant:
no infinities; the FP6/FP4 types have neither Inf nor NaN; MXINT8 is two's complement with 6
fraction bits, kept symmetric in -127..127).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

E8M0_BIAS = 127
SCALE_RULES = ("floor", "rceil")


@dataclass(frozen=True)
class ElementFormat:
    """An element type of OCP MX v1.0 §5.3: bits, exponent/mantissa split, bias, largest normal."""

    name: str
    bits: int
    ebits: int
    mbits: int
    bias: int
    max_normal: float
    emax: int  # exponent of the largest normal power of two (OCP MX Table 1 "emax_elem")
    is_int: bool = False

    @property
    def torch_dtype(self) -> torch.dtype | None:
        """torch's own dtype for the fp8 types (its cast is RNE and saturates after a clamp)."""
        return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}.get(self.name)


FORMATS: dict[str, ElementFormat] = {
    "e4m3": ElementFormat("e4m3", 8, 4, 3, 7, 448.0, 8),
    "e5m2": ElementFormat("e5m2", 8, 5, 2, 15, 57344.0, 15),
    "e3m2": ElementFormat("e3m2", 6, 3, 2, 3, 28.0, 4),
    "e2m3": ElementFormat("e2m3", 6, 2, 3, 1, 7.5, 2),
    "e2m1": ElementFormat("e2m1", 4, 2, 1, 1, 6.0, 2),
    "int8": ElementFormat("int8", 8, 0, 6, 0, 127 / 64, 0, is_int=True),
}


@functools.lru_cache(maxsize=32)
def value_table(fmt: ElementFormat, device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """float32[256]: the value of every element code (codes >= 2^bits are 0)."""
    c = torch.arange(256, dtype=torch.int64)
    if fmt.is_int:
        v = torch.where(c >= 128, c - 256, c).double() / 64
    else:
        mag_bits = fmt.ebits + fmt.mbits
        sign = torch.where((c >> mag_bits) & 1 == 1, -1.0, 1.0).double()
        field = (c >> fmt.mbits) & ((1 << fmt.ebits) - 1)
        mant = (c & ((1 << fmt.mbits) - 1)).double()
        e = torch.where(field == 0, 1 - fmt.bias, field - fmt.bias).double()
        frac = torch.where(field == 0, mant / 2 ** fmt.mbits, 1 + mant / 2 ** fmt.mbits)
        v = sign * frac * torch.exp2(e)
        if fmt.name == "e4m3":
            v[(c & 0x7F) == 0x7F] = 0.0  # NaN patterns, never produced by encode
        if fmt.name == "e5m2":
            v[(c & 0x7F) >= 0x7C] = 0.0  # Inf/NaN patterns, never produced
    v = torch.where(c < (1 << fmt.bits), v, torch.zeros_like(v))
    return v.float().to(device)


def round_elements(a: torch.Tensor, fmt: ElementFormat, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Element codes (uint8, unpacked) of already-scaled float32 values `a`: round to nearest even
    (or, with `noise` uniform in [0, 1), stochastically), saturating to ± the largest normal.

    Minifloats: with e = max(floor(log2|a|), 1 - bias) and r = round(|a| / 2^(e - mbits)), the
    magnitude code is ((e + bias - 1) << mbits) + r, which covers subnormals, zero and the carry
    into the next binade at once."""
    if fmt.is_int:
        q = a * 64.0
        q = torch.round(q) if noise is None else torch.floor(q + noise)
        return q.clamp(-127, 127).to(torch.int8).view(torch.uint8)
    if noise is None and fmt.torch_dtype is not None:
        return a.clamp(-fmt.max_normal, fmt.max_normal).to(fmt.torch_dtype).view(torch.uint8)
    mag = a.abs().clamp(max=fmt.max_normal)
    e = torch.where(mag > 0, torch.frexp(mag)[1] - 1, -fmt.bias).clamp(min=1 - fmt.bias)
    q = torch.ldexp(mag, (fmt.mbits - e).float())  # exact: a power-of-two scaling
    r = torch.round(q) if noise is None else torch.floor(q + noise)
    code = ((e + (fmt.bias - 1)) << fmt.mbits) + r.to(torch.int32)
    code = code | (torch.signbit(a).to(torch.int32) << (fmt.bits - 1))
    return code.to(torch.uint8)


# ------------------------------------------------------------------ E8M0 scales

@functools.lru_cache(maxsize=8)
def e8m0_table(device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """float32[256]: 2^(b - 127) for b = 0..254 (b = 0 is the fp32 subnormal 2^-127), NaN for 0xFF."""
    b = torch.arange(256, dtype=torch.float64)
    v = torch.exp2(b - E8M0_BIAS)
    v[255] = float("nan")
    return v.float().to(device)


def e8m0_exponent(amax: torch.Tensor, fmt: ElementFormat, rule: str) -> torch.Tensor:
    """The biased E8M0 scale (uint8) of blocks with float32 absmax `amax` (finite, >= 0).

    floor (OCP MX v1.0 §6.3): floor(log2 amax) - emax_elem, read from amax's exponent field
    (a subnormal or zero amax reads as 2^-127); rceil: ceil(log2(amax / max_normal)), exact
    (from frexp), 2^-127 for a zero block. Both clamped to the E8M0 range -127..127."""
    if rule == "floor":
        field = (amax.view(torch.int32) >> 23) & 0xFF
        unbiased = field - E8M0_BIAS - fmt.emax
    elif rule == "rceil":
        descale = amax / fmt.max_normal  # 0 also where it underflows: then the scale is 2^-127 anyway
        m, E = torch.frexp(descale)
        unbiased = torch.where(m == 0.5, E - 1, E)
        unbiased = torch.where(descale > 0, unbiased, torch.full_like(unbiased, -E8M0_BIAS))
    else:
        raise ValueError(f"scale rule {rule!r}; allowed: {', '.join(SCALE_RULES)}")
    return (unbiased.clamp(-E8M0_BIAS, E8M0_BIAS) + E8M0_BIAS).to(torch.uint8)


def e8m0_value(biased: torch.Tensor) -> torch.Tensor:
    """float32 2^(b - 127) of biased E8M0 bytes."""
    return e8m0_table(biased.device)[biased.long()]


# ------------------------------------------------------------------ packing

def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack unsigned `bits`-bit codes little-endian into bytes: 8 bits as is, 4 bits two to a byte
    (the first value in the low nibble, as torchao's pack_uint4 and the hardware FP4 layout),
    6 bits four to three bytes (v0 | v1 << 6 | v2 << 12 | v3 << 18, low byte first).
    ceil(n * bits / 8) bytes."""
    c = codes.reshape(-1)
    n = c.numel()
    if bits == 8:
        return c
    per = {4: 2, 6: 4}[bits]
    pad = (-c.numel()) % per
    if pad:
        c = torch.cat([c, c.new_zeros(pad)])
    if bits == 4:
        g = c.view(-1, 2)
        return g[:, 0] | (g[:, 1] << 4)
    g = c.view(-1, 4).to(torch.int32)
    w = g[:, 0] | (g[:, 1] << 6) | (g[:, 2] << 12) | (g[:, 3] << 18)
    out = torch.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], 1).to(torch.uint8).view(-1)
    return out[: (n * 6 + 7) // 8]


def unpack_codes(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """Inverse of `pack_codes`: n uint8 codes."""
    if bits == 8:
        return packed[:n]
    if bits == 4:
        p = packed.reshape(-1, 1)
        return torch.cat([p & 0xF, p >> 4], 1).view(-1)[:n]
    p = packed
    pad = (-p.numel()) % 3
    if pad:
        p = torch.cat([p, p.new_zeros(pad)])
    w = p.view(-1, 3).to(torch.int32)
    w = w[:, 0] | (w[:, 1] << 8) | (w[:, 2] << 16)
    return torch.stack([(w >> s) & 0x3F for s in (0, 6, 12, 18)], 1).to(torch.uint8).view(-1)[:n]


def blocks(flat: torch.Tensor, block: int) -> tuple[torch.Tensor, int]:
    """flat as a [ceil(n / block), block] float32 view, the tail block padded with zeros (zeros
    change no block's absmax); returns (view, n)."""
    n = flat.numel()
    pad = (-n) % block
    f = flat if flat.dtype == torch.float32 else flat.float()
    if pad:
        f = torch.cat([f, f.new_zeros(pad)])
    return f.view(-1, block), n


def round_to_odd_f32(p: torch.Tensor) -> torch.Tensor:
    """float32 of float64 `p` rounded to odd (truncated, the last bit set when inexact; NaN stays
    NaN): a later round-to-nearest to fp16 or bf16 then rounds p itself correctly (Boldo and
    Melquiond 2008: round-to-odd then round-to-nearest with 2 more bits of precision is one rounding)."""
    f = p.float()
    inexact = (f.double() != p) & ~torch.isnan(p)
    bits = f.view(torch.int32)
    bits = torch.where(inexact & (f.double().abs() > p.abs()), bits - 1, bits)  # one step toward zero
    return torch.where(inexact, bits | 1, bits).view(torch.float32)


def decode_blocks(codes: torch.Tensor, fmt: ElementFormat, scale: torch.Tensor, block: int,
                  dtype: torch.dtype) -> torch.Tensor:
    """values[codes] * scale per block (n unpacked codes, a [ceil(n / block)] scale, float32 or
    float64 holding an exact product such as NVFP4's E4M3 scale times its tensor scale) as n values
    of `dtype` with one rounding: the product is exact in float64 (at most 8 + 4 + 24 significant
    bits), saturated to dtype's range (a value past fp16's maximum decodes to that maximum, not Inf),
    then rounded once to dtype (through round-to-odd float32 for fp16/bf16). A NaN scale (E8M0 0xFF,
    E4M3 0x7F) makes its whole block NaN, as OCP MX v1.0 §5.2 says."""
    n, nb = codes.numel(), scale.numel()
    full = codes if n == nb * block else torch.cat([codes, codes.new_zeros(nb * block - n)])
    v = value_table(fmt, codes.device).double()[full.long().view(nb, block)] * scale.double()[:, None]
    big = torch.finfo(dtype).max
    v = v.view(-1)[:n].clamp(-big, big)
    return v.float() if dtype == torch.float32 else round_to_odd_f32(v).to(dtype)


# ------------------------------------------------------------------ stochastic rounding noise

_M32 = 0xFFFFFFFF


def _lowbias32(x: torch.Tensor) -> torch.Tensor:
    """Chris Wellons' lowbias32 hash of int64-held 32-bit values (products wrap; the low 32 bits kept)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _M32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def noise_from_index(i: torch.Tensor, k0: int | torch.Tensor, k1: int | torch.Tensor) -> torch.Tensor:
    """float32 noise of int64 element indices i under the key halves k0, k1 (see `uniform_noise`)."""
    h = _lowbias32(_lowbias32((i & _M32) ^ k0) ^ (i >> 32) ^ k1)
    return (h >> 8).to(torch.float32) * 2.0 ** -24


def uniform_noise(n: int, key: int, device: torch.device | str = "cpu", start: int = 0) -> torch.Tensor:
    """float32[n] uniform in [0, 1) on a 2^-24 grid for the elements start..start+n-1: element i is a
    counter-based hash of (i, key),
    h = lowbias32(lowbias32(lo32(i) ^ k0) ^ hi32(i) ^ k1) with key = k1 << 32 | k0, noise = (h >> 8) / 2^24.
    kernels/block_scaled.cu computes the same numbers, so stochastic rounding agrees bit for bit
    between the CPU and CUDA paths (a torch.Generator's stream differs between devices)."""
    if not 0 <= key < 2**64:
        raise ValueError(f"key={key!r}; allowed: an integer in 0..2**64-1")
    i = torch.arange(start, start + n, dtype=torch.int64, device=device)
    return noise_from_index(i, key & _M32, key >> 32)
