"""The CUDA emulator's concurrent CTAs (tests/cuda_emu): atomics are real and interleave, the
interleaving is fixed by the seed, the race detector names the kernel, both CTAs and both
source lines of an access to one address from two CTAs without an atomic, and a barrier that threads which
returned never reach is named."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from cuda_emu import harness
from lab.backend import KERNEL_DIR
from lab.codecs import hop

pytestmark = [pytest.mark.emu,
              pytest.mark.skipif(harness.compiler() is None, reason="the CUDA emulator needs g++ on the PATH")]

ATOMICS = r'''
typedef unsigned int u32;
extern "C" __global__ void count(u32* word, u32* order, u32* top, const u32* v) {
    const u32 me = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 at = atomicAdd(word, 1u);
    order[at] = blockIdx.x;  // one CTA writes each slot: no race
    u32 old = atomicCAS(top, 0u, 0u);  // a CAS loop for the max
    for (;;) {
        const u32 want = old > v[me] ? old : v[me];
        const u32 got = atomicCAS(top, old, want);
        if (got == old) break;
        old = got;
    }
}
extern "C" __global__ void racy_max(u32* word) {
    if (threadIdx.x == 0) {
        const u32 m = blockIdx.x + 1;
        if (m > *word) *word = m;
    }
}
'''


def _atomics(launcher: harness.Launcher, grid: int = 6, threads: int = 64):
    n = grid * threads
    word, order, top = torch.zeros(1, dtype=torch.int32), torch.full((n,), -1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    v = torch.randperm(n * 7, generator=torch.Generator().manual_seed(0))[:n].to(torch.int32)
    launcher("atomics", "count", grid, threads, (word, order, top, v))
    return int(word), order, int(top), int(v.max())


def test_atomics_are_real_and_interleave() -> None:
    """atomicAdd hands out every slot once and the CAS loop finds the max while CTAs interleave;
    the same seed gives the same interleaving, another seed another one."""
    runs = {}
    for seed in (1, 1, 2):
        launcher = harness.Launcher(sources={"atomics": ATOMICS}, seed=seed)
        total, order, top, vmax = _atomics(launcher)
        assert total == 6 * 64 and top == vmax
        assert sorted(order.tolist()) == sorted(list(range(6)) * 64)
        assert bool((order[1:] < order[:-1]).any()), "CTAs ran one after another, not interleaved"
        runs.setdefault(seed, []).append(order)
    assert torch.equal(runs[1][0], runs[1][1])
    assert not torch.equal(runs[1][0], runs[2][0])
    one = harness.Launcher(sources={"atomics": ATOMICS}, window=1)
    assert bool((_atomics(one)[1].diff() >= 0).all())  # window 1: the CTAs in order, as a check of the check


def test_race_detector_names_kernel_blocks_and_lines() -> None:
    launcher = harness.Launcher(sources={"atomics": ATOMICS})
    with pytest.raises(harness.EmuError) as caught:
        launcher("atomics", "racy_max", 4, 32, (torch.zeros(1, dtype=torch.int32),))
    msg = str(caught.value)
    line = ATOMICS.count("\n", 0, ATOMICS.index("if (m > *word)")) + 1
    m = re.search(r"race between CTAs in kernel racy_max: byte 0 of parameter 0, (written|read) by block (\d+) "
                  r"at [\w.]+:(\d+) and (written|read) by block (\d+) at [\w.]+:(\d+)", msg)
    assert m, msg
    assert m.group(2) != m.group(5) and {int(m.group(3)), int(m.group(6))} == {line}


def test_planted_cross_cta_race_in_the_absmax_is_reported(cuda_emu, monkeypatch) -> None:
    """A plain read-compare-write for the per-tensor absmax of kernels/collective.cu (instead of
    atomicMax): the detector names the kernel and collective.cu's line, whatever the interleaving."""
    from test_cuda_emu import SOURCES, _sub
    from test_collective_kernels import _codec

    atomic = "if (threadIdx.x == 0 && m != 0u) atomicMax(word, m);"
    cuda_emu.sources["collective"] = _sub(SOURCES["collective"], atomic,
                                          "if (threadIdx.x == 0 && m != 0u && m > *word) *word = m;")
    real = (KERNEL_DIR / "collective.cu").read_text()
    line = real.count("\n", 0, real.index(atomic)) + 1  # the line in kernels/collective.cu itself
    codec = _codec("dynamic_tree")
    n = 3 * 4096 + 8  # three CTAs under the test grid cap
    a = codec.encode(torch.randn(n, generator=torch.Generator().manual_seed(0)))
    x = torch.randn(n, generator=torch.Generator().manual_seed(1))
    for seed in (0, 1, 2):
        cuda_emu.seed = seed
        with pytest.raises(harness.EmuError, match=rf"race between CTAs in kernel hop_mixed_absmax: .* block \d+ "
                                                   rf"at collective\.cu:\d+ and .* block \d+ at collective\.cu:{line}\b"):
            hop.hop_mixed(codec, a, x)


def test_unchanged_kernels_have_no_race_under_any_seed(cuda_emu) -> None:
    """The real absmax (atomicMax) under several interleavings: no report, the same result."""
    from test_collective_kernels import _codec

    codec = _codec("dynamic_tree")
    n = 3 * 4096 + 8
    a = codec.encode(torch.randn(n, generator=torch.Generator().manual_seed(0)))
    x = torch.randn(n, generator=torch.Generator().manual_seed(1))
    got = []
    for seed in (0, 1, 2, 3):
        cuda_emu.seed = seed
        got.append(hop.hop_mixed(codec, a, x))
    assert all(torch.equal(g.tensors["codes"], got[0].tensors["codes"]) for g in got)
    assert any(g > 1 for _, _, g, _ in cuda_emu.launches)  # more than one CTA ran


def test_switch_every_is_checked() -> None:
    with pytest.raises(ValueError, match="power of two"):
        harness.Launcher(sources={"atomics": ATOMICS}, switch_every=3)("atomics", "racy_max", 1, 32,
                                                                          (torch.zeros(1, dtype=torch.int32),))
    assert np.log2(harness.Launcher().switch_every).is_integer()


BARRIERS = r'''
extern "C" __global__ void early_exit(float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1.f;
    __syncthreads();
    if (threadIdx.x >= 24) return;
    __syncthreads();
}
'''


def test_a_barrier_after_some_threads_exited_names_how_many() -> None:
    """A __syncthreads some threads of the CTA never reach (they returned first) stops the launch with its line, the
    CTA, the thread and how many threads had left by then (counted as they leave: at most the 8 that return)."""
    launcher = harness.Launcher(sources={"barriers": BARRIERS})
    lines = [i + 1 for i, s in enumerate(BARRIERS.splitlines()) if "__syncthreads" in s]
    with pytest.raises(harness.EmuError) as caught:
        launcher("barriers", "early_exit", 3, 32, (torch.zeros(96),))
    m = re.fullmatch(rf"__syncthreads at line {lines[1]} reached while (\d) of 32 threads have exited "
                     r"\(kernel early_exit, block \d, thread \d+\)", str(caught.value))
    assert m and 1 <= int(m.group(1)) <= 8, str(caught.value)
