"""Branch divergence of skipping dropped units (Song et al. 2019 §II-C, Fig. 1b): lab/dropout/divergence.py against
closed forms and explicit masks. Element-wise dropout: a warp runs unless all its lanes are dropped, P = 1 - p^32;
row and tile patterns drop in step along a warp, so whole warps skip."""
import itertools

import pytest
import torch

from lab.dropout import Pattern
from lab.dropout import divergence as dv
from lab.dropout.sampler import sampler_for_rate


def test_warp_activity_counts_each_warps_active_lanes_and_the_partial_last_warp():
    keep = torch.zeros(70, dtype=torch.bool)
    keep[[0, 31]] = True  # warp 0: 2 lanes; warp 1: none; warp 2 (6 lanes long): lanes 64 and 69
    keep[[64, 69]] = True
    a = dv.warp_activity(keep)
    assert a.warps == 3 and a.threads == 70 and a.active_lanes.tolist() == [2, 0, 2]
    assert a.warps_run == 2 and a.kept == 4 and a.lane_slots == 64
    assert a.busy_fraction == 4 / 64 and a.work_fraction == pytest.approx(2 / 3)
    assert a.work_saved == pytest.approx(1 / 3)
    # integers 0/1 and any shape are read in row-major thread order
    b = dv.warp_activity(keep.int().reshape(7, 10))
    assert b.active_lanes.tolist() == [2, 0, 2]
    assert dv.warp_activity(torch.ones(64, dtype=torch.bool), warp_size=16).active_lanes.tolist() == [16] * 4
    none = dv.warp_activity(torch.zeros(0, dtype=torch.bool))
    assert none.warps == 0 and none.work_fraction == 0.0 and none.busy_fraction == 0.0


def test_bad_input_is_a_clear_message():
    with pytest.raises(ValueError, match="warp size must be an integer >= 1"):
        dv.warp_activity(torch.ones(4, dtype=torch.bool), warp_size=0)
    with pytest.raises(ValueError, match="bool tensor or integers 0/1"):
        dv.warp_activity(torch.tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="lanes_along must be one of"):
        dv.thread_order(torch.ones(2, 2, dtype=torch.bool), "rows")
    with pytest.raises(ValueError, match="dropout kind"):
        dv.pattern_activity("block", 0.5, 32, 64)


@pytest.mark.parametrize("p", [0.3, 0.5, 0.8])
def test_element_wise_expectation_over_every_mask_of_a_small_warp_is_one_minus_p_to_the_warp_size(p):
    """Every keep-mask of a 6-lane warp, weighted by its probability under Bernoulli(p) drops: the expected warps run
    is 1 - p^6 and the expected kept lanes 6 (1 - p) — the closed forms pattern_activity uses."""
    w = 6
    runs = kept = 0.0
    for bits in itertools.product([0, 1], repeat=w):
        a = dv.warp_activity(torch.tensor(bits), warp_size=w)
        prob = (1 - p) ** sum(bits) * p ** (w - sum(bits))
        runs += prob * a.warps_run
        kept += prob * a.kept
    assert runs == pytest.approx(1 - p ** w) == pytest.approx(dv.bernoulli_run_probability(p, w))
    act = dv.pattern_activity("bernoulli", p, 1, w, warp_size=w)
    assert act.run_fraction == pytest.approx(runs) and act.busy_fraction == pytest.approx(kept / (w * runs))
    assert act.work_saved == pytest.approx(p ** w) and act.kept_fraction == pytest.approx(1 - p)


