"""Where a rank's time goes: per-rank Chrome/Perfetto traces and the split of a measured call (docs/design.md "Measuring").

A `Tracer` records a few calls of an operation under torch.profiler (CPU activity) with the comm code's
named ranges switched on (`lab.comm.spans`): encode, decode, hop, add, send, recv-wait, inside one
outer range per call. Each call's time is then cut into non-overlapping pieces, each owned by the
innermost range that covers it; time inside the call but in no range is "python" (the algorithm's own
control flow, buffer handling, the interpreter), added to the trace as ranges of that name.

The split of a call (seconds, summing to the call's traced time):
  codec_s   encode + decode + hop + add (the codec's work, and the fp32 adds of a raw wire)
  wire_s    of the time blocked in send / recv-wait, the part the link needs for this rank's traffic:
            min(blocked, messages·L + bytes/B), L and B measured in the same run by a ring shift
            of every rank's messages at once (`wire_cost`)
  wait_s    the rest of the blocked time: waiting for a peer that was still busy (its codec work or
            Python on the critical path), or for a link shared with other ranks
  python_s  the call's time outside every range
Usable by any multi-process measurement: `Tracer.measure(label, op)` (collective: every rank calls it); a
training loop records steps with `Tracer.step(label)` and `span("forward" | "backward" | "optimizer")` inside,
and `Tracer.step_split()` splits them into compute, codec, comm and Python (lab/train/ddp.py does).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from .base import Comm
from .spans import KINDS, PYTHON, STEP_KINDS, set_enabled

#: the codec's work among the ranges
CODEC_KINDS = ("encode", "decode", "hop", "add")
#: the ranges in which a rank is blocked on a transfer
BLOCKED_KINDS = ("send", "recv-wait")
#: the fields of a split that add up to the traced time
SPLIT_FIELDS = ("wire_s", "wait_s", "codec_s", "python_s")
#: the same for a training step (`Tracer.step_split`)
STEP_SPLIT_FIELDS = ("compute_s", "codec_s", "comm_s", "python_s")


def trace_path(directory: str | Path, rank: int) -> Path:
    """Where rank `rank`'s trace goes: DIR/rank<r>.trace.json (Chrome trace JSON; open in ui.perfetto.dev)."""
    return Path(directory) / f"rank{rank}.trace.json"


def flatten(start: float, end: float, children: list[dict], outside: str = PYTHON) -> list[tuple[str, float, float]]:
    """[start, end) cut into pieces (kind, a, b), each owned by the innermost range of `children`
    (Chrome 'X' events: name, ts, dur, same units) covering it, `outside` where none does;
    neighbours of one kind merged. Ranges nest (record_function), so the innermost is the latest started."""
    spans = [(c["ts"], c["ts"] + c["dur"], c["name"]) for c in children if c["dur"] > 0]
    points = sorted({start, end, *(min(max(a, start), end) for a, _, _ in spans),
                     *(min(max(b, start), end) for _, b, _ in spans)})
    out: list[tuple[str, float, float]] = []
    for a, b in zip(points, points[1:]):
        if b <= a:
            continue
        mid, owner, owner_start = (a + b) / 2, outside, None
        for s, e, name in spans:
            if s <= mid < e and (owner_start is None or s >= owner_start):
                owner, owner_start = name, s
        if out and out[-1][0] == owner and out[-1][2] == a:
            out[-1] = (owner, out[-1][1], b)
        else:
            out.append((owner, a, b))
    return out


def split_of(pieces: list[tuple[str, float, float]], seconds_per_unit: float = 1e-6) -> dict[str, float]:
    """Seconds per kind (encode_s, decode_s, hop_s, add_s, send_s, recv_wait_s, python_s) of flattened pieces."""
    out = {f"{k.replace('-', '_')}_s": 0.0 for k in (*KINDS, PYTHON)}  # (a step's ranges added when present)
    for kind, a, b in pieces:
        key = f"{kind.replace('-', '_')}_s"
        out[key] = out.get(key, 0.0) + (b - a) * seconds_per_unit
    return out


