"""The CUDA emulator itself (tests/cuda_emu): it finds and runs every kernel of kernels/*.cu, any
thread order gives the same answer, misuse is a clear error, planted bugs are caught (NVRTC's check is in test_kernels.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cuda_emu import harness, nvrtc
from lab.backend import KERNEL_DIR, kernel_source
from lab.codecs import cuda as C
from lab.codecs import cuda_block as CB
from lab.codecs import cuda_hop as H
from lab.codecs import hop
from lab.codecs.mx import MX_NAMES
from test_collective_kernels import CODECS, EMU_LENGTHS, _check_kernels, _codec, _no_fallback
from test_kernels import (DTYPES, SEARCHES, _check_roundtrip, _data, _mode, _prepared, bound_sitting,
                          tiny_blocks)

pytestmark = [pytest.mark.emu,
              pytest.mark.skipif(harness.compiler() is None, reason="the CUDA emulator needs g++ on the PATH")]

SOURCES = {p.stem: kernel_source(p.stem) for p in sorted(KERNEL_DIR.glob("*.cu"))}  # header expanded


def _reachable_kernels() -> set[str]:
    """Every kernel the launchers can choose, over the options the emulated tests use."""
    names = set()
    for dtype in DTYPES:
        for search in SEARCHES:
            for bs in (64, None):
                names.add(C.encode_plan(100, dtype, block_size=bs, search=search, x_aligned=True).kernel)
        for bs in (64, None):
            names.add(C.decode_plan(100, dtype, block_size=bs, codes_aligned=True, out_aligned=True).kernel)
    for kind in H.KINDS:
        for search in SEARCHES:
            for bs, scale in ((64, "absmax"), (None, "absmax"), (None, "none")):
                names |= {p.kernel for p in H.hop_plan(kind, 100, block_size=bs, scale=scale, search=search,
                                                       aligned=True)}
    names.add(H.decode_sum_plan(100, block_size=None, aligned=True).kernel)
    for dtype in DTYPES:  # kernels/block_scaled.cu (OCP MX, NVFP4)
        names |= {CB.encode_plan(kind, 100, dtype).kernel for kind in ("mx", "nvfp4")}
        names.add(CB.decode_plan(100, dtype).kernel)
    return names


def test_emulator_builds_every_kernel() -> None:
    found = {k for name in SOURCES for k in harness.module(name).kernels}
    assert len(found) == 38, sorted(found)
    assert found == _reachable_kernels(), "a kernel in kernels/*.cu that no launcher reaches, or the reverse"


def test_preprocess_keeps_line_numbers() -> None:
    for name, text in SOURCES.items():
        out = harness.preprocess(text)
        assert out.count("\n") == text.count("\n") and "#include" not in out
        assert "asm(" not in out and "__shared__" not in out
    with pytest.raises(harness.EmuError, match="does not map"):
        harness.preprocess('asm("mov.u32 %0, %%laneid;" : "=r"(x));')


def test_launch_arguments_follow_cupy(cuda_emu) -> None:
    """A Python int travels as int64: passing one for an `int` parameter is the launcher's bug."""
    p = _prepared("17")
    x, codes, absmax = torch.randn(100), torch.empty(100, dtype=torch.uint8), torch.empty(2)
    good = (x, codes, absmax, np.int64(100), np.int32(64), np.int32(32), np.int32(0), p["bpad"],
            np.int32(p["bpad"].numel()), p["lut"], np.int32(p["K"]))
    cuda_emu("codec", "encode_block_f32_lut", 1, 256, good)
    with pytest.raises(TypeError, match="parameter 4 has 4 bytes.*int64"):
        cuda_emu("codec", "encode_block_f32_lut", 1, 256, good[:4] + (64,) + good[5:])
    with pytest.raises(TypeError, match="is a pointer"):
        cuda_emu("codec", "encode_block_f32_lut", 1, 256, (np.uint64(x.data_ptr()),) + good[1:])
    with pytest.raises(TypeError, match="takes 11 arguments"):
        cuda_emu("codec", "encode_block_f32_lut", 1, 256, good[:-1])
    with pytest.raises(harness.EmuError, match="no kernel"):
        cuda_emu("codec", "encode_block_f64_lut", 1, 256, good)


