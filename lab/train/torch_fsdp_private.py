"""The private parts of torch's FSDP2 (`torch.distributed.fsdp.fully_shard`) the lab's FSDP training relies
on, in one place: the `AllGather` / `ReduceScatter` bases a custom collective subclasses (FSDPModule's public
`set_custom_all_gather` / `set_custom_reduce_scatter` take one; torch exports no public name for them), and
FSDPModule's switch that unshards asynchronously before the forward and backward pass (prefetch overlap).
tests/test_torch_fsdp_private.py pins what is used, so a torch that moves them fails there by name."""
from __future__ import annotations

import torch
from torch.distributed.fsdp import FSDPModule

FSDP_API = "torch.distributed.fsdp._fully_shard._fsdp_api"

try:
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
except ImportError as e:  # pragma: no cover - only on a torch that moved them
    raise ImportError(f"torch {torch.__version__} has no {FSDP_API}.AllGather / ReduceScatter, the bases of FSDP2's "
                      "custom collectives that ParaLab's FSDP training subclasses") from e


def set_unshard_async(model: FSDPModule, on: bool = True) -> None:
    """Unshard `model`'s units asynchronously before the forward and the backward pass, so a prefetched
    all-gather overlaps the unit computing now (FSDPModule._set_unshard_async_op)."""
    model._set_unshard_async_op(on)


__all__ = ["AllGather", "ReduceScatter", "set_unshard_async", "FSDP_API"]