def wire_cost(comm: Comm, big_bytes: int, repeats: int = 5) -> tuple[float, float]:
    """(L seconds per message, B bytes/s) of this machine's links with every rank sending at once: a
    ring shift (each rank sends to its right neighbour, receives from its left) of 8 bytes and of
    big_bytes (ranks agree on rank 0's), the fastest of `repeats` each (what the link needs; a loaded
    host only adds to it). Collective."""
    P, r = comm.size, comm.rank
    big = max(4096, int(comm.allgather_object(int(big_bytes))[0]))

    def shift(nbytes: int) -> float:
        out = torch.zeros(nbytes, dtype=torch.uint8, device=comm.device)
        got = torch.empty_like(out)
        times = []
        for _ in range(repeats):
            comm.barrier()
            t0 = time.perf_counter()
            comm.exchange([(out, (r + 1) % P)], [(got, (r - 1) % P)]).wait()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_small, t_big = shift(8), shift(big)
    if t_big > t_small:
        B = (big - 8) / (t_big - t_small)
        return max(0.0, t_small - 8 / B), B
    return 0.0, big / max(t_big, 1e-9)


class Tracer:
    """One rank's trace: calls recorded under torch.profiler with the named ranges on, the split of
    each (module docstring), written to `directory` (None: split only, no file) by `save()`."""

    def __init__(self, comm: Comm, directory: str | Path | None = None) -> None:
        self.comm, self.directory = comm, None if directory is None else Path(directory)
        self.events: list[dict] = []  # Chrome trace events of every recording, in order
        self.meta: dict = {}
        self.calls: list[dict] = []  # per recorded call: label, seconds, bytes, messages, split, pieces
        self._pending: list[dict] = []

    @contextmanager
    def recording(self) -> Iterator["Tracer"]:
        """Profile what runs inside (torch.profiler, CPU), ranges on; the calls made with `call` are split."""
        from torch.profiler import ProfilerActivity, profile

        self._pending = []
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.start()
        was = set_enabled(True)
        try:
            yield self
        finally:
            set_enabled(was)
            prof.stop()
            fd, tmp = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            try:
                prof.export_chrome_trace(tmp)
                data = json.loads(Path(tmp).read_text())
            finally:
                os.unlink(tmp)
            events = data.pop("traceEvents", [])
            if not self.meta:
                self.meta = data
                self.events += [e for e in events if e.get("ph") == "M"]
            self._attach([e for e in events if e.get("ph") == "X"])

    @contextmanager
    def call(self, label: str) -> Iterator[None]:
        """One measured call inside `recording`: the outer range `label`, its wall time (perf_counter)
        and the bytes and messages this rank sent in it."""
        from torch.autograd.profiler import record_function

        b0, m0 = self.comm.bytes_sent, self.comm.messages_sent
        t0 = time.perf_counter()
        with record_function(label):
            yield
        if self.comm.device.type == "cuda":
            torch.cuda.synchronize(self.comm.device)
        self._pending.append({"label": label, "seconds": time.perf_counter() - t0,
                              "bytes_sent": self.comm.bytes_sent - b0, "messages_sent": self.comm.messages_sent - m0})

    def _attach(self, events: list[dict]) -> None:
        """Match the recorded calls to their outer ranges (in order, by name) and split each."""
        used: set[int] = set()
        for c in self._pending:
            outer = next((i for i, e in enumerate(events) if i not in used and e.get("name") == c["label"]
                          and e.get("cat") == "user_annotation"), None)
            if outer is None:
                continue
            used.add(outer)
            o = events[outer]
            start, end = o["ts"], o["ts"] + o["dur"]
            kids = [e for e in events if e.get("name") in (*KINDS, *STEP_KINDS) and e.get("tid") == o.get("tid")
                    and e["ts"] >= start - 1e-3 and e["ts"] + e["dur"] <= end + 1e-3]
            pieces = flatten(start, end, kids)
            self.events += [{"name": PYTHON, "cat": "paralab", "ph": "X", "ts": a, "dur": b - a, "pid": o.get("pid"),
                             "tid": o.get("tid"), "args": {"call": c["label"]}} for k, a, b in pieces if k == PYTHON]
            c.update(traced_s=o["dur"] * 1e-6, parts=split_of(pieces),
                     pieces=[(k, (a - start) * 1e-6, (b - start) * 1e-6) for k, a, b in pieces])
            self.calls.append(c)
        self.events += events
        self._pending = []

    def measure(self, label: str, op: Callable[[], Any], repeats: int = 3) -> dict:
        """Record `repeats` calls of `op` (each after a barrier) under the profiler and return this rank's
        split of the median one: rank, seconds (its wall time), traced_s, wire_s, wait_s, codec_s,
        python_s (these four add up to traced_s), the seconds per range, wire_need_s (what the link
        needs for this rank's messages: more than wire_s when overlap hid part of it), bytes and messages
        sent, and the link's measured L and B. Collective: every rank calls it with the same label."""
        comm = self.comm
        comm.reset_counters()
        op()  # untraced: the message sizes the wire is calibrated at
        per_msg = comm.bytes_sent // max(1, comm.messages_sent)
        L, B = wire_cost(comm, per_msg) if comm.size > 1 else (0.0, float("inf"))
        first = len(self.calls)
        with self.recording():
            for _ in range(repeats):
                comm.barrier()
                with self.call(label):
                    op()
        mine = self.calls[first:]
        if not mine:
            raise RuntimeError(f"rank {comm.rank}: the profiler recorded no range {label!r}")
        c = sorted(mine, key=lambda k: k["seconds"])[len(mine) // 2]
        c["median"] = True
        p = c["parts"]
        codec = sum(p[f"{k}_s"] for k in CODEC_KINDS)
        blocked = p["send_s"] + p["recv_wait_s"]
        need = c["messages_sent"] * L + c["bytes_sent"] / B
        wire = min(blocked, need)
        return {"rank": comm.rank, "label": label, "seconds": c["seconds"], "traced_s": c["traced_s"],
                "wire_s": wire, "wait_s": blocked - wire, "codec_s": codec, "python_s": p[f"{PYTHON}_s"],
                **{k: v for k, v in p.items() if k != f"{PYTHON}_s"},
                "wire_need_s": need, "bytes_sent": c["bytes_sent"], "messages_sent": c["messages_sent"],
                "link_latency_s": L, "link_Bps": B if B != float("inf") else None}

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        """One training step recorded on its own (profiler started and stopped around it, outside its
        time); mark its forward, backward and optimizer with `span` inside. Split it with `step_split`."""
        with self.recording(), self.call(label):
            yield

    def step_split(self) -> dict | None:
        """This rank's split of its median recorded step (None before any): rank, label, seconds, traced_s,
        compute_s (forward + backward + optimizer, outside the ranges nested in them; DDP's wait for its
        bucket allreduces is inside backward), codec_s, comm_s (send + recv-wait seen from Python),
        python_s: the four add up to traced_s; each range's seconds too."""
        steps = [c for c in self.calls if any(f"{k}_s" in c["parts"] for k in STEP_KINDS)] or self.calls
        if not steps:
            return None
        for c in steps:
            c.pop("median", None)
        c = sorted(steps, key=lambda k: k["seconds"])[len(steps) // 2]
        c["median"] = True
        p = c["parts"]
        return {"rank": self.comm.rank, "label": c["label"], "seconds": c["seconds"], "traced_s": c["traced_s"],
                "compute_s": sum(p.get(f"{k}_s", 0.0) for k in STEP_KINDS),
                "codec_s": sum(p[f"{k}_s"] for k in CODEC_KINDS), "comm_s": p["send_s"] + p["recv_wait_s"],
                "python_s": p[f"{PYTHON}_s"], **{k: v for k, v in p.items() if k != f"{PYTHON}_s"}}

    def save(self) -> Path | None:
        """Write DIR/rank<r>.trace.json: the Chrome trace (every recording's events, the derived python
        ranges) plus a "paralab" block with each call's split and pieces. None without a directory."""
        if self.directory is None:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        path = trace_path(self.directory, self.comm.rank)
        calls = [{k: v for k, v in c.items()} for c in self.calls]
        data = {**self.meta, "traceEvents": self.events,
                "paralab": {"rank": self.comm.rank, "size": self.comm.size, "ranges": [*KINDS, PYTHON],
                            "calls": calls}}
        path.write_text(json.dumps(data))
        return path


def load_traces(directory: str | Path) -> dict[int, dict]:
    """Every rank's trace in `directory` (written by `Tracer.save`), by rank. Raises ValueError naming
    the directory when it holds none."""
    d = Path(directory)
    found = sorted(d.glob("rank*.trace.json")) if d.is_dir() else []
    if not found:
        raise ValueError(f"no traces (rank<r>.trace.json) in {d}; write some with --trace {d}")
    out = {}
    for f in found:
        data = json.loads(f.read_text())
        out[int(data["paralab"]["rank"])] = data
    return out


__all__ = ["BLOCKED_KINDS", "CODEC_KINDS", "SPLIT_FIELDS", "STEP_SPLIT_FIELDS", "Tracer", "flatten", "load_traces", "split_of",
           "trace_path", "wire_cost"]
