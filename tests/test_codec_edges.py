"""Every registered codec (from the registry, so new ones are swept too) at the edges of fp32,
fp16 and bf16: subnormals, values near the dtype's maximum, all-equal, a single value, huge and
tiny mixed, NaN/Inf at the start, middle and end, non-contiguous, 0-d and empty inputs.

The rule: a decode within the codec family's error bound, or a ValueError naming the problem;
never NaN or Inf from finite input (the unscaled formats saturate, and count it in
meta['saturated']). Error feedback around each codec keeps its invariant on the same inputs.
Deterministic (derandomized hypothesis, seeded torch generators) and small: eager paths only.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from lab.codecs import ErrorFeedback, get_codec
from lab.codecs.registry import codec_names
from lab.codecs.block_scaled import e8m0_value
from lab.codecs.mx import MXCodec
from lab.codecs.native import CastCodec, Fp8Codec, Int8Codec
from lab.codecs.nvfp4 import E2M1, NVFP4Codec
from lab.codecs.onebit import OneBit
from lab.codecs.powersgd import PowerSGD
from lab.codecs.qsgd import QSGD
from lab.codecs.sparsify import RandomK, Threshold, TopK
from lab.codecs.table_codec import TableCodec
from lab.codecs.terngrad import TernGrad

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# the registry's codecs with their defaults, plus the option that changes a family's edge behaviour
SPECS = [(name, {}) for name in codec_names()] + [
    ("dynamic_tree", {"block_size": 4}), ("linear", {"block_size": 3}), ("randomk", {"unbiased": True, "k": 2}),
    ("topk", {"ratio": 0.5}), ("qsgd", {"levels": 1}), ("threshold", {"tau": 0.5, "relative": False, "capacity": 0.5}),
]
IDS = [name + "".join(f",{k}={v}" for k, v in kw.items()) for name, kw in SPECS]
KINDS = ("random", "subnormal", "near_max", "all_equal", "single", "mixed", "nonfinite", "noncontiguous",
         "zero_d", "empty")
# every example runs every kind (hypothesis draws the size and the seed), so each kind is covered
# for every codec and dtype however few the examples
SWEEP = settings(derandomize=True, max_examples=6, deadline=None)
SWEEP_EF = settings(derandomize=True, max_examples=3, deadline=None)


# ------------------------------------------------------------------ inputs

def _sub(dtype: torch.dtype) -> float:
    """The smallest positive subnormal of dtype."""
    fi = torch.finfo(dtype)
    return fi.tiny * fi.eps  # 2^-149, 2^-24, 2^-133


def make_input(kind: str, dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    """A deterministic input of one edge kind (float64 arithmetic, cast exactly or rounded down)."""
    g = torch.Generator().manual_seed(seed)
    fi = torch.finfo(dtype)
    sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
    zero = torch.rand(n, generator=g) < 0.2
    if kind == "random":
        x = torch.randn(n, generator=g).double() * 10.0 ** torch.randint(-3, 4, (1,), generator=g).item()
    elif kind == "subnormal":
        k = torch.randint(1, round(1 / fi.eps), (n,), generator=g).double()  # tiny = sub / eps
        x = torch.where(zero, 0.0, sign * k * _sub(dtype))
    elif kind == "near_max":
        x = torch.where(zero, 0.0, sign * fi.max * (0.5 + 0.5 * torch.rand(n, generator=g).double()))
        x[0] = fi.max
    elif kind == "all_equal":
        v = [0.0, -0.0, 1.0, -3.5, _sub(dtype), fi.max, -fi.max, fi.tiny][seed % 8]
        x = torch.full((n,), v, dtype=torch.float64)
    elif kind == "single":
        x = torch.randn(1, generator=g).double() * [1.0, fi.max / 2, _sub(dtype) * 3][seed % 3]
    elif kind == "mixed":
        pick = torch.randint(0, 3, (n,), generator=g)
        mags = torch.stack([torch.full((n,), fi.max * 0.9, dtype=torch.float64),
                            torch.full((n,), _sub(dtype) * 5, dtype=torch.float64),
                            torch.rand(n, generator=g).double()])
        x = sign * mags.gather(0, pick[None])[0]
        x[seed % n] = fi.max * 0.75
    elif kind == "nonfinite":
        x = torch.randn(n, generator=g).double()
        where = [0, n // 2, n - 1][seed % 3]
        x[where] = [float("nan"), float("inf"), float("-inf")][(seed // 3) % 3]
    elif kind == "noncontiguous":
        base = torch.randn(n + 2, 5, generator=g).double()
        return base.to(dtype).t()[:, ::2]
    elif kind == "zero_d":
        return torch.tensor(float(torch.randn((), generator=g)) * 100, dtype=dtype)
    elif kind == "empty":
        return torch.empty((0,) if seed % 2 else (0, 3), dtype=dtype)
    else:
        raise AssertionError(kind)
    return x.to(dtype)


# ------------------------------------------------------------------ error bounds per family

def _rounding(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Half an ulp of dtype at |y| plus its subnormal step: the output cast's error."""
    fi = torch.finfo(dtype)
    return y.abs() * fi.eps / 2 + _sub(dtype)