def _codec_battery() -> None:
    """kernels/codec.cu through the real launchers: tails, groups, blocks, dtypes, bound-sitting data."""
    for table in ("tree256", "17"):
        p = _prepared(table)
        for dtype in DTYPES:
            for mode in ("block64", "block4096", "scale_absmax"):
                for n in (1, 3, 4097, 3 * 4096 + 6) + ((5 * 8192 + 3,) if mode == "scale_absmax" else ()):
                    x = _data(n, dtype, seed=n)
                    block_size, scale = _mode(mode, x.float())
                    _check_roundtrip(x, p, "lut" if table == "17" else "binary", block_size, scale)
    p = _prepared("tree256")
    for bs in (64, 4096):
        _check_roundtrip(bound_sitting(p["bounds"], bs, 8 if bs == 64 else 2, seed=bs), p, "lut", bs, None)
        _check_roundtrip(tiny_blocks(3 * 4096 + 6, seed=bs), p, "lut", bs, None)


def _collective_battery(monkeypatch) -> None:
    from test_collective_kernels import check_none_sees_every_chunk
    from lab.codecs import cuda_hop
    check_none_sees_every_chunk("cpu", 4 * cuda_hop.CTA * cuda_hop.HOP_ITEMS * cuda_hop.GROUP + 8)
    refs = _no_fallback(monkeypatch)
    for name in ("dynamic_tree", "dynamic_tree-b64", "dynamic_tree-b4096", "mantissa"):
        codec = _codec(name)
        for i, n in enumerate((3, 65, 4100, 3 * 4096 + 6)):
            _check_kernels(codec, n, "cpu", refs, seed=i)
        B = codec.block_size or 4096
        x = bound_sitting(codec.bounds, B, 2 if B > 64 else 8, seed=B)
        zero = codec.encode(torch.zeros_like(x))
        from lab.codecs import hop
        from test_collective_kernels import _assert_same
        _assert_same(hop.hop_mixed(codec, zero, x), refs["hop_mixed_reference"](codec, zero, x))
        if codec.scale != "none":
            t = tiny_blocks(3 * 4096 + 6, seed=2)
            if codec.block_size is None:
                t = t.clamp(-2.5e-39, 2.5e-39)
            zero = codec.encode(torch.zeros_like(t))
            _assert_same(hop.hop_mixed(codec, zero, t), refs["hop_mixed_reference"](codec, zero, t))


def _block_scaled_battery(monkeypatch) -> None:
    """kernels/block_scaled.cu through the MX and NVFP4 codecs: every element type, both scale
    rules, stochastic NVFP4, every dtype, tails, a misaligned input, the NaN/Inf rule."""
    from conftest import KernelTarget
    from test_block_scaled_kernels import EMU_LENGTHS as BL, _check as check_bs, _data as data_bs, check_nan_scale
    from test_block_scaled_midpoints import midpoint_battery_data
    emu = KernelTarget("emu")
    cases = [(n, {"scale_rule": r}) for n in MX_NAMES for r in ("floor", "rceil")]
    cases += [("nvfp4", {"rounding": r, "seed": 3}) for r in ("nearest", "stochastic")]
    for name, kw in cases:
        for dtype in DTYPES:
            for i, n in enumerate(BL):
                check_bs((name, kw), data_bs(n, dtype, seed=i), emu, monkeypatch)
        check_bs((name, kw), data_bs(4098, torch.float32, seed=9)[1:], emu, monkeypatch)
        x = torch.randn(100)
        x[37] = float("inf")
        check_bs((name, {**kw, "nonfinite": "saturate"}), x, emu, monkeypatch)
        if kw.get("seed") is None or kw.get("rounding") == "nearest":
            for seed in (1, 2):  # data on the rounding midpoints of the elements (and NVFP4's scales)
                check_bs((name, kw), midpoint_battery_data(name, seed, seed * 7 - 10, list(range(0, 62, 2))), emu,
                         monkeypatch)
    for name in list(MX_NAMES)[:2] + ["nvfp4"]:
        check_nan_scale(name, torch.float32, emu, monkeypatch)


