"""The package that installs: the wheel carries the CUDA kernels, the reference results and the dashboard
(its modules, views, static chart library and Streamlit settings) and no tests; results are read from
$PARALAB_RESULTS (or ./bench/results) before the shipped reference ones, `pays` included. The wheel
installed into a fresh venv is run by .ci/wheel_smoke.py from .ci/run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab.cli import app
from lab.data import results as res
from lab.packaged import SHIPPED, shipped

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> set[str]:
    """The file names in a wheel built (no dependencies, no install) from a copy of the working tree."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "build", "*.egg-info", "node_modules", ".pytest_cache", ".hypothesis"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("paralab-*.whl")
    with zipfile.ZipFile(whl) as z:
        return set(z.namelist())


def _files(folder: Path, *patterns: str) -> set[str]:
    return {p.relative_to(folder).as_posix() for pat in patterns for p in folder.glob(pat) if p.is_file()}


def test_the_wheel_carries_kernels_reference_results_and_the_dashboard(wheel_names):
    kernels = _files(REPO / "kernels", "*.cu", "*.cuh")
    assert len([k for k in kernels if k.endswith(".cu")]) >= 3 and "common.cuh" in kernels
    assert {f"lab/kernels/{k}" for k in kernels} <= wheel_names
    results = {r for r in _files(REPO / "bench" / "results", "*.json") if not r.endswith(".partial.json")}
    assert {f"lab/reference/{r}" for r in results} <= wheel_names
    dashboard = _files(REPO / "app", "*.py", "*.js", "views/*.py", "static/*", ".streamlit/config.toml")
    assert {"Home.py", "serve.py", "page_list.py", "static/plotly-paralab.min.js", ".streamlit/config.toml"} <= dashboard
    assert {f"lab/app/{a}" for a in dashboard} <= wheel_names
    modules = _files(REPO / "lab", "**/*.py")  # every module: a subpackage without __init__.py would be left out
    assert "packaged.py" in modules and {f"lab/{m}" for m in modules} <= wheel_names


def test_the_wheel_holds_the_package_only(wheel_names):
    tops = {n.split("/", 1)[0] for n in wheel_names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lab"}, tops
    assert not [n for n in wheel_names if "/tests/" in n or n.split("/")[-1].startswith("test_")]
    assert not [n for n in wheel_names if n.endswith((".pyc", ".partial.json")) or "node_modules" in n]
    assert not [n for n in wheel_names if n.startswith("lab/app/plotly_bundle/")]  # the bundle's build, not the app


def test_shipped_folders_in_a_checkout_are_the_repository_s():
    assert shipped("kernels") == REPO / "kernels"
    assert shipped("reference") == REPO / "bench" / "results"
    assert shipped("app") == REPO / "app"
    assert set(SHIPPED) == {"kernels", "reference", "app"}
    with pytest.raises(ValueError, match="unknown shipped folder 'docs'; known: kernels, reference, app"):
        shipped("docs")


def test_results_are_read_from_paralab_results_then_the_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALAB_RESULTS", str(tmp_path / "mine"))
    assert res.results_dir() == tmp_path / "mine"
    assert res.results_dirs() == [tmp_path / "mine", REPO / "bench" / "results"]
    monkeypatch.delenv("PARALAB_RESULTS")
    monkeypatch.chdir(tmp_path)  # unset: ./bench/results of the current folder, then the reference
    assert res.results_dirs() == [Path("bench", "results"), REPO / "bench" / "results"]
    monkeypatch.chdir(REPO)  # the repository's root: its bench/results is the reference, searched once
    assert res.results_dirs() == [Path("bench", "results")]


def test_a_users_converge_result_comes_before_the_reference(tmp_path, monkeypatch):
    from lab.plan import accuracy as acc

    monkeypatch.chdir(tmp_path)
    assert acc.find_result("mlp") == REPO / "bench" / "results" / "converge-mlp-cpu.json"
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(REPO / "bench" / "results" / "converge-mlp-cpu.json", mine / "converge-mlp-mybox.json")
    monkeypatch.setenv("PARALAB_RESULTS", str(mine))
    assert acc.find_result("mlp") == mine / "converge-mlp-mybox.json"


def _h100_codecs(path: Path, encode_ns: float, decode_ns: float) -> None:
    rows = [{"contestant": "dynamic_tree tensor (lut)", "op": op, "n": 1 << 26, "ns_per_value": ns}
            for op, ns in (("encode", encode_ns), ("decode_into", decode_ns))]
    path.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "device_type": "cuda", "rows": rows}))


def test_pays_reads_measured_codec_times_from_paralab_results_first(tmp_path, monkeypatch):
    from lab.plan import pays as pp

    monkeypatch.chdir(tmp_path)
    dev = pp.get_device("h100")
    shipped_file = pp.measured_codec_file(dev)
    assert shipped_file is not None and shipped_file.parent == REPO / "bench" / "results"
    mine = tmp_path / "mine"
    mine.mkdir()
    _h100_codecs(mine / "codecs-nvidia-h100-80gb-hbm3-mybox.json", 0.5, 0.25)
    monkeypatch.setenv("PARALAB_RESULTS", str(mine))
    f = pp.measured_codec_file(dev)
    assert f == mine / "codecs-nvidia-h100-80gb-hbm3-mybox.json"
    c = pp.codec_cost("dynamic_tree", dev, f)
    assert (c.encode_s_per_value, c.decode_s_per_value) == (0.5e-9, 0.25e-9)
    # the command a user runs: its codec time names the user's file
    r = runner.invoke(app, ["pays", "--codecs", "dynamic_tree", "--cluster", "2x8", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["codec_time"].startswith("measured: codecs-nvidia-h100-80gb-hbm3-mybox.json")
    # a GPU neither folder measured: the roofline, and the message names where it looked
    r = pp.pays("gpt2_small", "2x8", gpu="a100", codecs=["dynamic_tree"])
    assert r.codec_time.startswith("roofline") and str(mine) in r.codec_time


def test_dashboard_command_becomes_the_shipped_app_with_streamlit_options(monkeypatch):
    """`paralab dashboard` replaces itself with the server (os.execv), so stopping it stops the server."""
    calls = []

    def execv(path, argv):
        calls.append((path, argv))
        raise SystemExit(3)

    monkeypatch.setattr(os, "execv", execv)
    r = runner.invoke(app, ["dashboard", "--server.port", "8599", "--server.headless", "true"])
    assert r.exit_code == 3, r.output
    assert calls == [(sys.executable, [sys.executable, str(REPO / "app" / "serve.py"), "--server.port", "8599",
                                       "--server.headless", "true"])]
