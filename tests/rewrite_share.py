"""Shares of pytest's assertion rewriting, done before the collections that need it (tests/conftest.py).

In a fresh clone every collecting process rewrote the asserts of every test module (~3 s of each collection here;
pytest-xdist's workers each collect them all, the same work twice). The run's collectors now split it: with n of
them (each worker, or the one process of `-n 0`, and tests/run_caches.py in the background), collector k first
rewrites the modules from k/n of the way through the list onwards, wrapping round and skipping those already
written, so they meet, and each collection reads the others' shares from tests/__pycache__. The rewriting and the
cached files are pytest's own (`_pytest.assertion.rewrite`), so a collection reads them as if it had written them;
with a pytest that lacks those functions, no share is done and each collection rewrites as before."""
from __future__ import annotations

import fnmatch
import sys
import types
from pathlib import Path

from _pytest.assertion import rewrite


def modules_to_collect(config) -> list[Path]:
    """The test modules under the run's command-line paths (or `testpaths`), in pytest's order: files whose name
    matches `python_files`."""
    patterns = config.getini("python_files")
    found: list[Path] = []
    for arg in config.args:
        path = Path(config.invocation_params.dir, str(arg).split("::")[0])
        files = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
        found += [f for f in files if any(fnmatch.fnmatch(f.name, p) for p in patterns)]
    return list(dict.fromkeys(found))


def collectors(config) -> int:
    """How many processes share the rewriting: the run's pytest-xdist workers (or its one collecting process) and
    the background tests/run_caches.py."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return int(worker["workercount"]) + 1
    workers = getattr(config.option, "numprocesses", None)
    spread = getattr(config.option, "dist", "no") != "no" and isinstance(workers, int) and workers > 0
    return (workers if spread else 1) + 1


def pyc_of(module: Path) -> Path:
    """Where pytest keeps `module`'s rewritten code (as its import hook names it)."""
    return rewrite.get_cache_dir(module) / (module.name[:-3] + rewrite.PYC_TAIL)


def rewrite_share(modules: list[Path], index: int, count: int, config=None) -> int:
    """Rewrite, as pytest would on import, `modules` from `index`/`count` of the way through onwards (wrapping
    round) whose rewritten code is not cached yet; the number rewritten (none where bytecode is not written, as
    pytest). `config` None is pytest's rewriting without `enable_assertion_pass_hook`."""
    names = ("get_cache_dir", "try_makedirs", "PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc")
    if sys.dont_write_bytecode or not all(hasattr(rewrite, n) for n in names):
        return 0
    start = len(modules) * index // max(count, 1)
    state = types.SimpleNamespace(trace=lambda message: None)
    done = 0
    for fn in modules[start:] + modules[:start]:
        pyc = pyc_of(fn)
        if rewrite._read_pyc(fn, pyc) is not None:
            continue
        if not rewrite.try_makedirs(pyc.parent):
            return done
        try:
            key, code = rewrite._rewrite_test(fn, config)
        except Exception:  # (a syntax error, a file gone) left to the collection, which reports it as pytest does
            continue
        rewrite._write_pyc(state, code, key, pyc)
        done += 1
    return done