def _block_scale(codec: TableCodec, enc, n: int) -> torch.Tensor:
    s = enc.tensors["scales"].double()
    if codec.scale == "none":
        return torch.ones(n, dtype=torch.float64)
    if codec.block_size is None:
        return s.expand(n)
    return s.repeat_interleave(codec.block_size)[:n]


def check_table(codec: TableCodec, x: torch.Tensor, enc, y: torch.Tensor) -> None:
    """Nearest rounding: |y - clamp(x)| <= half the local table gap times the block's scale;
    values beyond an unscaled table saturate to its end and are counted."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    s = _block_scale(codec, enc, xd.numel())
    v = codec.values.double()
    a = xd / torch.where(s > 0, s, torch.ones_like(s))
    target_a = a.clamp(float(v[0]), float(v[-1]))
    i = torch.bucketize(target_a, v).clamp(1, len(v) - 1)
    gap = v[i] - v[i - 1]
    tol = gap * s / 2 * (1 + 1e-5) + 1e-6 * s * v.abs().max() + _rounding(yd, x.dtype) + 2 ** -149
    err = (yd - target_a * s).abs()
    assert bool((err <= tol).all()), f"{codec}: worst {float((err - tol).max()):.3g} over the bound"
    if codec.scale == "none":
        assert enc.meta["saturated"] == int((a.abs() > v.abs().max()).sum())


def check_cast(codec: CastCodec, x, enc, y) -> None:
    wmax, omax = torch.finfo(codec.wire_dtype).max, torch.finfo(x.dtype).max
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    target = xd.clamp(-wmax, wmax).clamp(-omax, omax)
    tol = _rounding(target, codec.wire_dtype) + _rounding(target, x.dtype) + target.abs() * 1e-12
    assert bool(((yd - target).abs() <= tol).all())
    assert enc.meta["saturated"] == int((xd.abs() > wmax).sum())


def check_scaled_uniform(codec, x, enc, y) -> None:
    """int8 and fp8: within half the format's step at the absmax (relative for fp8) of the absmax."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    absmax = xd.abs().max() if xd.numel() else 0.0
    if isinstance(codec, Int8Codec):
        tol = absmax / 254 + 0 * xd
    else:
        rel = {"fp8_e4m3": 2.0 ** -4, "fp8_e5m2": 2.0 ** -3}[codec.name]
        sub = {"fp8_e4m3": 2.0 ** -9, "fp8_e5m2": 2.0 ** -16}[codec.name] / codec.fmax
        tol = rel * xd.abs() + sub / 2 * absmax
    tol = tol * (1 + 1e-5) + 1e-6 * absmax + _rounding(yd, x.dtype)
    assert bool(((yd - xd).abs() <= tol).all())


