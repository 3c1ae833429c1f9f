"""Four ways to compute one convolutional layer (Ben-Nun & Hoefler 2018, "Computing convolutional layers"; Chetlur et
al. 2014 for im2col; Mathieu et al. 2014 for FFT; Lavin & Gray 2016 for Winograd's minimal filtering F(2x2, 3x3)),
each written out in torch so the learner can read and time it, each returning the output and the bytes of the
intermediate tensors it holds at its peak (the method's workspace). Like `torch.nn.functional.conv2d` (PyTorch's
convolution is a cross-correlation: no kernel flip), square kernels, zero padding; `microbatched` splits the batch
into micro-batches as µ-cuDNN (Oyama et al. 2018) does to fit a smaller workspace."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

CONV_METHODS = ("direct", "im2col", "fft", "winograd")
"""The methods of the survey's convolution table, in its order."""


@dataclass(frozen=True)
class ConvShape:
    """A convolutional layer: batch N, input channels C_in, output channels C_out, input H x W, a k x k kernel,
    stride and zero padding on each side (the survey's N, C_in, C_out, H, W, K_y = K_x = k)."""

    n: int
    c_in: int
    c_out: int
    h: int
    w: int
    k: int
    stride: int = 1
    padding: int = 0

    @property
    def h_out(self) -> int:
        """H' = (H + 2·padding − k) / stride + 1 (floor)."""
        return (self.h + 2 * self.padding - self.k) // self.stride + 1

    @property
    def w_out(self) -> int:
        """W' = (W + 2·padding − k) / stride + 1 (floor)."""
        return (self.w + 2 * self.padding - self.k) // self.stride + 1


def conv_shape(n: int, c_in: int, c_out: int, h: int, w: int, k: int, stride: int = 1,
               padding: int = 0) -> ConvShape:
    """A checked ConvShape: every size >= 1, padding >= 0 and below k, and the kernel fitting the padded input."""
    for name, v in (("batch N", n), ("input channels C_in", c_in), ("output channels C_out", c_out),
                    ("height H", h), ("width W", w), ("kernel k", k), ("stride", stride)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} = {v!r}: allowed a whole number >= 1")
    if int(padding) != padding or not 0 <= padding < k:
        raise ValueError(f"padding = {padding!r}: allowed a whole number from 0 to kernel k − 1 = {k - 1}")
    if min(h, w) + 2 * padding < k:
        raise ValueError(f"kernel k = {k} is larger than the padded input {h + 2 * padding}x{w + 2 * padding}: "
                         "allowed k <= min(H, W) + 2·padding")
    return ConvShape(int(n), int(c_in), int(c_out), int(h), int(w), int(k), int(stride), int(padding))


def check_method(method: str, shape: ConvShape) -> None:
    """A one-line ValueError when `method` is unknown or cannot compute `shape` (FFT: stride 1; Winograd
    F(2x2, 3x3): a 3x3 kernel and stride 1)."""
    if method not in CONV_METHODS:
        raise ValueError(f"conv method {method!r}: allowed {', '.join(CONV_METHODS)}")
    if method == "fft" and shape.stride != 1:
        raise ValueError(f"fft convolution computes stride 1 only (a strided one is a stride-1 one subsampled), "
                         f"got stride {shape.stride}")
    if method == "winograd" and (shape.k != 3 or shape.stride != 1):
        raise ValueError(f"winograd F(2x2, 3x3) needs a 3x3 kernel and stride 1, got kernel {shape.k}x{shape.k} "
                         f"and stride {shape.stride}")


def _shape_of(x: torch.Tensor, weight: torch.Tensor, stride: int, padding: int) -> ConvShape:
    if x.dim() != 4 or weight.dim() != 4 or x.shape[1] != weight.shape[1] or weight.shape[2] != weight.shape[3]:
        raise ValueError(f"input (N, C_in, H, W) and square kernel (C_out, C_in, k, k) expected, got "
                         f"{tuple(x.shape)} and {tuple(weight.shape)}")
    n, c, h, w = x.shape
    return conv_shape(n, c, weight.shape[0], h, w, weight.shape[2], stride, padding)


def _padded(x: torch.Tensor, p: int) -> torch.Tensor:
    return F.pad(x, (p, p, p, p)) if p else x


def direct(x: torch.Tensor, weight: torch.Tensor, s: ConvShape) -> tuple[torch.Tensor, int]:
    """Direct convolution: for each of the k·k kernel offsets, the strided window of the input times that
    offset's C_out x C_in weights, summed into the output (the survey's direct loop nest, its innermost
    C_in loop as one tensor contraction)."""
    xp = _padded(x, s.padding)
    y = x.new_zeros(s.n, s.c_out, s.h_out, s.w_out)
    last_h, last_w = s.stride * (s.h_out - 1) + 1, s.stride * (s.w_out - 1) + 1
    for i in range(s.k):
        for j in range(s.k):
            window = xp[:, :, i:i + last_h:s.stride, j:j + last_w:s.stride]
            y += torch.einsum("nchw,oc->nohw", window, weight[:, :, i, j])
    held = (xp.nbytes if s.padding else 0) + y.nbytes  # the padded copy and one offset's product
    return y, held


