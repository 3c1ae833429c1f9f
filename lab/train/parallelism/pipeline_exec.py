"""One rank's part of a pipeline step: torch's list of actions for this rank (`torch_pipelining_private.program`)
run over the lab's `Comm`, each send through a `Wire` (so a codec compresses what stages send each other).

  F       forward of a stage on a micro-batch (its input and output kept for the backward)
  B       full backward: the gradients of the stage's input and of its parameters (accumulated)
  I / W   the backward split in two (zero-bubble schedules, Qi et al. 2024 §2): I the input's gradient only,
          W the parameters' later, both torch's own `stage_backward_input` / `stage_backward_weight`
  SEND_F / RECV_F   a stage's output to the next stage's rank (activations)
  SEND_B / RECV_B   the gradient of a stage's input to the previous stage's rank
Receives are posted where the list puts them and waited for by the action that needs them (after the ones
posted before them from the same rank: a pair's messages match receives in posting order, as on Gloo); sends
are waited for at the end of the step. Stages on the same rank hand each other tensors directly. Every action is timed
(time.perf_counter, one clock for the processes of a host); a receive's row is the wait for it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch import nn

from lab.comm.spans import span

from . import torch_pipelining_private as tp
from .wire import Wire


@dataclass
class StepRecord:
    """What one step did on this rank: `loss` (the sum of the last stage's micro-batch losses, None without
    it), `rows` (one per action: stage, microbatch, kind, start, end in perf_counter seconds, bytes on the
    wire), `held` (per stage, the most micro-batches whose activations were kept at once) and `saved`
    (per stage, the largest bytes of activations one micro-batch kept for its backward)."""

    loss: float | None = None
    rows: list[dict] = field(default_factory=list)
    held: dict[int, int] = field(default_factory=dict)
    saved: dict[int, int] = field(default_factory=dict)


class StageExecutor:
    """Runs this rank's actions of a pipeline schedule.

    comm: the pipeline's communicator (rank r of it runs `program[r]`); wire: the Wire on it;
    modules: {stage: module} of the stages this rank holds; stage_to_rank: the rank of every stage;
    shapes: each stage's output shape for one sample (what it sends, without the batch dimension);
    actions: this rank's list (`tp.program`); loss_fn(output, target) -> the micro-batch's loss (scaled so
    that the micro-batches' losses add up to the batch's)."""

    def __init__(self, comm: Any, wire: Wire, modules: dict[int, nn.Module], stage_to_rank: Sequence[int],
                 shapes: Sequence[tuple[int, ...]], actions: Sequence[tp.Act],
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        self.comm, self.wire, self.modules = comm, wire, modules
        self.stage_to_rank, self.shapes = list(stage_to_rank), list(shapes)
        self.actions, self.loss_fn = actions, loss_fn
        self.last = len(self.stage_to_rank) - 1
        self.params = {s: list(m.parameters()) for s, m in modules.items()}
        self._param_ptrs = {p.untyped_storage().data_ptr() for ps in self.params.values() for p in ps}

    def run(self, xs: Sequence[torch.Tensor] | None, ys: Sequence[torch.Tensor] | None,
            sizes: Sequence[int]) -> StepRecord:
        """One step over micro-batches of `sizes` samples: xs (this rank holds stage 0) and ys (it holds the last
        stage) the micro-batches' inputs and targets. Parameter gradients accumulate in .grad."""
        self.xs, self.ys, self.sizes = xs, ys, list(sizes)
        self.rec = StepRecord()
        self.inp: dict[tuple[int, int], torch.Tensor] = {}
        self.out: dict[tuple[int, int], torch.Tensor] = {}
        self.grad_out: dict[tuple[int, int], torch.Tensor] = {}  # gradient of a stage's output, ready
        self.grad_in: dict[tuple[int, int], torch.Tensor] = {}   # gradient of a stage's input, to send
        self.pending: dict[tuple[str, int, int], tuple[Any, Callable[[], torch.Tensor], int, int]] = {}
        self.posted: dict[int, list[Any]] = {}  # each peer's receives in the order posted
        self.weight_state: dict[tuple[int, int], Any] = {}
        self.live = {s: 0 for s in self.modules}
        self.rec.held = {s: 0 for s in self.modules}
        self.rec.saved = {s: 0 for s in self.modules}
        self.sends: list[Any] = []
        self.losses: list[torch.Tensor] = []
        for a in self.actions:
            for b in (a.sub if a.kind == tp.OVERLAP else (a,)):
                self._do(b)
        for w in self.sends:
            w.wait()
        if self.pending:
            raise RuntimeError(f"rank {self.comm.rank}: receives never used: {sorted(self.pending)}")
        self.rec.loss = float(sum(float(v) for v in self.losses)) if self.losses else None
        return self.rec

    # -- the actions
    def _do(self, a: tp.Act) -> None:
        s, m = a.stage, a.mb
        if a.kind in ("RECV_F", "RECV_B"):
            fwd = a.kind == "RECV_F"
            shape = (self.sizes[m], *self.shapes[s - 1 if fwd else s])
            src = self.stage_to_rank[s - 1 if fwd else s + 1]
            work, get = self.wire.irecv(shape, src)
            self.posted.setdefault(src, []).append(work)
            self.pending[("F" if fwd else "B", s, m)] = (work, get, _wire_bytes(self.wire, shape), src)
            return
        t0 = time.perf_counter()
        nbytes = 0
        if a.kind == "SEND_F":
            work = self.wire.isend(self.out[(s, m)], self.stage_to_rank[s + 1])
            nbytes = _payload(work)
            self.sends.append(work)
        elif a.kind == "SEND_B":
            work = self.wire.isend(self.grad_in.pop((s, m)), self.stage_to_rank[s - 1])
            nbytes = _payload(work)
            self.sends.append(work)
        elif a.kind == "F":
            self._forward(s, m)
            t0 = self._t_compute
        elif a.kind in ("B", "I", "W"):
            self._backward(a.kind, s, m)
            t0 = self._t_compute
        else:
            raise RuntimeError(f"unknown pipeline action {a}")
        self._row(a.kind, s, m, t0, time.perf_counter(), nbytes)

    def _row(self, kind: str, s: int, m: int | None, t0: float, t1: float, nbytes: int = 0) -> None:
        self.rec.rows.append(dict(stage=s, microbatch=m, kind=kind, start=t0, end=t1, bytes=nbytes))

    def _received(self, kind: str, s: int, m: int) -> torch.Tensor:
        """The tensor of a posted receive, waited for and decoded now (its row: the wait). The receives posted
        before it from the same peer are waited for first: messages of a pair match receives in posting order."""
        work, get, nbytes, src = self.pending.pop((kind, s, m))
        t0 = time.perf_counter()
        queue = self.posted[src]
        while queue:
            earlier = queue.pop(0)
            earlier.wait()
            if earlier is work:
                break
        x = get()
        self._row("RECV_F" if kind == "F" else "RECV_B", s, m, t0, time.perf_counter(), nbytes)
        return x

    def _forward(self, s: int, m: int) -> None:
        if s == 0:
            x = self.xs[m]
        elif ("F", s, m) in self.pending:
            x = self._received("F", s, m).requires_grad_()
        else:  # the previous stage is on this rank
            x = self.out[(s - 1, m)].detach().requires_grad_()
        saved: dict[tuple, int] = {}  # each tensor kept for the backward once (a view of a batch: its own bytes)

        def pack(t: torch.Tensor) -> torch.Tensor:
            if t.untyped_storage().data_ptr() not in self._param_ptrs:
                saved[_key(t)] = t.numel() * t.element_size()
            return t

        self._t_compute = time.perf_counter()
        with span("forward"), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = self.modules[s](x)
            y = tp.detachable(y)
            if s == self.last:
                loss = self.loss_fn(y, self.ys[m])
                self.losses.append(loss.detach())
                y = loss
        self.inp[(s, m)], self.out[(s, m)] = x, y
        saved.setdefault(_key(y), y.numel() * y.element_size())
        self.rec.saved[s] = max(self.rec.saved[s], sum(saved.values()))
        self.live[s] += 1
        self.rec.held[s] = max(self.rec.held[s], self.live[s])

    def _grad_of_output(self, s: int, m: int) -> torch.Tensor | None:
        if s == self.last:
            return None  # the loss
        if ("B", s, m) in self.pending:
            return self._received("B", s, m)
        return self.grad_out.pop((s, m))

    def _backward(self, kind: str, s: int, m: int) -> None:
        if kind == "W":
            self._t_compute = time.perf_counter()
            with span("backward"):
                state = self.weight_state.pop((s, m))
                if s == 0:  # the first stage's input has no gradient: its weight half is the whole backward
                    torch.autograd.backward(self.out.pop((s, m)), state)
                else:
                    tp.backward_weight(iter(self.params[s]), state)
                    self.out.pop((s, m), None)
            self.inp.pop((s, m), None)
            self.live[s] -= 1
            return
        g = self._grad_of_output(s, m)
        self._t_compute = time.perf_counter()
        x, y = self.inp[(s, m)], self.out[(s, m)]
        with span("backward"):
            if kind == "B":
                torch.autograd.backward(y, g)
                gin = x.grad if s > 0 else None
                del self.inp[(s, m)], self.out[(s, m)]
                self.live[s] -= 1
            elif s == 0:  # I of the first stage: nothing to compute, W does it all
                self.weight_state[(s, m)] = g
                return
            else:
                dinputs, state = tp.backward_input([y], None if g is None else [g], [x], iter(self.params[s]))
                gin = dinputs[0]
                self.weight_state[(s, m)] = state
        if s > 0:
            if gin is None:
                gin = torch.zeros_like(x)
            if self.stage_to_rank[s - 1] == self.comm.rank:
                self.grad_out[(s - 1, m)] = gin
            else:
                self.grad_in[(s, m)] = gin


def _key(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)


def _wire_bytes(wire: Wire, shape: tuple[int, ...]) -> int:
    """Bytes a tensor of `shape` takes on `wire` (its codec's wire format, or fp32)."""
    n = 1
    for d in shape:
        n *= int(d)
    if wire.codec is None or not n:
        return 4 * n
    from lab.codecs.wire import WireFormat

    return int(WireFormat.of(wire.codec, n, torch.float32).nbytes)


def _payload(work: Any) -> int:
    p = getattr(work, "payload", None)
    return int(p.numel() * p.element_size()) if p is not None else 0


__all__ = ["StageExecutor", "StepRecord"]
