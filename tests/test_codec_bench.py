"""`paralab bench codecs` on a small size: every contestant timed for encode, decode and decode into a
buffer, ratios against the baselines of the same run, JSON written whole."""
import json
import math

from typer.testing import CliRunner

from lab.cli import app
from lab.codecs import bench


def test_bench_rows_ratios_and_decode_into():
    df, info = bench.run(sizes=[1 << 12], device="cpu", repeats=1)
    names = set(df.contestant)
    assert {"dynamic_tree block4096", "dynamic_tree tensor", "torch fp8_e4m3 cast"} <= names
    for name in ("dynamic_tree block4096", "dynamic_tree tensor"):
        assert set(df[df.contestant == name].op) == {"encode", "decode", "decode_into"}
    assert (df.seconds > 0).all() and (df.ns_per_value > 0).all()
    fp8 = df[(df.contestant == "torch fp8_e4m3 cast") & (df.op == "encode")]
    assert fp8.speed_vs_fp8_cast.iloc[0] == 1.0
    if "bitsandbytes blockwise4096" in names:  # the dev extra installs it
        row = df[(df.contestant == "dynamic_tree block4096") & (df.op == "decode_into")].iloc[0]
        assert row.speed_vs_bnb_op == "decode_into" and math.isfinite(row.speed_vs_bnb)
    assert info["device_type"] == "cpu" and "decode_into" in info["ops"]


def test_bench_codecs_cli_writes_json(tmp_path):
    out = tmp_path / "codecs.json"
    res = CliRunner().invoke(app, ["bench", "codecs", "--min-exp", "12", "--max-exp", "12", "--repeats", "1",
                                   "--device", "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["sizes"] == [4096] and data["rows"]
    assert {r["op"] for r in data["rows"]} == {"encode", "decode", "decode_into"}
    bad = CliRunner().invoke(app, ["bench", "codecs", "--min-exp", "20", "--max-exp", "12"])
    assert bad.exit_code == 2 and "need 0 <= --min-exp <= --max-exp <= 31" in bad.output
