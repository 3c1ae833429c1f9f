"""The one place that reads `torch.distributed.pipelining`'s private parts: its schedules' names, their rules
on micro-batches and stages, and each rank's list of actions (forward, backward input / weight / full,
and the sends and receives between stages), so that the lab runs torch's own schedules with its own executor.

Multi-stage schedules (interleaved 1F1B, looped BFS, the zero-bubble ones, DualPipeV) carry their per-rank
program with communication (`pipeline_order_with_comms`, what torch's `_PipelineScheduleRuntime` runs). The
single-stage ones (GPipe, 1F1B) run their own loop (`_step_microbatches`); their list is recorded from that
loop run over a stand-in stage, so it is the order torch really runs (torch 2.13's `Schedule1F1B.pipeline_order`
skips the last rank's first micro-batch, and its visualizer cannot add comms to single-stage schedules).
Importing torch.distributed.pipelining takes about a second, so it is imported on first use, not here.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

#: action kinds: compute, then communication (the stage of a SEND/RECV is the one that sends or receives)
COMPUTE = ("F", "I", "W", "B")
COMMS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
OVERLAP = "OVERLAP_F_B"  # DualPipeV: a forward and a backward of two stages run together (`sub` holds them)


class Act(NamedTuple):
    """One action of a rank's program: `kind` (COMPUTE, COMMS or OVERLAP), the stage it is for, the micro-batch
    (None for OVERLAP) and, for OVERLAP, the actions it runs."""

    kind: str
    stage: int
    mb: int | None = None
    sub: tuple["Act", ...] = ()


def _schedules() -> Any:
    from torch.distributed.pipelining import schedules

    return schedules


@functools.cache
def schedule_classes() -> dict[str, type]:
    """{lower-case name: class} of every schedule torch ships (its `Schedule*` classes that its
    `get_schedule_class` resolves by that name), in the order torch defines them."""
    s = _schedules()
    out = {}
    for attr, cls in list(vars(s).items()):
        if attr.startswith("Schedule") and isinstance(cls, type) and issubclass(cls, s._PipelineSchedule):
            name = attr[len("Schedule"):]
            try:
                if s.get_schedule_class(name) is cls:
                    out[name.lower()] = cls
            except ValueError:
                continue
    return out


def schedule_names() -> list[str]:
    """The lower-case names of torch's schedules, in the order torch defines them (GPipe first)."""
    return list(schedule_classes())


def is_multi(name: str) -> bool:
    """Does schedule `name` run several stages per rank (PipelineScheduleMulti)?"""
    return issubclass(schedule_classes()[name], _schedules().PipelineScheduleMulti)


class _StandIn:
    """A stage with what a schedule's constructor reads (its rank and group, stage count and module); torch's
    visualizer passes a `mock.create_autospec(PipelineStage)` instead: the same programs and refusals (for every
    schedule, P = 1..4, M = 1..9, V = 1..3), at 35x the cost."""

    def __init__(self, P: int, n_stages: int, index: int = 0) -> None:
        self.group_rank, self.group_size, self.submod, self.num_stages, self.stage_index = 0, P, None, n_stages, index


def build(name: str, P: int, M: int, V: int) -> Any:
    """torch's schedule object for P ranks, M micro-batches and V stages per rank over stand-in stages; its
    own checks raise ValueError / AssertionError for a combination it does not run."""
    cls = schedule_classes()[name]
    if not is_multi(name):
        return cls(_StandIn(P, P), M, loss_fn=lambda out, target: None)
    st = _StandIn(P, P * V)
    return cls([st] * V, M)


def check(name: str, P: int, M: int, V: int) -> None:
    """ValueError with torch's own words if its schedule `name` cannot run P ranks x V stages on M micro-batches."""
    refusal = _refusal(name, P, M, V)
    if refusal:
        raise ValueError(refusal)


@functools.cache
def _refusal(name: str, P: int, M: int, V: int) -> str | None:
    try:
        build(name, P, M, V)
    except (ValueError, AssertionError, RuntimeError) as e:
        return " ".join(str(e).split())
    return None


def _act(a: Any) -> Act:
    kind = a.computation_type.value
    if kind == OVERLAP:
        return Act(kind, _act(a.sub_actions[0]).stage, None, tuple(_act(s) for s in a.sub_actions))
    return Act(kind, a.stage_index, a.microbatch_index)


