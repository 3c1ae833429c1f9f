"""NVFP4 as a codec: 16-value blocks of FP4 E2M1 with an FP8 E4M3 block scale and one fp32
tensor scale (NVIDIA Blackwell NVFP4; two-level recipe as torchao's nvfp4_quantize).

tensor scale s = amax / (448 · 6); block scale = RNE_E4M3(clamp(block_amax / 6 / s, 2^-6, 448));
elements = RNE_E2M1(clamp(x · ((1 / s) / block_scale), ±6)), or stochastic rounding (seeded) as
training recipes use for gradients: floor(q + u) with u = block_scaled.uniform_noise (a counter-based
hash of the element index and a per-call key drawn from the seeded generator), which the CUDA
kernel computes too, so both paths give the same codes. Stochastic rounding rounds the block scale
up instead (`block_scale`), so no block maximum is clamped at 6 and the rounding is unbiased.
Decode is one rounding: value · block scale · tensor scale is exact in float64. Wire: 4 bits per value + 1 byte per block + 4 bytes:
4.5 bits per value. An all-zero tensor has s = 0 and decodes to zeros; a tensor whose s would
fall below 2^-120 (amax under about 2^-108.6) uses s = 2^-120, so (1/s) / block scale stays finite
(torchao's formula gives Inf there, and NaN for zeros).
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from .base import (Codec, Encoded, Field, Layout, SeededGenerator, check_input, check_seed, nonfinite_error, packed_bytes,
                   saturate_nonfinite)
from .registry import CodecInfo, OptionSpec, WorkModel, nonfinite_option, register, seed_option
from . import cpu
from .block_scaled import (FORMATS, blocks, decode_blocks, noise_from_index, pack_codes, round_elements, uniform_noise,
                           unpack_codes, value_table)
from .mx import own_code, pack_lanes, pack_rows, round_elements_bits
from .cuda_block import block_decode_cuda, nvfp4_encode_cuda, on_kernel_device

NV_BLOCK = 16
E2M1 = FORMATS["e2m1"]
E4M3_MAX = 448.0
E4M3_TINY = 2.0 ** -6  # torch.finfo(float8_e4m3fn).tiny: the smallest block scale (torchao's E4M3_EPS)
MIN_TENSOR_SCALE = 2.0 ** -120  # (1 / s) / 2^-6 stays below float32's 2^128


class NVFP4Codec(SeededGenerator, Codec):
    """NVFP4: rounding 'nearest' (RNE, the default) or 'stochastic' (seeded by `seed`)."""

    name = "nvfp4"
    summable = False
    requantize = True

    def __init__(self, *, rounding: str = "nearest", seed: int = 0, nonfinite: str = "raise") -> None:
        if rounding not in ("nearest", "stochastic"):
            raise ValueError(f"rounding={rounding!r}; allowed: 'nearest', 'stochastic'")
        if nonfinite not in ("raise", "saturate"):
            raise ValueError(f"nonfinite={nonfinite!r}; allowed: 'raise', 'saturate'")
        self.rounding, self.seed, self.nonfinite = rounding, check_seed(seed), nonfinite
        self.block_size = NV_BLOCK
        self.stochastic = rounding == "stochastic"

    def describe(self) -> str:
        return "nvfp4" if self.rounding == "nearest" else f"nvfp4[stochastic,seed={self.seed}]"

    def encode(self, x: torch.Tensor) -> Encoded:
        flat = check_input(x, nonfinite=self.nonfinite)
        n = flat.numel()
        meta = {"block_size": NV_BLOCK}
        if n == 0:
            z = flat.new_zeros(0, dtype=torch.uint8)
            return self.payload(x, {"codes": z, "scales": z.view(torch.float8_e4m3fn),
                                     "tensor_scale": flat.new_zeros(1, dtype=torch.float32)}, 0, meta)
        key = self._noise_key() if self.stochastic else None
        if on_kernel_device(flat):  # kernels/block_scaled.cu: scales and packed codes in one pass
            amax = flat.abs().amax().float().reshape(1)
            if not bool(torch.isfinite(amax)):
                if self.nonfinite == "raise":
                    raise nonfinite_error(flat)
                flat = saturate_nonfinite(flat)
                amax = flat.abs().amax().float().reshape(1)
            tscale = tensor_scale(amax)
            packed, bscale = nvfp4_encode_cuda(flat, tscale, key)
            return self.payload(x, {"codes": packed, "scales": bscale.view(torch.float8_e4m3fn),
                                     "tensor_scale": tscale}, packed_bytes(n, 4) + bscale.numel() + 4, meta)
        bamax = self._block_amax(flat)
        if not bool(torch.isfinite(bamax).all()):
            if self.nonfinite == "raise":
                raise nonfinite_error(flat)
            flat = saturate_nonfinite(flat)
            bamax = self._block_amax(flat)
        tscale = tensor_scale(bamax.amax().reshape(1))
        packed, bscale = self._encode_cpu(flat, bamax, tscale, key)
        return self.payload(x, {"codes": packed, "scales": bscale, "tensor_scale": tscale},
                             packed_bytes(n, 4) + bscale.numel() + 4, meta)

    def _block_amax(self, flat: torch.Tensor) -> torch.Tensor:
        """float32 absmax of every 16-value block (the tail block's over its values), one pass."""
        n = flat.numel()
        main = n - n % NV_BLOCK
        parts = []
        if main:
            x2d = flat[:main].view(-1, NV_BLOCK)
            got = cpu.try_compiled(_amax_fn, None, x2d) if main >= cpu.MIN_COMPILED else None
            parts.append(got if got is not None else x2d.float().abs().amax(1))
        if main < n:
            parts.append(flat[main:].float().abs().amax().reshape(1))
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    def _encode_cpu(self, flat: torch.Tensor, bamax: torch.Tensor, tscale: torch.Tensor,
                    key: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(packed codes, E4M3 block scales): the whole blocks through the fused torch.compile pass
        when there are enough of them, the tail block (and small inputs) through the reference."""
        n = flat.numel()
        main = n - n % NV_BLOCK
        if main >= cpu.MIN_COMPILED:
            keys = None if key is None else torch.tensor([key & 0xFFFFFFFF, key >> 32], dtype=torch.int64)
            out = cpu.try_compiled(_encode_nvfp4_fn, key is not None, flat[:main].view(-1, NV_BLOCK),
                                    bamax[:main // NV_BLOCK], tscale, keys)
            if out is not None:
                out = out[:2]
                if main == n:
                    return out
                tail, _ = blocks(flat[main:], NV_BLOCK)
                codes, bscale = self._encode_blocks(tail, bamax[-1:], tscale, key, start=main)
                return torch.cat([out[0], pack_codes(codes.view(-1)[:n - main], 4)]), torch.cat([out[1], bscale])
        x2d, _ = blocks(flat, NV_BLOCK)
        codes, bscale = self._encode_blocks(x2d, bamax, tscale, key)
        return pack_codes(codes.view(-1)[:n], 4), bscale

    def _noise_key(self) -> int:
        """The 64-bit key of this call's stochastic-rounding noise, drawn from the codec's CPU
        generator seeded by `seed` (so successive calls differ, and CPU and CUDA draw the same key)."""
        k = torch.randint(0, 2**32, (2,), generator=self.generator(torch.device("cpu")))
        return int(k[0]) | int(k[1]) << 32

    def encode_into(self, x: torch.Tensor, out: dict[str, torch.Tensor]) -> Encoded | None:
        """`encode(x)` written into the payload fields `out` (views into a reused wire buffer,
        `WireFormat.encode_into`), bit for bit `encode`, allocating only the block-scale bytes (one
        per 16 values): one pass for the tensor absmax, one fused pass for block scales and packed
        codes. None where this path does not apply (not float32 on the CPU, too few values for
        the compiled pass, a non-finite value): the caller then encodes."""
        if (not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.device.type != "cpu"
                or on_kernel_device(x) or not x.is_contiguous()):
            return None
        flat, codes, scales, ts = x.view(-1), out["codes"], out["scales"], out["tensor_scale"]
        n = flat.numel()
        main = n - n % NV_BLOCK
        if main < cpu.MIN_COMPILED:
            return None
        if codes.numel() != packed_bytes(n, 4) or scales.numel() != -(-n // NV_BLOCK) or ts.numel() != 1:
            raise ValueError(f"encode_into: {n} values need codes[{packed_bytes(n, 4)}], scales[{-(-n // NV_BLOCK)}] "
                             f"and tensor_scale[1]; got codes[{codes.numel()}], scales[{scales.numel()}], "
                             f"tensor_scale[{ts.numel()}]")
        amax = cpu.absmax(flat)
        if not bool(torch.isfinite(amax)) or cpu.kernel_status() != "compiled":
            return None  # (before the noise key is drawn: the fallback encode draws it)
        key = self._noise_key() if self.stochastic else None
        tscale = tensor_scale(amax.reshape(1))
        keys = None if key is None else torch.tensor([key & 0xFFFFFFFF, key >> 32], dtype=torch.int64)
        cb = main // 2
        got = cpu.try_compiled(_encode_nvfp4_into_fn, key is not None, flat[:main].view(-1, NV_BLOCK), tscale, keys,
                               codes[:cb])
        if got is None:
            return None
        scales[: main // NV_BLOCK].copy_(got)
        if main < n:
            tail, _ = blocks(flat[main:], NV_BLOCK)
            tc, tb = self._encode_blocks(tail, flat[main:].abs().amax().reshape(1), tscale, key, start=main)
            codes[cb:].copy_(pack_codes(tc.view(-1)[:n - main], 4))
            scales[main // NV_BLOCK:].copy_(tb)
        ts.copy_(tscale)
        return self.payload(x, {"codes": codes, "scales": scales, "tensor_scale": ts},
                            packed_bytes(n, 4) + scales.numel() + 4, {"block_size": NV_BLOCK})

    def layout(self, n: int) -> Layout:
        """E2M1 codes two to a byte, one E4M3 scale per block of 16 and one float32 tensor scale."""
        return (Field("codes", torch.uint8, (packed_bytes(n, 4),)),
                Field("scales", torch.float8_e4m3fn, (-(-n // NV_BLOCK),)),
                Field("tensor_scale", torch.float32, (1,)))

    def wire_meta(self, n: int) -> dict[str, Any]:
        return {"block_size": NV_BLOCK}

    def _encode_blocks(self, x2d: torch.Tensor, bamax: torch.Tensor, tscale: torch.Tensor, key: int | None = None,
                       start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(element codes [blocks, 16] uint8, E4M3 block scales) of a float32 [blocks, 16] view whose
        first value is element `start` of the tensor (plain torch ops: the reference)."""
        bscale = block_scale(bamax, tscale, key is not None)
        safe = torch.where(tscale > 0, tscale, torch.ones_like(tscale))
        recip = (1.0 / safe) / bscale.float()
        a = (x2d * recip[:, None]).clamp(-E2M1.max_normal, E2M1.max_normal)
        noise = None if key is None else uniform_noise(a.numel(), key, a.device, start).view(a.shape)
        return round_elements(a, E2M1, noise), bscale

    def decode(self, enc: Encoded) -> torch.Tensor:
        n = enc.numel
        if n == 0:
            return torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
        t = enc.tensors
        if on_kernel_device(t["codes"]):
            out = torch.empty(enc.shape, dtype=enc.dtype, device=enc.device)
            self._decode_flat(enc, out.view(-1))
            return out
        codes = unpack_codes(t["codes"], 4, n)
        scale = t["scales"].double() * t["tensor_scale"].double()  # exact: 4 x 24 significant bits
        return decode_blocks(codes, E2M1, scale, NV_BLOCK, enc.dtype).view(enc.shape)

    def _decode_flat(self, enc: Encoded, flat: torch.Tensor) -> bool:
        """Decode straight into `flat`: the CUDA kernel (kernels/block_scaled.cu), or on the CPU,
        for float32, the fused pass (`_decode_nvfp4_into_fn`) over the whole blocks; False elsewhere
        (then decode_into decodes and copies)."""
        t = enc.tensors
        if enc.numel == 0:
            return False
        if not on_kernel_device(t["codes"]):
            return self._decode_flat_cpu(enc, flat)
        dev = t["codes"].device
        block_decode_cuda(t["codes"], value_table(E2M1, dev), t["scales"].view(torch.uint8), e4m3_table(dev),
                          t["tensor_scale"], n=enc.numel, block=NV_BLOCK, bits=4, dtype=enc.dtype, out=flat)
        return True


    def _decode_flat_cpu(self, enc: Encoded, flat: torch.Tensor) -> bool:
        n, t = enc.numel, enc.tensors
        main = n - n % NV_BLOCK
        if t["codes"].device.type != "cpu" or flat.dtype != torch.float32 or main < cpu.MIN_COMPILED:
            return False
        nb, cb = main // NV_BLOCK, main // 2
        # the tensor scale copied: its offset in a wire buffer (0 when unaligned and cloned) would recompile
        if not cpu.try_compiled(_decode_nvfp4_into_fn, None, t["codes"][:cb], t["scales"][:nb].view(torch.uint8),
                                t["tensor_scale"].clone(), value_table(E2M1), e4m3_table(), flat[:main].view(nb, NV_BLOCK),
                                returns=True):
            return False
        if main < n:
            tail = unpack_codes(t["codes"][cb:], 4, n - main)
            scale = t["scales"][nb:].double() * t["tensor_scale"].double()
            flat[main:].copy_(decode_blocks(tail, E2M1, scale, NV_BLOCK, torch.float32))
        return True


@functools.cache
def _encode_nvfp4_into_fn(stochastic: bool):
    """`_encode_nvfp4_fn` with the block absmax computed in the pass, writing the packed codes into
    `codes_out` (a wire buffer's field) and returning the E4M3 block scales."""

    def fn(x2d, tscale, keys, codes_out):
        xf = x2d.float()
        bscale = block_scale(xf.abs().amax(1), tscale, stochastic)
        safe = torch.where(tscale > 0, tscale, torch.ones_like(tscale))
        recip = ((1.0 / safe) / bscale.float())[:, None]
        if stochastic:
            nb = xf.shape[0]
            i = torch.arange(nb * NV_BLOCK, dtype=torch.int64).view(nb, NV_BLOCK // 2, 2)

            def code_of(v, j):  # lane j: the elements 2m + j of each block
                return round_elements_bits((v * recip).clamp(-E2M1.max_normal, E2M1.max_normal), E2M1,
                                           noise_from_index(i[:, :, j], keys[0], keys[1]))
        else:
            def code_of(v, j):
                return round_elements_bits((v * recip).clamp(-E2M1.max_normal, E2M1.max_normal), E2M1)
        codes_out.copy_(pack_lanes(code_of, xf, 4))
        return bscale

    return torch.compile(own_code(fn, f"nvfp4_encode_into_{'sr' if stochastic else 'rne'}"), dynamic=True)


@functools.cache
def _decode_nvfp4_into_fn(_: None):
    """The fused (torch.compile) NVFP4 decode of whole blocks into a float32 `out2d` [blocks, 16]:
    value · block scale is exact in float32 (2 and 4 significant bits), so one float32 product with
    the tensor scale is the one rounding of `block_scaled.decode_blocks`; overflow clamped."""
    big = torch.finfo(torch.float32).max

    def fn(packed, bscale, tscale, values, e4m3, out2d):
        nb = out2d.shape[0]
        p = packed.view(nb, NV_BLOCK // 2, 1)
        codes = torch.cat([p & 0xF, p >> 4], 2).view(nb, NV_BLOCK)
        v = (values[codes.to(torch.int32)] * e4m3[bscale.to(torch.int32)].view(nb, 1)) * tscale
        out2d.copy_(v.clamp(-big, big))

    return torch.compile(own_code(fn, "nvfp4_decode_into"), dynamic=True)


@functools.cache
def _amax_fn(_: None):
    """Fused block absmax of a [blocks, 16] view (any float dtype) as float32."""
    return torch.compile(lambda x2d: x2d.float().abs().amax(1), dynamic=True)


@functools.cache
def _encode_nvfp4_fn(stochastic: bool):
    """The fused (torch.compile) NVFP4 encode of whole blocks given their absmax and the tensor
    scale: E4M3 block scale, scaling, rounding (to nearest even, or with the noise of
    block_scaled.noise_from_index for keys = [k0, k1]) and packing, one pass over the input."""

    def fn(x2d, bamax, tscale, keys):
        xf = x2d.float()
        safe = torch.where(tscale > 0, tscale, torch.ones_like(tscale))
        bscale = block_scale(bamax, tscale, stochastic)
        recip = (1.0 / safe) / bscale.float()
        a = (xf * recip[:, None]).clamp(-E2M1.max_normal, E2M1.max_normal)
        noise = None
        if stochastic:
            i = torch.arange(a.numel(), dtype=torch.int64).view(a.shape)
            noise = noise_from_index(i, keys[0], keys[1])
        codes = round_elements_bits(a, E2M1, noise)
        return pack_rows(codes, 4), bscale, codes  # codes materialised: packing reads bytes (see mx._encode_mx_fn)

    return torch.compile(fn, dynamic=True)


def block_scale(bamax: torch.Tensor, tscale: torch.Tensor, up: bool = False) -> torch.Tensor:
    """E4M3 block scales of float32 block absmaxes: E4M3(clamp(bamax / 6 / s, 2^-6, 448)), to
    nearest even, or with `up` (stochastic rounding) rounded up, so that no element exceeds ±6
    after scaling and none is clamped: a clamped block maximum would be biased toward zero."""
    safe = torch.where(tscale > 0, tscale, torch.ones_like(tscale))
    want = ((bamax / E2M1.max_normal) / safe).clamp(E4M3_TINY, E4M3_MAX)
    b = want.to(torch.float8_e4m3fn)
    if not up:
        return b
    low = b.float() < want  # then b < 448: the next byte up is the next E4M3 value
    return torch.where(low, b.view(torch.uint8) + 1, b.view(torch.uint8)).view(torch.float8_e4m3fn)


def tensor_scale(amax: torch.Tensor) -> torch.Tensor:
    """NVFP4's fp32 tensor scale of a 1-element absmax: amax / (448 · 6), at least 2^-120 for a
    nonzero tensor (so (1/s) / block scale stays finite), 0 for an all-zero one."""
    # A tensor divisor: torch on CUDA computes `t / python_float` as t * (1 / float), one ulp off.
    s = amax / amax.new_tensor(E4M3_MAX * E2M1.max_normal)
    return torch.where(amax > 0, s.clamp(min=MIN_TENSOR_SCALE), s)


@functools.lru_cache(maxsize=8)
def e4m3_table(device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """float32[256]: the value of every FP8 E4M3 byte (NaN for 0x7F and 0xFF), as torch casts it."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float().to(device)


register(CodecInfo("nvfp4", "NVFP4: 16-value blocks of FP4 E2M1 with an E4M3 block scale and an fp32 tensor "
                             "scale, 4.5 bits/value", lambda **kw: NVFP4Codec(**kw),
                   (OptionSpec("rounding", str, "nearest", ("nearest", "stochastic"),
                               help="rounding of the elements: to nearest even, or stochastic (unbiased; "
                                    "training recipes use it for gradients)"),
                    seed_option(), nonfinite_option()), work=WorkModel(extra_encode_bytes=4.0)))
