"""Every kernel of the report card (lab.codecs.kernel_card) launched alone through its real launcher, on the
card's representative call: aligned data, the dynamic tree's table (Dettmers 2016 §3.1) with quantization blocks
of kernel_card.BLOCK or one scale per tensor, MXFP8 (E4M3) and NVFP4 for the block-scaled kernels, decode_sum over
kernel_card.PAYLOADS rows. Each call launches its kernel and nothing else of the lab's (a per-tensor hop's
absmax pass is its own call; its encode pass runs with scale='none', the same kernel). On a GPU
`measure` times them with CUDA events (lab.backend.time_fn) for the card's measured-beside-predicted view."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from .. import backend
from . import cuda as C
from . import cuda_block as CB
from . import cuda_hop as H
from .block_scaled import FORMATS, e8m0_table, value_table
from .kernel_card import BLOCK, PAYLOADS
from .registry import get_codec
from .table_codec import search_tables_on

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def kernel_calls(n: int, device: torch.device | str) -> dict[str, Callable[[], Any]]:
    """{kernel: a call that launches it on n values on `device`} for every kernel of kernels/*.cu (n a multiple
    of 64, so every input is aligned for the vector paths)."""
    if n <= 0 or n % 64:
        raise ValueError(f"n={n}: a positive multiple of 64 (the vector paths' alignment)")
    device = torch.device(device)
    g = torch.Generator().manual_seed(0)
    x32 = torch.randn(n, generator=g).to(device)
    codec = get_codec("dynamic_tree")
    t = search_tables_on(codec.table, codec.rounding, "absmax", device)
    nblocks = n // BLOCK
    calls: dict[str, Callable[[], Any]] = {}
    one = torch.ones(1, device=device)
    for dt, dtype in _DTYPES.items():
        x = x32.to(dtype)
        for search in C.SEARCHES:
            calls[f"encode_block_{dt}_{search}"] = (
                lambda x=x, s=search: C.encode_cuda(x, t.bpad, t.lut, t.K, block_size=BLOCK, scale=None, search=s))
            calls[f"encode_scale_{dt}_{search}"] = (
                lambda x=x, s=search: C.encode_cuda(x, t.bpad, t.lut, t.K, block_size=None, scale=one, search=s))
        codes, scales = C.encode_cuda(x32, t.bpad, t.lut, t.K, block_size=BLOCK, scale=None)
        out = torch.empty(n, dtype=dtype, device=device)
        calls[f"decode_block_{dt}"] = (lambda c=codes, s=scales, o=out, d=dtype: C.decode_cuda(
            c, t.values256, s, block_size=BLOCK, dtype=d, out=o))
        calls[f"decode_scale_{dt}"] = (lambda c=codes, o=out, d=dtype: C.decode_cuda(
            c, t.values256, one, block_size=None, dtype=d, out=o))
        calls[f"mx_encode_{dt}"] = lambda x=x: CB.mx_encode_cuda(x, FORMATS["e4m3"], "floor")
        calls[f"nvfp4_encode_{dt}"] = lambda x=x: CB.nvfp4_encode_cuda(x, one, None)
        packed, e8m0, _ = CB.mx_encode_cuda(x32, FORMATS["e4m3"], "floor")
        mx_out = torch.empty(n, dtype=dtype, device=device)
        calls[f"block_decode_{dt}"] = (lambda p=packed, s=e8m0, o=mx_out, d=dtype: CB.block_decode_cuda(
            p, value_table(FORMATS["e4m3"], device), s, e8m0_table(device), None, n=n, block=CB.MX_BLOCK, bits=8,
            dtype=d, out=o))
    a_codes, a_scales = C.encode_cuda(x32, t.bpad, t.lut, t.K, block_size=BLOCK, scale=None)
    b_codes, b_scales = C.encode_cuda(x32.flip(0), t.bpad, t.lut, t.K, block_size=BLOCK, scale=None)
    amax = x32.abs().amax().reshape(1)
    ta_codes, ta_scale = C.encode_cuda(x32, t.bpad, t.lut, t.K, block_size=None, scale=amax)
    tb_codes, tb_scale = C.encode_cuda(x32.flip(0), t.bpad, t.lut, t.K, block_size=None, scale=amax)
    for search in C.SEARCHES:
        tabs = (t.values256, t.bpad, t.lut, t.K)
        calls[f"hop_codes_block_{search}"] = lambda s=search: H.hop_codes_cuda(
            a_codes, a_scales, b_codes, b_scales, *tabs, block_size=BLOCK, search=s)
        calls[f"hop_mixed_block_{search}"] = lambda s=search: H.hop_mixed_cuda(
            a_codes, a_scales, x32, *tabs, block_size=BLOCK, search=s)
        calls[f"hop_codes_scale_{search}"] = lambda s=search: H.hop_codes_cuda(
            ta_codes, ta_scale, tb_codes, tb_scale, *tabs, block_size=None, scale="none", search=s)
        calls[f"hop_mixed_scale_{search}"] = lambda s=search: H.hop_mixed_cuda(
            ta_codes, ta_scale, x32, *tabs, block_size=None, scale="none", search=s)
    calls["hop_codes_absmax"] = _absmax_pass("codes", n, device, (ta_codes, ta_scale, tb_codes, tb_scale), t)
    calls["hop_mixed_absmax"] = _absmax_pass("mixed", n, device, (ta_codes, ta_scale, x32), t)
    rows = torch.stack([a_codes] * PAYLOADS)
    row_scales = torch.stack([a_scales] * PAYLOADS)
    calls["decode_sum"] = lambda: H.decode_sum_cuda(rows, row_scales, t.values256, block_size=BLOCK)
    return calls


def _absmax_pass(kind: str, n: int, device: torch.device, src: tuple, t: Any) -> Callable[[], Any]:
    """The per-tensor hop's first kernel alone: hop_<kind>_absmax atomicMax'ing |sum| into one float, launched
    with the arguments cuda_hop._hop gives it (the sources, the word, n, chunk, team, vec, the table). The call
    returns the word."""
    plan = H.hop_plan(kind, n, block_size=None, scale="absmax", search="lut", aligned=True)[0]
    word = torch.zeros(1, dtype=torch.float32, device=device)
    shape = (np.int64(n), np.int32(plan.block), np.int32(plan.team), np.int32(plan.vec))

    def call() -> torch.Tensor:
        word.zero_()
        backend.launch_kernel("collective", plan.kernel, plan.grid, plan.threads, src + (word,) + shape + (t.values256,),
                              device)
        return word
    return call


def measure(calls: dict[str, Callable[[], Any]], device: torch.device | str, n: int,
            repeats: int = 20) -> dict[str, dict[str, float]]:
    """{kernel: {ns_per_value, low, high}}: the median over `repeats` timed calls after warm-up (CUDA events on a
    GPU), per value, with the fastest and slowest call."""
    out = {}
    for kernel, fn in calls.items():
        t = backend.time_fn(fn, device, warmup=3, repeats=repeats)
        out[kernel] = {"ns_per_value": t.median * 1e9 / n, "low": t.min * 1e9 / n, "high": t.max * 1e9 / n}
    return out


__all__ = ["kernel_calls", "measure"]
