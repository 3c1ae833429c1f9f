"""Sub-model counts of RDP and TDP against the paper's formulas (Song et al. 2019 §III-A/B): patterns (dp, b) with
dp <= dp_max number dp_max (dp_max + 1) / 2, RDP's dp_max = M, TDP's floor(M/x) floor(N/y); the sub-networks one
step trains, counted on explicit masks; and the tables the Dropout page shows."""
import pytest
import torch

from lab.dropout import Pattern
from lab.dropout import submodels as sm
from lab.experiments.dropout_submodels import sub_model_counts, tile_sizes


def test_the_paper_counts_every_pattern_dp_b_up_to_dp_max():
    for dmax in (1, 4, 7):
        pairs = [(dp, b) for dp in range(1, dmax + 1) for b in range(dp)]
        assert sm.patterns_up_to(dmax) == len(pairs) == dmax * (dmax + 1) // 2
    # RDP: dp_max = M (§III-A); TDP: floor(M/x) floor(N/y) (§III-B); e.g. Table I's 1024 units, batch 128, 32x32
    assert sm.max_sub_models("row", 1024, 128) == 1024 * 1025 // 2 == 524_800
    assert sm.tdp_max_dp(1024, 128) == 32 * 4 and sm.max_sub_models("tile", 1024, 128) == 128 * 129 // 2
    assert sm.tdp_max_dp(100, 50, (16, 8)) == (100 // 8) * (50 // 16)  # tile = (samples, units)
    # distinct RDP masks are at most the paper's count (it is a maximum: large dp repeat single-unit masks)
    masks = {tuple(Pattern("row", dp, b).mask(1, 6)[0].tolist()) for dp in range(1, 7) for b in range(dp)}
    assert len(masks) <= sm.max_sub_models("row", 6, 1)
    assert sm.conventional_log10_sub_models(10) == pytest.approx(3.0103, abs=1e-4)


def test_tdp_has_more_patterns_than_rdp_once_the_batch_is_above_about_a_tile():
    """§III-B: "TDP can generate more sub-models than RDP, when N is roughly greater than x × y"."""
    units = 1024
    assert sm.max_sub_models("tile", units, 2048) > sm.max_sub_models("row", units, 2048)
    assert sm.max_sub_models("tile", units, 512) < sm.max_sub_models("row", units, 512)


@pytest.mark.parametrize("batch,units,tile,dp", [(64, 96, (32, 32), 2), (128, 1024, (32, 32), 3),
                                                 (128, 1024, (32, 32), 4), (40, 50, (8, 16), 5)])
def test_sub_networks_in_a_step_are_the_distinct_kept_sets_of_the_batch(batch, units, tile, dp):
    for b in range(dp):
        rows = {tuple(r.tolist()) for r in Pattern("tile", dp, b, tile).mask(batch, units)}
        assert sm.sub_networks_in_step("tile", dp, b, batch, units, tile) == len(rows)
        assert sm.sub_networks_in_step("row", dp, b, batch, units, tile) == 1


def test_the_effective_number_of_patterns_is_exp_entropy():
    one_hot = torch.zeros(5, dtype=torch.float64)
    one_hot[3] = 1.0  # always dp = 4: four equally likely biases
    assert sm.effective_patterns(one_hot) == pytest.approx(4.0)
    d = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64) / 6  # d_i proportional to i: every (dp, b) equally likely
    assert sm.effective_patterns(d) == pytest.approx(sm.patterns_up_to(3))


def test_the_page_tables_carry_the_counts_and_the_tile_trade_off():
    t = sub_model_counts(0.7, 1024, 128).set_index("kind")
    assert t.loc["row", "max_sub_models"] == 524_800 and t.loc["tile", "max_sub_models"] == 8256
    assert t.loc["row", "search_patterns"] == t.loc["tile", "search_patterns"] == 10  # N = 4 at p = 0.7
    assert t.loc["row", "per_step"] == 1.0 and t.loc["tile", "per_step"] > 1.0  # 4 tile rows: several sets
    assert t.loc["bernoulli", "log10_sub_models"] == pytest.approx(1024 * 0.30103, rel=1e-4)
    tiles = tile_sizes(0.7, 1024, 32).set_index("side")
    assert tiles.loc[32, "dp_max"] == 32 and tiles.loc[8, "dp_max"] == 128 * 4
    assert list(tiles.max_sub_models) == sorted(tiles.max_sub_models, reverse=True)  # smaller tile, more patterns
    # 32-row tiles keep every warp (32 samples of a unit) whole; 16-row ones split warps: they diverge
    assert tiles.loc[32, "busy_fraction"] == pytest.approx(1.0) and tiles.loc[16, "busy_fraction"] < 0.9
