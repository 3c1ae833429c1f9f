"""The operator level (Ben-Nun & Hoefler 2018): the survey's W and D for FC and convolution layers against values
worked by hand from its tables, each convolution method equal to F.conv2d, their constraints as one-line errors,
micro-batching (µ-cuDNN) giving the same output with a smaller workspace, and the timing run's table."""
import json

import jsonschema
import pytest
import torch
import torch.nn.functional as F

from lab.experiments.operators import (BASELINE, conv_work_depth_table, depth_growth, fc_work_depth_table,
                                       microbatch_choice, operator_layer, operators_takeaway, time_conv_methods)
from lab.operators import (CONV_METHODS, conv, conv_multiplications, conv_shape, conv_work_depth, microbatched,
                           winograd_matrices)


def test_work_and_depth_are_the_survey_s_tables_worked_by_hand():
    # FC: W = C_out·C_in·N for the forward pass, ∇w and ∇o; D = ⌈log2⌉ of C_in, N, C_out
    fc = fc_work_depth_table(128, 1024, 10)
    assert fc["work"].tolist() == [1_310_720.0] * 3 and fc["depth"].tolist() == [10, 7, 4]
    assert fc["parallelism"].tolist() == [131_072.0, 1_310_720 / 7, 327_680.0]
    # conv: N=2, C_in=3, C_out=4, 8x8, 3x3, no padding: H' = W' = 6
    s = conv_shape(2, 3, 4, 8, 8, 3)
    direct, im2col = conv_work_depth(s, "direct"), conv_work_depth(s, "im2col")
    assert (direct.work, direct.depth) == (im2col.work, im2col.depth) == (2 * 4 * 6 * 6 * 3 * 3 * 3, 2 + 2 + 2)
    fft = conv_work_depth(s, "fft")  # c = 1: 64·log2 64·(12 + 6 + 8) + 64·2·3·4, D = 2·6 + 2
    assert (fft.work, fft.depth) == (11_520.0, 14)
    win = conv_work_depth(s, "winograd")  # m = 4, r = 3, α = 2: 2·(9 + 6 + 8 + 8 + 16) + 4·3·(2·2·2); D = 4 + 4 + 2
    assert (win.work, win.depth) == (190.0, 10)
    assert conv_work_depth(s, "fft", c=2.0).work == 11_520 + 9984
    # multiplications performed here: Winograd 16 per tile and channel pair (9 tiles) plus 84 per kernel transform
    assert conv_multiplications(s, "winograd") == 16 * 2 * 9 * 3 * 4 + 84 * 12
    assert conv_multiplications(s, "winograd") / conv_multiplications(s, "direct") == pytest.approx(4464 / 7776)
    # "W is linear and D logarithmic": doubling C_in doubles W and adds one step to D
    g = depth_growth(s)
    assert (g["work"] / g["work"].iloc[0]).tolist() == [1, 2, 4, 8] and g["depth"].diff().dropna().tolist() == [1] * 3


CASES = [  # N, C_in, C_out, H, W, k, stride, padding
    (2, 3, 4, 9, 7, 3, 1, 1), (1, 5, 2, 8, 8, 3, 1, 0), (3, 2, 3, 10, 11, 5, 2, 2), (2, 4, 4, 6, 6, 1, 1, 0),
    (1, 8, 16, 13, 5, 3, 1, 2), (2, 3, 2, 12, 12, 4, 3, 1)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[5]}x{c[5]}-s{c[6]}-p{c[7]}-{c[3]}x{c[4]}" for c in CASES])
def test_each_method_equals_conv2d_or_says_in_one_line_why_it_cannot(case):
    n, ci, co, h, w, k, stride, pad = case
    g = torch.Generator().manual_seed(sum(case))
    x, wt = torch.randn(n, ci, h, w, generator=g), torch.randn(co, ci, k, k, generator=g)
    ref = F.conv2d(x, wt, stride=stride, padding=pad)
    for method in CONV_METHODS:
        if method == "fft" and stride != 1 or method == "winograd" and (k != 3 or stride != 1):
            with pytest.raises(ValueError) as e:
                conv(method, x, wt, stride, pad)
            assert "\n" not in str(e.value) and ("stride 1" in str(e.value)) and str(stride) in str(e.value)
            continue
        y, held = conv(method, x, wt, stride, pad)
        assert y.shape == ref.shape and held > 0
        assert (y - ref).abs().max() <= 1e-4 * ref.abs().max(), method  # TOLERANCE, relative to the largest output
        if n > 1:  # µ-cuDNN: the batch in micro-batches, the same output, a workspace no larger
            y2, held2 = microbatched(method, x, wt, n, stride, pad)
            assert (y2 - ref).abs().max() <= 1e-4 * ref.abs().max() and held2 <= held


