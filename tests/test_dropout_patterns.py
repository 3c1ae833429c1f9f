"""Approximate Random Dropout patterns (Song et al. §III-A/B): pinned masks, the reading of Eq. 1,
tile groups, rate checks, and Algorithm 1's search with the per-unit equivalence of Eq. 2."""
import math

import pytest
import torch

from lab.dropout import (Pattern, PatternSampler, UnreachableRate, check_rate, conventional_dropout,
                         default_max_dp, expected_rate, kept_rows, row_pattern, search, tile_groups, tile_pattern)
from lab.dropout.search import _loss_and_grad, rate_vector


def test_row_pattern_keeps_one_in_dp():
    # Eq. 1 read as the kept rows: (i - b) mod dp == 0 keeps 1/dp, drops (dp-1)/dp
    assert torch.nonzero(row_pattern(10, 3, 1)).flatten().tolist() == [1, 4, 7]
    assert row_pattern(6, 1, 0).all()
    assert kept_rows(10, 3, 1) == slice(1, 10, 3)
    assert not row_pattern(5, 8, 6).any()  # dp larger than the rows: this bias keeps nothing
    assert len(range(*kept_rows(5, 8, 6).indices(5))) == 0
    assert Pattern("row", 4, 0).rate == 0.75


def test_tile_pattern_pinned():
    # 4 x 6 matrix, 2 x 2 tiles -> grid 2 x 3, tiles numbered row-major 0..5; dp=2, b=1 keeps 1, 3, 5
    m = tile_pattern(4, 6, 2, 1, (2, 2)).int()
    assert m.tolist() == [[0, 0, 1, 1, 0, 0],
                          [0, 0, 1, 1, 0, 0],
                          [1, 1, 0, 0, 1, 1],
                          [1, 1, 0, 0, 1, 1]]


@pytest.mark.parametrize("rows,cols,dp,bias,tile", [(5, 7, 3, 2, (2, 2)), (70, 45, 5, 0, (32, 16)),
                                                    (33, 65, 4, 3, (32, 32)), (9, 9, 50, 40, (4, 4))])
