"""kernels/codec.cu: nvcc compile checks (no GPU needed), the search algorithms and launch plans,
and kernel == CPU reference bit for bit through the real launchers, on a GPU (`gpu`) and on the
CPU emulation of CUDA (`emu`, tests/cuda_emu) at sizes that cross every block, group and tail."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from cuda_emu import compile_cache, harness, nvrtc
from lab.backend import KERNEL_DIR, kernel_source
from lab.codecs import cpu
from lab.codecs import cuda as C

CU_FILES = sorted(KERNEL_DIR.glob("*.cu"))
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SEARCHES = ("lut", "binary")
MODES = ("block64", "block256", "block1000", "block4096", "block65536", "scale_absmax", "scale_one")
LENGTHS = (0, 1, 4095, 4097, (1 << 20) + 3)
EMU_LENGTHS = (0, 1, 2, 3, 4095, 4097, 3 * 4096 + 6)  # every remainder mod 4 and 8, tails of each block


# ------------------------------------------------------------------ compile checks

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path", CU_FILES, ids=[p.name for p in CU_FILES])
def test_kernel_compiles(path: Path, arch: str) -> None:
    """nvcc builds the kernels' cubin for the GPUs we run on (kept in cuda_emu.compile_cache, as ccache would:
    compiled again when the source, its headers or nvcc change)."""
    def make(out: Path) -> None:
        cmd = ["nvcc", "-cubin", f"-arch={arch}", "-o", str(out), str(path)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        assert run.returncode == 0, f"{' '.join(cmd)} failed:\n{run.stderr}"

    version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    cubin = compile_cache.cached(f"{path.stem}-{arch}.cubin", make, kernel_source(path.stem), arch, version)
    assert cubin.stat().st_size > 0


@pytest.mark.skipif(nvrtc.library_path() is None, reason="NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12, "
                                                          "in the dev extra)")
@pytest.mark.parametrize("arch", ("compute_80", "compute_90"))
@pytest.mark.parametrize("path", CU_FILES, ids=[p.name for p in CU_FILES])
def test_nvrtc_compiles_without_fma(path: Path, arch: str) -> None:
    """No CUDA headers on the include path (NVRTC has none), every kernel in the PTX, and no
    fused multiply-add: the rounding-critical products and sums stay separately rounded."""
    name = path.stem
    ptx = nvrtc.compile_ptx(kernel_source(name), name, arch)  # as lab.backend.load_kernels hands it
    entries = set(re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M))
    assert entries == set(harness.module(name).kernels)
    assert not re.search(r"\bfma\.\w*f(32|16)", ptx), "an FMA in the PTX: a product and a sum contracted"
    assert re.search(r"\bmul\.rn\.f32", ptx)
    if name == "codec":
        assert re.search(r"\brcp\.rn\.f32", ptx) and re.search(r"\bcvt\.rn\.f16\.f32", ptx)
    if name == "block_scaled":  # IEEE division (scales), RNE and floor rounding, both output conversions
        for op in ("div.rn.f32", "cvt.rni.f32.f32", "cvt.rmi.f32.f32", "cvt.rn.f16.f32", "cvt.rn.bf16.f32"):
            assert op in ptx, f"no {op} in the PTX"
        assert not re.search(r"\b(div\.(approx|full)|rcp\.approx)|\.ftz\b", ptx), "approximate or flushing arithmetic"


def test_kernel_sources_exist() -> None:
    assert KERNEL_DIR / "codec.cu" in CU_FILES


# ------------------------------------------------------------------ tables and the reference

def _tables() -> dict[str, torch.Tensor]:
    """Sorted float32 value tables: 2, 17 (non-uniform), 255 and 256 (dynamic-tree-like) values,
    one beyond [-1, 1], and one whose bounds crowd 4 to a lut bucket."""
    g = torch.Generator().manual_seed(0)
    pos127 = torch.logspace(-6, 0, 128, dtype=torch.float64)[:-1].float()  # 1e-6 .. <1
    pos126 = torch.logspace(-6, 0, 127, dtype=torch.float64)[:-1].float()
    one, zero = torch.ones(1), torch.zeros(1)
    return {
        "2": torch.tensor([-1.0, 1.0]),
        "17": torch.cat([torch.rand(15, generator=g) * 2 - 1, -one, one]).sort().values,
        "tree255": torch.cat([-one, -pos126.flip(0), zero, pos126, one]),
        "tree256": torch.cat([-pos127.flip(0), zero, pos127, one]),
        "skewed": torch.cat([torch.randn(100, generator=g).sort().values ** 3, -one * 30, one * 30]).sort().values,
        "dense": torch.cat([-one, zero, 0.5 + 0.0012 * torch.arange(12), one]),  # K = 4 compares
    }


TABLES = _tables()


def _prepared(name: str) -> dict:
    values = TABLES[name]
    assert values.numel() == torch.unique(values).numel(), "tables must be strictly increasing"
    bounds = (values[:-1] + values[1:]) / 2
    lut, bpad, K = cpu.search_tables(bounds)
    values256 = torch.cat([values, values.new_zeros(256 - values.numel())])
    return {"values256": values256, "bounds": bounds, "lut": lut, "bpad": bpad, "K": K}


def _reference_encode(xf: torch.Tensor, bounds: torch.Tensor, block_size: int | None,
                      scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes, scales, per-element scale) of float32 x, per the CPU definition."""
    n = xf.numel()
    if block_size is None:
        scales, per = scale, scale.expand(n)
    else:
        nb = -(-n // block_size)
        padded = torch.cat([xf, xf.new_zeros(nb * block_size - n)]).view(nb, block_size)
        scales = padded.abs().amax(1)
        per = scales.repeat_interleave(block_size)[:n]
    codes = torch.bucketize(cpu.scale_to_unit(xf, per), bounds, right=True).to(torch.uint8)
    return codes, scales, per


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()])


