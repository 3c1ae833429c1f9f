"""Runs after the emulated kernel tests (files run in name order): every kernel of kernels/*.cu
was launched, unchanged, by at least one of them."""
import pytest

from cuda_emu import harness
from lab.backend import KERNEL_DIR


def _families() -> dict[str, int]:
    """The emulated families that launch every kernel, and how many cases each has."""
    import test_block_scaled_kernels as TB
    import test_collective_kernels as TC
    import test_kernels as TK

    return {"test_kernels.py::test_cuda_matches_reference":
            len(TK.MODES) * len(TK.TABLES) * len(TK.SEARCHES) * len(TK.DTYPES),
            "test_collective_kernels.py::test_cuda_collective_matches_reference": len(TC.CODECS) + len(TC.VARIANTS),
            "test_block_scaled_kernels.py::test_mx_kernels_match_cpu": len(TB.MX_NAMES) * len(TB.RULES) * len(TB.DTYPES),
            "test_block_scaled_kernels.py::test_nvfp4_kernels_match_cpu": len(TB.ROUNDINGS) * len(TB.DTYPES)}


@pytest.mark.emu
def test_every_kernel_ran_under_the_emulator(request) -> None:
    """Every kernel found in the sources was launched by an emulated test of this run."""
    emu = [i.nodeid for i in request.session.items if i.get_closest_marker("emu")]
    for family, cases in _families().items():
        ran = sum(family + "[emu-" in n for n in emu)
        if ran < cases:
            pytest.skip(f"only {ran} of the {cases} emulated cases of {family} ran in this session "
                        "(run the whole suite or -m emu)")
    missing = {k for name in (p.stem for p in KERNEL_DIR.glob("*.cu")) for k in harness.module(name).kernels} - harness.LAUNCHED
    assert not missing, f"kernels with no emulated test: {sorted(missing)}"


@pytest.mark.emu
def test_every_grid_and_block_loop_looped(request) -> None:
    """Under the test grid cap (`harness.cap_grids`) every grid-stride and block loop of every kernel
    that ran went round more than once in some thread of this run: a loop that only ever runs once
    hides what happens to the state it carries (a max that keeps only the last chunk, say)."""
    emu = [i.nodeid for i in request.session.items if i.get_closest_marker("emu")]
    for family, cases in _families().items():
        if sum(family + "[emu-" in n for n in emu) < cases:
            pytest.skip("run the whole suite or -m emu: the loop counts need every emulated family")
    assert any(v[0] for v in harness.LOOPS.values()), "no counted loop ran"
    once = harness.loops_once()
    assert not once, f"loops that never went round twice: {once}"
