"""A pipeline schedule on paper: torch's per-rank order of forwards and backwards laid out in time with unit
costs (`planned_timeline`), the bubble of a timeline (`bubble_of`), and the bubble fractions the papers publish
(`bubble_formula`)."""
from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from . import torch_pipelining_private as tp

#: unit times of a planned timeline: forward 1, full backward 2 (its input half 1, its weight half 1)
UNIT_TIMES = {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}


def default_stages_per_rank(schedule: str) -> int:
    """1 for single-stage schedules (GPipe, 1F1B), 2 for the multi-stage ones."""
    return 2 if tp.is_multi(schedule) else 1


#: the most pipeline ranks, stages per rank and micro-batches a schedule is built for (its lists grow with them)
MAX_RANKS, MAX_STAGES_PER_RANK, MAX_MICROBATCHES = 256, 64, 4096


def stages_per_rank(schedule: str, V: int | None = None) -> int:
    """V defaulted for `schedule`; ValueError, one line, for an unknown schedule or a V it does not take."""
    names = tp.schedule_names()
    if schedule not in names:
        raise ValueError(f"unknown --schedule {schedule!r}; torch's schedules: {', '.join(names)}")
    V = default_stages_per_rank(schedule) if V is None else V
    if isinstance(V, bool) or not isinstance(V, int) or not 1 <= V <= MAX_STAGES_PER_RANK:
        raise ValueError(f"--stages-per-rank {V!r}; allowed: an int in 1..{MAX_STAGES_PER_RANK}")
    if not tp.is_multi(schedule) and V != 1:
        raise ValueError(f"--schedule {schedule} runs one stage per rank; got --stages-per-rank {V}")
    if tp.is_multi(schedule) and V < 2:
        raise ValueError(f"--schedule {schedule} runs several stages per rank; got --stages-per-rank {V} "
                         "(allowed: >= 2)")
    return V


def check_schedule(schedule: str, P: int, M: int, V: int | None = None) -> int:
    """The stages per rank (V, defaulted); ValueError, one line, for an unknown schedule, a V it does not take or
    micro-batches it cannot run (torch's own rule, and the counts it allows)."""
    V = stages_per_rank(schedule, V)
    if isinstance(P, bool) or not isinstance(P, int) or not 1 <= P <= MAX_RANKS:
        raise ValueError(f"{P!r} pipeline ranks; allowed: an int in 1..{MAX_RANKS}")
    if isinstance(M, bool) or not isinstance(M, int) or not 1 <= M <= MAX_MICROBATCHES:
        raise ValueError(f"--microbatches {M!r}; allowed: an int in 1..{MAX_MICROBATCHES}")
    try:
        tp.check(schedule, P, M, V)
    except ValueError as e:
        if not any(_runs(schedule, P, m, V) for m in range(1, 8 * P * V + 1)):
            raise ValueError(f"--schedule {schedule} cannot run {P} pipeline ranks x {V} stages per rank; "
                             f"torch: {e}") from None
        ok = [m for m in range(1, 4 * P * V + 1) if _runs(schedule, P, m, V)][:8]
        raise ValueError(f"--schedule {schedule} on {P} pipeline ranks x {V} stages per rank cannot run "
                         f"--microbatches {M} (torch: {e}); allowed e.g.: {', '.join(map(str, ok))}") from None
    return V


def _runs(schedule: str, P: int, M: int, V: int) -> bool:
    try:
        tp.check(schedule, P, M, V)
        return True
    except ValueError:
        return False


def compute_order(schedule: str, P: int, M: int, V: int) -> list[list[tp.Act]]:
    """Each rank's forwards and backwards (F, I, W, B) in torch's order; DualPipeV's overlapped pairs unpacked."""
    program, _ = tp.program(schedule, P, M, V)
    out = []
    for acts in program:
        flat: list[tp.Act] = []
        for a in acts:
            flat.extend(a.sub if a.kind == tp.OVERLAP else (a,))
        out.append([a for a in flat if a.kind in tp.COMPUTE])
    return out


def planned_timeline(schedule: str, P: int, M: int, V: int | None = None,
                     times: Mapping[str, float] | None = None,
                     durations: Mapping[tuple[str, int, int], float] | None = None) -> pd.DataFrame:
    """torch's per-rank order of `schedule` on P ranks, M micro-batches and V stages per rank, laid out in time:
    each action starts when its rank is free and what it needs is done (a forward the previous stage's forward of
    its micro-batch, a backward (B or I) the next stage's backward and its own forward, a W its I), sends taking
    no time. times: seconds or units per kind (default `UNIT_TIMES`); durations: {(kind, stage, microbatch):
    seconds} of single actions, over `times` (a measured step replayed block by block). Columns rank, stage,
    microbatch, kind, start, end."""
    V = check_schedule(schedule, P, M, V)
    t = {**UNIT_TIMES, **(times or {})}
    order = compute_order(schedule, P, M, V)
    N = P * V
    done: dict[tuple[str, int, int], float] = {}
    pos, free, rows = [0] * P, [0.0] * P, []
    while any(pos[r] < len(order[r]) for r in range(P)):
        moved = False
        for r in range(P):
            while pos[r] < len(order[r]):
                a = order[r][pos[r]]
                need = _needs(a, N)
                if any(k not in done for k in need):
                    break
                start = max([free[r], *(done[k] for k in need)])
                end = start + float(durations.get((a.kind, a.stage, a.mb), t[a.kind]) if durations else t[a.kind])
                done[(a.kind, a.stage, a.mb)] = end
                if a.kind == "B":  # a full backward is its input half too
                    done[("I", a.stage, a.mb)] = end
                rows.append(dict(rank=r, stage=a.stage, microbatch=a.mb, kind=a.kind, start=start, end=end))
                free[r], pos[r], moved = end, pos[r] + 1, True
        if not moved:
            raise RuntimeError(f"{schedule}: the order torch gives never runs rank "
                               f"{min(r for r in range(P) if pos[r] < len(order[r]))}'s next action")
    return pd.DataFrame(rows, columns=["rank", "stage", "microbatch", "kind", "start", "end"])


