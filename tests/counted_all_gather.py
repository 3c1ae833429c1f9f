"""An all-gather plugin for the FSDP2 tests: the registered ring, counting its calls in this process, so a
test can tell that FSDP2 ran the algorithm it was given."""
from __future__ import annotations

from lab.comm.collectives import Collective, get_collective

#: calls of `run` in this process
CALLS = [0]


def run(comm, rows) -> None:
    CALLS[0] += 1
    get_collective("all_gather", "ring").run(comm, rows)


def _coefficients(P: int, m: float) -> tuple[float, float]:
    return get_collective("all_gather", "ring").coefficients(P, m)


def _total_bytes(P: int, m: float) -> float:
    return get_collective("all_gather", "ring").total_bytes(P, m)


COLLECTIVE = Collective(op="all_gather", name="counted_ring", summary="the ring, counting its calls",
                        citation="a test plugin", run=run, coefficients=_coefficients, total_bytes=_total_bytes)