def test_winograd_matrices_compute_a_2x2_tile_with_16_products():
    bt, g, at = winograd_matrices(torch.float64)
    d, k = torch.randn(4, 4, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    m = (g @ k @ g.T) * (bt @ d @ bt.T)  # the 16 products
    want = F.conv2d(d[None, None], k[None, None])[0, 0]
    assert m.numel() == 16 and torch.allclose(at @ m @ at.T, want)


def test_bad_layers_and_splits_are_one_line_errors_naming_what_is_allowed():
    x, wt = torch.randn(4, 2, 6, 6), torch.randn(3, 2, 3, 3)
    for call, words in [(lambda: conv("gemm", x, wt), "allowed direct, im2col, fft, winograd"),
                        (lambda: conv("direct", x, wt, padding=3), "allowed a whole number from 0 to kernel k − 1 = 2"),
                        (lambda: conv_shape(1, 1, 1, 2, 2, 5), "allowed k <= min(H, W) + 2·padding"),
                        (lambda: microbatched("im2col", x, wt, 5), "from 1 to the batch N = 4"),
                        (lambda: conv_shape(0, 1, 1, 4, 4, 3), "batch N = 0: allowed a whole number >= 1")]:
        with pytest.raises(ValueError) as e:
            call()
        assert words in str(e.value) and "\n" not in str(e.value)


def test_micro_batching_divides_the_im2col_workspace_by_k():
    x, wt = torch.randn(8, 3, 10, 10), torch.randn(4, 3, 3, 3)
    _, one = microbatched("im2col", x, wt, 1, padding=1)
    _, four = microbatched("im2col", x, wt, 4, padding=1)
    assert one == 8 * 27 * 100 * 4 and four == one // 4  # the unfolded columns: N·C_in·k²·H'W' floats


def test_timing_run_checks_every_method_and_times_it_against_conv2d():
    s = operator_layer(2, 3, 4, 8, 8, 3, 1, 1)
    t = time_conv_methods(s, splits=(1, 2), repeats=3)
    tb = t.table
    assert tb["method"].tolist() == [BASELINE] + [m for m in CONV_METHODS for _ in (1, 2)]
    assert tb["matches_conv2d"].all() and tb.loc[0, "vs_conv2d"] == 1.0
    assert (tb["low_ms"] <= tb["median_ms"]).all() and (tb["median_ms"] <= tb["high_ms"]).all()
    assert tb.loc[0, "coverage"] == 0.75  # 3 runs: the min-max interval covers the median with 75 %
    assert t.info["threads"] == torch.get_num_threads() and t.info["isa"]
    text = operators_takeaway(conv_work_depth_table(s), t.info["threads"], t)
    assert text.startswith("Winograd F(2×2, 3×3) does the fewest multiplications here") and "2 micro-batches" in text
    # µ-cuDNN's choice: the fastest (method, k) whose workspace fits; nothing fits below the smallest workspace
    smallest = tb["workspace_bytes"].min()
    pick = microbatch_choice(t, smallest)
    assert pick["workspace_bytes"] == smallest and pick["method"] != BASELINE
    assert microbatch_choice(t, smallest - 1) is None
    assert microbatch_choice(t, 1e12)["median_ms"] == tb[tb["method"] != BASELINE]["median_ms"].min()
    with pytest.raises(ValueError, match="allowed whole numbers from 1 to the batch N = 2"):
        time_conv_methods(s, splits=(3,), repeats=3)


def test_cli_prints_the_tables_and_its_json_is_the_schema(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from lab.cli import app

    out = tmp_path / "ops.json"
    r = CliRunner().invoke(app, ["operators", "-n", "2", "--c-in", "3", "--c-out", "4", "--height", "8", "--width",
                                 "8", "--padding", "0", "--fc-in", "1024", "--fc-out", "10", "--no-time", "--out",
                                 str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    jsonschema.validate(data, json.loads((Path(__file__).parents[1] / "docs/schemas/operators.schema.json")
                                         .read_text()))
    rows = {row["method"]: row for row in data["rows"]}
    assert rows["fft"]["work"] == 11_520 and rows["winograd"]["depth"] == 10 and "timings" not in data
    assert [f["depth"] for f in data["fc"]] == [10, 1, 4] and "Winograd" in r.output
    bad = CliRunner().invoke(app, ["operators", "--kernel", "5", "--stride", "2", "--height", "3", "--width", "3",
                                   "--padding", "0"])
    assert bad.exit_code == 2 and "allowed k <= min(H, W) + 2·padding" in bad.output
