"""One rank's part of a pipeline step: torch's list of actions for this rank (`torch_pipelining_private.program`)
run over the lab's `Comm`, each send through a `Wire` (so a codec compresses what stages send each other).

  F       forward of a stage on a micro-batch (its input and output kept for the backward)
  B       full backward: the gradients of the stage's input and of its parameters (accumulated)
  I / W   the backward split in two (zero-bubble schedules, Qi et al. 2024 §2): I the input's gradient only,
          W the parameters' later, both torch's own `stage_backward_input` / `stage_backward_weight`
  SEND_F / RECV_F   a stage's output to the next stage's rank (activations)
  SEND_B / RECV_B   the gradient of a stage's input to the previous stage's rank
Each run of sends and receives with no block between them in the list is posted as one batch (`Wire.exchange`,
a `batch_isend_irecv`), as torch's runtime posts them: 1F1B's last rank sends a gradient and receives the next
activation while its neighbour sends that activation and receives the gradient, which under NCCL's rules (a
transfer moves only while both of its ends are posted, base.py) would wait for each other forever if each rank
posted its send alone first. Receives are posted with their batch, or earlier: at a rank's first wait for a
receive in a step, every receive left in its list is posted at once (in list order, so a pair's messages still
match them in order), where the comm allows receiving ahead (Gloo; not NCCL): a message then lands as soon as it
is sent, and the posting is done while the rank waits anyway instead of between two blocks. The order of the
forwards and backwards is torch's, untouched. Each receive is waited for by the action that needs it (after the
ones posted before it from the same rank: a pair's messages match receives in posting order, as on Gloo). A send
goes out with its batch, right after its tensor is computed (`_sends_to_move`: only DualPipeV lists one later,
after its overlapped pair; that one goes out alone when its forward ends) and is waited for at the end of the
step. Stages on the same rank hand each other tensors directly. Every action is timed
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
        self.flat = [b for a in actions for b in (a.sub if a.kind == tp.OVERLAP else (a,))]
        self.recvs = [b for b in self.flat if b.kind in ("RECV_F", "RECV_B")]
        self.send_now = _sends_to_move(self.flat, self.stage_to_rank)
        self.batches = _batches(self.flat, set(self.send_now.values()))
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
        self.early: set[tuple[str, int, int]] = set()  # receives posted ahead of their place in the list
        self.done_recv: set[tuple[str, int, int]] = set()  # receives taken by the action that needed them
        self.ahead = bool(getattr(self.comm, "receive_ahead", False))  # post the rest at the first wait
        self.weight_state: dict[tuple[int, int], Any] = {}
        self.live = {s: 0 for s in self.modules}
        self.rec.held = {s: 0 for s in self.modules}
        self.rec.saved = {s: 0 for s in self.modules}
        self.sends: list[Any] = []
        self.losses: list[torch.Tensor] = []
        for i, a in enumerate(self.flat):
            if i in self.batches:
                self._post_batch([self.flat[j] for j in self.batches[i]])
            elif a.kind not in _COMMS:  # a send or receive is posted with its batch, a moved send after its block
                self._do(a)
            if i in self.send_now:
                self._post_batch([self.flat[self.send_now[i]]])
        for w in self.sends:
            w.wait()
        if self.pending:
            raise RuntimeError(f"rank {self.comm.rank}: receives never used: {sorted(self.pending)}")
        self.rec.loss = float(sum(float(v) for v in self.losses)) if self.losses else None
        return self.rec

    # -- the actions
    def _do(self, a: tp.Act) -> None:
        s, m = a.stage, a.mb
        if a.kind == "F":
            self._forward(s, m)
            t0 = self._t_compute
        elif a.kind in ("B", "I", "W"):
            self._backward(a.kind, s, m)
            t0 = self._t_compute
        else:
            raise RuntimeError(f"unknown pipeline action {a}")
        self._row(a.kind, s, m, t0, time.perf_counter())

    def _post_batch(self, acts: Sequence[tp.Act]) -> None:
        """Post the sends and receives `acts` as one batch (`Wire.exchange`), receives already posted ahead left
        out; each receive's Work is waited for by the action that needs it, the sends' at the end of the step.
        The sends' rows: the posting (encoding included), on the first send's row."""
        sends = [a for a in acts if a.kind in ("SEND_F", "SEND_B")]
        recvs = []
        for a in acts:
            if a.kind in ("RECV_F", "RECV_B"):
                key = ("F" if a.kind == "RECV_F" else "B", a.stage, a.mb)
                if key in self.early:
                    self.early.discard(key)
                else:
                    recvs.append(a)
        if not sends and not recvs:
            return
        t0 = time.perf_counter()
        out = [(self.out[(a.stage, a.mb)], self.stage_to_rank[a.stage + 1]) if a.kind == "SEND_F" else
               (self.grad_in.pop((a.stage, a.mb)), self.stage_to_rank[a.stage - 1]) for a in sends]
        batch = self._post(out, recvs)
        t1 = time.perf_counter()
        self.sends.extend(batch.sends)
        for k, (a, p) in enumerate(zip(sends, batch.payloads)):
            self._row(a.kind, a.stage, a.mb, t0 if k == 0 else t1, t1, int(p.numel() * p.element_size()))

    def _post(self, sends: list[tuple[torch.Tensor, int]], recvs: Sequence[tp.Act]) -> Any:
        """Post one batch of `sends` ((tensor, dst)) and the receives of RECV actions `recvs`; its Batch."""
        ops = []
        for a in recvs:
            fwd, s, m = a.kind == "RECV_F", a.stage, a.mb
            ops.append((("F" if fwd else "B", s, m), (self.sizes[m], *self.shapes[s - 1 if fwd else s]),
                        self.stage_to_rank[s - 1 if fwd else s + 1]))
        batch, gets = self.wire.exchange(sends, [(shape, src) for _, shape, src in ops])
        for (key, shape, src), work, get in zip(ops, batch.recvs, gets):
            self.posted.setdefault(src, []).append(work)
            self.pending[key] = (work, get, _wire_bytes(self.wire, shape), src)
        return batch

    def _post_rest(self) -> None:
        """Post every receive of the step not posted yet, in list order, as one batch (the rank is about to
        wait)."""
        self.ahead = False
        rest = [a for a in self.recvs if ("F" if a.kind == "RECV_F" else "B", a.stage, a.mb) not in self.pending
                and ("F" if a.kind == "RECV_F" else "B", a.stage, a.mb) not in self.done_recv]
        if rest:
            self._post([], rest)
        self.early.update(("F" if a.kind == "RECV_F" else "B", a.stage, a.mb) for a in rest)

    def _row(self, kind: str, s: int, m: int | None, t0: float, t1: float, nbytes: int = 0) -> None:
        self.rec.rows.append(dict(stage=s, microbatch=m, kind=kind, start=t0, end=t1, bytes=nbytes))

    def _received(self, kind: str, s: int, m: int) -> torch.Tensor:
        """The tensor of a posted receive, waited for and decoded now (its row: the wait). The receives posted
        before it from the same peer are waited for first: messages of a pair match receives in posting order."""
        t0 = time.perf_counter()
        if self.ahead:
            self._post_rest()
        work, get, nbytes, src = self.pending.pop((kind, s, m))
        self.done_recv.add((kind, s, m))
        queue = self.posted[src]
        while any(w is work for w in queue):  # else waited for already, before a later one of the peer's
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


def _sends_to_move(flat: Sequence[tp.Act], stage_to_rank: Sequence[int]) -> dict[int, int]:
    """{index of a compute action: index of the send of its output further down the list} for the sends that can
    go out as soon as that action is done, without passing another send to the same rank (so each pair's messages
    keep the list's order): DualPipeV lists the sends of an overlapped forward-backward pair after both, which
    run one after the other here; its forward's output then leaves when the forward ends, not after the backward."""
    out: dict[int, int] = {}
    for i, a in enumerate(flat):
        if a.kind not in ("F", "B", "I"):
            continue
        want = ("SEND_F",) if a.kind == "F" else ("SEND_B",)
        for j in range(i + 1, len(flat)):
            b = flat[j]
            if b.kind in want and b.stage == a.stage and b.mb == a.mb:
                if j > i + 1:
                    dst = stage_to_rank[b.stage + 1 if b.kind == "SEND_F" else b.stage - 1]
                    between = [c for c in flat[i + 1:j] if c.kind in ("SEND_F", "SEND_B")
                               and stage_to_rank[c.stage + 1 if c.kind == "SEND_F" else c.stage - 1] == dst]
                    if not between:
                        out[i] = j
                break
    return out


_COMMS = ("SEND_F", "SEND_B", "RECV_F", "RECV_B")


def _batches(flat: Sequence[tp.Act], moved: set[int]) -> dict[int, list[int]]:
    """{index of the first: indices} of each run of sends and receives with no block between them in the list
    (the sends in `moved` left out: they go out alone, after their block): what torch's runtime posts as one
    `batch_isend_irecv` (1F1B's forward send with the next backward's receive, its backward send with the next
    forward's receive). Posted together, two neighbours that each send before they receive do not wait for each
    other under NCCL's rules (a transfer moves only while both of its ends are posted)."""
    out: dict[int, list[int]] = {}
    run: list[int] = []
    for i, a in enumerate([*flat, None]):
        if a is not None and a.kind in _COMMS:
            if i not in moved:
                run.append(i)
        else:
            if run:
                out[run[0]] = run
            run = []
    return out


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


__all__ = ["StageExecutor", "StepRecord"]
