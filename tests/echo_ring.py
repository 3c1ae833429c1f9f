"""A test plugin allreduce algorithm, registered at run time by tests/test_registry_cli.py (module level, so
that the rank processes `lab.comm.launch` starts import it): the ring, then rank 0 sends the sum to every
other rank once more. The sum is the ring's; the bytes on the wire are the ring's plus (P−1)·m, so a run
shows whether this algorithm, and not another, summed its gradients."""
from __future__ import annotations

from lab.comm.algorithms import Algorithm
from lab.comm.algorithms.ring import reduce as ring_reduce


def reduce(comm, buf, ch) -> None:
    ring_reduce(comm, buf, ch)
    if comm.rank == 0:
        comm.exchange([(buf, q) for q in range(1, comm.size)]).wait()
    else:
        comm.exchange(recvs=[(buf, 0)]).wait()


ALGORITHM = Algorithm(name="echo_ring", summary="the ring, then rank 0 sends the sum again (test plugin)",
                      citation="test", reduce=reduce, coefficients=lambda P, m: (2.0 * P - 1, (3 * P - 2) / P * m),
                      total_bytes=lambda P, m: 2.0 * (P - 1) * m + (P - 1) * m, hops=lambda P: P)
