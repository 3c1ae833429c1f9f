"""The operator level of parallelism (Ben-Nun & Hoefler 2018, "Demystifying Parallel and Distributed Deep
Learning: An In-Depth Concurrency Analysis", its operator level as Hoefler's slides give it, "A primer of relevant
parallelism", "Computing fully connected layers", "Computing convolutional layers"; the survey's own section
numbers were not checked): the work and depth of a fully
connected layer and of each way to compute a convolution, each convolution method written out in torch
and checked against `torch.nn.functional.conv2d`, and micro-batching (µ-cuDNN, Oyama et al. 2018).

    work_depth    W, D and average parallelism W/D from the survey's tables (FC; conv direct, im2col, FFT,
                  Winograd), and the multiplications each implementation here performs
    conv_methods  direct, im2col (unfold + GEMM), FFT (torch.fft) and Winograd F(2x2, 3x3) convolution, the
                  bytes of the intermediates each holds at its peak, and the batch split into micro-batches
"""
from __future__ import annotations

from .conv_methods import (CONV_METHODS, ConvShape, check_method, conv, conv_shape, microbatched,
                           winograd_matrices)
from .work_depth import (WorkDepth, conv_multiplications, conv_work_depth, fc_work_depth, device_threads)

__all__ = ["CONV_METHODS", "ConvShape", "WorkDepth", "check_method", "conv", "conv_multiplications", "conv_shape",
           "conv_work_depth", "device_threads", "fc_work_depth", "microbatched", "winograd_matrices"]
