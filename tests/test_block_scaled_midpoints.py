"""Data on the rounding midpoints of every element and scale format (hypothesis strategies): every
MX element type and NVFP4's E2M1 elements exactly halfway between two codes, and NVFP4 block
maxima whose scale quotient (bamax / 6) / s is exactly halfway between two E4M3 values. On the CPU
against an exact reference (nearest, ties to the even code), and on the kernels against the CPU."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from lab.codecs import get_codec
from lab.codecs.block_scaled import FORMATS, value_table
from lab.codecs.mx import MX_NAMES
from lab.codecs.nvfp4 import e4m3_table, tensor_scale
from test_block_scaled_kernels import _check, cpu_path

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _grid(fmt_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(non-negative values ascending, their codes) of an element format."""
    fmt = FORMATS[fmt_name]
    v = value_table(fmt).double()[: 1 << fmt.bits]
    codes = torch.arange(v.numel())
    keep = (v >= 0) & (v <= fmt.max_normal) & ~((v == 0) & (codes != 0))
    order = v[keep].argsort()
    return v[keep][order], codes[keep][order]


def nearest_even(a: torch.Tensor, values: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Exact reference: the value nearest to |a| (float64), ties to the even code; sign kept."""
    d = (a.abs()[:, None] - values[None, :]).abs()
    best = d.min(1, keepdim=True).values
    tie = (d == best)
    even = tie & (codes[None, :] % 2 == 0)
    pick = torch.where(even.any(1), even.int().argmax(1), tie.int().argmax(1))
    return values[pick] * torch.where(a < 0, -1.0, 1.0).double()


def element_midpoints(fmt_name: str, k: int, picks: list[int], signs: list[bool], block: int) -> torch.Tensor:
    """One block whose scale is exactly 2^k (absmax = max normal · 2^k: both MX scale rules) and whose
    other values are midpoints between consecutive element values, times 2^k."""
    values, _ = _grid(fmt_name)
    mids = (values[:-1] + values[1:]) / 2
    x = torch.zeros(block, dtype=torch.float64)
    x[0] = FORMATS[fmt_name].max_normal
    for j, (p, s) in enumerate(zip(picks, signs)):
        x[1 + j % (block - 1)] = mids[p % mids.numel()] * (-1 if s else 1)
    return (x * 2.0 ** k).float()


def scale_midpoints(seed: int, nblocks: int) -> torch.Tensor:
    """Blocks whose quotient (bamax / 6) / s, in float32 as the codec computes it, is exactly the
    midpoint of two E4M3 values (s from an absmax that is not 2688 times a power of two)."""
    g = torch.Generator().manual_seed(seed)
    amax = (2688 * (1 + torch.rand(1, generator=g))).float()
    s = tensor_scale(amax)
    e4 = e4m3_table()[:0x7F]
    e4 = e4[e4 >= 2.0 ** -6].double()
    mids = ((e4[:-1] + e4[1:]) / 2).float()
    m = mids[torch.randint(0, mids.numel(), (nblocks,), generator=g)]
    b0 = (m.double() * 6 * s.double()).float()
    steps = torch.arange(-12, 13, dtype=torch.int32)
    cand = (b0.view(torch.int32)[:, None] + steps[None, :]).view(torch.float32)
    hit = ((cand / 6) / s) == m[:, None]
    ok = hit.any(1) & (cand.abs().amax(1) < amax)
    bamax = cand.gather(1, hit.int().argmax(1, keepdim=True))[:, 0][ok]
    rest = (torch.rand(int(ok.sum()), 15, generator=g) * 2 - 1) * bamax[:, None] * 0.99
    blocks = torch.cat([bamax[:, None], rest], 1)
    return torch.cat([amax, torch.zeros(15), blocks.reshape(-1)])  # block 0 holds the tensor's absmax


def nvfp4_element_midpoints(i: int, j: int, picks: list[int], signs: list[bool]) -> torch.Tensor:
    """A tensor scale 2^j (absmax 2688 · 2^j) and a block whose scale is exactly 2^i, its values
    E2M1 midpoints times 2^(i + j): x · ((1/s) / scale) is exactly the midpoint."""
    values, _ = _grid("e2m1")
    mids = (values[:-1] + values[1:]) / 2
    first = torch.zeros(16, dtype=torch.float64)
    first[0] = 2688.0 * 2.0 ** j
    blk = torch.zeros(16, dtype=torch.float64)
    blk[0] = 6.0 * 2.0 ** (i + j)
    for n, (p, s) in enumerate(zip(picks, signs)):
        blk[1 + n % 15] = mids[p % mids.numel()] * 2.0 ** (i + j) * (-1 if s else 1)
    return torch.cat([first, blk]).float()


picks = st.lists(st.integers(0, 255), min_size=1, max_size=31)


@SETTINGS
@given(name=st.sampled_from(sorted(MX_NAMES)), k=st.integers(-100, 100), picks=picks, data=st.data())
def test_mx_element_midpoints_round_to_even(name: str, k: int, picks: list[int], data) -> None:
    fmt = MX_NAMES[name]
    signs = data.draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
    x = element_midpoints(fmt, k, picks, signs, 32)
    if FORMATS[fmt].is_int:
        x = x.clamp(-127 / 64 * 2.0 ** k, 127 / 64 * 2.0 ** k)
    for rule in ("floor", "rceil"):
        y = get_codec(name, scale_rule=rule).roundtrip(x).double()
        values, codes = _grid(fmt)
        want = nearest_even(x.double() / 2.0 ** k, values, codes) * 2.0 ** k
        assert torch.equal(y, want.float().double()), f"{name} {rule}: {y.tolist()} != {want.tolist()}"


@SETTINGS
@given(i=st.integers(-6, 8), j=st.integers(-60, 60), picks=picks, data=st.data())
def test_nvfp4_element_midpoints_round_to_even(i: int, j: int, picks: list[int], data) -> None:
    signs = data.draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
    x = nvfp4_element_midpoints(i, j, picks, signs)
    y = get_codec("nvfp4").roundtrip(x).double()
    values, codes = _grid("e2m1")
    want = nearest_even(x[16:].double() / 2.0 ** (i + j), values, codes) * 2.0 ** (i + j)
    assert torch.equal(y[16:], want)


@SETTINGS
@given(seed=st.integers(0, 2**31))
def test_nvfp4_scale_midpoints_round_to_even(seed: int) -> None:
    x = scale_midpoints(seed, 64)
    enc = get_codec("nvfp4").encode(x)
    s = enc.tensors["tensor_scale"]
    q = ((x.view(-1, 16).abs().amax(1) / 6) / s).clamp(2.0 ** -6, 448).double()  # block 1..: E4M3 midpoints
    e4 = e4m3_table()[:0x7F].double()
    want = nearest_even(q, e4, torch.arange(0x7F))
    assert torch.equal(enc.tensors["scales"].float().double(), want)


@pytest.mark.emu
@SETTINGS
@given(name=st.sampled_from(sorted(MX_NAMES) + ["nvfp4"]), seed=st.integers(0, 2**31), k=st.integers(-60, 60),
       picks=picks)
def test_kernels_match_cpu_on_midpoints(name: str, seed: int, k: int, picks: list[int], cuda_emu, monkeypatch) -> None:
    from conftest import KernelTarget
    x = midpoint_battery_data(name, seed, k, picks)
    _check((name, {}), x, KernelTarget("emu"), monkeypatch)


def midpoint_battery_data(name: str, seed: int, k: int, picks: list[int]) -> torch.Tensor:
    """Midpoint data for one codec: element midpoints (and for NVFP4 scale midpoints too)."""
    signs = [bool(p & 1) for p in picks]
    if name == "nvfp4":
        return torch.cat([scale_midpoints(seed, 16), nvfp4_element_midpoints(k % 15 - 6, k, picks, signs)])
    fmt = MX_NAMES[name]
    x = element_midpoints(fmt, k, picks, signs, 32)
    if FORMATS[fmt].is_int:
        x = x.clamp(-127 / 64 * 2.0 ** k, 127 / 64 * 2.0 ** k)
    return x


def test_midpoint_data_is_on_midpoints() -> None:
    """The generators' own check: the scale quotients are E4M3 midpoints (so a formula one rounding
    off lands beside the tie), and enough blocks were found."""
    x = scale_midpoints(3, 64)
    assert x.numel() >= 16 * 32
    e4 = e4m3_table()[:0x7F]
    s = tensor_scale(x.abs().amax().reshape(1))
    q = (x.view(-1, 16)[1:, 0] / 6) / s
    at = (e4[None, :] <= q[:, None]).sum(1)
    assert torch.equal((e4[at - 1].double() + e4[at].double()) / 2, q.double())
