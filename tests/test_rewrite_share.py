"""The collectors' shares of pytest's assertion rewriting (tests/rewrite_share.py): what a share writes is the file
pytest itself writes and reads, and the shares split the modules between the collectors."""
import os
import subprocess
import sys
from pathlib import Path

from _pytest.assertion import rewrite

from rewrite_share import pyc_of as _pyc, rewrite_share

SOURCE = '''
def test_sum():
    values = [1, 2, 3]
    assert sum(values) == 6, values
'''


def _modules(folder: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        path = folder / f"test_m{i}.py"
        path.write_text(SOURCE.replace("test_sum", f"test_sum_{i}"))
        paths.append(path)
    return paths


def test_a_share_writes_the_file_pytest_writes_and_pytest_reads_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as in the run's collections (conftest) and run_caches
    (module,) = _modules(tmp_path, 1)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    collect = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
               str(module)]
    run = subprocess.run(collect, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    theirs = _pyc(module).read_bytes()
    _pyc(module).unlink()
    assert rewrite_share([module], 0, 1) == 1
    assert _pyc(module).read_bytes() == theirs
    # pytest runs the shared file: a failing assert still explains itself (the rewritten code, not plain Python's)
    module.write_text(SOURCE.replace("== 6", "== 7"))
    _pyc(module).unlink()
    assert rewrite_share([module], 0, 1) == 1
    run = subprocess.run(collect, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "assert 6 == 7" in run.stdout, run.stdout


def test_the_shares_split_the_modules_and_skip_what_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    modules = _modules(tmp_path, 5)
    assert rewrite_share(modules[:0], 0, 2) == 0
    # the second of two collectors starts half-way (module 2), wraps round, and rewrites them all when alone
    assert rewrite_share(modules, 1, 2) == 5
    assert rewrite_share(modules, 0, 2) == 0  # all written: nothing left for the first
    for m in modules:
        _pyc(m).unlink()
    assert rewrite_share(modules[2:], 0, 1) == 3
    assert rewrite_share(modules, 0, 2) == 2  # the first collector's share is what the other left
    assert all(rewrite._read_pyc(m, _pyc(m)) is not None for m in modules)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as pytest: nothing written where bytecode is not
    modules[0].write_text(SOURCE + "\n# changed\n")
    assert rewrite_share(modules, 0, 1) == 0
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    modules[3].write_text(SOURCE + "\n# changed\n")  # a changed source is rewritten again
    assert rewrite_share(modules, 1, 2) == 2  # and the one left above


def test_every_collector_counts_the_same_collectors():
    """The run's first process (which starts run_caches' share, the last) and each worker agree: the workers, or the
    one collecting process of `-n 0` or `--collect-only`, and run_caches."""
    from types import SimpleNamespace as NS

    from rewrite_share import collectors

    assert collectors(NS(option=NS(numprocesses=2, dist="loadscope"))) == 3
    assert collectors(NS(workerinput={"workerid": "gw1", "workercount": 2}, option=NS(numprocesses=2, dist="no"))) == 3
    assert collectors(NS(option=NS(numprocesses=0, dist="no"))) == 2
    assert collectors(NS(option=NS())) == 2


def test_a_module_that_does_not_parse_is_left_to_the_collection(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    modules = _modules(tmp_path, 3)
    modules[1].write_text("def test_broken(:\n")
    assert rewrite_share([*modules, tmp_path / "test_gone.py"], 0, 1) == 2  # pytest reports those when it collects
    assert not _pyc(modules[1]).exists()
