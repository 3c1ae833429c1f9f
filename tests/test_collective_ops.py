"""Every collective op x algorithm (lab.comm.collectives) exact in fp32 against NumPy on SimComm,
codecs on the wire, accumulation dtypes, bad input."""
from __future__ import annotations

import numpy as np
import pytest

K = 3  # values per shard / block


def _inputs(P: int, r: int, rows: int):
    """Rank r's input: small integers (every summation order is exact in fp32)."""
    return _INPUTS(r, rows)


@__import__("functools").lru_cache(maxsize=None)
def _INPUTS(r: int, rows: int):
    i = np.arange(rows * K).reshape(rows, K)
    return (((i * 7 + r * 13 + 5) % 17) - 8).astype(np.float32)


def _every_op(comm):
    """Each (op, algorithm) once on this rank; {(op, algo): result as NumPy or None}."""
    import torch

    from lab.comm import collectives as C

    P, r = comm.size, comm.rank
    out = {}
    for c in C.collective_infos():
        if c.op in ("all_gather", "broadcast", "sendrecv", "reduce"):
            x = torch.from_numpy(_inputs(P, r, 1)[0])
        else:
            x = torch.from_numpy(_inputs(P, r, P)).reshape(-1)
        kw = {"root": (P - 1) // 2} if c.op in ("broadcast", "reduce") else {}
        if c.op == "all_gather" and c.name == "pat":
            kw["buffer_bytes"] = 2 * K * 4  # two rows per transfer: the split path too
        y = C.call(c.op, comm, x, algorithm=c.name, **kw)
        out[(c.op, c.name)] = None if y is None else y.numpy().copy()
    return out


def _expected(op: str, P: int, r: int):
    if op == "all_gather":
        return np.concatenate([_inputs(P, p, 1)[0] for p in range(P)])
    if op == "reduce_scatter":
        return sum(_inputs(P, p, P) for p in range(P))[r]
    if op == "alltoall":
        return np.concatenate([_inputs(P, p, P)[r] for p in range(P)])
    if op == "broadcast":
        return _inputs(P, (P - 1) // 2, 1)[0]
    if op == "reduce":
        return sum(_inputs(P, p, 1)[0] for p in range(P)) if r == (P - 1) // 2 else None
    if op == "sendrecv":
        return _inputs(P, (r - 1) % P, 1)[0]
    raise AssertionError(op)


@pytest.mark.parametrize("P", list(range(1, 10)) + [12, 13, 16, 17, 31, 33, 64])
def test_every_op_and_algorithm_exact_on_simcomm(P):
    from lab.comm.sim import simulate

    res = simulate(_every_op, P, strict=True)
    for r in range(P):
        for (op, algo), got in res[r].items():
            want = _expected(op, P, r)
            if want is None:
                assert got is None, (op, algo, P, r)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{op}/{algo} P={P} rank {r}")