def _needs(a: tp.Act, N: int) -> list[tuple[str, int, int]]:
    s, m = a.stage, a.mb
    if a.kind == "F":
        return [("F", s - 1, m)] if s > 0 else []
    if a.kind == "W":
        return [("I", s, m)]
    return [("F", s, m)] + ([("I", s + 1, m)] if s < N - 1 else [])


def bubble_of(rows: pd.DataFrame | Iterable[dict], start: str = "start", end: str = "end") -> float:
    """The idle fraction of a timeline: its makespan (first start to last end over all ranks) less each rank's
    compute (F, I, W, B), over the makespan, averaged over the ranks."""
    df = pd.DataFrame(rows)
    if df.empty:
        return float("nan")
    t0, t1 = df[start].min(), df[end].max()
    span = t1 - t0
    if span <= 0:
        return float("nan")
    comp = df[df.kind.isin(tp.COMPUTE)]
    busy = (comp[end] - comp[start]).groupby(comp["rank"]).sum().reindex(sorted(df["rank"].unique()), fill_value=0.0)
    return float(((span - busy) / span).mean())


def bubble_formula(schedule: str, P: int, M: int, V: int | None = None, t_f: float = 1.0, t_b: float = 2.0,
                   t_w: float | None = None) -> float:
    """The bubble fraction (idle over total time per rank) the papers give for `schedule` on P ranks, M
    micro-batches, V stages per rank; t_f, t_b: one stage's forward and full backward of one micro-batch, t_w the
    weight half of t_b (default t_b / 2; the input half t_i = t_b - t_w). Idle time b per rank, over b + work:
      gpipe, 1f1b   (P-1)/(M+P-1)              GPipe (Huang et al. 2019 §2.2), 1F1B (PipeDream-Flush,
                                               Narayanan et al. 2021 §2.2.1): same bubble, less memory
      interleaved1f1b, loopedbfs  (P-1)/(V·M+P-1)   Narayanan et al. 2021 §2.2.2 (interleaved); looped BFS
                                               (Lamy-Poirier 2023 §3) has the same idle time per rank
      interleavedzerobubble  b = (P-1)(t_f+t_i-t_w), work V·M(t_f+t_b)   ZB-H1 (Qi et al. 2024 §2.1), in chunks
      zbvzerobubble  b = max(0, (P-1)(t_f+t_i-2t_w)), work 2M(t_f+t_b)   ZB-V (Qi et al. 2024 §6): ZB-H2's
                                               bubble within 1F1B's memory; zero when t_f = t_i = t_w
      dualpipev  b = (P-1)(F&B + t_b - 3t_w), F&B = t_f + t_b run one after the other here, work 2M(t_f+t_b)
                                               DualPipe (DeepSeek-AI 2024, DeepSeek-V3 report §3.2.1, Table 2) with
                                               PP = 2P stages; DualPipeV is it cut in half onto P ranks
    """
    V = default_stages_per_rank(schedule) if V is None else V
    if schedule not in tp.schedule_names():
        raise ValueError(f"unknown schedule {schedule!r}; torch's schedules: {', '.join(tp.schedule_names())}")
    if P < 1 or M < 1 or V < 1 or t_f < 0 or t_b < 0:
        raise ValueError(f"P={P}, M={M}, V={V}, t_f={t_f}, t_b={t_b}: allowed P, M, V >= 1 and times >= 0")
    t_w = t_b / 2 if t_w is None else t_w
    t_i = t_b - t_w
    if schedule in ("gpipe", "1f1b"):
        return (P - 1) / (M + P - 1)
    if schedule in ("interleaved1f1b", "loopedbfs"):
        return (P - 1) / (V * M + P - 1)
    if schedule == "interleavedzerobubble":
        idle, work = (P - 1) * (t_f + t_i - t_w), V * M * (t_f + t_b)
    elif schedule == "zbvzerobubble":
        idle, work = (P - 1) * (t_f + t_i - 2 * t_w), 2 * M * (t_f + t_b)
    elif schedule == "dualpipev":
        idle, work = (P - 1) * ((t_f + t_b) + t_b - 3 * t_w), 2 * M * (t_f + t_b)
    else:
        raise ValueError(f"no published bubble for schedule {schedule!r}")
    idle = max(0.0, idle)
    return idle / (idle + work) if idle + work > 0 else 0.0


__all__ = ["UNIT_TIMES", "planned_timeline", "bubble_of", "bubble_formula", "check_schedule", "stages_per_rank",
           "compute_order", "default_stages_per_rank", "MAX_RANKS", "MAX_STAGES_PER_RANK", "MAX_MICROBATCHES"]
