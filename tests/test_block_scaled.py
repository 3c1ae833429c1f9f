"""Block-scaled formats (OCP MX v1.0, NVFP4): bit-for-bit agreement with torchao's to_mx and
nvfp4_quantize, the intentional differences, packing, tails, edges, and the allreduce hop."""
from __future__ import annotations

import pytest
import torch

from lab.codecs import get_codec
from lab.codecs.block_scaled import (FORMATS, pack_codes, round_elements, unpack_codes, value_table)
from lab.codecs.mx import MX_NAMES, encode_mx_reference
from lab.codecs.nvfp4 import NVFP4Codec

ALL = list(MX_NAMES) + ["nvfp4"]


def _blocks_input(kind: str, nblocks: int = 64, seed: int = 0) -> torch.Tensor:
    """[nblocks * 32] float32 of one kind: random, heavy-tailed, all-zero, subnormal-scale, saturating."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nblocks, 32, generator=g)
    if kind == "heavy":
        x = x / torch.rand(nblocks, 32, generator=g).clamp(min=1e-3) ** (1 / 3)  # Student-t-like tails
    elif kind == "zero":
        x[::2] = 0
    elif kind == "subnormal_scale":  # blocks whose E8M0 scale sits at 2^-127 (or just above)
        x = x * torch.exp2(-torch.randint(118, 140, (nblocks, 1), generator=g).float())
    elif kind == "saturating":  # block maxima just under the next power of two: the floor rule saturates them
        x[:, 0] = torch.exp2(torch.randint(-20, 20, (nblocks,), generator=g).float()) * 1.99
    return x.reshape(-1)


# ------------------------------------------------------------------ torchao agreement

def _torchao() -> None:
    """Skip a torchao comparison where torchao (dev extra) is missing: imported here, not at collection (1-2 s)."""
    pytest.importorskip("torchao.prototype.mx_formats.mx_tensor", reason="torchao (dev extra) not installed")


def _tao_mx(x: torch.Tensor, element: str, rule: str) -> tuple[torch.Tensor, torch.Tensor]:
    _torchao()
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    from torchao.prototype.mx_formats.mx_tensor import ScaleCalculationMode, to_mx
    dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m3": DTYPE_FP6_E2M3,
          "e3m2": DTYPE_FP6_E3M2, "e2m1": torch.float4_e2m1fn_x2}[element]
    mode = {"floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL}[rule]
    s, d = to_mx(x.view(-1, 128), dt, 32, mode)
    d = d.view(torch.uint8).reshape(-1)
    if element == "e2m1":
        d = unpack_codes(d, 4, x.numel())
    return d, s.view(torch.uint8).reshape(-1)


def _tao_quirk_blocks(scales: torch.Tensor, rule: str) -> torch.Tensor:
    """Blocks where torchao departs from the spec on purpose: its E8M0 scale byte is 0 (2^-127).
    floor: it divides by 2^-126 (F32_MIN_NORMAL, a Triton workaround) while storing 2^-127;
    rceil: it multiplies by 1.0 instead of 2^127. Elsewhere the two agree bit for bit."""
    return scales == 0


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"])
@pytest.mark.parametrize("kind", ["random", "heavy", "zero", "subnormal_scale", "saturating"])
def test_mx_matches_torchao(kind: str, element: str, rule: str) -> None:
    x = _blocks_input(kind)
    codes, scales = encode_mx_reference(x.view(-1, 32), FORMATS[element], rule)
    codes = codes.reshape(-1)
    want_c, want_s = _tao_mx(x, element, rule)
    assert torch.equal(scales, want_s)
    quirk = _tao_quirk_blocks(scales, rule) & x.view(-1, 32).ne(0).any(1)
    same = ~quirk.repeat_interleave(32)
    assert torch.equal(codes[same], want_c[same])
    if kind == "subnormal_scale":
        assert bool(quirk.any())  # the difference is exercised, and ours follows the spec:
        v = value_table(FORMATS[element])[codes.long()].view(-1, 32)
        spec = round_elements(x.view(-1, 32) / 2.0 ** -127, FORMATS[element])
        assert torch.equal(codes.view(-1, 32)[quirk], spec[quirk])
        assert bool(torch.isfinite(v).all())
    # the codec's own (possibly compiled) path gives the same payload
    c = get_codec(next(k for k, v in MX_NAMES.items() if v == element), scale_rule=rule)
    enc = c.encode(x)
    assert torch.equal(enc.tensors["scales"], scales)
    assert torch.equal(unpack_codes(enc.tensors["codes"], c.bits, x.numel()), codes)


@pytest.mark.parametrize("kind", ["random", "heavy", "zero", "subnormal_scale", "saturating"])
def test_nvfp4_matches_torchao(kind: str) -> None:
    _torchao()
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale
    x = _blocks_input(kind)
    if kind == "subnormal_scale":
        x = x * 2.0 ** 110  # torchao's tensor scale overflows 1/s below amax ~2^-108.6 (ours clamps, see nvfp4.py)
    s = per_tensor_amax_to_scale(x.abs().amax())
    bs, d = nvfp4_quantize(x.view(16, -1), 16, s)
    enc = NVFP4Codec().encode(x)
    assert torch.equal(enc.tensors["tensor_scale"], s.reshape(1))
    assert torch.equal(enc.tensors["scales"].view(torch.uint8), bs.reshape(-1).view(torch.uint8))
    assert torch.equal(enc.tensors["codes"], d.reshape(-1))


def test_nvfp4_all_zero_and_tiny_tensor_where_torchao_gives_nan() -> None:
    """Intentional difference: torchao's two-level scale is 0 for an all-zero tensor (0/0 -> NaN
    codes' scale) and 1/s overflows for a tiny one; ours decodes zeros and stays finite."""
    c = NVFP4Codec()
    assert not bool(c.roundtrip(torch.zeros(40)).any())
    x = torch.randn(64) * 2.0 ** -130
    y = c.roundtrip(x)
    assert bool(torch.isfinite(y).all()) and float((y - x).abs().max()) <= float(x.abs().max())


