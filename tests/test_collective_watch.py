"""`watch=` of lab.comm's front doors: the buffer the algorithm works in, handed over once before any message,
is the one the result forms in (what the step-through reads between messages)."""
from __future__ import annotations

import torch

from lab.comm import allreduce, simulate
from lab.comm.collectives import call


def test_allreduce_hands_over_the_buffer_it_sums_in():
    P, n = 4, 12

    def rank(comm):
        seen, sent_before = [], []
        x = torch.full((n,), float(comm.rank + 1))

        def watch(buf):
            seen.append(buf)
            sent_before.append(buf.clone())
        out = allreduce(comm, x, algorithm="ring", check=False, watch=watch)
        return seen, sent_before, out

    for seen, before, out in simulate(rank, P):
        assert len(seen) == 1 and before[0].eq(before[0][0]).all()  # this rank's input, before any message
        assert seen[0].data_ptr() == out.data_ptr() and torch.equal(out, torch.full((n,), 10.0))


def test_each_collective_hands_over_its_working_buffer_once():
    P, k = 4, 3
    cases = {"all_gather": torch.ones(k), "reduce_scatter": torch.ones(P, k), "alltoall": torch.ones(P, k),
             "broadcast": torch.ones(k), "reduce": torch.ones(k), "sendrecv": torch.ones(k)}
    for op, x in cases.items():
        def rank(comm, op=op, x=x):
            seen = []
            out = call(op, comm, x.clone(), check=False, watch=seen.append)
            return seen, out
        for r, (seen, out) in enumerate(simulate(rank, P)):
            assert len(seen) == 1, op
            if op == "reduce_scatter":  # it sums in P blocks and returns this rank's
                assert torch.equal(seen[0][r], out.reshape(-1)), op
            elif out is not None:  # reduce: None off the root
                assert torch.equal(seen[0].reshape(-1), out.reshape(-1)), op