@functools.cache
def program(name: str, P: int, M: int, V: int) -> tuple[tuple[tuple[Act, ...], ...], tuple[int, ...]]:
    """(each rank's actions in torch's order, the rank of each stage) for schedule `name` on P ranks, M
    micro-batches, V stages per rank. FSDP's UNSHARD / RESHARD / REDUCE_GRAD markers are left out."""
    if not is_multi(name):
        return tuple(_record_single(name, P, M, r) for r in range(P)), tuple(range(P))
    sched = build(name, P, M, V)
    keep = (*COMPUTE, *COMMS, OVERLAP)
    ranks = tuple(tuple(_act(a) for a in sched.pipeline_order_with_comms[r] if a is not None
                        and a.computation_type.value in keep) for r in range(P))
    mapping = sched.stage_index_to_group_rank
    return ranks, tuple(int(mapping[s]) for s in range(P * V))


def _record_single(name: str, P: int, M: int, rank: int) -> tuple[Act, ...]:
    """The actions torch's single-stage loop (`_step_microbatches`) runs on `rank`, recorded over a stand-in
    stage: each posted send / receive in the order posted, each forward and backward in the order run."""
    from unittest import mock

    s = _schedules()
    log: list[Act] = []
    first, last = rank == 0, rank == P - 1

    class Stage:
        stage_index, num_stages, is_first, is_last, has_backward = rank, P, first, last, True
        group_rank, group_size, submod = rank, P, None

        def get_fwd_recv_ops(self, i: int) -> list:
            return [] if first else [Act("RECV_F", rank, i)]

        def get_fwd_send_ops(self, i: int) -> list:
            return [] if last else [Act("SEND_F", rank, i)]

        def get_bwd_recv_ops(self, i: int) -> list:
            return [] if last else [Act("RECV_B", rank, i)]

        def get_bwd_send_ops(self, i: int) -> list:
            return [] if first else [Act("SEND_B", rank, i)]

        def forward_one_chunk(self, i: int, *args: Any, **kwargs: Any) -> None:
            log.append(Act("F", rank, i))

        def backward_one_chunk(self, i: int, *args: Any, full_backward: bool = True, **kwargs: Any) -> None:
            log.append(Act("B" if full_backward else "I", rank, i))

        def __getattr__(self, attr: str) -> Any:  # clear_runtime_states, perform_reduce_grad, ...
            return lambda *a, **k: None

    sched = s.get_schedule_class(name)(Stage(), M, loss_fn=lambda out, target: None)
    sched._stage_forward_initialized = sched._stage_backward_initialized = True

    def post(ops: list, desc: str | None = None) -> list:
        log.extend(ops)
        return []

    def post_sorted(ops: list, desc: str | None = None) -> dict:
        log.extend(ops)
        return {}

    with mock.patch.object(s, "_batch_p2p", post), mock.patch.object(s, "_sorted_batch_p2p", post_sorted), \
            mock.patch.object(s, "_wait_batch_p2p", lambda work: None):
        sched._step_microbatches([()] * M, [{}] * M, [None] * M)
    return tuple(log)


def backward_input(outputs: list, output_grads: list | None, inputs: list, params: Any) -> tuple[tuple, Any]:
    """torch's input half of a stage's backward (`stage_backward_input`, the zero-bubble B): the gradients of
    the stage's inputs, and the state its weight half needs."""
    from torch.distributed.pipelining._backward import stage_backward_input

    return stage_backward_input(outputs, output_grads, inputs, params)


def detachable(y: Any) -> Any:
    """y, or a copy of it when it is a view: torch's input half detaches a stage's output in place, which a
    view forbids."""
    return y.clone() if y._is_view() else y


def backward_weight(params: Any, state: Any) -> None:
    """torch's weight half (`stage_backward_weight`, the zero-bubble W): accumulates the parameters' .grad."""
    from torch.distributed.pipelining._backward import stage_backward_weight

    stage_backward_weight(params, state)


__all__ = ["Act", "COMPUTE", "COMMS", "OVERLAP", "schedule_classes", "schedule_names", "is_multi", "build", "check",
           "program", "backward_input", "backward_weight", "detachable"]
