"""Gradient compressors (1-bit SGD, TernGrad, QSGD, top-k, random-k) and error feedback."""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.codecs import registry
from lab.codecs.base import Codec, pack_bits, unpack_bits
from lab.codecs.error_feedback import ErrorFeedback
from lab.codecs.onebit import OneBit
from lab.codecs.qsgd import QSGD
from lab.codecs.sparsify import RandomK, TopK
from lab.codecs.terngrad import TernGrad

FACTORIES: dict[str, Callable[[], Codec]] = {
    "onebit": lambda: OneBit(),
    "terngrad": lambda: TernGrad(seed=1),
    "qsgd": lambda: QSGD(levels=8, seed=1),
    "topk": lambda: TopK(ratio=0.25),
    "randomk": lambda: RandomK(ratio=0.25, seed=1),
    "randomk_unbiased": lambda: RandomK(k=5, unbiased=True, seed=1),
    "ef_onebit": lambda: ErrorFeedback(OneBit()),
    "ef_topk": lambda: ErrorFeedback(TopK(k=3)),
}
ALL = pytest.mark.parametrize("make", list(FACTORIES.values()), ids=list(FACTORIES))


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------ bit packing


@settings(max_examples=200, deadline=None)
@given(bits=st.integers(1, 8), data=st.data())
def test_pack_unpack_roundtrip(bits: int, data: st.DataObject) -> None:
    codes = data.draw(st.lists(st.integers(0, 2**bits - 1), max_size=70))
    t = torch.tensor(codes, dtype=torch.uint8)
    packed = pack_bits(t, bits)
    assert packed.numel() == bits * math.ceil(len(codes) / 8)
    assert torch.equal(unpack_bits(packed, bits, len(codes)), t)


# ------------------------------------------------------------------ 1-bit SGD


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 300), seed=st.integers(0, 2**31))
def test_onebit_two_values_and_part_sums(n: int, seed: int) -> None:
    x = torch.randn(n, generator=gen(seed))
    x[0], x[1] = 1.5, -0.5  # both signs present
    c = OneBit()
    enc = c.encode(x)
    y = c.decode(enc)
    pos, neg = x >= 0, x < 0
    assert torch.unique(y).numel() == 2
    assert torch.allclose(y[pos], x[pos].mean().expand(int(pos.sum())), rtol=1e-5, atol=1e-6)
    assert torch.allclose(y[neg], x[neg].mean().expand(int(neg.sum())), rtol=1e-5, atol=1e-6)
    assert float(y[pos].sum()) == pytest.approx(float(x[pos].sum()), rel=1e-5, abs=1e-5)
    assert float(y[neg].sum()) == pytest.approx(float(x[neg].sum()), rel=1e-5, abs=1e-5)
    assert enc.wire_bytes == math.ceil(n / 8) + 8


def test_onebit_one_sign_only() -> None:
    y = OneBit().roundtrip(torch.tensor([1.0, 2.0, 0.0, 5.0]))
    assert torch.equal(y, torch.full((4,), 2.0))
    y = OneBit().roundtrip(torch.tensor([-1.0, -3.0]))
    assert torch.equal(y, torch.full((2,), -2.0))


# ------------------------------------------------------------------ unbiased stochastic codecs

TRIALS = 3000
Z = 5.0  # per-coordinate bound in standard errors; the seeds are fixed, so the test is deterministic


