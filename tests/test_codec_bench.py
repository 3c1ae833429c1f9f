"""`paralab bench codecs` on a small size: every contestant timed for encode, decode and decode into a
buffer, ratios against the baselines of the same run, JSON written whole."""
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from lab.cli import app
from lab.codecs import bench

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries


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
    res = CliRunner().invoke(app, ["bench", "codecs", "-b", "16K", "-e", "16K", "--repeats", "1",
                                   "--device", "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["sizes"] == [4096] and data["rows"]
    assert {r["op"] for r in data["rows"]} == {"encode", "decode", "decode_into"}
    assert {"mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"} <= {r["contestant"] for r in data["rows"]}
    assert all("speed_vs_torchao_mx" in r for r in data["rows"]) and isinstance(data["notes"], list)
    bad = CliRunner().invoke(app, ["bench", "codecs", "-b", "4M", "-e", "16K"])
    assert bad.exit_code == 2 and "allowed: 4 <= min <= max" in bad.output


def test_block_scaled_rows_and_the_torchao_baseline():
    """MX and NVFP4 timed beside the dynamic tree, each as a ratio to torch's fp8 cast and to torchao's
    to_mx of the same run; a size that is not whole 32-blocks skips to_mx with a note."""
    pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    df, info = bench.run(sizes=[1 << 10, 48], device="cpu", repeats=1)
    for name in ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"):
        rows = df[df.contestant == name]
        assert set(rows.op) == {"encode", "decode", "decode_into"} and set(rows.n) == {1024, 48}
        big = rows[rows.n == 1024]
        assert big.speed_vs_fp8_cast.map(math.isfinite).all() and big.speed_vs_torchao_mx.map(math.isfinite).all()
        assert (big[big.op == "decode_into"].speed_vs_torchao_mx_op == "decode").all()  # to_mx has no decode_into
    mx = df[df.contestant == bench.TORCHAO_MX]
    assert set(mx.n) == {1024} and set(mx.op) == {"encode", "decode"}
    assert (mx.speed_vs_torchao_mx == 1.0).all()
    assert df[df.n == 48].speed_vs_torchao_mx.isna().all()
    assert any("takes multiples of 32" in m for m in info["notes"])
    # the codec round trip the benchmark times is the real one: to_mx's codes decode to ours
    x = torch.randn(1024, generator=torch.Generator().manual_seed(0))
    c = [c for c in bench.contestants(torch.device("cpu")) if c.name in ("mxfp8_e4m3", bench.TORCHAO_MX)]
    a, b = (k.decode(k.encode(x)) for k in c)
    assert torch.equal(a.view(-1), b.view(-1))


def test_torchao_missing_is_a_note_not_a_crash(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_torchao(name, *args, **kwargs):
        if name.startswith("torchao"):
            raise ImportError("No module named 'torchao' (simulated)")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torchao)
    df, info = bench.run(sizes=[256], device="cpu", repeats=1)
    assert bench.TORCHAO_MX not in set(df.contestant) and "nvfp4" in set(df.contestant)
    assert df.speed_vs_torchao_mx.isna().all()
    assert any(m.startswith(bench.TORCHAO_MX + " skipped") and "simulated" in m for m in info["notes"])


def test_torchao_import_noise_stays_out_of_the_output():
    """torchao logs 'Failed to load <its CUDA .so>' and torch a pytree Enum deprecation when the to_mx
    baseline imports it; `paralab bench codecs` drops exactly those (lab/cli/quiet.py)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "lab", "bench", "codecs", "-b", "4K", "-e", "4K", "--repeats", "1",
                        "--device", "cpu", "--json"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Failed to load" not in p.stderr and "Enum subclass" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["command"] == "bench codecs"


def test_a_result_s_library_versions_are_read_without_importing_them():
    """backend.versions() names the installed bitsandbytes and numpy (the versions their modules report) without
    importing a module that is not loaded yet (bitsandbytes' import cost ~1 core-second of each benchmark command).
    (Checked in one fresh process, so this test's worker imports nothing more.)"""
    import subprocess
    import sys

    code = ("import json, sys; from lab import backend; v = backend.versions(); "
            "imported = 'bitsandbytes' in sys.modules; import bitsandbytes, numpy; "
            "print(json.dumps([imported, v['bitsandbytes'] == bitsandbytes.__version__, "
            "v['numpy'] == numpy.__version__, v['cupy'] is None or isinstance(v['cupy'], str)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[-1]) == [False, True, True, True], out


def test_a_result_records_the_vector_isa_and_honours_aten_cpu_capability():
    """Every result's versions name the vector ISA ATen dispatched to, and ATEN_CPU_CAPABILITY lowers it (how AVX2
    is measured on an AVX-512 machine; 'default' works on every CPU). (In fresh processes: ATen reads it at import.)"""
    import os
    import subprocess
    import sys

    code = "import json; from lab import backend; print(json.dumps(backend.versions()['vector_isa']))"

    def isa(**env: str) -> str:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, **env})
        return json.loads(out.stdout.splitlines()[-1])

    assert isa() == torch.backends.cpu.get_cpu_capability()  # the same environment as this process
    assert isa(ATEN_CPU_CAPABILITY="default") == "DEFAULT"
