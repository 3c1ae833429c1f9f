"""Warp divergence measured by the CUDA emulator (tests/cuda_emu): a library built with branch counting counts, at
every `if`, the lanes of each warp that arrived and those that took it. Two dropout kernels that skip dropped units
with a branch (tests/cuda_emu/dropout_branches.cu) against the closed-form model the Dropout page teaches with
(lab/dropout/divergence.py, Song et al. 2019, Fig. 1b): element-wise dropout leaves nearly every warp running the
branch with half its lanes idle, a row pattern skips whole warps and keeps the rest fully busy."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cuda_emu import harness
from lab.dropout.divergence import WARP_SIZE, warp_activity

pytestmark = [pytest.mark.emu,
              pytest.mark.skipif(harness.compiler() is None, reason="the CUDA emulator needs g++ on the PATH")]

SOURCE = (Path(harness.__file__).parent / "dropout_branches.cu").read_text()
THREADS = 128


def _line(text: str) -> int:
    return 1 + next(i for i, s in enumerate(SOURCE.splitlines()) if text in s)


def test_branch_lanes_match_the_warp_model() -> None:
    """Per branch: warp passes = warps launched, passes where a lane took it = the model's warps that run the branch,
    lanes that took it = kept units, busy fraction = kept / (32 x warps run); the outputs are the dropout's."""
    launcher = harness.Launcher(sources={"dropout_branches": SOURCE}, branches=True)
    g = torch.Generator().manual_seed(5)
    n = 40 * WARP_SIZE + 7  # a partial last warp
    keep = torch.rand(n, generator=g) < 0.5
    keep[:WARP_SIZE] = False  # a warp with every unit dropped: it skips the branch
    keep[WARP_SIZE:2 * WARP_SIZE] = True  # and one with every unit kept
    x, y = torch.randn(n, generator=g), torch.zeros(n)
    grid = -(-n // THREADS)
    launcher("dropout_branches", "dropout_units", grid, THREADS,
             (keep.to(torch.uint8), x, y, np.float32(2.0), np.int32(n)))
    assert torch.equal(y, torch.where(keep, x * 2, 0.0))
    model = warp_activity(keep)
    got = launcher.branch_counts[("dropout_units", "dropout_branches.cu", _line("if (i < n && keep[i])"))]
    assert got == [grid * THREADS // WARP_SIZE, model.warps_run, grid * THREADS, model.kept]
    assert got[3] / (WARP_SIZE * got[1]) == pytest.approx(model.busy_fraction, rel=1e-12)
    assert model.warps_run == model.warps - 1 and 0.4 < model.busy_fraction < 0.6  # Fig. 1b: every warp, half busy

    rows, cols = 24, 2 * WARP_SIZE
    keep_row = torch.rand(rows, generator=g) < 0.5
    x, y = torch.randn(rows * cols, generator=g), torch.zeros(rows * cols)
    grid = -(-rows * cols // THREADS)
    launcher("dropout_branches", "dropout_rows", grid, THREADS,
             (keep_row.to(torch.uint8), x, y, np.float32(2.0), np.int32(rows), np.int32(cols)))
    units = keep_row.repeat_interleave(cols)
    assert torch.equal(y, torch.where(units, x * 2, 0.0))
    model = warp_activity(units)
    got = launcher.branch_counts[("dropout_rows", "dropout_branches.cu",
                                  _line("if (i < rows * cols && keep_row[i / cols])"))]
    assert got == [rows * cols // WARP_SIZE, model.warps_run, rows * cols, model.kept]
    assert model.busy_fraction == 1.0 and model.warps_run == int(keep_row.sum()) * cols // WARP_SIZE