def mean_of_decodes(c: Codec, x: torch.Tensor, trials: int = TRIALS) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample mean of decodes and of squared errors ||Q(x) - x||^2, in float64."""
    total = torch.zeros(x.shape, dtype=torch.float64)
    sq = torch.zeros((), dtype=torch.float64)
    for _ in range(trials):
        y = c.roundtrip(x).double()
        total += y
        sq += ((y - x.double()) ** 2).sum()
    return total / trials, sq / trials


def assert_unbiased(mean: torch.Tensor, x: torch.Tensor, var: torch.Tensor, trials: int) -> None:
    """|mean - x| <= Z standard errors per coordinate (plus fp32 rounding slack)."""
    se = (var / trials).sqrt()
    slack = 1e-6 * float(x.abs().max())
    err = (mean - x.double()).abs()
    assert bool((err <= Z * se + slack).all()), f"max z = {float((err / (se + 1e-30)).max()):.2f}"
    # and the whole vector: the sum of the coordinate errors is within Z standard errors too
    assert abs(float((mean - x.double()).sum())) <= Z * float(var.sum().sqrt()) / math.sqrt(trials) + 64 * slack


def test_terngrad_unbiased() -> None:
    x = torch.randn(64, generator=gen(3))
    c = TernGrad(seed=7)
    y = c.roundtrip(x)
    s = float(x.abs().max())
    assert set(torch.unique(y).tolist()) <= {-s, 0.0, s}
    p = x.double().abs() / s
    mean, _ = mean_of_decodes(c, x)
    assert_unbiased(mean, x, s**2 * p * (1 - p), TRIALS)
    assert c.encode(x).wire_bytes == math.ceil(2 * 64 / 8) + 4


@pytest.mark.parametrize("levels", [1, 4, 16])
def test_qsgd_unbiased_and_variance_bound(levels: int) -> None:
    n = 64
    x = torch.randn(n, generator=gen(levels))
    c = QSGD(levels=levels, seed=11)
    norm = float(x.double().norm())
    r = x.double().abs() / norm * levels
    frac = r - r.floor()
    var = (norm / levels) ** 2 * frac * (1 - frac)  # exact per-coordinate variance
    mean, msq = mean_of_decodes(c, x)
    assert_unbiased(mean, x, var, TRIALS)
    # Lemma 3.1: E||Q(g) - g||^2 <= min(n/s^2, sqrt(n)/s) ||g||^2, for the exact expectation ...
    bound = min(n / levels**2, math.sqrt(n) / levels) * norm**2
    assert float(var.sum()) <= bound
    # ... and the measured one agrees with the exact expectation (sd of the mean is far below 10%)
    assert float(msq) == pytest.approx(float(var.sum()), rel=0.1)
    assert float(msq) <= bound
    # decoded values lie on the grid norm * l / s, l in 0..s
    y = c.roundtrip(x).double()
    l = y.abs() * levels / norm
    assert torch.allclose(l, l.round(), atol=1e-4) and float(l.max()) <= levels + 1e-4
    assert c.encode(x).wire_bytes == math.ceil(n * (1 + math.ceil(math.log2(levels + 1))) / 8) + 4


def test_qsgd_wire_bits() -> None:
    for s, bits in [(1, 2), (2, 3), (3, 3), (4, 4), (16, 6), (127, 8)]:
        enc = QSGD(levels=s).encode(torch.randn(1000, generator=gen(0)))
        assert enc.wire_bytes == math.ceil(1000 * bits / 8) + 4
        assert QSGD(levels=s).describe() == f"qsgd(s={s})"


def test_randomk_unbiased_scaling() -> None:
    n, k = 40, 8
    x = torch.randn(n, generator=gen(5))
    c = RandomK(k=k, unbiased=True, seed=3)
    y = c.roundtrip(x)
    kept = y != 0
    assert int(kept.sum()) == k
    assert torch.allclose(y[kept], x[kept] * n / k)
    mean, _ = mean_of_decodes(c, x)
    assert_unbiased(mean, x, x.double() ** 2 * (n / k - 1), TRIALS)


# ------------------------------------------------------------------ reproducibility of stochastic codecs


@pytest.mark.parametrize("make", [lambda s: TernGrad(seed=s), lambda s: QSGD(seed=s),
                                  lambda s: RandomK(ratio=0.1, seed=s)], ids=["terngrad", "qsgd", "randomk"])
def test_stochastic_codecs_reproducible_from_seed(make: Callable[[int], Codec]) -> None:
    xs = [torch.randn(200, generator=gen(i)) for i in range(4)]
    a, b, other = make(5), make(5), make(6)
    ya = [a.roundtrip(x) for x in xs]
    yb = [b.roundtrip(x) for x in xs]
    yo = [other.roundtrip(x) for x in xs]
    assert all(torch.equal(p, q) for p, q in zip(ya, yb))
    assert not all(torch.equal(p, q) for p, q in zip(ya, yo))
    assert not torch.equal(ya[0], a.roundtrip(xs[0]))  # the generator advances between encodes


# ------------------------------------------------------------------ top-k and random-k


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 500), ratio=st.floats(1e-3, 1.0), seed=st.integers(0, 2**31))
def test_topk_keeps_k_largest(n: int, ratio: float, seed: int) -> None:
    x = torch.randn(n, generator=gen(seed))
    c = TopK(ratio=ratio)
    enc = c.encode(x)
    k = max(1, math.ceil(Fraction(repr(ratio)) * n))  # ceil(ratio * n) in exact decimal arithmetic
    assert enc.tensors["values"].numel() == k
    assert enc.wire_bytes == 8 * k
    y = c.decode(enc)
    kept = torch.zeros(n, dtype=torch.bool)
    kept[enc.tensors["indices"].long()] = True
    assert int(kept.sum()) == k  # distinct indices
    assert torch.equal(y[kept], x[kept]) and bool((y[~kept] == 0).all())
    if k < n:
        assert float(x[kept].abs().min()) >= float(x[~kept].abs().max())


def test_topk_exact_values() -> None:
    x = torch.tensor([0.1, -5.0, 3.0, 0.0, -0.2, 4.0])
    y = TopK(k=3).roundtrip(x)
    assert torch.equal(y, torch.tensor([0.0, -5.0, 3.0, 0.0, 0.0, 4.0]))
    assert TopK(k=100).encode(x).wire_bytes == 8 * 6  # k is capped at n
    assert TopK(ratio=0.1).encode(torch.randn(30)).tensors["values"].numel() == 3  # not ceil(3.0000000000000004)


def test_randomk_wire_and_indices() -> None:
    n = 1000
    x = torch.randn(n, generator=gen(9))
    c = RandomK(ratio=0.05, seed=2)
    enc = c.encode(x)
    assert enc.wire_bytes == 4 * 50 + 8
    y = c.decode(enc)
    kept = y != 0
    assert int(kept.sum()) == 50
    assert torch.equal(y[kept], x[kept])
    # the indices come from the seed in the payload, not from the codec's state
    assert torch.equal(RandomK(ratio=0.05, seed=99).decode(enc), y)


def test_randomk_summable_with_shared_seed() -> None:
    xs = [torch.randn(100, generator=gen(i)) for i in range(3)]
    workers = [RandomK(k=10, seed=4) for _ in xs]
    encs = [w.encode(x) for w, x in zip(workers, xs)]
    assert RandomK.summable
    assert all(torch.equal(e.tensors["seed"], encs[0].tensors["seed"]) for e in encs)
    summed = dataclasses.replace(encs[0], tensors={
        "values": sum(e.tensors["values"] for e in encs), "seed": encs[0].tensors["seed"]})
    assert torch.allclose(workers[0].decode(summed), sum(w.decode(e) for w, e in zip(workers, encs)))


# ------------------------------------------------------------------ error feedback


@pytest.mark.parametrize("inner", [OneBit(), TopK(ratio=0.1)], ids=["onebit", "topk"])
def test_error_feedback_tracks_running_sum(inner: Codec) -> None:
    n, steps = 50, 300
    ef = ErrorFeedback(inner)
    g = gen(21)
    sum_x = torch.zeros(n, dtype=torch.float64)
    sum_y = torch.zeros(n, dtype=torch.float64)
    sum_plain = torch.zeros(n, dtype=torch.float64)
    max_norm = 0.0
    for _ in range(steps):
        x = torch.randn(n, generator=g) + 0.3  # a biased stream: without feedback the error grows
        sum_x += x.double()
        sum_y += ef.decode(ef.encode(x, key="w")).double()
        sum_plain += inner.roundtrip(x).double()
        max_norm = max(max_norm, float(x.norm()))
    res = ef.residual("w")
    assert res is not None and res.dtype == torch.float32
    # nothing is lost, only delayed: sum x - sum decode == the residual
    assert torch.allclose(sum_x - sum_y, res.double(), atol=1e-3)
    # both codecs are contractions, ||C(v) - v||^2 <= (1 - d) ||v||^2 (top-k: d = k/n; 1-bit with
    # the two means is a projection keeping at least ||v||_1^2 / n >= ||v||^2 / n: d = 1/n), so
    # ||e|| <= sqrt(1-d) / (1 - sqrt(1-d)) * max ||x_t||
    d = 5 / n if isinstance(inner, TopK) else 1 / n
    q = math.sqrt(1 - d)
    assert float(res.norm()) <= q / (1 - q) * max_norm
    # without feedback the lost mass grows with the steps (here ~15x / ~40x larger after 300)
    assert float((sum_x - sum_y).norm()) < 0.25 * float((sum_x - sum_plain).norm())


def test_error_feedback_changes_output_and_keys() -> None:
    x = torch.tensor([1.0, 0.6, 0.5, -0.2])
    ef = ErrorFeedback(TopK(k=1))
    y1 = ef.encode(x, key="a")
    y2 = ef.encode(x, key="a")
    assert torch.equal(ef.decode(y1), torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert torch.equal(ef.decode(y2), torch.tensor([0.0, 1.2, 0.0, 0.0]))  # residual 0.6 + 0.6 wins
    assert torch.equal(ef.decode(ef.encode(x, key="b")), torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert sorted(ef.keys()) == ["a", "b"]
    ef.reset("a")
    assert ef.residual("a") is None and ef.residual("b") is not None
    ef.reset()
    assert ef.keys() == []
    assert ef.name == "ef(topk)" and ef.describe() == "ef(topk(k=1))"
    assert not ef.summable and ErrorFeedback(RandomK()).summable


def test_error_feedback_shape_change_raises() -> None:
    ef = ErrorFeedback(OneBit())
    ef.encode(torch.randn(4, 3), key="layer1.weight")
    with pytest.raises(ValueError, match=r"'layer1\.weight'.*\(4, 3\).*\(12,\)"):
        ef.encode(torch.randn(12), key="layer1.weight")
    ef.encode(torch.randn(12), key="other")  # other keys are independent


def test_error_feedback_low_precision_residual_is_fp32() -> None:
    ef = ErrorFeedback(TopK(k=2))
    sum_x = torch.zeros(16, dtype=torch.float64)
    sum_y = torch.zeros(16, dtype=torch.float64)
    for i in range(50):
        x = torch.randn(16, generator=gen(i)).to(torch.bfloat16)
        y = ef.decode(ef.encode(x))
        assert y.dtype == torch.bfloat16
        sum_x += x.double()
        sum_y += y.double()
    res = ef.residual()
    assert res is not None and res.dtype == torch.float32
    assert torch.allclose(sum_x - sum_y, res.double(), atol=1e-4)


def test_error_feedback_nan_does_not_poison_memory() -> None:
    ef = ErrorFeedback(OneBit())
    ef.encode(torch.ones(3))
    before = ef.residual().clone()  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="1 non-finite"):
        ef.encode(torch.tensor([1.0, float("nan"), 0.0]))
    assert torch.equal(ef.residual(), before)  # type: ignore[arg-type]


# ------------------------------------------------------------------ common rules, every codec


@ALL
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dtype_shape_device_preserved(make: Callable[[], Codec], dtype: torch.dtype) -> None:
    x = torch.randn(3, 5, 7, generator=gen(0)).to(dtype)
    c = make()
    y = c.decode(c.encode(x))
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    assert bool(torch.isfinite(y).all())


@ALL
@pytest.mark.parametrize("shape", [(0,), (0, 3)])
def test_empty_input(make: Callable[[], Codec], shape: tuple[int, ...]) -> None:
    c = make()
    x = torch.empty(shape, dtype=torch.float16)
    y = c.roundtrip(x)
    assert y.shape == x.shape and y.dtype == x.dtype


def test_empty_wire_bytes() -> None:
    """An empty tensor sends nothing: no values and no side information (tests/test_codec_edges.py
    checks the rule for every registered codec)."""
    empty = torch.empty(0)
    for c in (OneBit(), TernGrad(), QSGD(), TopK(), RandomK(), ErrorFeedback(OneBit())):
        assert c.encode(empty).wire_bytes == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("levels", [1, 16, 127])
def test_qsgd_near_the_dtype_maximum_stays_finite(dtype: torch.dtype, levels: int) -> None:
    """||g||_2 of values near the dtype's maximum overflowed float32 (all NaN), and decoded values
    above max|g| overflowed fp16/bf16 (inf): the scale is now capped at the dtype's maximum."""
    big = torch.finfo(dtype).max
    for x in (torch.full((5,), big), torch.tensor([big, -big, 1.0, 0.0, big * 0.75])):
        x = x.to(dtype)
        c = QSGD(levels=levels, seed=3)
        for _ in range(20):
            y = c.roundtrip(x)
            assert bool(torch.isfinite(y).all()), y
            assert (y.float().abs() <= big).all() and (torch.sign(y) * torch.sign(x) >= 0).all()


