"""Where `paralab` writes and what it says about bad input: benchmarks write
under the current directory or $PARALAB_RESULTS, never into the package; --out is checked before the
run; result files follow the umask; the reported bad inputs end as one `error:` line, exit 2."""
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lab
from lab.cli import app
from test_cli_sweep import Reached, cut_at_run, paths  # noqa: F401  (fixtures, used by their names)

runner = CliRunner()
PACKAGE_RESULTS = Path(lab.__file__).resolve().parents[1] / "bench" / "results"
BENCH_AUGMENT = ["bench", "augment", "--batch", "1", "--image-size", "40", "--crop", "32", "--repeats", "1",
                 "--device", "cpu"]


def one_error_line(r, says: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert says in lines[0] and "Traceback" not in r.output, lines[0]


def _listing(folder: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*")} if folder.is_dir() else {}


# -- where results go

def test_a_benchmark_without_out_writes_under_the_current_directory(tmp_path, monkeypatch):
    before = _listing(PACKAGE_RESULTS)
    monkeypatch.delenv("PARALAB_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, BENCH_AUGMENT)
    assert r.exit_code == 0, r.output
    written = tmp_path / "bench" / "results" / "augment-cpu.json"
    assert json.loads(written.read_text())["command"] == "bench augment"
    assert "wrote bench/results/augment-cpu.json" in r.stderr
    assert _listing(PACKAGE_RESULTS) == before  # nothing written into the package's tree


def test_paralab_results_names_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PARALAB_RESULTS", str(tmp_path / "elsewhere"))
    r = runner.invoke(app, BENCH_AUGMENT)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "elsewhere" / "augment-cpu.json").is_file() and not (tmp_path / "bench").exists()


def test_results_dir_and_partial_files_follow_the_cwd(tmp_path, monkeypatch):
    from lab.cli.base import bench_out, partial_out

    monkeypatch.delenv("PARALAB_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert bench_out(None, False, "codecs-cpu").resolve() == tmp_path / "bench" / "results" / "codecs-cpu.json"
    assert partial_out(False, "x").resolve().parent == tmp_path / "bench" / "results"
    assert bench_out(None, True, "codecs-cpu") is None


def test_an_unwritable_results_folder_fails_before_the_run(tmp_path, monkeypatch, cut_at_run):
    monkeypatch.setenv("PARALAB_RESULTS", "/sys/paralab-results")
    one_error_line(runner.invoke(app, BENCH_AUGMENT), "PARALAB_RESULTS")
    monkeypatch.setenv("PARALAB_RESULTS", str(tmp_path))
    with pytest.raises(Reached):  # writable: the run starts
        runner.invoke(app, BENCH_AUGMENT)
    with pytest.raises(Reached):  # --json alone writes no file: no folder needed
        monkeypatch.setenv("PARALAB_RESULTS", "/sys/paralab-results")
        runner.invoke(app, [*BENCH_AUGMENT, "--json"])


# -- --out checked first, files follow the umask, the reported inputs

@pytest.mark.parametrize("where", ["/sys/r.json", "/proc/r.json", "{file}/r.json", "{dir}", "{ro}/r.json"])
def test_out_that_cannot_be_written_fails_before_the_run(where, paths, cut_at_run):
    for k, v in paths.items():  # {ro}: a folder on which creating a file fails with EROFS
        where = where.replace(k, v)
    r = runner.invoke(app, ["errors", "--samples", "100", "--out", where])
    one_error_line(r, "--out")
    assert not Path(paths["{ro}"], "r.json").exists()


def test_out_files_follow_the_umask(tmp_path):
    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        old = os.umask(mask)
        try:
            out = tmp_path / f"r{mask:o}.json"
            r = runner.invoke(app, ["codecs", "--out", str(out)])
        finally:
            os.umask(old)
        assert r.exit_code == 0, r.output
        assert stat.S_IMODE(out.stat().st_mode) == mode, (oct(mask), oct(out.stat().st_mode))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp or probe file left


@pytest.mark.parametrize("args, says", [
    (["errors", "--samples", "-5"], "--samples"),
    (["errors", "--samples", "0", "--json"], "--samples"),
    (["table1", "--samples", "0"], "--samples"),
    (["errors", "--samples", "x"], "--samples"),
    (["errors", "--nope"], "--nope"),
    (["errors", "--codec", "ef:powersgd", "--samples", "100"], "keeps its own error feedback"),
    (["pays", "--codecs", "ef:powersgd"], "keeps its own error feedback"),
    (["plan", "--codec", "ef:powersgd"], "keeps its own error feedback"),
    (["pays", "--codecs", "topk:ratio=2"], "allowed: float in [0.0, 1.0] or none"),
    (["pays", "--codecs", "nope"], "; or none"),
    (["bench", "codecs", "--device", "gpu0"], "allowed: cpu, cuda"),
    (["train", "--hidden", "nan"], "--hidden"),
    (["bench", "compressed", "--values", "0"], "allowed: 1 to 2G values"),
    (["bench", "compressed", "--values", "4G"], "allowed: 1 to 2G values"),
    (["trace", "-P", "9"], "allowed: an integer from 2 to 8"),
])
def test_reported_bad_inputs_are_one_line(args, says, cut_at_run):
    r = runner.invoke(app, args)
    one_error_line(r, says)
    assert "; or none; or none" not in r.output and "or none; or none" not in r.output
    if args[:3] == ["pays", "--codecs", "topk:ratio=2"]:
        assert not r.stderr.strip().endswith("or none; or none") and r.stderr.count("or none") == 1