def test_tile_pattern_partial_tiles_match_definition(rows, cols, dp, bias, tile):
    th, tw = tile
    J = math.ceil(cols / tw)
    want = torch.tensor([[((r // th) * J + c // tw - bias) % dp == 0 for c in range(cols)] for r in range(rows)])
    assert torch.equal(tile_pattern(rows, cols, dp, bias, tile), want)
    groups = tile_groups(rows, cols, dp, bias, tile)
    seen = torch.cat([g.rows for g in groups]).sort().values
    assert seen.tolist() == list(range(rows))  # the groups partition the batch rows
    for g in groups:
        sub = want[g.rows]
        keep = torch.zeros(cols, dtype=torch.bool)
        keep[g.cols] = True
        assert torch.equal(sub, keep.expand_as(sub))


@pytest.mark.parametrize("kind", ["row", "tile"])
def test_blocks_cover_exactly_the_mask(kind):
    g = torch.Generator().manual_seed(3)
    for _ in range(30):
        B, M = (int(torch.randint(1, 80, (1,), generator=g)) for _ in range(2))
        dp = int(torch.randint(1, 9, (1,), generator=g))
        b = int(torch.randint(dp, (1,), generator=g))
        pat = Pattern(kind, dp, b, (8, 4))
        covered = torch.zeros(B, M, dtype=torch.bool)
        for blk in pat.blocks(B, M):
            r = torch.arange(B)[blk.rows] if isinstance(blk.rows, slice) else blk.rows
            c = torch.arange(M)[blk.cols] if isinstance(blk.cols, slice) else blk.cols
            covered[r[:, None], c[None, :]] = True
        assert torch.equal(covered, pat.mask(B, M))


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), float("inf"), "0.5", True, None])
def test_rate_outside_unit_interval_is_value_error(bad):
    with pytest.raises(ValueError, match="dropout rate"):
        check_rate(bad)


def test_bad_patterns_are_value_errors():
    for kw in ({"kind": "diag", "dp": 2}, {"kind": "row", "dp": 0}, {"kind": "row", "dp": 3, "bias": 3},
               {"kind": "row", "dp": 2, "bias": -1}, {"kind": "tile", "dp": 2, "tile": (0, 4)},
               {"kind": "row", "dp": 2.5}):
        with pytest.raises(ValueError):
            Pattern(**kw)


def test_conventional_dropout_with_given_mask_and_expectation():
    x = torch.ones(2000, 50)
    mask = torch.rand(2000, 50, generator=torch.Generator().manual_seed(0)) >= 0.3
    y = conventional_dropout(x, 0.3, mask=mask)
    assert torch.allclose(y, mask.float() / 0.7)
    z = conventional_dropout(x, 0.3, generator=torch.Generator().manual_seed(1))
    assert abs(float((z == 0).float().mean()) - 0.3) < 0.01 and abs(float(z.mean()) - 1) < 0.02


def test_search_gradient_matches_autograd():
    v = torch.randn(7, dtype=torch.float64, requires_grad=True)
    d = torch.softmax(v, 0)
    loss = 0.9 * (d @ rate_vector(7) - 0.4) ** 2 + 0.1 * (d * d.log()).sum() / 7
    loss.backward()
    assert torch.allclose(_loss_and_grad(v.detach(), rate_vector(7), 0.4, 0.9, 0.1)[5], v.grad)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
def test_search_reaches_rate(p):
    for n in (None, 32):
        r = search(p, n)
        assert r.converged and abs(r.rate - p) < 1e-3
        assert r.d.min() >= 0 and abs(float(r.d.sum()) - 1) < 1e-9
        assert abs(expected_rate(r.d) - r.rate) < 1e-12
        assert r.trace[-1]["loss"] < r.trace[0]["loss"]
        assert r.entropy > 0.3  # spread over several patterns, not one


def test_search_defaults_and_limits():
    assert [default_max_dp(p) for p in (0.1, 0.3, 0.5, 0.7, 0.9)] == [2, 2, 3, 4, 14]
    zero = search(0.0, 8)
    assert zero.rate == 0 and zero.d[0] == 1
    with pytest.raises(UnreachableRate, match=r"N >= 11"):
        search(0.9, 8)  # (N-1)/N = 0.875 < 0.9
    with pytest.raises(UnreachableRate):
        search(0.5, 1)
    with pytest.raises(UnreachableRate, match="stopped after 3 steps"):
        search(0.1, 32, max_steps=3)
    with pytest.raises(ValueError):
        search(0.5, 0)
    with pytest.raises(ValueError):
        search(0.5, 4, lambda1=0.0)


def _row_drops(dp: torch.Tensor, b: torch.Tensor, units: int) -> torch.Tensor:
    u = torch.arange(units)
    return (u[None, :] - b[:, None]) % dp[:, None] != 0


def _tile_drops(dp: torch.Tensor, b: torch.Tensor, rows: int, cols: int, tile: tuple[int, int]) -> torch.Tensor:
    J = math.ceil(cols / tile[1])
    t = (torch.arange(rows)[:, None] // tile[0]) * J + torch.arange(cols)[None, :] // tile[1]
    return (t[None] - b[:, None, None]) % dp[:, None, None] != 0


@pytest.mark.parametrize("p", [0.3, 0.5, 0.7, 0.9])
def test_every_unit_drops_with_probability_p(p):
    """Eq. 2: under patterns drawn from d, each unit (row) / entry (tile) is dropped with probability
    d . p_u ~ p; checked per unit against the binomial standard error, and the dp scaling is unbiased."""
    r = search(p)
    K = 20_000
    dp, b = PatternSampler(r, "row", seed=1).sample_params(K)
    se = math.sqrt(p * (1 - p) / K)
    drops = _row_drops(dp, b, 101).float()  # 101 units: no dp divides it
    z = (drops.mean(0) - r.rate) / se
    assert z.abs().max() < 5, z.abs().max()
    assert abs(float(drops.mean()) - p) < 5 * se
    kept_scaled = (1 - drops) * dp[:, None].float()
    assert float((kept_scaled.mean(0) - 1).abs().max()) < 0.1  # E[mask * dp] = 1 per unit
    dp, b = PatternSampler(r, "tile", seed=2).sample_params(4000)
    tdrops = _tile_drops(dp, b, 40, 50, (16, 8)).float().mean(0)  # partial tiles both ways
    tz = (tdrops - r.rate) / math.sqrt(p * (1 - p) / 4000)
    assert tz.abs().max() < 5, tz.abs().max()


def test_sampler_is_seeded_and_uniform_in_bias():
    r = search(0.7)
    a = [PatternSampler(r, "row", seed=5).sample() for _ in range(3)]
    s1, s2 = PatternSampler(r, "row", seed=5), PatternSampler(r, "row", seed=5)
    assert [s1.sample() for _ in range(20)] == [s2.sample() for _ in range(20)]
    assert a[0] == a[1] == a[2]  # a fresh sampler with one seed draws the same first pattern
    dp, b = PatternSampler(r, "row", seed=0).sample_params(30_000)
    assert (b < dp).all() and (b >= 0).all()
    hist = torch.bincount(dp - 1, minlength=r.n).double() / 30_000
    assert torch.allclose(hist, r.d, atol=0.01)
    with pytest.raises(ValueError):
        PatternSampler(torch.tensor([0.5, 0.6]), "row")