def test_qsgd_capped_scale_stays_unbiased() -> None:
    """With the scale capped at the dtype maximum (below ||g||_2), decode is still unbiased."""
    x = torch.tensor([60000.0, -30000.0, 1000.0, 0.0, 65504.0]).half()
    mean, var = mean_of_decodes(QSGD(levels=4, seed=0), x)
    assert_unbiased(mean, x.float(), var, TRIALS)


def test_onebit_means_near_the_float32_maximum() -> None:
    """The sums behind 1-bit's means overflowed float32 (inf) for values near its maximum."""
    big = torch.finfo(torch.float32).max
    y = OneBit().roundtrip(torch.tensor([big, big, -big, -big * 0.5]))
    assert torch.equal(y, torch.tensor([big, big, -big * 0.75, -big * 0.75]))


@ALL
def test_all_zero_input(make: Callable[[], Codec]) -> None:
    c = make()
    for _ in range(2):  # twice, so error feedback sees its (zero) residual
        y = c.roundtrip(torch.zeros(4, 6))
        assert torch.equal(y, torch.zeros(4, 6))


@ALL
def test_non_contiguous_equals_contiguous(make: Callable[[], Codec]) -> None:
    x = torch.randn(12, 20, generator=gen(8)).t()[::2]
    assert not x.is_contiguous()
    a, b = make(), make()
    for _ in range(2):
        assert torch.equal(a.roundtrip(x), b.roundtrip(x.contiguous()))


