"""`paralab dropout ...` and `paralab bench dropout` in smoke mode, and their clear errors."""
import json

import pytest
import torch
from typer.testing import CliRunner

from lab.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_search_table_and_json():
    r = runner.invoke(app, ["dropout", "search", "-p", "0.7"])
    assert r.exit_code == 0, r.output
    assert "dp = 1..4" in r.output and "converged" in r.output
    r = runner.invoke(app, ["dropout", "search", "-p", "0.5", "-n", "6", "--json", "--trace"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert abs(out["rate"] - 0.5) < 1e-3 and len(out["rows"]) == 6 and out["trace"]


def test_search_help_states_the_default_n_the_code_uses():
    import re

    r = runner.invoke(app, ["dropout", "search", "--help"], env={"COLUMNS": "200"})
    text = " ".join(r.output.replace("│", " ").split())
    assert "ceil(1/(1-p)) + 1" not in text
    examples = re.findall(r"(\d+) for (?:p = )?(0\.\d)", text)
    assert [(n, p) for n, p in examples] == [("3", "0.5"), ("4", "0.7"), ("14", "0.9")]
    for n, p in examples:
        r = runner.invoke(app, ["dropout", "search", "-p", p, "--json"])
        assert len(json.loads(r.stdout)["rows"]) == int(n), p


@pytest.mark.parametrize("args,message", [
    (["dropout", "search", "-p", "0.9", "-n", "8"], "N >= 11"),
    (["dropout", "search", "-p", "1.0"], "[0, 1)"),
    (["dropout", "mlp", "--smoke", "--rates", "0.5,abc"], "comma-separated numbers"),
    (["dropout", "mlp", "--smoke", "--rates", "0.5,0.5,0.5"], "3 rates for 2 layers"),
    (["dropout", "mlp", "--smoke", "--rates", "1.2"], "[0, 1)"),
    (["dropout", "mlp", "--smoke", "--kinds", "row,gaussian"], "allowed: bernoulli"),
    (["dropout", "mlp", "--dataset", "imagenet", "--epochs", "1"], "imagenet"),
    (["dropout", "lstm", "--corpus", "ptb", "--path", "/nonexistent/ptb"], "Penn Treebank"),
    (["dropout", "lstm", "--smoke", "--layers", "0"], "--layers"),
    (["dropout", "patterns", "--tile", "3"], "rows,cols"),
    (["bench", "dropout", "--widths", "0"], "must be >= 1"),
    (["bench", "dropout", "--rates", "0.5,1"], "[0, 1)"),
    (["bench", "dropout", "--tile", "32"], "rows,cols"),
])
def test_bad_input_fails_cleanly(args, message):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()), r.output
    assert "Traceback" not in r.output


def test_patterns_command():
    r = runner.invoke(app, ["dropout", "patterns", "-p", "0.5", "--batch", "4", "--units", "16",
                            "--iterations", "200"])
    assert r.exit_code == 0, r.output
    assert "row (dp=" in r.output and "drop frequency" in r.output


def test_mlp_and_lstm_smoke(tmp_path):
    out = tmp_path / "mlp.json"
    r = runner.invoke(app, ["dropout", "mlp", "--smoke", "--rates", "0.5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["config"]["dataset"] == "digits" and [row["kind"] for row in data["rows"]] == ["bernoulli", "row", "tile"]
    assert data["curves"] and all(row["epoch_s"] > 0 for row in data["rows"])
    r = runner.invoke(app, ["dropout", "lstm", "--smoke", "--rates", "0.3", "--kinds", "bernoulli,row", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    rows = out["rows"]
    assert [row["kind"] for row in rows] == ["bernoulli", "row"] and rows[1]["test_ppl"] > 1
    # a fresh machine (conftest: no Debian corpora): Python's own documentation, and the result says so
    assert out["config"]["corpus"] == "pydoc" and "pydoc_data.topics" in out["config"]["corpus_source"]


def test_bench_dropout_writes_json(tmp_path):
    out = tmp_path / "dropout.json"
    r = runner.invoke(app, ["bench", "dropout", "--widths", "64,96", "--rates", "0.3,0.7", "--steps", "2",
                            "--repeats", "1", "--batch", "32", "--threads", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["device_type"] == "cpu" and data["threads"] == 1 and data["widths"] == [64, 96]
    assert len(data["rows"]) == 2 * 2 * 4
    assert {row["contestant"] for row in data["rows"]} == {"dense", "conventional", "row", "tile"}
    for row in data["rows"]:
        assert row["seconds"] > 0 and row["ceiling"] == pytest.approx(1 / (1 - row["p"]))
        assert row["of_ceiling"] == pytest.approx(row["speedup"] / row["ceiling"])
