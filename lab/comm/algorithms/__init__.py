"""Allreduce algorithms, each written once against `Comm` (docs/design.md "Core interfaces"), one plugin each.

Every algorithm is one module defining `ALGORITHM = Algorithm(...)` (see `base.py`): `reduce(comm,
buf, channel)`, an in-place allreduce of a flat fp32 buffer whose payloads go through the channel
(raw or re-quantised at each hop), `gather(comm, rows)`, an allgather of one fixed-size payload row
per rank in the same communication pattern, and its cost model, bytes and bus-bandwidth factor.
Built-ins are found by scanning this package; others join through `register`.
"""
from .base import (ENV, NATIVE, Algorithm, algorithm_infos, algorithm_names, allreduce_busbw, get_algorithm,
                   register, register_module, unregister)


def __getattr__(name: str):
    if name == "ALGORITHMS":  # live: {name: Algorithm} of every registered algorithm, in display order
        return {a.name: a for a in algorithm_infos()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALGORITHMS", "Algorithm", "algorithm_infos", "algorithm_names", "get_algorithm", "register",
           "register_module", "unregister", "allreduce_busbw", "ENV", "NATIVE"]