def im2col(x: torch.Tensor, weight: torch.Tensor, s: ConvShape) -> tuple[torch.Tensor, int]:
    """im2col (Chetlur et al. 2014): unfold every k x k window into a column (`F.unfold`: a
    (C_in·k·k) x (H'·W') matrix per sample), then one GEMM with the (C_out) x (C_in·k·k) weights."""
    cols = F.unfold(x, s.k, padding=s.padding, stride=s.stride)
    y = weight.reshape(s.c_out, -1) @ cols
    return y.reshape(s.n, s.c_out, s.h_out, s.w_out), cols.nbytes


def fft(x: torch.Tensor, weight: torch.Tensor, s: ConvShape) -> tuple[torch.Tensor, int]:
    """FFT convolution (Mathieu et al. 2014): transform the padded input and the zero-extended kernels to the
    frequency domain (`torch.fft.rfft2`), multiply pointwise (conjugated kernel: a cross-correlation) and sum over
    C_in, transform back; the outputs that did not wrap around are the convolution. Stride 1 only."""
    xp = _padded(x, s.padding)
    size = (xp.shape[2], xp.shape[3])
    xf = torch.fft.rfft2(xp)
    wf = torch.fft.rfft2(weight, s=size)
    yf = torch.einsum("nchw,ochw->nohw", xf, wf.conj())
    held = (xp.nbytes if s.padding else 0) + xf.nbytes + wf.nbytes + yf.nbytes
    y = torch.fft.irfft2(yf, s=size)[:, :, :s.h_out, :s.w_out]
    return y.contiguous(), held


def winograd_matrices(dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Bᵀ, G, Aᵀ) of Winograd's F(2x2, 3x3) (Lavin & Gray 2016): a 4x4 input tile d and a 3x3 kernel g give
    the 2x2 output tile Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A with 16 multiplications instead of 36."""
    bt = torch.tensor([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=dtype, device=device)
    g = torch.tensor([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=dtype, device=device)
    at = torch.tensor([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=dtype, device=device)
    return bt, g, at


def winograd(x: torch.Tensor, weight: torch.Tensor, s: ConvShape) -> tuple[torch.Tensor, int]:
    """Winograd F(2x2, 3x3) (Lavin & Gray 2016): 4x4 input tiles overlapping by 2, each transformed (Bᵀ d B), the
    kernels transformed once (G g Gᵀ), 16 pointwise products summed over C_in per tile, and the inverse
    transform Aᵀ m A gives each 2x2 output tile. A 3x3 kernel and stride 1 only."""
    bt, g, at = winograd_matrices(x.dtype, x.device)
    th, tw = math.ceil(s.h_out / 2), math.ceil(s.w_out / 2)
    xp = F.pad(x, (s.padding, s.padding + 2 * tw - s.w_out, s.padding, s.padding + 2 * th - s.h_out))
    tiles = xp.unfold(2, 4, 2).unfold(3, 4, 2)  # (N, C_in, th, tw, 4, 4), a view
    v = torch.einsum("ij,nctwjk,lk->nctwil", bt, tiles, bt)
    u = torch.einsum("ij,ocjk,lk->ocil", g, weight, g)
    m = torch.einsum("nctwij,ocij->notwij", v, u)
    held = xp.nbytes + v.nbytes + u.nbytes + m.nbytes
    y = torch.einsum("ij,notwjk,lk->notwil", at, m, at)  # (N, C_out, th, tw, 2, 2)
    y = y.permute(0, 1, 2, 4, 3, 5).reshape(s.n, s.c_out, 2 * th, 2 * tw)[:, :, :s.h_out, :s.w_out]
    return y.contiguous(), held


_IMPLEMENTATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, ConvShape], tuple[torch.Tensor, int]]] = {
    "direct": direct, "im2col": im2col, "fft": fft, "winograd": winograd}


def conv(method: str, x: torch.Tensor, weight: torch.Tensor, stride: int = 1, padding: int = 0
         ) -> tuple[torch.Tensor, int]:
    """The convolution of `x` (N, C_in, H, W) with `weight` (C_out, C_in, k, k) by `method` (one of CONV_METHODS),
    as `F.conv2d(x, weight, stride=stride, padding=padding)` computes it, and the bytes of the intermediates the
    method held at its peak. A method that cannot compute the layer is a one-line ValueError."""
    s = _shape_of(x, weight, stride, padding)
    check_method(method, s)
    return _IMPLEMENTATIONS[method](x, weight, s)


def microbatched(method: str, x: torch.Tensor, weight: torch.Tensor, splits: int, stride: int = 1,
                 padding: int = 0) -> tuple[torch.Tensor, int]:
    """µ-cuDNN's micro-batching (Oyama et al. 2018): the layer's batch split into `splits` micro-batches (sizes
    differing by at most one), each convolved by `method` in turn; the same output, and the workspace of the
    largest micro-batch only (bytes)."""
    n = x.shape[0] if x.dim() == 4 else 0
    if int(splits) != splits or not 1 <= splits <= max(n, 1):
        raise ValueError(f"micro-batches = {splits!r}: allowed a whole number from 1 to the batch N = {n}")
    outs, peak = [], 0
    for part in torch.tensor_split(x, int(splits), dim=0):
        y, held = conv(method, part, weight, stride, padding)
        outs.append(y)
        peak = max(peak, held)
    return torch.cat(outs), peak


__all__ = ["CONV_METHODS", "ConvShape", "check_method", "conv", "conv_shape", "direct", "fft", "im2col",
           "microbatched", "winograd", "winograd_matrices"]