def _data(n: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Heavy-tailed values with exact zeros and negative zeros, finite in every dtype."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, generator=g) * torch.exp(2 * torch.randn(n, generator=g))).clamp(-6e4, 6e4)
    x[torch.rand(n, generator=g) < 0.03] = 0.0
    x[torch.rand(n, generator=g) < 0.03] = -0.0
    if n > 3 * 4096:
        x[4096:8192] = 0.0  # all-zero blocks
        x[8192:12288] *= 1e-39  # blocks whose 1/absmax overflows to inf (fp32, bf16)
    return x.to(dtype)


# ------------------------------------------------------------------ the kernels' searches, emulated

def _probe_values(bounds: torch.Tensor) -> torch.Tensor:
    """Scaled values to search: every bound and its float neighbours, zeros, denormals, extremes."""
    g = torch.Generator().manual_seed(1)
    big = torch.tensor(3e38)
    near = torch.cat([bounds, torch.nextafter(bounds, -big), torch.nextafter(bounds, big)])
    special = torch.tensor([0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.0, -1.0, 3.4e38, -3.4e38])
    return torch.cat([near, special, torch.randn(20000, generator=g), torch.rand(20000, generator=g) * 2 - 1,
                      torch.randn(5000, generator=g) * 1e-5])


def _kernel_search(a: torch.Tensor, p: dict, search: str) -> torch.Tensor:
    """codec.cu's Search::operator() in torch: lut + K compares, or 8-step bisection of 255 slots."""
    sb = torch.cat([p["bpad"][: 256 + C.MAX_K], torch.full((256 + C.MAX_K,), float("inf"))])[: 256 + C.MAX_K]
    if search == "lut":
        c = p["lut"][(a.view(torch.int32) >> 16) & 0xFFFF].long()
        for _ in range(p["K"]):
            c = c + (a >= sb[c]).long()
    else:
        c = torch.zeros_like(a, dtype=torch.long)
        for s in (128, 64, 32, 16, 8, 4, 2, 1):
            c = c + s * (sb[c + s - 1] <= a).long()
    nb = int((sb <= 3.4028235e38).sum())
    c = torch.where(a.abs() <= 3.4028235e38, c, torch.where(a == float("-inf"), 0, nb))
    return c


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("table", sorted(TABLES))
def test_kernel_search_matches_bucketize(table: str, search: str) -> None:
    p = _prepared(table)
    assert 1 <= p["K"] <= C.MAX_K, "the lut search needs K <= 4"
    a = _probe_values(p["bounds"])
    a = torch.cat([a, torch.tensor([float("inf"), float("-inf"), float("nan")])])
    want = torch.bucketize(a, p["bounds"], right=True)
    assert torch.equal(_kernel_search(a, p, search), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_launch_plans(dtype: torch.dtype) -> None:
    vec = C._VEC[dtype]
    for n in (1, 4097, 10**6, 3 * 2**31):
        for block_size in (1, 3, 64, 100, 256, 1000, 4096, 65536, 10**6, None):
            for aligned in (True, False):
                for plan in (C.encode_plan(n, dtype, block_size=block_size, search="lut", x_aligned=aligned),
                             C.decode_plan(n, dtype, block_size=block_size, codes_aligned=aligned,
                                           out_aligned=True),
                             C.decode_plan(n, dtype, block_size=block_size, codes_aligned=True,
                                           out_aligned=aligned)):
                    group = vec if plan.kernel.startswith("encode") else C.DECODE_GROUP
                    assert plan.threads % 32 == 0 and plan.threads <= C.MAX_CTA
                    assert plan.team == plan.threads or (plan.team <= 32 and plan.team & (plan.team - 1) == 0)
                    assert plan.threads % plan.team == 0
                    assert 1 <= plan.grid <= C.MAX_GRID
                    assert not plan.vec or aligned
                    if plan.vec:
                        assert plan.block % group == 0
                    if block_size is not None:
                        assert plan.block == block_size
                        teams = plan.grid * (plan.threads // plan.team)
                        assert teams >= -(-n // block_size) or plan.grid == C.MAX_GRID


def test_launchers_reject_bad_arguments() -> None:
    p = _prepared("17")
    x, codes = torch.randn(100), torch.zeros(4, dtype=torch.uint8)
    args = (x, p["bpad"], p["lut"], p["K"])
    with pytest.raises(ValueError, match="CUDA"):
        C.encode_cuda(*args, block_size=64, scale=None)
    with pytest.raises(ValueError, match="exactly one"):
        C.encode_cuda(*args, block_size=64, scale=torch.ones(1))
    with pytest.raises(ValueError, match="exactly one"):
        C.encode_cuda(*args, block_size=None, scale=None)
    with pytest.raises(ValueError, match="block_size"):
        C.encode_cuda(*args, block_size=0, scale=None)
    with pytest.raises(ValueError, match="search"):
        C.encode_cuda(*args, block_size=64, scale=None, search="linear")
    with pytest.raises(ValueError, match="dtype"):
        C.decode_cuda(codes, p["values256"], torch.ones(1), block_size=None, dtype=torch.float64)
    with pytest.raises(ValueError, match="CUDA"):
        C.decode_cuda(codes, p["values256"], torch.ones(1), block_size=None, dtype=torch.float32)


# ------------------------------------------------------------------ GPU: kernels == reference

def _mode(mode: str, xf: torch.Tensor) -> tuple[int | None, torch.Tensor | None]:
    if mode.startswith("block"):
        return int(mode[5:]), None
    if mode == "scale_absmax":
        return None, (xf.abs().max() if xf.numel() else torch.tensor(0.0)).reshape(1)
    return None, torch.ones(1)


def _check_roundtrip(x: torch.Tensor, p: dict, search: str, block_size: int | None,
                     scale: torch.Tensor | None) -> None:
    """Encode the CUDA tensor x and decode its codes into every dtype; compare bits with the reference."""
    dev = x.device
    d = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in p.items()}
    xf = x.cpu().float()
    want_codes, want_scales, per = _reference_encode(xf, p["bounds"], block_size, scale)
    codes, scales = C.encode_cuda(x, d["bpad"], d["lut"], d["K"], block_size=block_size,
                                  scale=None if scale is None else scale.to(dev), search=search)
    assert codes.dtype == torch.uint8 and codes.shape == (x.numel(),)
    mismatch = (codes.cpu() != want_codes).nonzero()
    assert mismatch.numel() == 0, (
        f"{mismatch.numel()} codes differ, first at {mismatch[:5, 0].tolist()}: got "
        f"{codes.cpu()[mismatch[:5, 0]].tolist()}, want {want_codes[mismatch[:5, 0]].tolist()} "
        f"for x = {xf[mismatch[:5, 0]].tolist()}")
    assert torch.equal(_bits(scales.cpu()), _bits(want_scales))
    for dtype in DTYPES:
        out = C.decode_cuda(codes, d["values256"], scales, block_size=block_size, dtype=dtype)
        want = (p["values256"][want_codes.long()] * per).to(dtype)
        assert out.dtype == dtype and out.shape == (x.numel(),)
        assert torch.equal(_bits(out.cpu()), _bits(want)), f"decode into {dtype} differs"
        given = torch.full((x.numel(),), float("nan"), dtype=dtype, device=dev)
        assert C.decode_cuda(codes, d["values256"], scales, block_size=block_size, dtype=dtype, out=given) is given
        assert torch.equal(_bits(given.cpu()), _bits(want)), f"decode into a given {dtype} buffer differs"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_matches_reference(dtype: torch.dtype, search: str, table: str, mode: str, target) -> None:
    p = _prepared(table)
    for i, n in enumerate(EMU_LENGTHS if target.emulated else LENGTHS):
        x = _data(n, dtype, seed=i)
        block_size, scale = _mode(mode, x.float())
        _check_roundtrip(x.to(target.device), p, search, block_size, scale)


@pytest.mark.parametrize("mode", ("block64", "block100", "block4096", "block65536", "scale_absmax"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_unaligned_input(dtype: torch.dtype, mode: str, target) -> None:
    """Inputs and codes one element off 16-byte alignment take the kernels' scalar path."""
    p = _prepared("tree256")
    dev = target.device
    for n in (4097, 20003 if target.emulated else 200003):
        x = _data(n + 1, dtype, seed=n)
        block_size, scale = _mode(mode, x[1:].float())
        _check_roundtrip(x.to(dev)[1:], p, "lut", block_size, scale)
        d = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in p.items()}
        codes, scales = C.encode_cuda(x.to(dev)[1:], d["bpad"], d["lut"], d["K"], block_size=block_size,
                                      scale=None if scale is None else scale.to(dev))
        shifted = torch.cat([codes.new_zeros(1), codes])[1:]  # codes at an odd address
        out = C.decode_cuda(shifted, d["values256"], scales, block_size=block_size, dtype=dtype)
        want = C.decode_cuda(codes, d["values256"], scales, block_size=block_size, dtype=dtype)
        assert torch.equal(_bits(out), _bits(want))


@pytest.mark.parametrize("offset", (1, 2, 3, 4))
@pytest.mark.parametrize("mode", ("block64", "block4096", "scale_absmax"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_decode_into_unaligned_out(dtype: torch.dtype, mode: str, offset: int, target) -> None:
    """decode_into an allreduce segment (buf[offset:], its start not a multiple of 16 bytes) with
    aligned codes: the vector path's 16-byte stores would fault, so the plan must take the scalar
    path (a 'misaligned address' is sticky on a GPU and ends the CUDA context)."""
    p = _prepared("tree256")
    dev = target.device
    d = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in p.items()}
    for n in (4096, 4097, 3 * 4096 + 6):
        x = _data(n, dtype, seed=n)
        block_size, scale = _mode(mode, x.float())
        codes, scales = C.encode_cuda(x.to(dev), d["bpad"], d["lut"], d["K"], block_size=block_size,
                                      scale=None if scale is None else scale.to(dev))
        assert codes.data_ptr() % 8 == 0
        buf = torch.full((n + offset,), float("nan"), dtype=dtype, device=dev)
        out = buf[offset:]
        assert C.decode_cuda(codes, d["values256"], scales, block_size=block_size, dtype=dtype, out=out) is out
        want = C.decode_cuda(codes, d["values256"], scales, block_size=block_size, dtype=dtype)
        assert torch.equal(_bits(out.cpu()), _bits(want.cpu()))
        assert torch.isnan(buf[:offset].float()).all(), "decode wrote before its output"


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_all_zero_input(dtype: torch.dtype, search: str, target) -> None:
    p = _prepared("tree255")
    x = torch.zeros(10000, dtype=dtype, device=target.device)
    for block_size, scale in ((64, None), (4096, None), (None, torch.zeros(1)), (None, torch.ones(1))):
        _check_roundtrip(x, p, search, block_size, scale)
        _check_roundtrip(-x, p, search, block_size, scale)


def test_cuda_scale_overflow_and_bounds(target) -> None:
    """Values on the bounds exactly (scale 1), and x / scale overflowing to +-inf (a tiny scale)."""
    for table in sorted(TABLES):
        p = _prepared(table)
        a = _probe_values(p["bounds"])
        for search in SEARCHES:
            _check_roundtrip(a.to(target.device), p, search, None, torch.ones(1))
            _check_roundtrip(a.to(target.device), p, search, None, torch.tensor([1e-38]))


def tiny_blocks(n: int, seed: int) -> torch.Tensor:
    """float32 whose blocks of 64 alternate: normal values, and subnormal ones whose absmax is below
    2**-128, so 1/absmax overflows and the block is coded from x / absmax."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g)
    tiny = (torch.arange(n) // 64) % 2 == 1
    x[tiny] = (torch.randn(int(tiny.sum()), generator=g) * 4e-40).clamp(-2.5e-39, 2.5e-39)
    x[::7] = 0.0
    return x


@pytest.mark.parametrize("mode", ("block64", "block4096", "scale_absmax"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_cuda_subnormal_absmax(dtype: torch.dtype, mode: str, target) -> None:
    """Blocks (or a tensor) whose absmax is subnormal below 2**-128: zeros stay zeros and every
    value is coded from x / absmax, as the CPU reference (bf16 reaches such values too)."""
    p = _prepared("tree256")
    for n in (64 * 5 + 3, 3 * 4096 + 6):
        x = tiny_blocks(n, seed=n).to(dtype)
        if mode == "scale_absmax":
            x = x.clamp(-2.5e-39, 2.5e-39)
        block_size, scale = _mode(mode, x.float())
        _check_roundtrip(x.to(target.device), p, "lut", block_size, scale)


def bound_sitting(bounds: torch.Tensor, block_size: int, blocks: int, seed: int) -> torch.Tensor:
    """float32 blocks whose values, scaled by 1/absmax of their block, land on a bound or within
    two ulps of one: a code flips if a kernel's 1/absmax or x * inv is one ulp off the reference's."""
    g = torch.Generator().manual_seed(seed)
    absmax = torch.rand(blocks, generator=g) * 10 + 0.1
    out = []
    for k in range(blocks):
        inv = 1.0 / absmax[k]
        x = bounds[torch.randint(0, bounds.numel(), (block_size,), generator=g)] / inv
        shift = torch.randint(-2, 3, (block_size,), generator=g)
        for s in (-2, -1, 1, 2):  # move each value by its own number of ulps
            for _ in range(abs(s)):
                moved = torch.nextafter(x, torch.full_like(x, 1e30 if s > 0 else -1e30))
                x = torch.where(shift == s, moved, x)
        x = torch.where(x.abs() < absmax[k], x, torch.zeros_like(x))
        x[0] = absmax[k]
        out.append(x)
    return torch.cat(out)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("block_size", (64, 4096))
def test_cuda_block_inverse_is_exact(block_size: int, search: str, target) -> None:
    """Values on the bounds to the last ulp after scaling: the kernels' 1/absmax and x * inv are
    the reference's, bit for bit (a 1-ulp change in either flips codes here)."""
    p = _prepared("tree256")
    x = bound_sitting(p["bounds"], block_size, 24 if block_size == 64 else 4, seed=block_size)
    _check_roundtrip(x.to(target.device), p, search, block_size, None)
    _check_roundtrip(x[:block_size].to(target.device), p, search, None, x[:1].abs().clone())


@pytest.mark.gpu
@pytest.mark.slow
def test_cuda_beyond_2_pow_31() -> None:
    """64-bit indexing: the last blocks of a 2**31 + 4099 element input."""
    n, B, tail = 2**31 + 4099, 4096, 1 << 20
    start = (n - tail) // B * B
    p = _prepared("tree256")
    d = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in p.items()}
    x = torch.zeros(n, dtype=torch.float16, device="cuda")
    x[start:] = _data(n - start, torch.float16, seed=7).cuda()
    for search in SEARCHES:
        codes, scales = C.encode_cuda(x, d["bpad"], d["lut"], d["K"], block_size=B, scale=None, search=search)
        want_codes, want_scales, per = _reference_encode(x[start:].float().cpu(), p["bounds"], B, None)
        assert torch.equal(codes[start:].cpu(), want_codes)
        assert torch.equal(scales[start // B:].cpu(), want_scales)
        del codes
    out = C.decode_cuda(torch.cat([torch.zeros(start, dtype=torch.uint8, device="cuda"), want_codes.cuda()]),
                        d["values256"], torch.cat([torch.zeros(start // B, device="cuda"), want_scales.cuda()]),
                        block_size=B, dtype=torch.float16)
    assert torch.equal(_bits(out[start:].cpu()), _bits((p["values256"][want_codes.long()] * per).half()))