def check_onebit(codec, x, enc, y) -> None:
    """Two values: the means of the non-negative and negative parts (bounded by the absmax, sums kept)."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    pos = xd >= 0
    for part in (pos, ~pos):
        if part.any():
            mean = xd[part].mean()
            assert bool(((yd[part] - mean).abs() <= mean.abs() * 1e-6 + _rounding(mean, x.dtype)).all())


def check_terngrad(codec, x, enc, y) -> None:
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    s = xd.abs().max() if xd.numel() else 0.0
    assert bool(((yd == 0) | ((yd.abs() - s).abs() <= _rounding(yd, x.dtype))).all())
    assert bool((yd * xd >= 0).all()) and bool((yd[xd == 0] == 0).all())


def check_qsgd(codec, x, enc, y) -> None:
    """|y| <= the scale min(||x||_2, dtype max), the sign of x, 0 where x is 0."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    scale = min(float(torch.linalg.vector_norm(xd)), torch.finfo(x.dtype).max)
    assert bool((yd.abs() <= scale * (1 + 1e-6) + _rounding(torch.tensor(scale), x.dtype)).all())
    assert bool((yd * xd >= 0).all()) and bool((yd[xd == 0] == 0).all())


def check_topk(codec, x, enc, y) -> None:
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    kept = enc.tensors["indices"].long()
    assert torch.equal(yd[kept], xd[kept])
    rest = torch.ones_like(xd, dtype=torch.bool)
    rest[kept] = False
    assert bool((yd[rest] == 0).all())
    if rest.any() and kept.numel():
        assert float(xd[kept].abs().min()) >= float(xd[rest].abs().max())


def check_randomk(codec, x, enc, y) -> None:
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    n, k = xd.numel(), enc.meta["k"]
    f = n / k if codec.unbiased and k else 1.0
    big = torch.finfo(x.dtype).max
    target = (xd * f).clamp(-big, big)
    kept = yd != 0
    assert bool(((yd[kept] - target[kept]).abs() <= _rounding(target[kept], x.dtype) + target[kept].abs() * 1e-7).all())
    assert int(kept.sum()) <= k


def check_threshold(codec, x, enc, y) -> None:
    """Strom: every value sent is +-tau with x's sign and |x| >= tau; the ones left out are below tau,
    or smaller than every value sent when the message is full."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    tau = float(enc.tensors["tau"])
    sent = yd != 0
    assert int(sent.sum()) == enc.meta["sent"] <= enc.tensors["words"].numel()
    sent_tau = float(torch.tensor(tau).to(x.dtype))  # decoded in x's dtype
    assert bool((yd[sent].abs() == sent_tau).all()) and bool((torch.sign(yd[sent]) == torch.sign(xd[sent])).all())
    assert bool((xd[sent].abs() >= tau).all())
    rest = xd[~sent].abs()
    if rest.numel() and enc.meta["sent"] < enc.tensors["words"].numel():
        assert float(rest.max()) < tau or tau == 0
    elif rest.numel() and sent.any():
        assert float(rest.max()) <= float(xd[sent].abs().min())


def check_block_scaled(codec, x, enc, y) -> None:
    """MX and NVFP4: |y - clamp(x / S, ±max_normal) · S| within half the element's step at that
    value (relative for the minifloats, 1/128 for MXINT8), S the block's decoded scale."""
    xd, yd = x.double().reshape(-1), y.double().reshape(-1)
    n, B = xd.numel(), codec.block_size
    if isinstance(codec, NVFP4Codec):
        fmt, s = E2M1, enc.tensors["scales"].double() * enc.tensors["tensor_scale"].double()
    else:
        fmt, s = codec.fmt, e8m0_value(enc.tensors["scales"]).double()
    s = s.repeat_interleave(B)[:n]
    omax = torch.finfo(x.dtype).max
    target = ((xd / torch.where(s > 0, s, 1.0)).clamp(-fmt.max_normal, fmt.max_normal) * s).clamp(-omax, omax)
    if fmt.is_int:
        tol = s / 128
    else:
        tol = target.abs() * 2.0 ** -(fmt.mbits + 1) + s * 2.0 ** (-fmt.bias - fmt.mbits)
    tol = tol * (1 + 1e-6) + _rounding(yd, x.dtype) + 2 ** -149
    err = (yd - target).abs()
    assert bool((err <= tol).all()), f"{codec}: worst {float((err - tol).max()):.3g} over the bound"


