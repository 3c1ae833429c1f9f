"""Shared test set-up: GPU tests skip without a GPU; the CUDA emulator for `emu` tests; hypothesis
profile for CI."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    from lab.backend import gpu_available

    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_thread():
    """Small GEMMs: one torch thread is faster and immune to a loaded machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def cuda_emu(monkeypatch):
    """Run kernels/*.cu on the CPU emulation of CUDA (tests/cuda_emu) under the real launchers:
    `lab.backend.launch_kernel` becomes the emulator's and CPU tensors count as kernel tensors.
    Uninitialised tensors are filled (NaN / the largest integer), so a value a kernel should
    have written and did not shows. Yields the `harness.Launcher` (set `.flags` for orders)."""
    import torch

    from cuda_emu import harness
    from lab import backend

    if harness.compiler() is None:
        pytest.skip("the CUDA emulator needs g++ on the PATH (Debian: apt install g++)")
    launcher = harness.Launcher()
    monkeypatch.setattr(backend, "launch_kernel", launcher)
    monkeypatch.setattr(backend, "KERNEL_DEVICE_TYPE", "cpu")
    fill, det = torch.utils.deterministic.fill_uninitialized_memory, torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield launcher
    torch.utils.deterministic.fill_uninitialized_memory = fill
    torch.use_deterministic_algorithms(det)


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
