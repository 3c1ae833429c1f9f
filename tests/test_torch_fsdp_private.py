"""lab/train/torch_fsdp_private.py: what the lab's FSDP training takes from torch's private FSDP2 API. FSDP2 calls
a custom collective with keyword arguments, so the parameter names are part of what is relied on."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule, fully_shard

from lab.train import torch_fsdp_private as adapter


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


@pytest.mark.parametrize("base, call", [("AllGather", ["output_tensor", "input_tensor", "group", "async_op"]),
                                        ("ReduceScatter", ["output_tensor", "input_tensor", "group", "op", "async_op"])])
def test_the_custom_collective_bases_keep_their_shape(base, call):
    cls = getattr(adapter, base)
    where = f"torch {torch.__version__}: {adapter.FSDP_API}.{base}"
    assert getattr(cls, "__abstractmethods__", None) == frozenset({"allocate", "__call__"}), \
        f"{where} no longer asks for exactly allocate and __call__"
    assert _params(cls.__call__) == call, f"{where}.__call__ takes {_params(cls.__call__)}, the lab's take {call}"
    assert _params(cls.allocate) == ["size", "dtype", "device"], f"{where}.allocate changed"


def test_fsdp_module_takes_them_and_has_the_async_switch():
    for name in ("set_custom_all_gather", "set_custom_reduce_scatter", "_set_unshard_async_op"):
        assert callable(getattr(FSDPModule, name, None)), f"torch {torch.__version__}: FSDPModule.{name} is gone"
    assert _params(FSDPModule._set_unshard_async_op) == ["async_op"]


def test_fsdp2_runs_a_custom_reduce_scatter_and_takes_the_async_switch():
    """One rank, in this process: FSDP2 accepts subclasses of the adapter's bases and allocates through them
    (with one rank it skips the collectives themselves); the async switch is accepted."""
    calls: list[str] = []

    class Alloc:
        def allocate(self, size, *, dtype, device):
            calls.append(type(self).__name__)
            return torch.empty(*size, dtype=dtype, device=device)

    class AG(Alloc, adapter.AllGather):
        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            return dist.all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)

    class RS(Alloc, adapter.ReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            return dist.reduce_scatter_tensor(output_tensor, input_tensor, op=op, group=group, async_op=async_op)

    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        model[0].set_custom_all_gather(AG())
        model[0].set_custom_reduce_scatter(RS())
        adapter.set_unshard_async(model)
        model(torch.randn(3, 4)).sum().backward()
        assert "RS" in calls
        assert all(p.grad is not None for p in model.parameters())
    finally:
        dist.destroy_process_group()
