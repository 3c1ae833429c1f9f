"""Runs after the emulated kernel tests (conftest hands this module out last; it waits for the
records every pytest-xdist worker writes after each emulated test, `harness.report`): every kernel of
kernels/*.cu was launched, unchanged, by at least one of them, and every counted loop looped."""
import pytest

from cuda_emu import harness
from lab.backend import KERNEL_DIR

# a test here waits up to 1200 s for the other workers' emulated tests (harness.gathered): above pytest's timeout
pytestmark = pytest.mark.timeout(1300)


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


def _records(request) -> tuple[set[str], dict]:
    """What every process of this session launched and looped, once all its other emulated tests are done;
    skips unless every emulated case of the families that launch every kernel was selected."""
    emu = [i for i in request.session.items if i.get_closest_marker("emu")]
    for family, cases in _families().items():
        ran = sum(family + "[emu-" in i.nodeid for i in emu)
        if ran < cases:
            pytest.skip(f"only {ran} of the {cases} emulated cases of {family} ran in this session "
                        "(run the whole suite or -m emu)")
    return harness.gathered({i.nodeid for i in emu if i.path != request.node.path})


@pytest.mark.emu
def test_every_kernel_ran_under_the_emulator(request) -> None:
    """Every kernel found in the sources was launched by an emulated test of this run."""
    launched, _ = _records(request)
    missing = {k for name in (p.stem for p in KERNEL_DIR.glob("*.cu")) for k in harness.module(name).kernels} - launched
    assert not missing, f"kernels with no emulated test: {sorted(missing)}"


@pytest.mark.emu
def test_every_grid_and_block_loop_looped(request) -> None:
    """Under the test grid cap (`harness.cap_grids`) every grid-stride and block loop of every kernel
    that ran went round more than once in some thread of this run: a loop that only ever runs once
    hides what happens to the state it carries (a max that keeps only the last chunk, say)."""
    _, loops = _records(request)
    assert any(v[0] for v in loops.values()), "no counted loop ran"
    once = harness.loops_once(loops=loops)
    assert not once, f"loops that never went round twice: {once}"
