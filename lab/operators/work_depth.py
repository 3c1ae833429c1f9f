"""Work W (operations), depth D (the longest chain of dependent operations) and average parallelism W/D of one
layer, from Ben-Nun & Hoefler 2018 (the work–depth model of "A primer of relevant parallelism") and its tables for
fully connected and convolutional layers; and the multiplications each convolution method of
lab.operators.conv_methods performs.

Readings chosen where the table is terse (its text is extracted from a PDF):
- The FC table gives orders, O(C_out·C_in·N) and O(log C_in); here W = C_out·C_in·N multiply-adds and
  D = ⌈log2 x⌉ (a tree sum of x terms), the conv table's form.
- The conv table's Winograd row is used as printed: m x m input tiles, r x r kernels, α ≡ m − r + 1 (the output
  tile; F(2x2, 3x3) is m = 4, r = 3, α = 2) and P ≡ N·⌈H/m⌉·⌈W/m⌉; FFT's transform constant c defaults to 1.
- A depth of 0 (a sum of one term) counts as 1 in W/D: one step still has to run."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .conv_methods import ConvShape, check_method


def log2_ceil(x: float) -> int:
    """⌈log2 x⌉ for x >= 1: the depth of a binary-tree sum of x terms."""
    if x < 1:
        raise ValueError(f"log2_ceil: {x!r} is below 1")
    return math.ceil(math.log2(x) - 1e-12) if x > 1 else 0


@dataclass(frozen=True)
class WorkDepth:
    """One operator's work W, depth D and average parallelism W / max(D, 1) (operations that can run at once on
    average)."""

    operator: str
    work: float
    depth: int

    @property
    def parallelism(self) -> float:
        return self.work / max(self.depth, 1)


def fc_work_depth(n: int, c_in: int, c_out: int) -> list[WorkDepth]:
    """The survey's FC table ("Computing fully connected layers"): the forward pass f_l(x) = w·x, the weight
    gradient ∇w and the input gradient ∇o of a C_in → C_out layer on a batch of N: each W = C_out·C_in·N,
    D = ⌈log2 C_in⌉, ⌈log2 N⌉, ⌈log2 C_out⌉ (the dimension each sums over)."""
    for name, v in (("batch N", n), ("input features C_in", c_in), ("output features C_out", c_out)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} = {v!r}: allowed a whole number >= 1")
    w = float(c_out) * c_in * n
    return [WorkDepth("forward f(x)", w, log2_ceil(c_in)), WorkDepth("weight gradient ∇w", w, log2_ceil(n)),
            WorkDepth("input gradient ∇o", w, log2_ceil(c_out))]


def conv_work_depth(s: ConvShape, method: str, m: int = 4, c: float = 1.0) -> WorkDepth:
    """The survey's convolution table ("Computing convolutional layers") for `method` (direct, im2col, fft,
    winograd) on layer `s`: direct and im2col W = N·C_out·H'·W'·C_in·K_y·K_x,
    D = ⌈log2 C_in⌉ + ⌈log2 K_y⌉ + ⌈log2 K_x⌉;
    FFT W = c·HW·log2(HW)·(C_out·C_in + N·C_in + N·C_out) + HW·N·C_in·C_out, D = 2⌈log2 HW⌉ + ⌈log2 C_in⌉;
    Winograd (m x m tiles, r x r kernels) W = α(r² + αr + 2α² + αm + m²) + C_out·C_in·P,
    D = 2⌈log2 r⌉ + 4⌈log2 α⌉ + ⌈log2 C_in⌉, α ≡ m − r + 1, P ≡ N·⌈H/m⌉·⌈W/m⌉."""
    check_method(method, s)
    if method in ("direct", "im2col"):
        work = float(s.n) * s.c_out * s.h_out * s.w_out * s.c_in * s.k * s.k
        return WorkDepth(method, work, log2_ceil(s.c_in) + 2 * log2_ceil(s.k))
    if method == "fft":
        hw = s.h * s.w
        work = c * hw * math.log2(hw) * (s.c_out * s.c_in + s.n * s.c_in + s.n * s.c_out) + hw * s.n * s.c_in * s.c_out
        return WorkDepth(method, float(work), 2 * log2_ceil(hw) + log2_ceil(s.c_in))
    r = s.k
    alpha = m - r + 1
    if alpha < 1:
        raise ValueError(f"Winograd tile m = {m}: allowed m >= kernel r = {r} (α = m − r + 1 >= 1)")
    p = s.n * math.ceil(s.h / m) * math.ceil(s.w / m)
    work = alpha * (r * r + alpha * r + 2 * alpha * alpha + alpha * m + m * m) + s.c_out * s.c_in * p
    return WorkDepth(method, float(work), 2 * log2_ceil(r) + 4 * log2_ceil(alpha) + log2_ceil(s.c_in))


WINOGRAD_KERNEL_TRANSFORM = 4 * 3 * 3 + 4 * 3 * 4
"""Multiplications of G g Gᵀ for one 3x3 kernel as two plain matrix products (4x3·3x3, then 4x3·3x4)."""


def conv_multiplications(s: ConvShape, method: str) -> float:
    """Real multiplications the implementation of `method` in conv_methods performs on layer `s`: direct and
    im2col N·C_out·H'·W'·C_in·k²; FFT 4 per complex pointwise product over the half spectrum of the padded
    input, N·C_out·C_in·H_p·(W_p/2 + 1), plus a radix-2 estimate of n·log2 n per real plane of n = H_p·W_p points
    transformed (N·C_in inputs, C_out·C_in kernels, N·C_out outputs); Winograd F(2x2, 3x3) 16 per 4x4 tile and
    (C_in, C_out) pair plus 84 per kernel transform (Bᵀ and Aᵀ hold 0 and ±1 only: their transforms add, never
    multiply)."""
    check_method(method, s)
    if method in ("direct", "im2col"):
        return float(s.n) * s.c_out * s.h_out * s.w_out * s.c_in * s.k * s.k
    if method == "fft":
        hp, wp = s.h + 2 * s.padding, s.w + 2 * s.padding
        plane = hp * wp
        pointwise = 4.0 * s.n * s.c_out * s.c_in * hp * (wp // 2 + 1)
        return pointwise + plane * math.log2(max(plane, 2)) * (s.n * s.c_in + s.c_out * s.c_in + s.n * s.c_out)
    tiles = math.ceil(s.h_out / 2) * math.ceil(s.w_out / 2)
    return 16.0 * s.n * tiles * s.c_in * s.c_out + WINOGRAD_KERNEL_TRANSFORM * s.c_in * s.c_out


def device_threads(device: str = "cpu") -> tuple[int, str]:
    """The threads the device runs at once and how that was counted: a GPU's SM count x resident threads per SM
    (torch.cuda.get_device_properties), else torch's intra-op CPU threads (torch.get_num_threads)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.device(device))
        per_sm = int(getattr(p, "max_threads_per_multi_processor", 2048))
        return p.multi_processor_count * per_sm, (f"{p.name}: {p.multi_processor_count} SMs x {per_sm} resident "
                                                  "threads")
    n = torch.get_num_threads()
    return n, f"CPU: {n} intra-op thread{'s' if n != 1 else ''} (torch.get_num_threads)"


__all__ = ["WINOGRAD_KERNEL_TRANSFORM", "WorkDepth", "conv_multiplications", "conv_work_depth", "device_threads",
           "fc_work_depth", "log2_ceil"]
