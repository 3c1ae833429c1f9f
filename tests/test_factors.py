"""Send the factors, not the gradient (lab/plan/factors.py, the Planner's codec advice, `paralab plan --advice`):
B·(Cin + Cout) values against Cin·Cout, the crossover B* = Cin·Cout / (Cin + Cout) per FC layer."""
import json

import pytest

from lab.plan.factors import crossover_batch, factor_curves, factor_table, fc_layers
from test_app import page


def test_crossovers_of_the_papers_fc_layers():
    assert round(crossover_batch(9216, 4096), 1) == 2835.7  # AlexNet fc6
    assert crossover_batch(4096, 4096) == 2048.0
    alex = factor_table("alexnet", batch=128, gpus=8, rank=4).set_index("layer")
    assert list(alex.index) == ["fc6", "fc7", "fc8"]
    fc6 = alex.loc["fc6"]
    assert (fc6.c_in, fc6.c_out, fc6.grad_values, fc6.factor_values) == (9216, 4096, 9216 * 4096, 128 * 13312)
    assert fc6.crossover_8bit == pytest.approx(2835.69 / 4, abs=0.01) and fc6.down_crossover == pytest.approx(354.46, abs=0.01)
    assert fc6.powersgd_values == 13312 * 4 and fc6.best_up == "PowerSGD rank 4"
    deep = factor_table("deep_image", batch=64).set_index("layer")
    assert deep.loc["fc1"].crossover == pytest.approx(25088 * 6144 / (25088 + 6144))  # 4935.4
    mlp = factor_table("dettmers_mlp", batch=1, rank=4).set_index("layer")
    assert [(l.c_in, l.c_out) for l in fc_layers("dettmers_mlp")] == [(784, 1024), (1024, 1024), (1024, 10)]
    assert mlp.loc["fc3"].crossover == pytest.approx(10240 / 1034) and mlp.loc["fc1"].best_up == "factors"
    with pytest.raises(ValueError, match="no fully connected layer"):
        fc_layers("gpt2_small")


@pytest.mark.parametrize("c_in,c_out", [(9216, 4096), (784, 1024), (1024, 10), (4096, 1000)])
def test_factors_are_smaller_exactly_below_the_crossover(c_in, c_out):
    b = crossover_batch(c_in, c_out)
    below, above = int(b - 1e-9), int(b) + 1
    assert below * (c_in + c_out) <= c_in * c_out < above * (c_in + c_out)


def test_the_curves_cross_at_b_star_and_at_the_rank():
    c = factor_curves("alexnet", rank=8, batches=[8, 2835, 2836])
    fc6 = c[c.layer == "fc6"].pivot(index="batch", columns="what", values="bytes")
    fac, grad = fc6["factors (o_l−1, δ_l), fp32"], fc6["∇w, fp32"]
    assert fac[2835] < grad[2835] < fac[2836]
    assert fac[8] == fc6["PowerSGD rank 8, fp32"][8]  # factors equal PowerSGD's exactly at B = r


def test_the_planner_shows_the_crossovers():
    at = page("planner", plan_show="Codec advice", factors="true", factor_net="alexnet", factor_rank="4")
    assert not at.exception and not at.error
    md = " ".join(m.value for m in at.markdown)
    assert "Crossover B*" in md and "2835.7" in md and "803.8" in md and "1,703,936" in md
    said = " ".join(s.value for s in at.success)
    assert "the largest crossover is fc6's B* = 2,835.7 (9,216×4,096)" in said
    assert "against PowerSGD rank 4 only below B = 4" in said
    at = page("planner", plan_show="Codec advice", factors="true", factor_rank="0")
    assert any("PowerSGD rank r" in e.value and "allowed: 1..1024" in e.value for e in at.error)


def test_plan_advice_prints_the_factor_table():
    from typer.testing import CliRunner

    from lab.cli import app
    r = CliRunner().invoke(app, ["plan", "--model", "alexnet", "--gpus", "1,8", "--advice", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["layer"]: row for row in json.loads(r.output)["factors"]["rows"]}
    assert round(rows["fc6"]["crossover"], 1) == 2835.7 and rows["fc6"]["factor_values"] == 128 * 13312
