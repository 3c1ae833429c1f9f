"""Allreduce algorithms, each written once against `Comm` (DESIGN.md "Core interfaces").

Every module has `reduce(comm, buf, channel)`, an in-place allreduce of a flat fp32 buffer whose
payloads go through the channel (raw or re-quantised at each hop), and `gather(comm, rows)`, an
allgather of one fixed-size payload row per rank in the same communication pattern.
"""
from . import butterfly_sync, parameter_server, rabenseifner, recursive_doubling, ring, tree

ALGORITHMS = {
    "tree": tree,
    "recursive_doubling": recursive_doubling,
    "ring": ring,
    "rabenseifner": rabenseifner,
    "butterfly_sync": butterfly_sync,
    "parameter_server": parameter_server,
}

__all__ = ["ALGORITHMS"]