FAMILIES = [(MXCodec, check_block_scaled), (NVFP4Codec, check_block_scaled), (TableCodec, check_table), (CastCodec, check_cast), (Int8Codec, check_scaled_uniform),
            (Fp8Codec, check_scaled_uniform), (OneBit, check_onebit), (TernGrad, check_terngrad),
            (QSGD, check_qsgd), (TopK, check_topk), (RandomK, check_randomk),
            (Threshold, check_threshold)]


# Registered codecs with no per-value bound, and why: the sweep checks only the common rules for them.
NO_FAMILY_BOUND = {PowerSGD: "low rank: its error follows the gradient matrix's spectrum, not each value"}


def codecs_without_a_bound(names: list[str]) -> list[str]:
    """The codecs among `names` (registry names, built with their defaults) that neither FAMILIES bounds nor
    NO_FAMILY_BOUND excuses: a codec registered later would otherwise be swept by the common rules alone."""
    known = tuple(cls for cls, _ in FAMILIES) + tuple(NO_FAMILY_BOUND)
    return [n for n in names if not isinstance(get_codec(n), known)]


@pytest.mark.parametrize("name", codec_names())
def test_every_registered_codec_has_its_familys_bound(name: str) -> None:
    """The lab's own codecs each have their family's bound here; a plugin codec of a family of its own (from
    an installed package) is swept by the common rules, its bound is its package's to test."""
    from lab.codecs.registry import REGISTRY, codec_info

    if codecs_without_a_bound([name]) and not REGISTRY.builtin(codec_info(name)):
        pytest.skip(f"plugin codec {name!r} ({codec_info(name).factory.__module__}) is of no family bounded here: "
                    "the common rules only")
    assert not codecs_without_a_bound([name]), \
        f"add {name}'s error bound to FAMILIES (or its reason to NO_FAMILY_BOUND)"


def test_a_codec_registered_later_without_a_bound_is_named() -> None:
    """The check reads the registry when it runs, so a plugin registered after import is seen too."""
    from lab.codecs import Codec, CodecInfo, register, unregister

    class Half(CastCodec):  # a new codec of a bounded family: covered
        pass

    class Unbounded(Codec):  # a family of its own
        name = "unbounded_for_test"

        def encode(self, x):
            raise NotImplementedError

        def decode(self, enc):
            raise NotImplementedError

    before = set(codecs_without_a_bound(codec_names()))  # an installed plugin's codec may be among them
    register(CodecInfo("halve_for_test", "a subclass of a bounded family", lambda: Half("fp16"), ()))
    register(CodecInfo("unbounded_for_test", "no family", Unbounded, ()))
    try:
        assert set(codecs_without_a_bound(codec_names())) - before == {"unbounded_for_test"}
    finally:
        unregister("halve_for_test")
        unregister("unbounded_for_test")


def check_bound(codec, x, enc, y) -> None:
    """The family's bound; a codec of an unknown family gets the common rules only."""
    for cls, check in FAMILIES:
        if isinstance(codec, cls):
            check(codec, x, enc, y)
            return


# ------------------------------------------------------------------ the sweep

def _codec(i: int, **extra):
    name, kw = SPECS[i]
    return get_codec(name, **{**kw, **extra})


def run_case(codec, x: torch.Tensor) -> None:
    """The common rules, then the family's bound."""
    finite = bool(torch.isfinite(x).all())
    if not finite:
        with pytest.raises(ValueError, match="non-finite"):
            codec.encode(x)
        return
    enc = codec.encode(x)
    if x.numel() == 0:
        assert enc.wire_bytes == 0
    y = codec.decode(enc)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    assert bool(torch.isfinite(y).all()), f"{codec}: NaN/Inf from finite input {x} -> {y}"
    if not bool(x.any()):
        assert not bool(y.any()), f"{codec}: all-zero input decoded to {y}"
    out = torch.full_like(x, float("nan"))
    assert torch.equal(codec.decode_into(enc, out), y) if x.numel() else True
    check_bound(codec, x, enc, y)