# ------------------------------------------------------------------ formats, packing, wire

def test_generic_rounding_equals_torch_fp8_casts() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(100_000, generator=g) * torch.exp2(torch.randint(-24, 24, (100_000,), generator=g).float())
    a[:3] = torch.tensor([0.0, -0.0, 1e30])
    for name, dt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        f = FORMATS[name]
        generic = FORMATS[name].__class__(**{**f.__dict__, "name": "generic"})  # no torch dtype: the formula
        want = a.clamp(-f.max_normal, f.max_normal).to(dt).view(torch.uint8)
        assert torch.equal(round_elements(a, generic), want)
        assert torch.equal(value_table(f)[want.long()], a.clamp(-f.max_normal, f.max_normal).to(dt).float())


@pytest.mark.parametrize("element", list(FORMATS))
def test_every_element_value_codes_to_itself(element: str) -> None:
    f = FORMATS[element]
    codes = torch.arange(2 ** f.bits, dtype=torch.uint8)
    v = value_table(f)[codes.long()]
    ok = torch.isfinite(v) & (v.abs() <= f.max_normal)
    if element == "e4m3":
        ok &= (codes & 0x7F) != 0x7F
    if element == "e5m2":
        ok &= (codes & 0x7F) < 0x7C
    back = round_elements(v[ok], f)
    assert torch.equal(value_table(f)[back.long()], v[ok])
    assert float(v[ok].abs().max()) == f.max_normal


@pytest.mark.parametrize("bits", [4, 6, 8])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 31, 33, 1001])
def test_packing_roundtrips_at_its_honest_size(bits: int, n: int) -> None:
    c = torch.randint(0, 2 ** bits, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(n))
    p = pack_codes(c, bits)
    assert p.numel() == (n * bits + 7) // 8
    assert torch.equal(unpack_codes(p, bits, n), c)