@pytest.mark.parametrize("flags", (1, 2, 3, 8, 8 | 1 | 2),
                         ids=("threads-reversed", "blocks-reversed", "both-reversed", "lowest-runnable-first",
                              "highest-runnable-first"))
def test_any_thread_order_gives_the_same_result(flags: int, cuda_emu, monkeypatch) -> None:
    """Threads and blocks run in reverse order, or a CTA always runs its lowest (highest) runnable thread instead of
    round robin: a result that depends on the order is a race."""
    cuda_emu.flags = flags
    before = {k: list(v) for k, v in harness.LOOPS.items()}
    _codec_battery()
    _collective_battery(monkeypatch)
    _block_scaled_battery(monkeypatch)
    once = harness.loops_once(before)  # under the test grid cap every grid-stride and block loop loops
    assert not once, f"loops that never went round twice in the batteries: {once}"


def test_ucontext_fibers_pass_the_codec_battery_too(cuda_emu) -> None:
    """Flag 4: the threads are ucontext fibers, as on a machine that is not x86-64 (x86-64 switches them with the
    header's emu_switch, which makes no system call): the same kernels give the same checked results that way."""
    cuda_emu.flags = 4 | 1
    _codec_battery()


def test_every_output_dtype_rounds_to_nearest(cuda_emu) -> None:
    """The decode kernels' float16 and bfloat16 outputs are their own float32 output rounded to nearest even (torch's
    casts), at sizes with tails and both block modes: a store that truncates, or rounds another way, differs
    whatever the CPU reference says (a check of its own beside test_kernels' comparison with the reference)."""
    p = _prepared("17")
    for n in (1, 63, 4097, 3 * 4096 + 6):
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3
        for block_size in (64, None):
            scale = None if block_size else _mode("scale_absmax", x)[1]
            codes, scales = C.encode_cuda(x, p["bpad"], p["lut"], p["K"], block_size=block_size, scale=scale,
                                          search="lut")
            f32 = C.decode_cuda(codes, p["values256"], scales, block_size=block_size, dtype=torch.float32)
            assert not torch.equal(f32, f32.to(torch.bfloat16).float()), "the data must need rounding"
            for dtype in (torch.float16, torch.bfloat16):
                got = C.decode_cuda(codes, p["values256"], scales, block_size=block_size, dtype=dtype)
                want = f32.to(dtype)
                bad = (got.view(torch.int16) != want.view(torch.int16)).nonzero()
                assert bad.numel() == 0, (f"{dtype} decode of {n} values (block {block_size}) is not the float32 "
                                          f"decode rounded to nearest at {bad[:4, 0].tolist()}")


def test_scaled_word_sees_every_chunk_of_codes_sums(cuda_emu) -> None:
    """scale='none' (mantissa) through the codes + codes hop: two payloads whose sum leaves the table only in the
    first chunk of a CTA that goes on to later chunks, then only in its last: the fused hop gives the codec's own
    result (the saturated count), so the word that watches |sum| kept every chunk's maximum (a check of its own
    beside check_none_sees_every_chunk's mixed hop)."""
    from lab.codecs import cuda_hop
    from test_collective_kernels import _assert_same

    codec = _codec("mantissa")
    chunk = cuda_hop.CTA * cuda_hop.HOP_ITEMS * cuda_hop.GROUP
    n = 4 * chunk + 8  # the grid cap (3 CTAs) gives CTA 0 chunks 0 and 3
    big = float(codec.decode(codec.encode(torch.tensor([1e30]))).abs().max())  # the table's largest magnitude
    for at in (3, 3 * chunk + 5):
        x = torch.zeros(n)
        x[at] = big
        a = codec.encode(x)
        want = hop.hop_codes_reference(codec, a, a)
        _assert_same(hop.hop_codes(codec, a, a), want)


# ------------------------------------------------------------------ planted bugs

def _sub(text: str, old: str, new: str) -> str:
    assert old in text, f"the mutation's anchor is gone from the source: {old!r}"
    return text.replace(old, new)


