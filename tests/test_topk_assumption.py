"""Alistarh et al. 2018's Assumption 1 (||TopK(mean) - mean(TopK)|| / ||mean||), computed and on the Codecs page."""
from __future__ import annotations

import math

import pytest
import torch

from test_app import page as app_page
from lazy_import import lazy

from lab.experiments.topk_assumption import topk_assumption, topk_gap

figures = lazy("chart", "figures")


def test_the_gap_by_hand_and_zero_when_the_workers_agree():
    g = torch.tensor([[4.0, 0.0, 1.0], [0.0, 3.0, 1.0]])  # mean (2, 1.5, 1); k = 1
    # TopK(mean) = (2, 0, 0); the top-ks (4, 0, 0) and (0, 3, 0) average to (2, 1.5, 0)
    assert topk_gap(g, 1 / 3) == pytest.approx(1.5 / math.sqrt(7.25), rel=1e-9)
    same = torch.randn(1, 500, generator=torch.Generator().manual_seed(0)).repeat(4, 1)
    assert topk_gap(same, 0.05) == pytest.approx(0.0, abs=1e-12)


def test_on_real_gradients_xi_is_bounded_below_one_and_zero_for_one_worker():
    df = topk_assumption(workers=(1, 2, 8), ratios=(0.01, 0.1), batch=8, seed=0)
    assert len(df) == 6 and set(df.k) == {845, 8448} and set(df.n) == {84480}
    assert (df[df.workers == 1].xi == 0).all()
    many = df[df.workers > 1].xi
    assert (many > 0.05).all() and (many < 1).all()  # Alistarh et al.: xi small in practice


@pytest.mark.parametrize("kw, says", [(dict(workers=(0, 2)), "workers=(0, 2); allowed: integers from 1 to 64"),
                                      (dict(ratios=(0.0,)), "allowed: numbers in (0, 1]"),
                                      (dict(batch=65), "batch=65; allowed: an integer from 1 to 64")])
def test_bad_settings_are_named(kw, says):
    with pytest.raises(ValueError, match=r".*") as e:
        topk_assumption(**kw)
    assert says in str(e.value)


def test_the_page_asks_first_then_draws_xi_against_p_with_a_computed_takeaway():
    q = dict(guess="skip", section="Top-k of the mean", ta_ratios=["1 %"], ta_batch="4")
    at = app_page("codecs", **q)
    assert not at.exception
    assert any("does the top-k of the mean drift away" in m.value for m in at.markdown)
    assert not any("takeaway" in s.value.lower() and "xi" in s.value for s in at.success)
    before = len(figures(at))
    at = app_page("codecs", ta_guess="skip", **q)
    assert not at.exception and len(figures(at)) == before + 1
    df = topk_assumption(ratios=(0.01,), batch=4, seed=0)
    worst = df[df.workers > 1].xi.max()
    text = next(s.value for s in at.success if "xi stays below 1" in s.value or "xi reaches 1" in s.value)
    assert f"largest {worst:.2f}" in text
