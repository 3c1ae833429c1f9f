"""Where did the time go? The per-rank split of a measured allreduce (wire, waiting, codec work, Python)
and its timeline, from the traces `--trace DIR` writes (lab.comm.timesplit; docs/design.md "Measuring").

`split_table` flattens the `split` of benchmark rows (one row per measured row and rank); `timeline_table`
reads the traces back as pieces (label, rank, kind, start, end) of each rank's median traced call;
`time_split` measures a small compressed allreduce live on 2 ranks for the Collectives page, and
`split_takeaway` says what the numbers on screen teach: how much of the wire the overlap hid, whether the
codec's work sits on the critical path, and why fp16 can beat an 8-bit codec on a CPU.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from lab.backend import Progress
from lab.comm.spans import KINDS, PYTHON
from lab.comm.timesplit import SPLIT_FIELDS, load_traces
from lab.data.results import reference_dir

#: what each range kind means, for legends and tooltips (the timeline's colours follow this order)
RANGE_KINDS: dict[str, str] = {
    "encode": "a codec payload made from fp32 values",
    "decode": "a payload decoded into fp32",
    "hop": "one fused decode-add-encode reduction hop",
    "add": "decoded values added into the sum",
    "send": "posting transfers, waiting for a send",
    "recv-wait": "blocked until a receive completes",
    PYTHON: "the algorithm's own Python, buffers, the interpreter",
}
assert tuple(RANGE_KINDS)[:len(KINDS)] == KINDS
#: the page's live measurement: 2 ranks, a small vector, fp32 then these codecs
LIVE_CODECS = ("fp16", "dynamic_tree")
LIVE_VALUES = 1 << 20


@dataclass
class TimeSplit:
    """`time_split`'s result. rows: the benchmark rows (seconds per call, speedup against fp32); split: one
    row per (codec, rank) (`split_table`); timeline: the pieces of each rank's median traced call
    (`timeline_table`); directory: where the per-rank Chrome traces are; takeaway: computed from split."""

    rows: pd.DataFrame
    split: pd.DataFrame
    timeline: pd.DataFrame
    directory: str
    takeaway: str = ""
    config: dict = field(default_factory=dict)


def split_table(rows: pd.DataFrame | Sequence[dict]) -> pd.DataFrame:
    """One row per (benchmark row, rank) from the rows' `split`: the row's algorithm, codec and size, the
    rank, its traced call's seconds and the split (wire_s, wait_s, codec_s, python_s, each range's
    seconds), split_sum_s (wire + wait + codec + python), of_call (split_sum_s / the call's wall time) and
    the shares of the call. Empty when no row carries a split (run without --trace)."""
    records = rows.to_dict(orient="records") if isinstance(rows, pd.DataFrame) else list(rows)
    out = []
    for r in records:
        split = r.get("split")
        if not isinstance(split, list):
            continue
        keys = {k: r[k] for k in ("algorithm", "codec", "P", "n_values", "nbytes") if k in r}
        keys["row_seconds"] = r.get("seconds")
        for s in split:
            d = {**keys, **s}
            d["split_sum_s"] = sum(s[k] for k in SPLIT_FIELDS)
            d["of_call"] = d["split_sum_s"] / s["seconds"] if s["seconds"] else None
            for k in SPLIT_FIELDS:
                d[k.replace("_s", "_share")] = s[k] / d["split_sum_s"] if d["split_sum_s"] else None
            out.append(d)
    return pd.DataFrame(out)


def timeline_table(directory: str | Path, labels: Sequence[str] | None = None) -> pd.DataFrame:
    """The pieces (label, rank, kind, start_s, end_s; seconds from the call's start on that rank) of each
    rank's median traced call in the traces in `directory`, for the calls named in `labels` (all when None)."""
    out = []
    for rank, data in sorted(load_traces(directory).items()):
        for c in data["paralab"]["calls"]:
            if not c.get("median") or (labels is not None and c["label"] not in labels):
                continue
            out += [{"label": c["label"], "rank": rank, "kind": k, "start_s": a, "end_s": b, "seconds": b - a}
                    for k, a, b in c["pieces"]]
    return pd.DataFrame(out, columns=["label", "rank", "kind", "start_s", "end_s", "seconds"])


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms"


def split_takeaway(split: pd.DataFrame) -> str:
    """What the split on screen teaches, from its numbers: per codec the slowest rank's call against the
    time its link needed, how much of the wire the overlap hid, whether codec work is on the critical
    path, and (with fp16 and an 8-bit codec) whether the bytes the 8-bit codec saves pay for its extra
    codec work on this CPU."""
    if split is None or not len(split):
        return "No split measured yet."
    lines = []
    per = {}
    for codec, g in split.groupby("codec", sort=False):
        r = g.loc[g["seconds"].idxmax()]  # the slowest rank: the call's time
        need = float(r.get("wire_need_s", r["wire_s"]))
        blocked = float(r["wire_s"] + r["wait_s"])
        hidden = max(0.0, need - blocked)
        per[codec] = r
        text = (f"{codec}: {_ms(r['seconds'])} on rank {int(r['rank'])}: codec work {_ms(r['codec_s'])} "
                f"({r['codec_share']:.0%}), on the wire {_ms(r['wire_s'])}, waiting {_ms(r['wait_s'])}, Python "
                f"{_ms(r['python_s'])}")
        if codec != "fp32" and r["codec_s"] > 0:
            if need and hidden >= 0.5 * need:
                text += (f"; the link needed {_ms(need)} for its bytes and the rank was blocked only {_ms(blocked)}: "
                         f"the overlap hid {hidden / need:.0%} of the wire under its codec work")
            elif r["codec_s"] > r["wire_s"]:
                text += (f"; its codec work ({_ms(r['codec_s'])}) exceeds its wire time ({_ms(r['wire_s'])}) and "
                         "runs while the link idles: the codec is on the critical path")
            else:
                text += "; the wire, not the codec, sets its time"
        lines.append(text + ".")
    eight = next((c for c in per if c not in ("fp32", "fp16", "bf16") and "fp16" in per), None)
    if eight is not None:
        a, b = per["fp16"], per[eight]
        saved = float(a["wire_s"] - b["wire_s"])
        extra = float(b["codec_s"] - a["codec_s"])
        diff = float(b["seconds"] - a["seconds"])
        within = abs(diff) < 0.1 * max(a["seconds"], b["seconds"])
        if within:
            verdict = f"{eight} and fp16 take the same time within noise (10 %)"
        elif diff > 0:
            verdict = f"fp16 beats {eight} by {_ms(diff)}"
        else:
            verdict = f"{eight} beats fp16 by {_ms(-diff)}"
        lines.append(f"{verdict}: {eight} saves {_ms(saved)} of wire with its smaller payload and spends "
                     f"{_ms(extra)} more in codec work than fp16's plain cast"
                     + (" — on this CPU the codec eats the gain." if extra > saved else
                        " — the bytes it saves pay for its codec work here."))
    return " ".join(lines)


def time_split(values: int = LIVE_VALUES, codecs: Sequence[str] = LIVE_CODECS, *, procs: int = 2,
               algorithm: str = "ring", link_rate: str | None = None, target_s: float = 0.2,
               directory: str | Path | None = None, progress: Progress | None = None) -> TimeSplit:
    """Measure one allreduce of `values` values on `procs` local processes with fp32 and each codec (same
    run), trace each rank (3 calls, the median one kept) and split its time; the traces go to `directory`
    (a fresh temporary one when None). Raises ValueError naming the allowed values on bad input."""
    from .benchmarks import compressed_benchmark

    if isinstance(values, bool) or not isinstance(values, int) or not 1 <= values <= 1 << 26:
        raise ValueError(f"values={values!r}; allowed: 1 to 64M values per rank")
    if isinstance(procs, bool) or not isinstance(procs, int) or not 2 <= procs <= 16:
        raise ValueError(f"procs={procs!r}; allowed: 2 to 16 processes")
    d = str(directory) if directory is not None else tempfile.mkdtemp(prefix="paralab-trace-")
    rows = compressed_benchmark(values, algorithm, list(codecs), procs=procs, link_rate=link_rate,
                                target_s=target_s, progress=progress, compare=[], trace=d)
    split = split_table(rows)
    timeline = with_codecs(timeline_table(d), split)
    config = {"values": values, "codecs": list(codecs), "procs": procs, "algorithm": algorithm,
              "link_rate": link_rate}
    return TimeSplit(rows.drop(columns=["split"], errors="ignore"), split, timeline, d, split_takeaway(split), config)


#: the shipped measurement the Collectives page shows before a live run (`paralab bench compressed --trace`)
COMMITTED = reference_dir() / "compressed-cpu-P2-shaped-1gbit-trace.json"


def with_codecs(timeline: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """`timeline` with a codec column: each piece's call label mapped to the codec of the split row."""
    label_of = dict(zip(split["label"], split["codec"])) if len(split) else {}
    out = timeline.copy()
    out.insert(1, "codec", out["label"].map(label_of))
    return out


def load_time_split(path: str | Path = COMMITTED) -> TimeSplit:
    """A `bench compressed --trace` result file (rows with `split`, and `timeline`) as a TimeSplit. Raises
    ValueError naming the file when it is missing or carries no split."""
    import json

    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read a result file ({e}); write one with paralab bench compressed --trace DIR "
                         "--out FILE")
    rows = pd.DataFrame(data.get("rows") or [])
    split = split_table(rows)
    if not len(split) or not data.get("timeline"):
        raise ValueError(f"{p}: no per-rank split in it; it was run without --trace")
    timeline = with_codecs(pd.DataFrame(data["timeline"]), split)
    config = dict(data.get("config", {}), device=data.get("device"), link_rate=data.get("link_rate"))
    return TimeSplit(rows.drop(columns=["split"], errors="ignore"), split, timeline,
                     str(data["config"].get("trace", "")), split_takeaway(split), config)


def trace_summary(directory: str | Path) -> pd.DataFrame:
    """The split of every median traced call in `directory` (for traces written by `--trace`): label, rank,
    seconds and each range's seconds; the same numbers the rows' `split` carried."""
    out: list[dict[str, Any]] = []
    for rank, data in sorted(load_traces(directory).items()):
        for c in data["paralab"]["calls"]:
            if c.get("median"):
                out.append({"label": c["label"], "rank": rank, "seconds": c["seconds"], "traced_s": c["traced_s"],
                            **c["parts"]})
    return pd.DataFrame(out)


__all__ = ["COMMITTED", "load_time_split", "with_codecs", "LIVE_CODECS", "LIVE_VALUES", "RANGE_KINDS", "TimeSplit", "split_table", "split_takeaway",
           "time_split", "timeline_table", "trace_summary"]
