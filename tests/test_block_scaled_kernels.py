"""kernels/block_scaled.cu (OCP MX v1.0, NVFP4) == the CPU path bit for bit, through the codecs'
own CUDA dispatch and the real launchers (lab/codecs/cuda_block.py), on a GPU (`gpu`) and on the
CPU emulation of CUDA (`emu`, tests/cuda_emu): lengths crossing every block and tail, misaligned
inputs and outputs, all-zero, subnormal-scale and saturating blocks, the NaN/Inf rule, fp16/bf16
input, and NVFP4's seeded stochastic rounding."""
from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from lab import backend
from lab.codecs import cuda_block as CB
from lab.codecs import get_codec
from lab.codecs.block_scaled import FORMATS, uniform_noise
from lab.codecs.mx import MX_NAMES

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
RULES = ("floor", "rceil")
ROUNDINGS = ("nearest", "stochastic")
EMU_LENGTHS = (1, 31, 33, 16 * 1024 + 5)
GPU_LENGTHS = EMU_LENGTHS + ((1 << 20) + 7,)


@contextlib.contextmanager
def cpu_path(monkeypatch):
    """The codecs' CPU path (no kernels, no torch.compile: its own tests pin the compiled path)."""
    with monkeypatch.context() as m:
        m.setattr(backend, "KERNEL_DEVICE_TYPE", "cuda")
        m.setenv("PARALAB_COMPILE", "0")
        yield


