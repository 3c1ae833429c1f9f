"""Rank functions of tests/test_parallel_tensor.py that need real ranks (importable by the rank processes)."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn


def dtensor_case(comm) -> dict:
    """One column-row pair (the MLP 16-12-10, no dropout) split by torch's own tensor parallelism
    (`parallelize_module` with ColwiseParallel, RowwiseParallel on a DeviceMesh) and by the lab's layers over the
    same Gloo ranks: logits and gradients of each, one forward and backward on the same batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from lab.train.models import MLP
    from lab.train.parallelism.tensor_layers import TensorGroup
    from lab.train.parallelism.tensor_models import TensorParallelMLP

    torch.manual_seed(0)
    mlp = MLP(16, 10, (12,), (0.0, 0.0))
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (5,), generator=torch.Generator().manual_seed(2))
    theirs = copy.deepcopy(mlp)
    pair = nn.Sequential(theirs[1], theirs[2], theirs[4])  # Linear, ReLU, Linear (the dropouts are p = 0)
    parallelize_module(pair, init_device_mesh("cpu", (comm.size,)), {"0": ColwiseParallel(), "2": RowwiseParallel()})
    out_theirs = pair(x)
    F.cross_entropy(out_theirs, y).backward()
    ours = TensorParallelMLP(copy.deepcopy(mlp), TensorGroup(comm))
    out = ours(x)
    F.cross_entropy(out, y).backward()
    return dict(out=out.detach(), out_theirs=torch.empty(tuple(out.shape)).copy_(out_theirs.detach()),
                grads=[(ours.layers[0].weight.grad, pair[0].weight.grad.to_local()),
                       (ours.layers[0].bias.grad, pair[0].bias.grad.to_local()),
                       (ours.layers[1].weight.grad, pair[2].weight.grad.to_local()),
                       (ours.layers[1].bias.grad, pair[2].bias.grad.full_tensor())],
                types=(type(pair[0].weight).__name__, type(pair[2].weight).__name__))
