"""A shortened soak (bench/soak.py): compressed ring allreduces on 4 real ranks; resident memory
settles (under 5 % growth after the warm-up) and the result does not drift."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))  # ranks import `soak` too

import soak  # noqa: E402


@pytest.mark.slow
def test_soak_memory_settles_and_result_does_not_drift():
    res = soak.soak(procs=4, n=1 << 20, iters=60, warm=20, timeout=120)
    assert res["all_last_equal_first"], res["ranks"]
    assert res["max_growth"] < soak.MAX_GROWTH, res["ranks"]
    assert len(res["ranks"]) == 4 and all(r["max_abs_diff"] == 0 for r in res["ranks"])


def test_soak_refuses_bad_sizes():
    with pytest.raises(ValueError, match="allowed: 1 <= warm < iters"):
        soak.soak(iters=10, warm=10)
    with pytest.raises(ValueError, match="allowed: >= 1 value"):
        soak.soak(n=0)
