"""The spread of a measured transfer (Dettmers 2016 Figure 2 between two processes): each size's median one-way
time with its 95 % interval, and where a codec and 32-bit are within noise of each other."""
from __future__ import annotations

import pandas as pd

from lab.comm import bench

from .spread import median_interval


def transfer_spread(rows: list[dict]) -> list[dict]:
    """`bench.transfer_rank`'s rows with the spread of their repeats in place of the repeats: seconds_lo..seconds_hi,
    each rank's 95 % interval of its median one-way time (`spread.median_interval`) averaged over the ranks as the
    median is, its coverage, the timed calls per rank, and the speedup interval over fp32 (`bench.speedups`)."""
    out = []
    for r in rows:
        r = dict(r)
        calls = r.pop("rank_calls_s", None)
        if calls:
            ends = [median_interval(c) for c in calls]
            r.update(seconds_lo=sum(e[0] for e in ends) / len(ends), seconds_hi=sum(e[1] for e in ends) / len(ends),
                     coverage=min(e[2] for e in ends), calls=min(len(c) for c in calls))
        out.append(r)
    return bench.speedups(out)


def within_noise(df: pd.DataFrame) -> dict[str, list[int]]:
    """Per codec of a measured transfer (`transfer_sweep`): the sizes where its speedup interval spans 1x, where the
    codec and 32-bit are within noise of each other (their time intervals overlap)."""
    out: dict[str, list[int]] = {}
    if "speedup_vs_fp32_lo" not in df:
        return out
    for codec, g in df[df["codec"] != "fp32"].groupby("codec", sort=False):
        out[codec] = [int(n) for n, lo, hi in zip(g["n_values"], g["speedup_vs_fp32_lo"], g["speedup_vs_fp32_hi"])
                      if lo <= 1 <= hi]
    return out