def test_fp6_packs_four_values_in_three_bytes_little_endian() -> None:
    p = pack_codes(torch.tensor([1, 2, 3, 63], dtype=torch.uint8), 6)
    w = 1 | 2 << 6 | 3 << 12 | 63 << 18
    assert p.tolist() == [w & 0xFF, (w >> 8) & 0xFF, w >> 16]


@pytest.mark.parametrize("name,bpv", [("mxfp8_e4m3", 8.25), ("mxfp8_e5m2", 8.25), ("mxfp6_e3m2", 6.25),
                                      ("mxfp6_e2m3", 6.25), ("mxfp4_e2m1", 4.25), ("mxint8", 8.25)])
def test_mx_bits_per_value(name: str, bpv: float) -> None:
    enc = get_codec(name).encode(torch.randn(32 * 1024))
    assert enc.bits_per_value == bpv
    assert enc.wire_bytes == sum(t.numel() * t.element_size() for t in enc.tensors.values())


def test_nvfp4_bits_per_value() -> None:
    n = 16 * 4096
    assert get_codec("nvfp4").encode(torch.randn(n)).wire_bytes == n // 2 + n // 16 + 4  # 4.5 bits + 32


def test_mxint8_codes_spec_rule() -> None:
    """MXINT8: X = 2^floor(log2 amax) (emax 0), elements round(v / X · 64), symmetric -127..127."""
    x = torch.tensor([1.99, -1.0, 0.5, 0.0] + [0.0] * 28)
    enc = get_codec("mxint8").encode(x)
    assert enc.tensors["scales"].tolist() == [127]
    assert enc.tensors["codes"].view(torch.int8)[:4].tolist() == [127, -64, 32, 0]


def test_floor_rule_saturates_rceil_does_not() -> None:
    x = torch.zeros(32)
    x[0], x[1] = 1.99 * 256, 1.0  # e4m3: floor gives X = 1, 509.44 saturates to 448
    floor, rceil = get_codec("mxfp8_e4m3"), get_codec("mxfp8_e4m3", scale_rule="rceil")
    assert float(floor.roundtrip(x)[0]) == 448.0
    assert abs(float(rceil.roundtrip(x)[0]) - 509.44) / 509.44 < 2 ** -4