def test_element_wise_warps_counted_on_explicit_masks_match_one_minus_p_to_the_32():
    """4,096 warps of a sampled mask at p = 0.95, where p^32 = 0.19 is large enough to count: within 4 standard
    errors of the closed form. At p = 0.5 a warp skips with probability 2.3e-10: none of the 4,096 does."""
    g = torch.Generator().manual_seed(0)
    for p in (0.95, 0.5):
        a = dv.warp_activity(torch.rand(4096 * 32, generator=g) >= p)
        want = dv.bernoulli_run_probability(p)
        se = (want * (1 - want) / a.warps) ** 0.5
        assert abs(a.work_fraction - want) <= 4 * se + 1e-12, (p, a.work_fraction, want)
        assert a.busy_fraction == pytest.approx((1 - p) / want, rel=0.02)
    assert dv.bernoulli_run_probability(0.5) == pytest.approx(1 - 0.5 ** 32)
    assert dv.rate_for_skipping(0.01) ** 32 == pytest.approx(0.01)


def test_a_row_pattern_along_the_batch_skips_whole_warps_and_along_the_units_diverges():
    """RDP (dp = 3, b = 1) on 64 samples x 96 units: along the batch (a warp is one unit over 32 samples) every
    warp is all kept or all dropped, and exactly the dropped units' warps skip; along the units every warp
    mixes kept and dropped lanes, so all run with 1 lane in 3 busy."""
    mask = Pattern("row", 3, 1).mask(64, 96)
    a = dv.warp_activity(dv.thread_order(mask, "batch"))
    assert set(a.active_lanes.tolist()) == {0, 32}
    assert a.warps_run == 32 * 2 and a.warps == 96 * 2  # 32 kept units x 2 warps each
    assert a.busy_fraction == 1.0 and a.work_saved == pytest.approx(2 / 3)
    u = dv.warp_activity(dv.thread_order(mask, "units"))
    assert u.warps_run == u.warps and u.busy_fraction == pytest.approx(1 / 3, abs=0.02)


def test_aligned_tiles_keep_warps_whole_and_16_row_tiles_split_a_warp_along_the_batch():
    t32 = Pattern("tile", 3, 0, (32, 32)).mask(64, 128)
    for lanes in dv.LANE_LAYOUTS:
        assert set(dv.warp_activity(dv.thread_order(t32, lanes)).active_lanes.tolist()) <= {0, 32}
    # 16 x 16 tiles, 4 tile columns: tile row 1 keeps other columns than tile row 0 for dp = 3, so a warp of one
    # unit over samples 0-31 is half kept
    t16 = Pattern("tile", 3, 0, (16, 16)).mask(32, 64)
    a = dv.warp_activity(dv.thread_order(t16, "batch"))
    assert 16 in a.active_lanes.tolist() and a.busy_fraction < 1.0


@pytest.mark.parametrize("kind", ["row", "tile"])
def test_pattern_activity_weights_every_pattern_and_saves_what_it_drops(kind):
    """Exact average over Algorithm 1's patterns (d_dp / dp each): with warps along a batch of 32, whole warps
    skip, so the work saved equals the searched rate and every lane of a running warp is busy. The sampled
    estimate (used above the size limit) lands near the exact one."""
    p = 0.6
    exact = dv.pattern_activity(kind, p, 32, 256)
    rate = sampler_for_rate(p, kind).rate
    assert exact.exact and exact.patterns == sum(range(1, sampler_for_rate(p, kind).d.numel() + 1))
    assert exact.work_saved == pytest.approx(rate, abs=1e-9) and exact.busy_fraction == pytest.approx(1.0)
    assert exact.kept_fraction == pytest.approx(1 - rate, abs=1e-9)
    bern = dv.pattern_activity("bernoulli", p, 32, 256)
    assert bern.run_fraction == pytest.approx(1 - p ** 32) and bern.work_saved < 1e-6
    old = dv.EXACT_LIMIT
    try:
        dv.EXACT_LIMIT = 0
        sampled = dv.pattern_activity(kind, p, 32, 256, samples=400, seed=1)
    finally:
        dv.EXACT_LIMIT = old
    assert not sampled.exact and sampled.patterns == 400
    assert sampled.work_saved == pytest.approx(exact.work_saved, abs=0.05)
