"""Checks of the numbers a UI collects: the allowed range of an input, said in one message."""
from __future__ import annotations

import math


def check_range(label: str, value: float, lo: float | None = None, hi: float | None = None) -> float:
    """`value` if it is a finite number within [lo, hi] (either end may be open); else a
    ValueError naming the input and the allowed range."""
    def fmt(v: float) -> str:
        return f"{v:g}"

    allowed = (f"{fmt(lo)}..{fmt(hi)}" if lo is not None and hi is not None else
               f">= {fmt(lo)}" if lo is not None else f"<= {fmt(hi)}" if hi is not None else "a finite number")
    try:
        ok = math.isfinite(float(value)) and (lo is None or value >= lo) and (hi is None or value <= hi)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{label} = {value!r} is out of range; allowed: {allowed}")
    return value


def check_backend(name: str) -> str:
    """`name` if it is a torch.distributed backend the lab runs (gloo, nccl); else a ValueError saying
    which are."""
    from lab.comm.dist import check_backend as check

    check(name)
    return name


__all__ = ["check_range", "check_backend"]
