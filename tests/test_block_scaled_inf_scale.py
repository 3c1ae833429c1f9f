"""Infinite and NaN scales of the block-scaled formats: which scale encodings have an
Inf, and that decoding one gives what the CPU reference gives, on the kernel (a real GPU or the emulator).

Only NVFP4's fp32 tensor scale can be infinite. The block scales cannot: E8M0 (every MX format) has no
Inf, its only special code is 0xFF = NaN (OCP MX v1.0 §5.4.1), and E4M3 'fn' (NVFP4's block scale) has no
Inf either, only NaN at 0x7F / 0xFF. Their NaN bytes are tested in test_block_scaled_kernels.py
(`test_nan_scale_decodes_its_block_to_nan`); here a test pins that their tables hold no Inf, so a format
that gains one is seen."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from lab.codecs import get_codec
from lab.codecs.block_scaled import e8m0_table
from test_block_scaled_kernels import DTYPES, _launches, _u8, cpu_path


def test_only_nvfp4s_tensor_scale_can_be_infinite() -> None:
    """E8M0 and E4M3fn decode no byte to Inf (so no Inf block-scale byte exists to decode); NaN is 0xFF in
    E8M0 and 0x7F / 0xFF in E4M3fn. NVFP4's tensor scale is a plain float32, Inf included."""
    e8 = e8m0_table()
    assert not torch.isinf(e8).any()
    assert torch.isnan(e8).nonzero().flatten().tolist() == [0xFF]
    e4 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    assert not torch.isinf(e4).any()
    assert torch.isnan(e4).nonzero().flatten().tolist() == [0x7F, 0xFF]
    fields = {f.name: f.dtype for f in get_codec("nvfp4").layout(64)}
    assert fields["tensor_scale"] == torch.float32


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal bit for bit, except that any NaN matches any NaN (payload and sign are not promised)."""
    gn, wn = torch.isnan(got.float()), torch.isnan(want.float())
    return torch.equal(gn, wn) and torch.equal(_u8(got[~gn]), _u8(want[~wn]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("tscale", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
def test_nvfp4_non_finite_tensor_scale_decodes_as_the_cpu_does(tscale: float, dtype: torch.dtype, target,
                                                               monkeypatch) -> None:
    """The CPU reference's rule (`block_scaled.decode_blocks`): the IEEE product, saturated to the dtype's
    range. So an Inf tensor scale makes every nonzero element the dtype's largest value with the product's
    sign (times -Inf: flipped) and every zero element NaN (0 · Inf); a NaN one makes every element NaN.
    Checked element by element on the CPU path, and the kernel must give what the CPU gives."""
    x = torch.randn(3 * 16 + 5, generator=torch.Generator().manual_seed(5)).to(dtype)
    x[7] = 0.0  # an element whose code is zero
    codec = get_codec("nvfp4")
    with cpu_path(monkeypatch):
        enc = codec.encode(x)
        clean = codec.decode(enc)
    bad = dataclasses.replace(enc, tensors={**enc.tensors, "tensor_scale": torch.tensor([tscale])})
    with cpu_path(monkeypatch):
        want = codec.decode(bad)
    c = clean.float()
    if math.isnan(tscale):
        assert torch.isnan(want.float()).all()
    else:
        big = torch.finfo(dtype).max
        expect = torch.where(c == 0, torch.full_like(c, math.nan), c.sign() * math.copysign(big, tscale))
        assert _same(want, expect.to(dtype)), "CPU: an infinite tensor scale must saturate (zeros: NaN)"
    dev = dataclasses.replace(bad, tensors={k: v.to(target.device) for k, v in bad.tensors.items()})
    with _launches(target, "block_decode_"):
        got = codec.decode(dev).cpu()
    assert _same(got, want), "kernel: a non-finite tensor scale decodes differently from the CPU"