@ALL
def test_nan_raises_with_count(make: Callable[[], Codec]) -> None:
    x = torch.randn(10, generator=gen(1))
    x[3] = float("nan")
    x[7] = float("inf")
    with pytest.raises(ValueError, match="2 non-finite"):
        make().encode(x)


@pytest.mark.parametrize("cls", [OneBit, TernGrad, QSGD, TopK, RandomK])
def test_saturate_policy(cls: type) -> None:
    x = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    y = cls(nonfinite="saturate").roundtrip(x)
    assert bool(torch.isfinite(y).all())


@pytest.mark.parametrize("build", [
    lambda: QSGD(levels=0), lambda: QSGD(levels=128), lambda: QSGD(levels=2.5), lambda: QSGD(levels=True),
    lambda: TopK(ratio=0), lambda: TopK(ratio=1.5), lambda: TopK(ratio=float("nan")), lambda: TopK(k=0),
    lambda: TopK(ratio=0.1, k=3), lambda: RandomK(k=-1), lambda: RandomK(unbiased="yes"),
    lambda: TernGrad(seed=-1), lambda: QSGD(seed="a"), lambda: OneBit(nonfinite="clip"),
    lambda: ErrorFeedback("topk"),
])
def test_bad_options_raise(build: Callable[[], Codec]) -> None:
    with pytest.raises(ValueError, match="allowed|not both|wraps"):
        build()