# ------------------------------------------------------------------ edges

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n", [1, 31, 33, 16 * 1024 + 5])
def test_tail_block(name: str, n: int) -> None:
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    c = get_codec(name)
    enc = c.encode(x)
    y = c.decode(enc)
    assert y.shape == x.shape
    blocks = -(-n // c.block_size)
    bits = 4 if name == "nvfp4" else c.bits
    assert enc.wire_bytes == (n * bits + 7) // 8 + blocks + (4 if name == "nvfp4" else 0)
    # the tail coded as a block of its own: the same values as encoding it alone (MX: per-block scale)
    if name != "nvfp4":
        full = (n // 32) * 32
        assert torch.equal(y[full:], c.roundtrip(x[full:]))
    assert float((y - x).abs().max()) <= 0.5 * float(x.abs().max())


@pytest.mark.parametrize("name", ALL)
def test_nonfinite_zero_dtypes_empty_meta(name: str) -> None:
    c = get_codec(name)
    x = torch.randn(100)
    x[37] = float("nan")
    with pytest.raises(ValueError, match="non-finite.*index 37"):
        c.encode(x)
    y = get_codec(name, nonfinite="saturate").roundtrip(x)
    assert bool(torch.isfinite(y).all()) and float(y[37]) == 0.0
    assert not bool(c.roundtrip(torch.zeros(70)).any())
    for dt in (torch.float16, torch.bfloat16):
        xd = torch.randn(3, 50).to(dt)
        yd = c.roundtrip(xd)
        assert yd.dtype == dt and yd.shape == xd.shape
        assert float((yd.float() - xd.float()).norm() / xd.float().norm()) < 0.2
    big = torch.full((32,), 65504.0, dtype=torch.float16)
    big[1::2] = 65000.0
    assert bool(torch.isfinite(c.roundtrip(big)).all())  # rounded-up values saturate to fp16's max
    assert c.encode(torch.empty(0)).wire_bytes == 0
    with pytest.raises(ValueError, match="meta tensors are not supported"):
        c.encode(torch.empty(4, device="meta"))


def test_nvfp4_stochastic_is_seeded_and_unbiased() -> None:
    x = torch.full((16 * 256,), 0.7)
    x[::16] = 6.0  # every block scale is 1 · tensor scale: 0.7 lies between FP4 values 0.5 and 1.0
    rest = torch.ones_like(x, dtype=torch.bool)
    rest[::16] = False
    a = NVFP4Codec(rounding="stochastic", seed=3).roundtrip(x)
    b = NVFP4Codec(rounding="stochastic", seed=3).roundtrip(x)
    assert torch.equal(a, b)
    assert set(a[rest].unique().tolist()) == {0.5, 1.0}
    assert abs(float(a[rest].mean()) - 0.7) < 0.02
    assert not torch.equal(a, NVFP4Codec(rounding="stochastic", seed=4).roundtrip(x))
    assert float(NVFP4Codec().roundtrip(x)[1]) == 0.5


def test_bad_options_are_clear() -> None:
    with pytest.raises(ValueError, match="scale_rule"):
        get_codec("mxfp8_e4m3", scale_rule="up")
    with pytest.raises(ValueError, match="rounding"):
        get_codec("nvfp4", rounding="sr")


# ------------------------------------------------------------------ collectives

@pytest.mark.parametrize("name", ALL)
def test_ring_allreduce_on_simcomm(name: str) -> None:
    from lab.comm import allreduce, simulate
    P, n = 4, 1000
    xs = [torch.randn(n, generator=torch.Generator().manual_seed(r)) for r in range(P)]
    outs = simulate(lambda comm: allreduce(comm, xs[comm.rank], algorithm="ring", codec=get_codec(name)), P)
    exact = torch.stack(xs).sum(0)
    for o in outs:
        assert torch.equal(o, outs[0])
        assert o.shape == exact.shape
        assert float((o - exact).norm() / exact.norm()) < (0.6 if "4" in name else 0.15)


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("name", list(MX_NAMES))
def test_compiled_mx_equals_reference(name: str, rule: str) -> None:
    """Inputs with at least cpu.MIN_COMPILED values in whole blocks take the fused torch.compile
    path (the tail block the reference): bit for bit the reference, packed codes and scales."""
    x = torch.cat([_blocks_input(k, nblocks=512, seed=5) for k in ("heavy", "zero", "subnormal_scale", "saturating")])
    x = torch.cat([x, torch.randn(7) * 1e-3])  # a tail block of 7
    c = get_codec(name, scale_rule=rule)
    enc = c.encode(x)
    codes, scales = encode_mx_reference(torch.cat([x, x.new_zeros(25)]).view(-1, 32), c.fmt, rule)
    assert torch.equal(enc.tensors["scales"], scales)
    assert torch.equal(enc.tensors["codes"], pack_codes(codes.view(-1)[:x.numel()], c.bits))


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_compiled_nvfp4_equals_reference(rounding: str, monkeypatch) -> None:
    """NVFP4 with at least cpu.MIN_COMPILED values in whole blocks: the fused block absmax and
    encode (the tail block by the reference, its noise at its own indices) give the reference's bytes."""
    x = torch.cat([_blocks_input(k, nblocks=512, seed=6) for k in ("heavy", "zero", "saturating", "random")])
    x = torch.cat([x, torch.randn(9)])  # a tail block of 9
    fast = NVFP4Codec(rounding=rounding, seed=5).encode(x)
    monkeypatch.setenv("PARALAB_COMPILE", "0")
    ref = NVFP4Codec(rounding=rounding, seed=5).encode(x)
    for k in ("codes", "scales", "tensor_scale"):
        assert torch.equal(fast.tensors[k].view(torch.uint8), ref.tensors[k].view(torch.uint8)), k
