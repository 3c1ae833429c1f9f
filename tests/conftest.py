"""Shared test set-up: GPU tests skip without a GPU; the CUDA emulator for `emu` tests; hypothesis
profile for CI; a fresh machine's system data (none of Debian's fortunes, bible-kjv,
dataset-fashion-mnist) for every test."""
import gc
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_FRESH_ROOT: str | None = None
_EMU_RECORDS: str | None = None


def pytest_configure(config):
    """Point $PARALAB_SYSTEM_DATA_ROOT at an empty directory for the whole session (rank
    processes and CLI subprocesses inherit it), so the suite sees what a fresh machine has here
    too. Set it yourself to run against other data (PARALAB_SYSTEM_DATA_ROOT=/ for this
    machine's real installs); a test that wants the real root uses the `real_system_data` fixture."""
    global _FRESH_ROOT, _EMU_RECORDS
    from lab.data.system import ENV_ROOT

    if not hasattr(config, "workerinput"):  # the session's first process: pytest-xdist's workers inherit these
        from cuda_emu import RECORDS_ENV

        # One OpenMP thread per process: the workers, rank processes, CLI runs and the Streamlit server share the
        # cores, and torch's spinning OpenMP threads made a small training test 3x slower beside a busy core.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        # and torch.compile compiles in the process that asks (no pool of compile workers per process): 0.92x
        # the CPU of test_wire_into.py's cold compiles
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        # The run starts hundreds of fresh Python processes (CLI runs, launch servers, notebook kernels, the
        # Streamlit server): they write their bytecode (git-ignored __pycache__) as Python does by default, so
        # each compiles the lab's sources once for the run, not once per process, even where the machine sets
        # PYTHONDONTWRITEBYTECODE; pytest keeps its rewritten test modules the same way.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
        _EMU_RECORDS = tempfile.mkdtemp(prefix="paralab-emu-records-")
        os.environ[RECORDS_ENV] = _EMU_RECORDS

    if os.environ.get(ENV_ROOT):
        return
    _FRESH_ROOT = tempfile.mkdtemp(prefix="paralab-fresh-root-")
    os.environ[ENV_ROOT] = _FRESH_ROOT


def pytest_unconfigure(config):
    from lab.data.system import ENV_ROOT

    if _EMU_RECORDS is not None:
        shutil.rmtree(_EMU_RECORDS, ignore_errors=True)

    if _FRESH_ROOT is not None:
        if os.environ.get(ENV_ROOT) == _FRESH_ROOT:
            del os.environ[ENV_ROOT]
        shutil.rmtree(_FRESH_ROOT, ignore_errors=True)


@pytest.fixture
def real_system_data(monkeypatch):
    """This machine's real Debian data for one test (the session default is a fresh machine's)."""
    from lab.data.system import ENV_ROOT

    monkeypatch.delenv(ENV_ROOT, raising=False)


#: The check that the emulated tests of every worker together launched every kernel and looped every loop:
#: it waits for their records (cuda_emu.harness.report), so it starts after every other module.
LAST_MODULES = ("tests/test_kernels_emulated_coverage.py",)

#: the modules that run longest (the dashboard's pages in a browser, the notebooks' kernels), by name prefix:
#: started first, so no long module starts last while the other workers idle
LONG_MODULES = ("test_browser", "test_warmup", "test_notebooks")


def pytest_collection_modifyitems(config, items):
    """LONG_MODULES first and LAST_MODULES after every other test: pytest-xdist (`--dist loadscope
    --no-loadscope-reorder`) hands out whole modules in this order, and in one process (`-n 0`) the coverage check
    would otherwise wait for the records of emulated tests that run after it. GPU tests skip without a GPU."""
    from lab.backend import gpu_available

    def order(item) -> tuple[bool, bool]:
        path = item.nodeid.split("::", 1)[0]
        return path in LAST_MODULES, not os.path.basename(path).startswith(LONG_MODULES)

    items.sort(key=order)  # stable: each module's tests, and the modules within each rank, keep their order
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Report an emulated test's launches to the coverage check (whichever worker runs it). Stop the browser
    tests' shared server and browser once no further test uses them."""
    import sys

    if item.get_closest_marker("emu") and "cuda_emu.harness" in sys.modules:
        sys.modules["cuda_emu.harness"].report(item.nodeid)

    fixtures = sys.modules.get("browser_fixtures")
    if fixtures is not None:
        fixtures.release_unless_needed(item, nextitem)


def pytest_sessionfinish(session):
    import sys

    fixtures = sys.modules.get("browser_fixtures")
    if fixtures is not None:
        fixtures.SHARED.close()


@pytest.fixture
def one_thread():
    """Small GEMMs: one torch thread is faster and immune to a loaded machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


_SELECTED: set[str] = set()  # the names of the tests this run runs (with and without their parameters)
_EMU_PREBUILT = False


def pytest_sessionstart(session):
    gc.freeze()  # the imports so far (pytest-xdist's controller collects nothing): see pytest_collection_finish


def pytest_collection_finish(session):
    global _SELECTED
    _SELECTED = {item.name for item in session.items} | {getattr(item, "originalname", item.name) for item in session.items}
    # What collection imported (torch, pandas, hypothesis, the lab) lives as long as this process: frozen, the
    # garbage collector's full collections skip it (they were ~8 % of a worker's CPU, walking it again each time).
    gc.freeze()


@pytest.fixture
def cuda_emu(monkeypatch):
    """Run kernels/*.cu on the CPU emulation of CUDA (tests/cuda_emu) under the real launchers:
    `lab.backend.launch_kernel` becomes the emulator's and CPU tensors count as kernel tensors.
    Uninitialised tensors are filled (NaN / the largest integer), so a value a kernel should
    have written and did not shows. The launch plans' grids are capped (`harness.cap_grids`), so
    grid-stride loops loop. Yields the `harness.Launcher` (set `.flags` for orders, `.seed` for
    the interleaving of CTAs); a test that launched no kernel fails."""
    import torch

    from cuda_emu import harness
    from lab import backend

    if harness.compiler() is None:
        pytest.skip("the CUDA emulator needs g++ on the PATH (Debian: apt install g++)")
    global _EMU_PREBUILT
    if not _EMU_PREBUILT:  # a cold cache: every library this run needs compiles in the background, in parallel
        _EMU_PREBUILT = True
        harness.prebuild_for(_SELECTED)
    launcher = harness.Launcher()
    monkeypatch.setattr(backend, "launch_kernel", launcher)
    monkeypatch.setattr(backend, "KERNEL_DEVICE_TYPE", "cpu")
    harness.cap_grids(monkeypatch)
    fill, det = torch.utils.deterministic.fill_uninitialized_memory, torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield launcher
    torch.utils.deterministic.fill_uninitialized_memory = fill
    torch.use_deterministic_algorithms(det)
    if launcher.expect_launches and not launcher.launches:  # a silent fallback to the CPU path
        pytest.fail("this emulated test launched no kernel (set cuda_emu.expect_launches = False if it should not)")


class KernelTarget:
    """Where a kernel test runs: a real GPU ('gpu') or the CPU emulation of CUDA ('emu')."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.emulated = kind == "emu"
        self.device = "cpu" if self.emulated else "cuda"

    def __repr__(self) -> str:
        return self.kind


@pytest.fixture(params=[pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu", marks=pytest.mark.emu)])
def target(request) -> KernelTarget:
    """Parametrises a kernel test over a real GPU and the emulator (same body, two markers)."""
    if request.param == "emu":
        request.getfixturevalue("cuda_emu")
    return KernelTarget(request.param)