MASK = "((1u << size) - 1) << (threadIdx.x & 31 & ~(size - 1))"
MUTATIONS = {
    # (module, description) -> source transform
    "codec-missing-syncthreads": ("codec", lambda s: _sub(
        s, "sb[i] = i < nbpad ? bpad[i] : INF;\n    __syncthreads();", "sb[i] = i < nbpad ? bpad[i] : INF;\n")),
    "codec-wrong-shuffle-mask": ("codec", lambda s: _sub(s, MASK, "((1u << size) - 1)")),
    "codec-tail-off-by-one": ("codec", lambda s: _sub(
        s, "for (int i = rest + t.lane; i < len; i += t.size)\n            cb[i]",
        "for (int i = rest + t.lane; i < len - 1; i += t.size)\n            cb[i]")),
    "codec-inverse-one-ulp": ("codec", lambda s: _sub(
        s, "inv = s > 0.f ? __frcp_rn(s) : 0.f;", "inv = s > 0.f ? __uint_as_float(__float_as_uint(__frcp_rn(s)) + 1u) : 0.f;")),
    "codec-no-division-for-tiny-blocks": ("codec", lambda s: _sub(s, "divide = inv == INF;", "divide = false;")),
    "codec-flush-to-zero": ("codec", lambda s: "#define ftz_(f) (fabsf(f) < 1.17549435e-38f ? 0.0f * (f) : (f))\n" + _sub(
        _sub(s, "store_float<D>(ob + g, __fmul_rn(sv[c[j]], s));", "store_float<D>(ob + g, ftz_(__fmul_rn(sv[c[j]], s)));"),
        "bits[i] = D::from_float(__fmul_rn(sv[code], s));", "bits[i] = D::from_float(ftz_(__fmul_rn(sv[code], s)));")),
    "codec-out-of-bounds-write": ("codec", lambda s: _sub(
        s, "for (int i = ngroups * G + t.lane; i < len; i += t.size)",
        "for (int i = ngroups * G + t.lane; i <= len; i += t.size)")),
    "collective-missing-syncthreads": ("collective", lambda s: _sub(
        s, "sb[i] = i < nbpad ? bpad[i] : INF;\n    __syncthreads();", "sb[i] = i < nbpad ? bpad[i] : INF;\n")),
    "collective-wrong-shuffle-mask": ("collective", lambda s: _sub(s, MASK, "((1u << size) - 1)")),
    "collective-fma-contraction": ("collective", lambda s: _sub(
        _sub(s, "s[0] = __fadd_rn(__fmul_rn(sv[a[i]], da), x[i]);", "s[0] = fmaf(sv[a[i]], da, x[i]);"),
        "s[j] = __fadd_rn(__fmul_rn(sv[(ca >> (8 * j)) & 0xffu], da), xs[j]);",
        "s[j] = fmaf(sv[(ca >> (8 * j)) & 0xffu], da, xs[j]);")),
    "collective-inverse-one-ulp": ("collective", lambda s: _sub(
        s, "inv = s > 0.f ? __frcp_rn(s) : 0.f;", "inv = s > 0.f ? __uint_as_float(__float_as_uint(__frcp_rn(s)) + 1u) : 0.f;")),
    "collective-no-division-for-tiny-blocks": ("collective", lambda s: _sub(s, "divide = inv == INF;", "divide = false;")),
    "collective-tail-off-by-one": ("collective", lambda s: _sub(
        s, "const i64 i = ngroups * N + tid;\n        if (i < n) {", "const i64 i = ngroups * N + tid;\n        if (i < n - 1) {")),
    "collective-out-of-bounds-write": ("collective", lambda s: _sub(
        s, "if constexpr (N == 1) out[i] = acc[0];", "if constexpr (N == 1) out[i + (i == n - 1)] = acc[0];")),
    "block_scaled-wrong-shuffle-mask": ("block_scaled", lambda s: _sub(s, MASK, "((1u << size) - 1)")),
    "block_scaled-out-of-bounds-write": ("block_scaled", lambda s: _sub(
        s, "if (at + j < nbytes) out[at + j]", "if (at + j <= nbytes) out[at + j]")),
    "block_scaled-fp6-byte-order": ("block_scaled", lambda s: _sub(
        s, "c[0] | c[1] << 6 | c[2] << 12 | c[3] << 18", "c[0] << 18 | c[1] << 12 | c[2] << 6 | c[3]")),
    "block_scaled-rceil-subnormal-quotient": ("block_scaled", lambda s: _sub(
        s, "bits >> 23 ? frac == 0 : (frac & (frac - 1)) == 0", "frac == 0")),
    "block_scaled-no-decode-saturation": ("block_scaled", lambda s: _sub(
        s, "y = y > lim ? lim : y < -lim ? -lim : y;", "")),
    "block_scaled-noise-off-by-one": ("block_scaled", lambda s: _sub(
        s, "uniform_noise(base + j, k0, k1)", "uniform_noise(base + j + 1, k0, k1)")),
    # a race inside a CTA (the team max's last reads of `red` against the next call's writes) and a read past the end
    # whose values are never stored: the shared-memory race detector and the guard zones' read check catch them
    "codec-team-max-without-trailing-syncthreads": ("codec", lambda s: _sub(
        s, "for (int w = 1; w < (int)blockDim.x / 32; ++w) v = umax(v, red[w]);\n        __syncthreads();",
        "for (int w = 1; w < (int)blockDim.x / 32; ++w) v = umax(v, red[w]);\n")),
    "codec-packed-load-without-tail-guard": ("codec", lambda s: _sub(
        s, "if (g < ngroups) c[j] = cb[g];", "c[j] = cb[g];")),
    # the classes the concurrent emulator, the grid cap, NaN scales and midpoint data catch
    "collective-racy-absmax": ("collective", lambda s: _sub(
        s, "if (threadIdx.x == 0 && m != 0u) atomicMax(word, m);",
        "if (threadIdx.x == 0 && m != 0u && m > *word) *word = m;")),
    "collective-none-keeps-last-chunk": ("collective", lambda s: _sub(
        s, "if constexpr (MODE == SCALED) m = umax(m, bm);", "if constexpr (MODE == SCALED) m = bm;")),
    "block_scaled-nan-scale-clamp": ("block_scaled", lambda s: _sub(
        s, "y = y > lim ? lim : y < -lim ? -lim : y;", "y = fmin(fmax(y, -lim), lim);")),
    "block_scaled-nvfp4-scale-one-division": ("block_scaled", lambda s: _sub(
        s, "__fdiv_rn(__fdiv_rn(bamax, E2M1_MAX), safe)", "__fdiv_rn(bamax, __fmul_rn(E2M1_MAX, safe))")),
}


