"""Stochastic rounding on the lab's grids (lab/codecs/stochastic.py) and its lesson (app/views/rounding.py):
nearest is the hardware's cast, stochastic is unbiased, a weight under tiny updates stalls to nearest and tracks
stochastically, and low-precision training keeps learning only with stochastic rounding."""
import math

import pytest
import torch

from lab.codecs.stochastic import FLOAT_DTYPES, grid, neighbours, round_to, ulp
from lab.experiments import low_precision_training, tiny_updates
from test_app import page


@pytest.mark.parametrize("name", list(FLOAT_DTYPES))
def test_nearest_is_the_hardware_cast_and_values_stay_on_the_grid(name):
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(100_000, generator=g) * 3, torch.randn(2000, generator=g) * 1e-6])
    grid_ = grid(name)
    want = x.clamp(float(grid_[0]), float(grid_[-1])).to(FLOAT_DTYPES[name]).float()
    assert torch.equal(round_to(x, name, "nearest"), want)  # ties to even included (float32 inputs hit ties)
    s = round_to(x, name, "stochastic", g)
    lo, hi = neighbours(x, grid_)
    assert bool(((s.double() == lo) | (s.double() == hi)).all())  # always one of the two neighbours
    assert torch.equal(round_to(x, name, "stochastic", torch.Generator().manual_seed(5)),
                       round_to(x, name, "stochastic", torch.Generator().manual_seed(5)))  # seeded


@pytest.mark.parametrize("name", ["bf16", "fp8_e4m3", "dynamic_tree", "mantissa"])
def test_stochastic_rounding_is_unbiased_within_a_computed_interval(name):
    """For 40 x between grid values, the mean of n draws is within 4.5 standard errors of x, the standard error
    from the exact variance (hi − x)(x − lo) / n of a two-point draw; nearest's bias is as large as
    min(x − lo, hi − x) at every x."""
    gr = grid(name)
    i = int(torch.searchsorted(gr, torch.tensor(0.3, dtype=torch.float64)))
    x = torch.linspace(float(gr[i]), float(gr[i + 2]), 42, dtype=torch.float64)[1:-1].float()
    x = x[(x.double() != gr[i + 1])]
    n = 20_000
    draws = round_to(x.repeat(n, 1), name, "stochastic", torch.Generator().manual_seed(1)).double()
    lo, hi = neighbours(x, gr)
    xd = x.double()
    se = torch.sqrt((hi - xd) * (xd - lo) / n)
    assert bool(((draws.mean(0) - xd).abs() <= 4.5 * se).all()), (draws.mean(0) - xd) / se
    near = round_to(x, name, "nearest").double()
    assert torch.allclose((near - xd).abs(), torch.minimum(xd - lo, hi - xd))


def test_a_bf16_weight_stalls_under_nearest_and_tracks_under_stochastic():
    r = tiny_updates("bf16", start=1.0, update=1e-4, steps=10_000, seeds=8, seed=0)
    a = r.attrs
    assert a["gap"] == 2 ** -7 and a["final_nearest"] == 1.0  # 1e-4 < half of 2^-7: every update lost, exactly
    assert (r.nearest == 1.0).all()
    assert a["final_exact"] == pytest.approx(2.0, abs=1e-6)
    sto = torch.tensor(a["final_stochastic"], dtype=torch.float64)
    # each step moves up one gap with probability 1e-4 / 2^-7 (2^-6 above 2): the sum's sd is < 0.1
    assert abs(float(sto.mean()) - 2.0) <= 3 * 0.1 / math.sqrt(len(sto)) and float(sto.std()) < 0.15
    # an update above half a gap: nearest moves a whole gap (2^-7) a step up to 2.0, where the gap doubles and it stalls
    r = tiny_updates("bf16", start=1.0, update=0.005, steps=1000, seeds=1)
    assert r.attrs["final_nearest"] == 2.0 and r.attrs["final_exact"] == pytest.approx(6.0, abs=1e-4)
    assert ulp(2.0, "bf16") == 2 ** -6


def test_low_precision_training_learns_with_stochastic_rounding_and_stalls_with_nearest():
    df = low_precision_training("bf16", steps=300, lr=0.01, seed=0)
    last = df[df.step == 300].set_index("weights").test_accuracy
    images = df.attrs["test"]
    assert last["stochastic"] - last["nearest"] > 20 / images  # stochastic ahead by more than 20 test images
    assert abs(last["stochastic"] - last["float32"]) < 10 / images  # and within 10 images of float32


def test_the_lesson_predicts_first_then_shows_both_roundings():
    at = page("rounding")
    assert not at.exception and not at.error
    md = " ".join(m.value for m in at.markdown)
    assert "A weight in bf16 at 1 gets 10,000 updates of +0.0001" in md
    assert [m.value for m in at.metric][:3] == ["?", "?", "?"]  # withheld until answered
    at = page("rounding", guess="where it started: every update is lost")
    assert not at.exception
    got = {m.label: m.value for m in at.metric}
    assert got["Round to nearest ends at"] == "1" and got["Exact sum"] == "2"
    assert abs(float(got["Stochastic ends at (mean)"]) - 2) < 0.1
    said = " ".join(s.value for s in at.success)
    assert "rounding to nearest ends at 1 (100 % of the way lost)" in said
    assert "Rounding to nearest is off by up to 0.50 of a gap" in said
    at = page("rounding", fmt="fp8_e4m3", start="1e4")  # past fp8's largest value: said in the control's name
    assert not at.exception
    assert any("Start weight" in e.value and "allowed" in e.value for e in at.error)
