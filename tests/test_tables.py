"""The paper's value tables, the bit-layout builder and the rounding thresholds."""
import numpy as np
import pytest
import torch

from lab.codecs import BitLayout, tables
from lab.codecs.rounding import bounds, paper_search


def test_dynamic_tree_is_dettmers_table():
    t = tables.dynamic_tree()
    mags = t.magnitudes
    assert len(t.values) == 255 and t.symmetric
    assert mags[0] == 0 and mags[-1] == 1.0
    inner = mags[1:-1]
    assert len(inner) == 126
    assert inner[0] == pytest.approx(2.75e-6, rel=1e-6) and inner[-1] == pytest.approx(0.99140625, rel=1e-6)
    counts = [int(((inner >= 10.0 ** -(n + 1)) & (inner < 10.0 ** -n)).sum()) for n in range(6)]
    assert counts == [64, 32, 16, 8, 4, 2]
    top = inner[inner > 0.1]
    steps = np.diff(top)
    assert np.allclose(steps[top[1:] < 0.45], 0.0109375, atol=1e-6)
    assert np.allclose(steps[top[:-1] > 0.45], 0.0171875, atol=1e-6)


def test_linear_is_k_over_127():
    v = np.asarray(tables.linear().values)
    assert np.allclose(v, np.arange(-127, 128) / 127, atol=1e-7)


def test_mantissa_and_static_tree_layouts():
    m = tables.mantissa(1).magnitudes
    assert m.max() == pytest.approx(150.0) and 1.0 in m and 15.0 in m and 0.0 in m
    s = tables.static_tree(1)
    # 256 patterns, the lowest (smallest leaf of the smallest exponent, either sign) stands for 0
    assert len(s.values) == 255 and 0.0 in s.values
    assert s.magnitudes[1] == pytest.approx(1.65625e-7)  # the second leaf of (1e-7, 4.5e-7)
    leaves = s.magnitudes[(s.magnitudes > 1) & (s.magnitudes < 10)]
    assert len(leaves) == 16 and leaves[0] == pytest.approx(1.21875)  # first leaf of (1, 4.5)


@pytest.mark.parametrize("kw, field", [
    (dict(total_bits=9), "total_bits"), (dict(total_bits=1), "total_bits"),
    (dict(base=3), "base"), (dict(mantissa="log"), "mantissa"),
    (dict(dynamic=True, exponent_bits=2), "exponent_bits"),
    (dict(dynamic=False, exponent_bits=8), "exponent_bits"),
    (dict(dynamic=False, exponent_bits=7, mantissa="linear"), "exponent_bits"),
    (dict(dynamic=False, exponent_bits=3, offset=50), "offset"),
    (dict(total_bits=2, signed=True, dynamic=True), "total_bits"),
])
def test_impossible_layout_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        BitLayout(**kw).table()


def test_layout_sizes():
    for bits in range(2, 9):
        t = BitLayout(bits, False, 0, 2, 0, "linear", False).table()
        assert len(t.values) == 2 ** bits
    t = BitLayout(4, True, 2, 2, 0, "linear", False).table()
    assert t.symmetric and len(t.values) <= 16


def test_nearest_bounds_are_midpoints():
    t = tables.dynamic_tree()
    b = bounds(t, "nearest")
    v = np.asarray(t.values, dtype=np.float32)
    assert np.allclose(b, (v[1:] + v[:-1]) / 2, rtol=1e-6, atol=0)


@pytest.mark.parametrize("table", [tables.dynamic_tree(), tables.linear(), tables.mantissa(1),
                                   tables.static_tree(1)], ids=lambda t: t.name)
def test_paper_bounds_reproduce_the_kernel(table):
    """Thresholds give exactly the clusterNet bisection's choice, ties and exact table values included."""
    rng = np.random.default_rng(0)
    v = np.asarray(table.values, dtype=np.float32)
    b = bounds(table, "paper")
    a = np.concatenate([rng.uniform(-1, 1, 100_000) * table.absmax, v[v != 0], b[b != 0],
                        np.nextafter(b[b != 0], np.float32(np.inf)),
                        np.nextafter(b[b != 0], np.float32(-np.inf))]).astype(np.float32)
    got = v[np.searchsorted(b, a, side="right")]
    mags = table.magnitudes.astype(np.float32)
    want = np.sign(a) * mags[paper_search(np.abs(a), table.magnitudes)]
    assert np.array_equal(got, want)


def test_paper_rounding_quirk_quarter_of_codes_low():
    """About a quarter of U(0,1) codes land one step below round-to-nearest (a quirk of the paper's tree search)."""
    t = tables.dynamic_tree()
    x = torch.rand(200_000, generator=torch.Generator().manual_seed(0))
    a = x / x.max()
    near = torch.bucketize(a, torch.from_numpy(bounds(t, "nearest")), right=True)
    paper = torch.bucketize(a, torch.from_numpy(bounds(t, "paper")), right=True)
    diff = near - paper
    assert set(diff.unique().tolist()) <= {0, 1}
    assert 0.2 < diff.float().mean().item() < 0.3


def test_paper_rounding_rejects_asymmetric_table():
    with pytest.raises(ValueError, match="sign-symmetric"):
        bounds(tables.bnb_dynamic(), "paper")
