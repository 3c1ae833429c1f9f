"""The CUDA emulator's concurrent CTAs (tests/cuda_emu): atomics are real and interleave, the
interleaving is fixed by the seed, the race detector names the kernel, both CTAs and both
source lines of an access to one address from two CTAs without an atomic, and a barrier that threads which
returned never reach is named; inside a CTA, shared memory written and read by two threads between the same two
barriers is a race, a read of shared memory no thread of the CTA has written is an error, and so is a read into a
buffer's guard zone; host threads may launch at once while another builds."""
from __future__ import annotations

import re
import threading

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


INSIDE = r"""
extern "C" __global__ void team_sum(float* out, const float* x, long long trailing) {
    __shared__ float part[64];
    for (int k = 0; k < 2; ++k) {
        part[threadIdx.x] = x[k * blockDim.x + threadIdx.x];
        __syncthreads();
        float s = 0.f;
        for (int i = 0; i < (int)blockDim.x; ++i) s += part[i];
        if (trailing) __syncthreads();
        out[(blockIdx.x * 2 + k) * blockDim.x + threadIdx.x] = s;
    }
}
extern "C" __global__ void read_before_write(float* out, const float* x) {
    __shared__ float buf[64];
    const float early = buf[threadIdx.x];  // no thread has written buf yet
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buf[63 - threadIdx.x] + early * 0.f;
}
extern "C" __global__ void unguarded(float* out, const float* x, long long n) {
    const int i = threadIdx.x;
    const float v = x[i];  // read before the guard: past the end for i >= n
    if (i < n) out[i] = v;
    else if (v != v) out[0] = 0.f;  // uses the value: the load stays where it is
}
"""


@pytest.mark.parametrize("flags", (0, 1, 8, 9), ids=("round-robin", "reversed", "lowest-first", "highest-first"))
def test_race_inside_a_cta_names_both_threads_and_lines_in_any_order(flags: int) -> None:
    """A team sum that loses its trailing __syncthreads: the next round's write to shared memory and another
    thread's read of the same word fall between the same two barriers. Reported, with both threads and source lines,
    whichever order the threads run in; with the barrier the same sums come out, no report."""
    launcher = harness.Launcher(sources={"inside": INSIDE}, flags=flags)
    x = torch.arange(128, dtype=torch.float32)
    out = torch.zeros(3 * 128)
    launcher("inside", "team_sum", 3, 64, (out, x, 1))
    want = torch.cat([torch.full((64,), float(x[:64].sum())), torch.full((64,), float(x[64:].sum()))])
    assert torch.equal(out, want.repeat(3))
    lines = INSIDE.splitlines()
    write = 1 + next(i for i, s in enumerate(lines) if "part[threadIdx.x] =" in s)
    read = 1 + next(i for i, s in enumerate(lines) if "s += part[i]" in s)
    with pytest.raises(harness.EmuError) as caught:
        launcher("inside", "team_sum", 3, 64, (out, x, 0))
    m = re.fullmatch(r"race inside a CTA in kernel team_sum, block (\d): byte (\d+) of a 256-byte __shared__ array, "
                     r"(written|read) by thread (\d+) at inside\.cu:(\d+) and (written|read) by thread (\d+) "
                     r"at inside\.cu:(\d+) "
                     r"between the same two barriers with no atomic \(kernel team_sum, block \1, thread \7\)",
                     str(caught.value))
    assert m, str(caught.value)
    assert m.group(4) != m.group(7) and int(m.group(2)) < 256
    assert {(m.group(3), int(m.group(5))), (m.group(6), int(m.group(8)))} == {("written", write), ("read", read)}


def test_a_read_into_a_guard_zone_is_an_error() -> None:
    """A load past the end whose value is never stored leaves every output exact; the read itself stops the launch,
    naming the kernel, the parameter, how far past the end and the source line (memcheck's invalid global read)."""
    launcher = harness.Launcher(sources={"inside": INSIDE})
    x, out = torch.arange(40, dtype=torch.float32), torch.zeros(40)
    launcher("inside", "unguarded", 1, 40, (out, x, 40))
    assert torch.equal(out, x)
    line = 1 + next(i for i, s in enumerate(INSIDE.splitlines()) if "const float v = x[i];" in s)
    with pytest.raises(harness.EmuError, match=rf"^out-of-bounds read of 4 bytes in kernel unguarded: 4 bytes past "
                                               rf"the end of parameter 1 \(160 bytes\) at [\w.]+:{line} "
                                               rf"\(kernel unguarded, block 0, thread 40\)$"):
        launcher("inside", "unguarded", 1, 64, (out, x, 40))


def test_a_shared_read_before_any_write_is_an_error() -> None:
    """Shared memory read before any thread of the CTA wrote it (a missing barrier or a missing fill): the launch
    stops naming the kernel, the bytes, the block, the thread and the source line, whatever the poison's value."""
    launcher = harness.Launcher(sources={"inside": INSIDE})
    line = 1 + next(i for i, s in enumerate(INSIDE.splitlines()) if "const float early = buf[threadIdx.x];" in s)
    with pytest.raises(harness.EmuError, match=rf"^read of uninitialised __shared__ memory in kernel read_before_write: "
                                               rf"4 bytes at byte 0 of a 256-byte array, which no thread of block 0 has "
                                               rf"written at [\w.]+:{line} \(kernel read_before_write, block 0, thread 0\)$"):
        launcher("inside", "read_before_write", 2, 64, (torch.zeros(64), torch.arange(64, dtype=torch.float32)))


def test_launches_from_several_threads_while_another_builds() -> None:
    """Three host threads launch at once (each on fiber stacks of its own; the harness runs one launch at a time)
    while a fourth builds and loads another library and launches from it: every result is the right one."""
    x = torch.arange(128, dtype=torch.float32)
    errors: list[BaseException] = []

    def launch(k: int) -> None:
        try:
            launcher = harness.Launcher(sources={"inside": INSIDE}, seed=k)
            for r in range(8):
                out = torch.zeros(3 * 128)
                launcher("inside", "team_sum", 3, 64, (out, x + k + r, 1))
                want = torch.cat([torch.full((64,), float((x[:64] + k + r).sum())),
                                  torch.full((64,), float((x[64:] + k + r).sum()))])
                assert torch.equal(out, want.repeat(3)), (k, r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def build() -> None:
        try:
            launcher = harness.Launcher(sources={"inside": INSIDE + "\n// the copy a thread builds\n"})
            out = torch.zeros(40)
            launcher("inside", "unguarded", 1, 40, (out, x[:40], 40))
            assert torch.equal(out, x[:40])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=launch, args=(k,)) for k in range(3)] + [threading.Thread(target=build)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
