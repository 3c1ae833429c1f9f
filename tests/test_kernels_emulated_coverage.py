"""Runs after the emulated kernel tests (files run in name order): every kernel of kernels/*.cu
was launched, unchanged, by at least one of them."""
import pytest

from cuda_emu import harness
from lab.backend import KERNEL_DIR


FAMILIES = ("test_kernels.py::test_cuda_matches_reference", "test_collective_kernels.py::test_cuda_collective_matches_reference")


@pytest.mark.emu
def test_every_kernel_ran_under_the_emulator(request) -> None:
    """Every kernel found in the sources was launched by an emulated test of this run."""
    emu = [i.nodeid for i in request.session.items if i.get_closest_marker("emu")]
    for family in FAMILIES:
        if sum(family in n for n in emu) < 20:
            pytest.skip(f"the emulated tests of {family} did not all run in this session "
                        "(run the whole suite or -m emu)")
    missing = {k for name in (p.stem for p in KERNEL_DIR.glob("*.cu")) for k in harness.module(name).kernels} - harness.LAUNCHED
    assert not missing, f"kernels with no emulated test: {sorted(missing)}"