def _each_kind(dtype: torch.dtype, n: int, seed: int, case) -> None:
    """case(kind, x) for every kind of input, failures naming the kind and the input."""
    for kind in KINDS:
        x = make_input(kind, dtype, n, seed)
        try:
            case(kind, x)
        except Exception as e:
            raise AssertionError(f"kind={kind!r}, input {x}: {type(e).__name__}: {e}") from e


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("i", range(len(SPECS)), ids=IDS)
@SWEEP
@given(n=st.integers(1, 24), seed=st.integers(0, 2**16))
def test_every_codec_at_the_edges(i: int, dtype: torch.dtype, n: int, seed: int) -> None:
    def case(kind: str, x: torch.Tensor) -> None:
        run_case(_codec(i), x)
        if kind == "nonfinite":  # the other policy: NaN -> 0, +-Inf -> +-the largest finite value
            y = _codec(i, nonfinite="saturate").roundtrip(x)
            assert bool(torch.isfinite(y).all())

    _each_kind(dtype, n, seed, case)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("i", range(len(SPECS)), ids=IDS)
@SWEEP_EF
@given(n=st.integers(1, 24), seed=st.integers(0, 2**16))
def test_error_feedback_around_every_codec(i: int, dtype: torch.dtype, n: int, seed: int) -> None:
    if not _with_ef(_codec(i))[1:]:
        return  # refused, with its message (_with_ef)
    _each_kind(dtype, n, seed, lambda kind, x: run_ef_case(_codec(i), x))


def _with_ef(codec) -> tuple:
    """The codec, and error feedback around it unless the codec keeps its own (PowerSGD), which ErrorFeedback
    refuses in one line naming why."""
    try:
        return codec, ErrorFeedback(codec)
    except ValueError as e:
        assert "keeps its own error feedback" in str(e), str(e)
        return (codec,)


def run_ef_case(codec, x: torch.Tensor) -> None:
    """Three encodes of the same input: finite decodes, a finite residual, and
    sum(x) - sum(decode) == residual (float32 arithmetic), or a ValueError naming the overflow."""
    dtype = x.dtype
    ef = ErrorFeedback(codec)
    if not bool(torch.isfinite(x).all()):
        with pytest.raises(ValueError, match="non-finite"):
            ef.encode(x)
        assert ef.residual() is None
        return
    total = torch.zeros(x.shape, dtype=torch.float64)
    for _ in range(3):
        try:
            enc = ef.encode(x)
        except ValueError as e:
            # x + residual beyond float32's range: only where the dtype reaches that far
            assert "overflows float32" in str(e) and dtype in (torch.float32, torch.bfloat16)
            return
        y = ef.decode(enc)
        assert bool(torch.isfinite(y).all()) and y.shape == x.shape
        total += x.double() - y.double()
        res = ef.residual()
        assert res is not None and bool(torch.isfinite(res).all())
        tol = 1e-5 * (x.double().abs() + y.double().abs() + res.double().abs()) * 3 + 1e-30
        if dtype == torch.float32:  # narrower dtypes clamp what the codec sees; the residual keeps the rest
            assert bool(((total - res.double()).abs() <= tol + 1e-6 * total.abs()).all())


# ------------------------------------------------------------------ rules every codec shares

@pytest.mark.parametrize("i", range(len(SPECS)), ids=IDS)
def test_empty_tensor_costs_nothing(i: int) -> None:
    """One rule: an empty tensor sends 0 bytes (no values, no scale, no seed); it decodes to its shape."""
    for shape in ((0,), (0, 3), (2, 0)):
        for c in _with_ef(_codec(i)):
            enc = c.encode(torch.empty(shape, dtype=torch.float16))
            assert enc.wire_bytes == 0 and enc.bits_per_value == 0
            assert c.decode(enc).shape == shape


@pytest.mark.parametrize("i", range(len(SPECS)), ids=IDS)
def test_meta_tensor_is_a_clear_error(i: int) -> None:
    for c in _with_ef(_codec(i)):
        with pytest.raises(ValueError, match="meta tensors are not supported"):
            c.encode(torch.empty(4, 3, device="meta"))


def test_sweep_covers_the_registry() -> None:
    assert {name for name, _ in SPECS} == set(codec_names())
