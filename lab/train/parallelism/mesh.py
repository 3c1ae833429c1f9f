"""A 2-D mesh of ranks (data × tensor, data × pipeline): torch's `DeviceMesh` layout, and this rank's
communicators along each of its dimensions for the lab's wire (codecs on every transfer).

`init_device_mesh(device, (d0, d1), mesh_dim_names=(n0, n1))` lays ranks out row-major: rank r sits at
(r // d1, r % d1); the group along n1 is the ranks of r's row (contiguous), the group along n0 its column.
When torch.distributed is initialised the layout is read from a real DeviceMesh; either way the sub-groups
are `Comm.group` views of this rank's comm, so every byte is counted and can carry a codec."""
from __future__ import annotations

from typing import Sequence

import torch

from lab.comm.base import Comm


def check_mesh(procs: int, outer: int, what: str = "data") -> int:
    """The inner size procs // outer; ValueError unless `outer` (the --data replicas) divides procs."""
    if isinstance(outer, bool) or not isinstance(outer, int) or outer < 1:
        raise ValueError(f"--{what} {outer!r}; allowed: an int >= 1 that divides the processes")
    if procs % outer:
        raise ValueError(f"--{what} {outer} does not divide {procs} processes; allowed: "
                         + ", ".join(str(d) for d in range(1, procs + 1) if procs % d == 0))
    return procs // outer


def layout(shape: Sequence[int], names: Sequence[str]) -> torch.Tensor:
    """The rank grid of a mesh of `shape` (DeviceMesh's, from torch when torch.distributed is initialised)."""
    import torch.distributed as dist

    P = 1
    for s in shape:
        P *= int(s)
    grid = torch.arange(P).view(*shape)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() == P:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", tuple(int(s) for s in shape), mesh_dim_names=tuple(names))
        grid = mesh.mesh.clone()
    return grid


def mesh_groups(comm: Comm, shape: Sequence[int], names: Sequence[str]) -> dict[str, Comm]:
    """{name: this rank's communicator along that dimension} for a 2-D mesh of `shape` over comm's ranks."""
    if len(shape) != 2 or len(names) != 2:
        raise ValueError(f"a mesh of two dimensions; got shape {tuple(shape)}, names {tuple(names)}")
    grid = layout(shape, names)
    where = (grid == comm.rank).nonzero()[0].tolist()
    row = grid[where[0], :].tolist()
    col = grid[:, where[1]].tolist()
    return {names[0]: comm.group(col), names[1]: comm.group(row)}


__all__ = ["check_mesh", "layout", "mesh_groups"]
