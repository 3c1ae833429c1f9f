"""The step-through as tables (docs/design.md rule 3: what a page shows, the CLI prints): `paralab trace`.

One allreduce traced message by message by `step_through` (P = 2..8 SimComm ranks, any registered
algorithm, a codec re-encoding at every hop, Dettmers 2016 §3.2), then summed per directed link and
per rank against nccl-tests' 2(P−1)/P·n (docs/PERFORMANCE.md), and timed on a link for algbw / busbw.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab.experiments.step_through import StepThrough, busbw_table, step_through

#: default per-rank message size for the algbw / busbw rows (bytes; nccl-tests-sized)
TRACE_SIZE = 1 << 28


@dataclass
class TraceTables:
    """`trace_tables`' result. messages: one row per message (step, src, dst, values, bytes on the
    wire, fp32_bytes, carries: what its values hold, contributions, max_abs_error against the exact
    partial sum, rel_error = max_abs_error / max |exact|). links: one row per directed link that
    carried bytes (fp32 and wire totals, × n, against 2(P−1)/P·n). ranks: per rank sent and received.
    busbw: time, algbw and busbw on `link` at `size_bytes` per rank (fp32, and the codec's wire
    bytes). final: each rank's error after the allreduce. summary: the traffic summary plus the
    headline numbers; takeaway: one sentence computed from them."""

    trace: StepThrough
    messages: pd.DataFrame
    links: pd.DataFrame
    ranks: pd.DataFrame
    busbw: pd.DataFrame
    final: pd.DataFrame
    summary: dict = field(default_factory=dict)
    takeaway: str = ""


def _carries(row: pd.Series) -> str:
    if row.kind == "unknown":
        return "values of unknown provenance"
    what = {"own data": "own data of rank", "partial sum": "partial sum of ranks", "full sum": "full sum of ranks",
            "mixed": "mixed sums of ranks"}.get(row.kind, row.kind)
    return f"{what} {row.ranks}"


def trace_tables(algorithm: str = "ring", P: int = 4, n: int = 24, *, codec: str | None = None, seed: int = 0,
                 link: str = "nvlink4", size_bytes: float = TRACE_SIZE) -> TraceTables:
    """Trace one allreduce of n values per rank on P = 2..8 SimComm ranks (`step_through`) and tabulate
    it: every message, the bytes per directed link and per rank as multiples of n (one rank's fp32
    vector) beside nccl-tests' 2(P−1)/P·n, and algbw / busbw on `link` with `size_bytes` per rank
    (busbw = algbw · 2(P−1)/P, nccl-tests docs/PERFORMANCE.md). Raises ValueError naming the allowed
    values on bad input."""
    if codec in ("", "fp32"):
        codec = None
    tr = step_through(algorithm, P, n, codec=codec, seed=seed)
    bw = busbw_table(tr, link, size_bytes)
    nb, share = tr.nbytes, 2 * (tr.P - 1) / tr.P

    m = tr.messages.sort_values(["step", "src", "dst"], kind="stable").reset_index(drop=True)
    msgs = pd.DataFrame({
        "step": m.step, "src": m.src, "dst": m.dst, "values": m["values"], "bytes": m["bytes"],
        "fp32_bytes": m.fp32_bytes, "carries": m.apply(_carries, axis=1),
        "contributions": m.contributions_max, "max_abs_error": m.max_abs_error,
        "rel_error": m.max_abs_error / m.max_abs_value.where(m.max_abs_value > 0)})

    g = m.groupby(["src", "dst"], sort=True)
    links = g.agg(messages=("step", "size"), bytes=("bytes", "sum"), fp32_bytes=("fp32_bytes", "sum")).reset_index()
    links["x_n"] = links.fp32_bytes / nb
    links["nccl_share_x_n"] = share
    links["of_share"] = links.x_n / share

    fp, wire = tr.link_bytes(wire=False), tr.link_bytes(wire=True)
    ranks = pd.DataFrame({"rank": np.arange(tr.P), "sent_fp32_bytes": fp.sum(1), "received_fp32_bytes": fp.sum(0),
                          "sent_bytes": wire.sum(1), "received_bytes": wire.sum(0)})
    ranks["sent_x_n"] = ranks.sent_fp32_bytes / nb
    ranks["received_x_n"] = ranks.received_fp32_bytes / nb
    ranks["nccl_share_x_n"] = share

    s = dict(tr.summary)
    fp_row = bw.iloc[0]
    errs = msgs.max_abs_error.dropna()
    s.update({"algorithm": tr.algorithm, "P": tr.P, "values": tr.n, "codec": tr.codec, "seed": tr.seed,
              "link": str(fp_row.link), "link_GBps": float(fp_row.link_GBps), "size_bytes": float(size_bytes),
              "algbw_GBps": float(fp_row.algbw_GBps), "busbw_GBps": float(fp_row.busbw_GBps),
              "busbw_of_link": float(fp_row.busbw_of_link),
              "first_hop_max_abs_error": float(msgs[msgs.contributions == 1].max_abs_error.max())
              if (msgs.contributions == 1).any() else None,
              "max_message_error": float(errs.max()) if len(errs) else None,
              "final_max_abs_error": float(tr.final.max_abs_error.max()),
              "final_rel_error": float(tr.final.rel_error.max()),
              "exact_provenance": bool(tr.final.exact_provenance.all())})
    return TraceTables(tr, msgs, links, ranks, bw, tr.final.copy(), s, trace_takeaway(s))


def trace_takeaway(s: dict) -> str:
    """One sentence from a `trace_tables` summary: the messages, the busiest rank against 2(P−1)/P·n,
    what that means for busbw, and (with a codec) the error after the last hop."""
    share, x = s["nccl_share"], s["busiest_rank_x_n"]
    head = (f"{s['algorithm']} on {s['P']} ranks sends {s['messages']} messages in {s['steps']} steps; its busiest "
            f"rank moves {x:.3g}·n")
    if abs(x - share) < 1e-9:
        bw = (f", exactly the 2(P−1)/P·n = {share:.3g}·n busbw assumes, so busbw = algbw × {share:.3g} reaches "
              f"{s['busbw_of_link']:.0%} of {s['link']}'s {s['link_GBps']:g} GB/s")
    elif x > share:
        bw = (f", {x / share:.2g}× the 2(P−1)/P·n = {share:.3g}·n busbw assumes, so busbw reaches only "
              f"{s['busbw_of_link']:.0%} of {s['link']}'s {s['link_GBps']:g} GB/s")
    else:
        bw = f", less than the 2(P−1)/P·n = {share:.3g}·n busbw assumes (busbw factor {s['busbw_factor']:.3g})"
    tail = ""
    if s["codec"] != "fp32":
        first = s.get("first_hop_max_abs_error")
        tail = (f"; with {s['codec']} the result is off by at most {s['final_max_abs_error']:.3g}"
                + (f" ({s['final_max_abs_error'] / first:.2g}× the first hop's {first:.3g})" if first else ""))
    return head + bw + tail + "."


__all__ = ["TraceTables", "trace_tables", "trace_takeaway", "TRACE_SIZE"]