for _m, (_module, _mutate) in MUTATIONS.items():  # built in the background once the run's emulated tests start
    harness.VARIANTS[f"test_planted_bug_is_caught[{_m}]"] = (
        lambda module=_module, mutate=_mutate: [(module, mutate(SOURCES[module]), f"{module}-variant")])


@pytest.mark.slow
def test_planted_silent_fallback_is_caught(cuda_emu, monkeypatch) -> None:
    """The MX and NVFP4 codecs made to take their CPU path on kernel-device tensors: the block-scaled
    battery (CPU against CPU then) must fail, because each check proves its kernel ran."""
    from lab.codecs import mx, nvfp4

    cuda_emu.expect_launches = False  # what is planted: nothing launches
    for mod in (mx, nvfp4):
        monkeypatch.setattr(mod, "on_kernel_device", lambda t: False)
    with pytest.raises(AssertionError, match="kernel ran"):
        _block_scaled_battery(monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_planted_bug_is_caught(mutation: str, cuda_emu, monkeypatch) -> None:
    """A copy of a kernel source with one known bug: the emulated tests must fail on it."""
    module, mutate = MUTATIONS[mutation]
    cuda_emu.sources[module] = mutate(SOURCES[module])
    assert cuda_emu.sources[module] != SOURCES[module]
    battery = {"codec": _codec_battery, "collective": lambda: _collective_battery(monkeypatch),
               "block_scaled": lambda: _block_scaled_battery(monkeypatch)}[module]
    with pytest.raises((AssertionError, harness.EmuError)) as caught:
        battery()
    print(f"{mutation}: {type(caught.value).__name__}: {str(caught.value).splitlines()[0][:160]}")
