"""Every nccl-tests collective but allreduce, one plugin per (op, algorithm) (docs/design.md rule 6).

    from lab.comm.collectives import all_gather, reduce_scatter
    full = all_gather(comm, shard, algorithm="ring", codec="mxfp8_e4m3")      # P·len(shard) rows
    mine = reduce_scatter(comm, grads, algorithm="ring", codec="dynamic_tree")  # shard r of the sum

Ops, their nccl-tests bus-bandwidth factors and what "size" means: `OPS` (base.py). Algorithms: the
modules <op>_<algorithm>.py of this package (each defines `COLLECTIVE`), found by `lab.plugins`.
"""
from .api import MODES, all_gather, alltoall, broadcast, call, reduce, reduce_scatter, resolve_mode, sendrecv
from .base import (ENV, OPS, Collective, Op, allreduce_phases, check_op, collective_infos, collective_names,
                   get_collective, register, register_module, unregister)
from .wire import ACCUMULATE

__all__ = ["all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv", "call", "resolve_mode",
           "MODES", "ACCUMULATE", "OPS", "Op", "Collective", "collective_infos", "collective_names", "get_collective",
           "register", "register_module", "unregister", "check_op", "ENV", "allreduce_phases"]