def test_registry() -> None:
    # these modules register on import; compare what they registered with the classes
    cases = {
        "onebit": ({}, OneBit, "onebit"),
        "terngrad": ({"seed": 3}, TernGrad, "terngrad"),
        "qsgd": ({"levels": 4}, QSGD, "qsgd(s=4)"),
        "topk": ({"ratio": 0.05}, TopK, "topk(ratio=0.05)"),
        "randomk": ({"k": 7, "unbiased": True}, RandomK, "randomk(k=7, unbiased)"),
    }
    for name, (opts, cls, text) in cases.items():
        c = registry.get_codec(name, **opts)
        assert isinstance(c, cls) and c.name == name and c.describe() == text
        assert name in registry.codec_help()
    assert registry.get_codec("qsgd").describe() == "qsgd(s=16)"
    assert registry.get_codec("topk").describe() == "topk(ratio=0.01)"
    with pytest.raises(ValueError, match="bad options"):
        registry.get_codec("onebit", levels=3)
    with pytest.raises(ValueError, match="allowed"):
        registry.get_codec("qsgd", levels=500)
    assert [c.stochastic for c in (OneBit(), TernGrad(), QSGD(), TopK(), RandomK())] == [False, True, True, False, True]


def test_decode_rejects_foreign_payload() -> None:
    with pytest.raises(ValueError, match="encoded by 'topk'"):
        OneBit().decode(TopK(k=1).encode(torch.randn(4)))
