"""The `paralab` CLI: Table 1 as JSON, error tables, clear errors, and the codec benchmark."""
import json

from typer.testing import CliRunner

from lab.cli import app

runner = CliRunner()


def test_table1_json():
    r = runner.invoke(app, ["table1", "--samples", "20000", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["rows"]) == 16 and "not reproducible" in out["note"].lower()
    assert {"rel_pct_paper", "rel_pct_nearest", "paper_rel_pct"} <= set(out["rows"][0])


def test_table1_bad_rounding():
    r = runner.invoke(app, ["table1", "--rounding", "up"])
    assert r.exit_code == 2 and "allowed: paper, nearest, both" in r.output


def test_errors_unknown_codec_lists_names():
    r = runner.invoke(app, ["errors", "--codec", "dynamic", "--samples", "100"])
    assert r.exit_code == 2 and "known codecs" in r.output


def test_errors_json():
    r = runner.invoke(app, ["errors", "--codec", "qsgd", "--dist", "laplace(0,1)", "--samples", "1000", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows[0]["codec"].startswith("qsgd") and rows[0]["data"] == "laplace(0,1)"


def test_bench_codecs_writes_json(tmp_path):
    out = tmp_path / "codecs.json"
    r = runner.invoke(app, ["bench", "codecs", "--min-exp", "10", "--max-exp", "12", "--repeats", "2",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["device_type"] == "cpu" and data["sizes"] == [1024, 4096]
    names = {row["contestant"] for row in data["rows"]}
    assert {"dynamic_tree block4096", "torch fp8_e4m3 cast", "bitsandbytes blockwise4096"} <= names
    assert all(row["ns_per_value"] > 0 and row["speed_vs_fp8_cast"] > 0 for row in data["rows"])