def _data(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Heavy-tailed values whose 32-value blocks cycle through: random, all-zero, subnormal-scale
    (E8M0 scale at or near 2^-127), saturating (maximum just under a power of two: the floor rule
    saturates it), values near the dtype's maximum, and absmax = a max normal times a power of two
    (rceil's exact-power quotient); exact zeros and -0.0 sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    nb = -(-n // 32)
    x = (torch.randn(nb, 32, generator=g) * torch.exp(2 * torch.randn(nb, 32, generator=g)))
    kind = torch.arange(nb) % 6
    x[kind == 1] = 0.0
    tiny = torch.exp2(-torch.randint(118, 142, (nb, 1), generator=g).float())
    x = torch.where((kind == 2)[:, None], x * tiny, x)
    sat = torch.exp2(torch.randint(-20, 20, (nb,), generator=g).float()) * 1.99
    x[:, 0] = torch.where(kind == 3, sat, x[:, 0])
    # rceil's edge: amax = an element type's max normal times a power of two, so amax / max_normal is
    # an exact power of two, normal or the subnormal 2^-127 (the one subnormal quotient whose scale
    # the rule decides). The j-th such block takes m = [1.5, 1.75, 1.875, 127/64][j % 4] (6; 28, 448
    # and 57344; 7.5; MXINT8's max, over powers of two) times 2^(j // 4 - 130), so the 16K+5 input
    # walks every format's quotients 2^-127 .. 2^-110
    j = torch.arange(nb) // 6
    m = torch.tensor([1.5, 1.75, 1.875, 127 / 64])[j % 4]
    edge = (m.double() * torch.exp2((-130 + j // 4).double())).float()
    x = torch.where((kind == 5)[:, None], x.clamp(-1, 1) * edge[:, None] * 0.5, x)
    x[:, 1] = torch.where(kind == 5, -edge, x[:, 1])
    big = torch.finfo(dtype).max if dtype != torch.float32 else 2.0 ** 120
    x = torch.where((kind == 4)[:, None], (x / x.abs().amax(1, keepdim=True).clamp(min=1e-30)) * big * 0.999, x)
    x = x.reshape(-1)[:n]
    x[torch.rand(n, generator=g) < 0.03] = 0.0
    x[torch.rand(n, generator=g) < 0.03] = -0.0
    return x.clamp(-big, big).to(dtype)


def _u8(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).cpu()


def _same_payload(got, want) -> None:
    assert sorted(got.tensors) == sorted(want.tensors)
    for k, w in want.tensors.items():
        g = _u8(got.tensors[k])
        w = _u8(w)
        bad = (g != w).nonzero()
        assert bad.numel() == 0, (f"{k}: {bad.numel()} of {w.numel()} bytes differ, first at "
                                  f"{bad[:5, 0].tolist()}: got {g[bad[:5, 0]].tolist()}, want {w[bad[:5, 0]].tolist()}")
    assert got.wire_bytes == want.wire_bytes and got.dtype == want.dtype and got.shape == want.shape


@contextlib.contextmanager
def _launches(target, prefix: str | None):
    """Under the emulator: the block inside launched a kernel whose name starts with `prefix` (a
    silent fallback to the CPU path would compare the CPU with itself)."""
    if not target.emulated or prefix is None:
        yield
        return
    before = len(backend.launch_kernel.launches)
    yield
    ran = [k for _, k, _, _ in backend.launch_kernel.launches[before:]]
    assert any(k.startswith(prefix) for k in ran), f"no {prefix}* kernel ran (launched: {ran}): a CPU fallback?"


def _check(codec_kw: tuple[str, dict], x: torch.Tensor, target, monkeypatch) -> None:
    """Encode and decode x on the target and on the CPU path: same bytes, same decoded bits, also
    from codes at an odd address and by decode_into a misaligned output."""
    name, kw = codec_kw
    dev = target.device
    with cpu_path(monkeypatch):
        want = get_codec(name, **kw).encode(x)
        want_y = get_codec(name, **kw).decode(want)
    c = get_codec(name, **kw)
    with _launches(target, ("mx_encode_" if name != "nvfp4" else "nvfp4_encode_") if x.numel() else None):
        got = c.encode(x.to(dev))
    assert all(t.device.type == torch.device(dev).type for t in got.tensors.values())
    _same_payload(got, want)
    with _launches(target, "block_decode_" if x.numel() else None):
        y = c.decode(got)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert torch.equal(_u8(y), _u8(want_y)), "decode differs"
    codes = got.tensors["codes"]
    odd = dataclasses.replace(got, tensors={**got.tensors, "codes": torch.cat([codes.new_zeros(1), codes])[1:]})
    assert odd.tensors["codes"].data_ptr() % 2  # codes at an odd address, as a slice of a wire buffer
    assert torch.equal(_u8(c.decode(odd)), _u8(want_y)), "decode of codes at an odd address differs"
    buf = torch.full((x.numel() + 1,), float("nan"), dtype=x.dtype, device=dev)
    out = buf[1:]  # an allreduce segment: not 16-byte aligned
    assert c.decode_into(got, out) is out
    assert torch.equal(_u8(out), _u8(want_y)) and bool(torch.isnan(buf[:1].float()).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", list(MX_NAMES))
def test_mx_kernels_match_cpu(name: str, rule: str, dtype: torch.dtype, target, monkeypatch) -> None:
    lengths = EMU_LENGTHS if target.emulated else GPU_LENGTHS
    for i, n in enumerate(lengths):
        x = _data(n, dtype, seed=i)
        _check((name, {"scale_rule": rule}), x, target, monkeypatch)
    x = _data(lengths[-1] + 1, dtype, seed=99)[1:]  # the input one element off its allocation's alignment
    assert x.data_ptr() % 16
    _check((name, {"scale_rule": rule}), x, target, monkeypatch)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_nvfp4_kernels_match_cpu(rounding: str, dtype: torch.dtype, target, monkeypatch) -> None:
    lengths = EMU_LENGTHS if target.emulated else GPU_LENGTHS
    for i, n in enumerate(lengths):
        _check(("nvfp4", {"rounding": rounding, "seed": 7 + i}), _data(n, dtype, seed=i), target, monkeypatch)
    x = _data(lengths[-1] + 1, dtype, seed=99)[1:]
    _check(("nvfp4", {"rounding": rounding}), x, target, monkeypatch)


def test_nvfp4_stochastic_stream_matches_cpu_call_after_call(target, monkeypatch) -> None:
    """The seeded stream: each encode draws a new key from the codec's generator, on both paths."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    gpu, cpu = get_codec("nvfp4", rounding="stochastic", seed=11), get_codec("nvfp4", rounding="stochastic", seed=11)
    payloads = []
    for _ in range(3):
        got = gpu.encode(x.to(target.device))
        with cpu_path(monkeypatch):
            want = cpu.encode(x)
        _same_payload(got, want)
        payloads.append(_u8(got.tensors["codes"]))
    assert not torch.equal(payloads[0], payloads[1])  # the stream advances


@pytest.mark.parametrize("name", list(MX_NAMES) + ["nvfp4"])
def test_kernels_nonfinite_rule_zero_and_tiny_tensors(name: str, target, monkeypatch) -> None:
    """NaN/Inf: ValueError naming the first index by default, saturated with nonfinite='saturate'
    (the same codes as the CPU path); an all-zero tensor decodes to zeros; a tensor far below
    2^-126 (NVFP4: its tensor scale clamped to 2^-120) stays finite and matches the CPU path."""
    dev = target.device
    x = torch.randn(100, generator=torch.Generator().manual_seed(1))
    x[37], x[80] = float("nan"), float("-inf")
    with pytest.raises(ValueError, match="non-finite.*index 37"):
        get_codec(name).encode(x.to(dev))
    _check((name, {"nonfinite": "saturate"}), x, target, monkeypatch)
    zero = get_codec(name).roundtrip(torch.zeros(70, device=dev))
    assert not bool(zero.any())
    _check((name, {}), torch.randn(100, generator=torch.Generator().manual_seed(2)) * 2.0 ** -135, target, monkeypatch)
    _check((name, {}), -torch.zeros(40), target, monkeypatch)


def test_uniform_noise_is_uniform_and_keyed() -> None:
    u = uniform_noise(1 << 16, 5)
    assert u.dtype == torch.float32 and float(u.min()) >= 0 and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 0.01 and abs(float(u.var()) - 1 / 12) < 0.002
    assert torch.equal(u, uniform_noise(1 << 16, 5)) and not torch.equal(u, uniform_noise(1 << 16, 6))
    assert torch.equal(((u * 2 ** 24).round() / 2 ** 24), u)  # a 2^-24 grid: exact in float32
    with pytest.raises(ValueError, match="key"):
        uniform_noise(4, -1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_launch_plans(dtype: torch.dtype) -> None:
    for n in (1, 31, 33, 16 * 1024 + 5, 10**7, 3 * 2**31):
        for kind, block in (("mx", 32), ("nvfp4", 16)):
            p = CB.encode_plan(kind, n, dtype)
            teams = p.grid * (p.threads // (block // CB.GROUP))
            assert p.threads % 32 == 0 and 1 <= p.grid <= CB.MAX_GRID
            assert teams >= -(-n // block) or p.grid == CB.MAX_GRID
        d = CB.decode_plan(n, dtype)
        assert d.grid * d.threads * CB.GROUP >= n or d.grid == CB.MAX_GRID


def test_launchers_reject_bad_arguments() -> None:
    x = torch.randn(64)
    with pytest.raises(ValueError, match="CUDA"):
        CB.mx_encode_cuda(x, FORMATS["e4m3"], "floor")
    with pytest.raises(ValueError, match="CUDA"):
        CB.nvfp4_encode_cuda(x, torch.ones(1), None)
    with pytest.raises(ValueError, match="dtype"):
        CB.block_decode_cuda(torch.zeros(64, dtype=torch.uint8), torch.zeros(256), torch.zeros(2, dtype=torch.uint8),
                             torch.zeros(256), None, n=64, block=32, bits=8, dtype=torch.float64)
    with pytest.raises(ValueError, match="bits"):
        CB.block_decode_cuda(torch.zeros(64, dtype=torch.uint8), torch.zeros(256), torch.zeros(2, dtype=torch.uint8),
                             torch.zeros(256), None, n=64, block=32, bits=5, dtype=torch.float32)


@pytest.mark.emu
def test_kernel_emulated_bad_arguments(cuda_emu) -> None:
    """Under the emulator (CPU tensors are kernel tensors): wrong sizes and dtypes are clear errors."""
    cuda_emu.expect_launches = False
    with pytest.raises(ValueError, match="rule"):
        CB.mx_encode_cuda(torch.randn(64), FORMATS["e4m3"], "up")
    with pytest.raises(ValueError, match="flat"):
        CB.mx_encode_cuda(torch.randn(2, 32), FORMATS["e4m3"], "floor")
    with pytest.raises(ValueError, match="tscale"):
        CB.nvfp4_encode_cuda(torch.randn(64), torch.ones(2), None)
    with pytest.raises(ValueError, match="code bytes"):
        CB.block_decode_cuda(torch.zeros(63, dtype=torch.uint8), torch.zeros(256), torch.zeros(2, dtype=torch.uint8),
                             torch.zeros(256), None, n=64, block=32, bits=8, dtype=torch.float32)


def check_nan_scale(name: str, dtype: torch.dtype, target, monkeypatch) -> None:
    """A NaN scale byte (E8M0 0xFF; E4M3 0x7F and 0xFF) decodes its whole block to NaN (OCP MX v1.0
    §5.2; NVFP4 the same), on the CPU path and on the kernel; every other block is unchanged."""
    block = 16 if name == "nvfp4" else 32
    x = torch.randn(3 * block + 5, generator=torch.Generator().manual_seed(3)).to(dtype)
    with cpu_path(monkeypatch):
        enc = get_codec(name).encode(x)
        clean = get_codec(name).decode(enc)
    raw = enc.tensors["scales"]
    bad = raw.view(torch.uint8).clone()
    bad[1] = 0x7F if name == "nvfp4" else 0xFF
    if name == "nvfp4":
        bad[3] = 0xFF  # the tail block: E4M3's negative NaN
    nan = dataclasses.replace(enc, tensors={**enc.tensors, "scales": bad.view(raw.dtype)})
    with cpu_path(monkeypatch):
        want = get_codec(name).decode(nan)
    is_nan = torch.zeros(x.numel(), dtype=torch.bool)
    is_nan[block:2 * block] = True
    if name == "nvfp4":
        is_nan[3 * block:] = True
    assert torch.equal(torch.isnan(want.float()), is_nan), "CPU: a NaN scale must make exactly its block NaN"
    assert torch.equal(_u8(want[~is_nan]), _u8(clean[~is_nan]))
    dev_enc = dataclasses.replace(nan, tensors={k: v.to(target.device) for k, v in nan.tensors.items()})
    with _launches(target, "block_decode_"):
        got = get_codec(name).decode(dev_enc).cpu()
    assert torch.equal(torch.isnan(got.float()), is_nan), "kernel: a NaN scale must make exactly its block NaN"
    assert torch.equal(_u8(got[~is_nan]), _u8(want[~is_nan]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(MX_NAMES) + ["nvfp4"])
def test_nan_scale_decodes_its_block_to_nan(name: str, dtype: torch.dtype, target, monkeypatch) -> None:
    check_nan_scale(name, dtype, target, monkeypatch)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mxfp4_e2m1", "mxfp8_e4m3", "nvfp4"])
def test_cuda_beyond_2_pow_31(name: str, monkeypatch) -> None:
    """64-bit indexing in kernels/block_scaled.cu: the last blocks of a 2**31 + 4099 value fp16
    input (codes, scale bytes and decoded values past element 2**31) match the CPU path on them."""
    n, tail = 2**31 + 4099, 1 << 20
    block = 16 if name == "nvfp4" else 32
    start = (n - tail) // 64 * 64
    x = torch.zeros(n, dtype=torch.float16, device="cuda")
    x[start:] = _data(n - start, torch.float16, seed=7).cuda()
    # NVFP4's tensor scale: the absmax lies in the tail, so the CPU path on the tail has the same
    c = get_codec(name)
    enc = c.encode(x)
    with cpu_path(monkeypatch):
        want = get_codec(name).encode(x[start:].cpu())
    bits = 4 if name != "mxfp8_e4m3" else 8
    got_codes = enc.tensors["codes"][start * bits // 8:].cpu()
    assert torch.equal(got_codes, want.tensors["codes"])
    assert torch.equal(_u8(enc.tensors["scales"][start // block:]), _u8(want.tensors["scales"]))
    y = c.decode(enc)[start:].cpu()
    with cpu_path(monkeypatch):
        want_y = get_codec(name).decode(want)
    assert torch.equal(_u8(y), _u8(want_y))
