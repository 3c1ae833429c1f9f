"""Index widths of kernels/*.cu: every kernel builds with g++ -Wconversion -Werror in the emulated build (a
64-bit index kept in an int is an error at any size), a planted `const int i = g * N` fails that check, and every
launch plan the launchers choose, up to the largest sizes, fits the kernels' index types (CUDA's gridDim.x limit,
1024 threads, the 32-bit in-block offsets and the 64-bit element offsets)."""
from __future__ import annotations

import pytest
import torch

from cuda_emu import harness, widths
from lab.backend import KERNEL_DIR, kernel_source
from lab.codecs import cuda as C
from lab.codecs import cuda_block as CB
from lab.codecs import cuda_hop as H

pytestmark = [pytest.mark.emu,
              pytest.mark.skipif(harness.compiler() is None, reason="the index-width check needs g++ on the PATH")]

SOURCES = {p.stem: kernel_source(p.stem) for p in sorted(KERNEL_DIR.glob("*.cu"))}
INT32 = 2**31 - 1
INT64 = 2**63 - 1
GRID_X = 2**31 - 1  # CUDA's largest gridDim.x (compute capability 3.0 and later)
# The largest launch: 2^48 values is past any GPU's memory (the largest holds under 2^38 bytes); the kernels'
# largest 64-bit product is n * bits <= 8n, which fits int64 up to 2^60.
SIZES = (1, 1000, INT32, INT32 + 1, 2**32 + 3, 2**40 + 7, 2**48)
BLOCKS = (None, 1, 3, 32, 4096, 2**20, C.MAX_BLOCK)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_kernels_build_with_wconversion(name: str) -> None:
    assert widths.conversion_errors(name, SOURCES[name]) == []


def test_planted_int_index_fails_the_build_check() -> None:
    """A 64-bit group index times the group size kept in an int: the build check names its line."""
    good = "const i64 base = g * GROUP;"
    assert SOURCES["block_scaled"].count(good) == 1
    errors = widths.conversion_errors("block_scaled", SOURCES["block_scaled"].replace(good, "const int base = g * GROUP;"))
    assert errors and all("-Werror=conversion" in e for e in errors)
    # the expanded source's #line directives point at kernels/block_scaled.cu itself
    assert {e.split(": error")[0].rsplit(":", 1)[0].split("/")[-1] for e in errors} == {"block_scaled.cu:"
                                                                                            f"{_kernel_line(good)}"}


def _kernel_line(text: str) -> int:
    return next(i for i, s in enumerate((KERNEL_DIR / "block_scaled.cu").read_text().split("\n"), 1) if text in s)


def _fits(plan, n: int, team: int, block: int, items: int, group: int) -> None:
    """The index types of a launch: gridDim.x, a CTA, the int offsets inside one block (a team's lanes step
    through at most block + items * team * group elements) and the int64 element offsets (at most 8n bits)."""
    assert 1 <= plan.grid <= GRID_X, plan
    assert 32 <= plan.threads <= 1024 and plan.threads % 32 == 0, plan
    assert plan.threads % team == 0, plan
    assert block + (items + 1) * team * group <= INT32, plan
    assert 8 * n + plan.grid * plan.threads * group <= INT64, plan


@pytest.mark.parametrize("n", SIZES)
def test_codec_and_hop_plans_fit_their_index_types(n: int) -> None:
    for bs in BLOCKS:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for aligned in (True, False):
                p = C.encode_plan(n, dtype, block_size=bs, search="binary", x_aligned=aligned)
                _fits(p, n, p.team, p.block, C.ENCODE_ITEMS, 8)
                p = C.decode_plan(n, dtype, block_size=bs, codes_aligned=aligned, out_aligned=aligned)
                _fits(p, n, p.team, p.block, C.DECODE_ITEMS, 8)
        for aligned in (True, False):
            for kind in H.KINDS:
                for scale in H.SCALES if bs is None else ("absmax",):
                    for p in H.hop_plan(kind, n, block_size=bs, scale=scale, search="binary", aligned=aligned):
                        _fits(p, n, p.team, p.block, H.HOP_ITEMS, H.GROUP)
            p = H.decode_sum_plan(n, block_size=bs, aligned=aligned)
            _fits(p, n, 1, 0, 1, H.GROUP)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for kind, block in (("mx", CB.MX_BLOCK), ("nvfp4", CB.NV_BLOCK)):
            _fits(CB.encode_plan(kind, n, dtype), n, block // CB.GROUP, block, 1, CB.GROUP)
        _fits(CB.decode_plan(n, dtype), n, 1, CB.GROUP, 1, CB.GROUP)


def test_plans_at_the_limits_are_capped() -> None:
    """The grid is capped at CUDA's gridDim.x limit (the kernels loop over the rest) and the largest block
    the launchers accept keeps its in-block offsets in 32 bits."""
    assert C.encode_plan(2**48, torch.float32, block_size=1, search="binary", x_aligned=True).grid == GRID_X
    assert CB.decode_plan(2**48, torch.float32).grid == GRID_X
    with pytest.raises(ValueError, match="block_size"):
        C.check_block_size(C.MAX_BLOCK + 1)
    C.check_block_size(C.MAX_BLOCK)
