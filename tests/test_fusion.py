"""Deep Image §4.2 multi-scale fusion (lab.experiments.deep_image.multiscale_fusion) and `paralab fusion`."""
import json

import pytest
import torch
from typer.testing import CliRunner

from lab.cli import app
from lab.experiments.deep_image import multiscale_fusion
from lab.data.images import DataError

runner = CliRunner()
TINY = dict(dataset="digits", scales=(8, 12), epochs=1, train_size=200, test_size=100, batch=32)


def test_smoke_via_cli_json():
    r = runner.invoke(app, ["fusion", "--smoke", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    info, table = out["info"], out["rows"]
    assert info["smoke"] and info["dataset"] == "digits" and info["scales"] == [16, 32]
    assert [row["model"] for row in table] == ["16 px", "32 px", "fused (mean of softmax)"]
    errors = [row["test_error"] for row in table]
    assert all(0 <= e < 20 for e in errors)  # digits: a few percent after 8 epochs
    assert errors[2] <= max(errors[:2])      # the fusion is never worse than the worse model here
    nll = [row["test_nll"] for row in table]
    assert nll[2] <= (nll[0] + nll[1]) / 2 + 1e-9  # log of a mean <= mean of logs (Jensen)
    assert sum(a["fraction"] for a in out["agreement"]) == pytest.approx(1.0)
    assert len(out["curves"]) == 2 * info["epochs"]


def test_seeded_and_tidy():
    a = multiscale_fusion(seed=3, **TINY)
    b = multiscale_fusion(seed=3, **TINY)
    cols = ["model", "test_error", "test_nll"]
    assert a.table[cols].equals(b.table[cols]) and a.curves["train_loss"].equals(b.curves["train_loss"])
    assert list(a.table.columns) == ["model", "scale_px", "test_error", "test_nll", "train_s", "vs_best_single"]
    assert a.info["train"] == 200 and a.info["test"] == 100
    rng = torch.random.get_rng_state()
    multiscale_fusion(seed=4, **TINY)
    assert torch.equal(rng, torch.random.get_rng_state())  # the global RNG is left alone


@pytest.mark.parametrize("kw, match", [(dict(scales=(16,)), "two different sizes"),
                                       (dict(scales=(16, 16)), "two different sizes"),
                                       (dict(epochs=0), "epochs must be"), (dict(lr=0.0), "lr must be")])
def test_bad_input(kw, match):
    args = {**TINY, **kw}
    with pytest.raises(ValueError, match=match):
        multiscale_fusion(**args)
    with pytest.raises(DataError, match="known: auto"):
        multiscale_fusion(**{**TINY, "dataset": "imagenet"})


def test_cli_errors_are_one_line():
    for args in (["fusion", "--scales", "16"], ["fusion", "--dataset", "imagenet"], ["fusion", "--scales", "a,b"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output
