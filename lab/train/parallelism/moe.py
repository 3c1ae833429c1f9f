"""A mixture-of-experts layer whose experts live on different ranks (expert parallelism), and the MLP built
around it: input -> Linear(features, d) -> ReLU -> h + MoE(h) -> Linear(d, classes).

Gating (Shazeer et al. 2017 §2; GShard, Lepikhin et al. 2020 §2.2 and Algorithm 1; Switch Transformer, Fedus
et al. 2021 §2.1-2.2): a linear router gives E logits per token; softmax; each token goes to its top-k experts
(k = 1: Switch, its gate the expert's probability; k >= 2: GShard, the k probabilities renormalised to sum
to 1). Each source rank gives every expert at most C = ceil(capacity_factor * T * k / E) slots, T = the
tokens of the largest shard of the global batch (ceil(B / P), the same on every rank, so every all-to-all
block has one size), and C <= T (more slots could only carry padding). Slots are handed out first choices first, then second choices, in token order
(GShard's priority); an assignment past C is dropped: if all its choices are dropped the token passes through
the residual only. The load-balancing loss (Switch §2.2, GShard's l_aux) is E * sum_e f_e * P_e, f_e the
fraction of tokens whose first choice is e and P_e the mean router probability of e.

Expert parallelism (GShard §2.3): expert e lives on rank e // (E / P). Dispatch: each rank fills a padded
[E, C, d] block of its tokens (zeros where slots are empty) and one all-to-all sends block [e] to e's rank;
each expert runs on the P * C rows it received; combine: the reverse all-to-all returns the [E, C, d]
outputs to the source ranks, which add gate * output to each kept token. Precision per direction (as
DeepSeek-V3 §3.3 runs its FP8 MoE): what travels towards the experts (the forward dispatch, and in backward
the gradient of the combine's output) carries the dispatch codec; what travels back to the source ranks (the
forward combine, and in backward the gradient of the dispatched tokens) carries the combine precision.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.comm.base import Comm

#: the all-to-alls of one step: forward dispatch and combine, and their gradients in backward
OPS = ("dispatch", "combine", "dispatch_grad", "combine_grad")
#: the weight of the load-balancing loss (Switch Transformer §2.2: alpha = 1e-2)
AUX_WEIGHT = 0.01


def capacity(tokens: int, experts: int, top_k: int, factor: float) -> int:
    """Slots per expert per source rank: ceil(factor * tokens * top_k / experts), at least 1 and at most
    `tokens` (a token picks an expert once: more slots could only carry padding)."""
    return max(1, min(tokens, math.ceil(factor * tokens * top_k / experts)))


@dataclass
class Routing:
    """Where a source rank's T tokens go. expert, gate, slot, kept: [T, k] (slot = expert * C + position, valid
    where kept); tokens, dropped: [E] assignments routed to each expert and those past its capacity; aux: the
    load-balancing loss (a scalar with gradient to the router)."""

    expert: torch.Tensor
    gate: torch.Tensor
    slot: torch.Tensor
    kept: torch.Tensor
    tokens: torch.Tensor
    dropped: torch.Tensor
    aux: torch.Tensor


def route(logits: torch.Tensor, top_k: int, cap: int) -> Routing:
    """Top-k softmax gating of logits [T, E] with `cap` slots per expert (module docstring)."""
    T, E = logits.shape
    probs = torch.softmax(logits.float(), dim=-1)
    gate, expert = probs.topk(top_k, dim=-1)
    if top_k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    onehot = F.one_hot(expert.t().reshape(-1), E)  # [k*T, E], choice-major: every first choice before a second
    pos = ((onehot.cumsum(0) - 1) * onehot).sum(-1).view(top_k, T).t()  # [T, k] place in its expert's queue
    kept = pos < cap
    slot = expert * cap + pos.clamp(max=cap - 1)
    tokens = onehot.sum(0)
    over = expert[~kept]
    dropped = torch.zeros(E, dtype=tokens.dtype, device=logits.device).index_add_(0, over, torch.ones_like(over))
    if T:
        first = torch.bincount(expert[:, 0], minlength=E).float() / T
        aux = E * (first * probs.mean(0)).sum()
    else:
        aux = logits.sum() * 0.0
    return Routing(expert, gate, slot, kept, tokens, dropped, aux)


def collective(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), a call that may wait on other ranks, leaving torch's grad mode as this rank had it:
    SimComm's ranks share one thread, and with it the grad mode another rank's `torch.no_grad()` sets."""
    mode = torch.is_grad_enabled()
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_grad_enabled(mode)


@dataclass
class Exchange:
    """The all-to-alls of one rank: `codecs[op]` (None: fp32) for each of OPS; per op the wire bytes, their fp32
    weight, and the seconds of the current step (`begin_step` starts one, `end_step` hands its numbers back)."""

    comm: Comm
    codecs: dict[str, Codec | None]
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    fp32_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    step: dict[str, Any] | None = None

    def run(self, x: torch.Tensor, op: str) -> torch.Tensor:
        """x [E * C, d] (dim 0: P equal blocks, block j to rank j) through one all-to-all carrying codecs[op]."""
        from lab.comm.collectives.api import alltoall

        comm = self.comm
        b0, t0 = comm.bytes_sent, time.perf_counter()
        y = collective(alltoall, comm, x.detach().contiguous(), codec=self.codecs[op], check=False)
        dt, sent = time.perf_counter() - t0, comm.bytes_sent - b0
        fp32 = 4 * x.numel() * (comm.size - 1) // comm.size
        self.bytes[op] += sent
        self.fp32_bytes[op] += fp32
        if self.step is not None:
            s = self.step[op]
            s[0] += dt
            s[1] += sent
            s[2] += fp32
        return y

    def begin_step(self) -> None:
        self.step = {op: [0.0, 0, 0] for op in OPS}

    def end_step(self) -> dict[str, list]:
        out, self.step = self.step or {}, None
        return out


class Expert(nn.Sequential):
    """One expert: Linear(d, hidden) -> ReLU -> Linear(hidden, d)."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))


class MoE(nn.Module):
    """The router (data-parallel) and this rank's experts of E (all of them until `shard`)."""

    def __init__(self, d: int, experts: int, hidden: int, top_k: int, capacity_factor: float) -> None:
        super().__init__()
        self.d, self.E, self.top_k, self.capacity_factor = d, experts, top_k, capacity_factor
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(Expert(d, hidden) for _ in range(experts))
        self.first = 0
        self.exchange: Exchange | None = None
        self.last: Routing | None = None
        self.aux = torch.zeros(())

    def shard(self, exchange: Exchange) -> None:
        """Keep the experts of exchange.comm's rank (E / P consecutive ones); route through its all-to-alls."""
        P, r = exchange.comm.size, exchange.comm.rank
        n = self.E // P
        self.first = r * n
        self.experts = nn.ModuleList(list(self.experts)[self.first:self.first + n])
        self.exchange = exchange

    def dispatch(self, h: torch.Tensor, tokens: int) -> tuple[Routing, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Route this rank's tokens h [T, d] (`tokens`: the largest shard's T, for the capacity): the routing, the
        padded dispatch block [E * C, d] (a function of h), and the (token, slot) of each kept assignment."""
        C = capacity(tokens, self.E, self.top_k, self.capacity_factor)
        r = self.last = route(self.router(h), self.top_k, C)
        self.aux = r.aux
        tok = torch.arange(h.shape[0], device=h.device).unsqueeze(1).expand_as(r.expert)[r.kept]
        slots = r.slot[r.kept]
        return r, h.new_zeros(self.E * C, self.d).index_copy(0, slots, h[tok]), tok, slots

    def run_experts(self, got: torch.Tensor) -> torch.Tensor:
        """This rank's experts on what the dispatch brought, [E * C, d]: P blocks (one per source rank) of its
        E / P experts' C rows each; the outputs in the same layout."""
        P, n, d = self._exchange().comm.size, len(self.experts), self.d
        C = len(got) // (P * n)
        x = got.view(P, n, C, d)
        return torch.stack([e(x[:, i].reshape(P * C, d)).view(P, C, d) for i, e in enumerate(self.experts)],
                           1).reshape(P * n * C, d)

    @staticmethod
    def combine(back: torch.Tensor, r: Routing, tok: torch.Tensor, slots: torch.Tensor,
                like: torch.Tensor) -> torch.Tensor:
        """MoE(h): each kept assignment's expert output (rows of `back`, [E * C, d]) times its gate, added up
        per token; dropped assignments add nothing."""
        gate = r.gate[r.kept].unsqueeze(1).to(like.dtype)
        return like.new_zeros(like.shape).index_add(0, tok, gate * back[slots])

    def forward(self, h: torch.Tensor, tokens: int) -> torch.Tensor:
        """MoE(h) for this rank's tokens h [T, d], without gradients across the all-to-alls (evaluation; training
        goes through `MoEMLP.step`). Every rank calls it."""
        ex = self._exchange()
        r, buf, tok, slots = self.dispatch(h, tokens)
        out = self.run_experts(ex.run(buf, "dispatch"))
        return self.combine(ex.run(out, "combine"), r, tok, slots, h)

    def _exchange(self) -> Exchange:
        if self.exchange is None:
            raise RuntimeError("MoE.shard(exchange) first: its experts live on the ranks of a communicator")
        return self.exchange


class MoEMLP(nn.Module):
    """Dropout -> Linear(features, d) -> ReLU -> (h + MoE(h)) -> Dropout -> Linear(d, classes)."""

    def __init__(self, features: int, classes: int, d: int, experts: int, expert_hidden: int, top_k: int,
                 capacity_factor: float, dropout: Sequence[float] = (0.0, 0.0)) -> None:
        super().__init__()
        self.drop_in, self.drop_out = nn.Dropout(dropout[0]), nn.Dropout(dropout[-1])
        self.inp = nn.Linear(features, d)
        self.moe = MoE(d, experts, expert_hidden, top_k, capacity_factor)
        self.head = nn.Linear(d, classes)

    def dense(self) -> list[nn.Parameter]:
        """The data-parallel parameters (every rank holds them): input layer, router, head."""
        return [*self.inp.parameters(), *self.moe.router.parameters(), *self.head.parameters()]

    def forward(self, x: torch.Tensor, tokens: int) -> torch.Tensor:
        """The logits of this rank's samples x (`tokens`: the largest shard's size); no gradient crosses ranks:
        for evaluation, under torch.no_grad (training: `step`)."""
        if torch.is_grad_enabled():
            raise RuntimeError("MoEMLP.forward carries no gradient across ranks; call it under torch.no_grad() "
                               "(training: MoEMLP.step)")
        h = torch.relu(self.inp(self.drop_in(x)))
        return self.head(self.drop_out(h + self.moe(h, tokens)))

    def step(self, x: torch.Tensor, y: torch.Tensor, batch: int, tokens: int) -> torch.Tensor:
        """Forward and backward of this rank's samples (x, y) of a global batch of `batch` (`tokens`: its largest
        shard's size, for the capacity): the loss is the cross-entropy summed over x, plus AUX_WEIGHT * len(x) *
        the load-balancing loss, over `batch` (summed over ranks: the global batch's mean). Every parameter's
        .grad gets this rank's part (the dense ones still to be summed over ranks); an expert no token reached
        gets zeros (it ran on its padded block). Returns the cross-entropy sum (detached).

        The graph is cut at each all-to-all and run stage by stage, backward in reverse order, each stage's
        gradient sent by the reverse all-to-all between them. (An autograd.Function that communicates inside
        the autograd engine works across processes, but the simulated ranks of SimComm share one thread, and
        with it autograd's grad mode and engine: the stages keep every all-to-all outside the engine.)"""
        moe, ex = self.moe, self.moe._exchange()
        h = torch.relu(self.inp(self.drop_in(x)))
        hl = h.detach().requires_grad_()
        r, buf, tok, slots = moe.dispatch(hl, tokens)
        got = ex.run(buf.detach(), "dispatch").requires_grad_()
        out = moe.run_experts(got)
        back = ex.run(out.detach(), "combine").requires_grad_()
        logits = self.head(self.drop_out(hl + moe.combine(back, r, tok, slots, hl)))
        ce = F.cross_entropy(logits, y, reduction="sum")
        ((ce + AUX_WEIGHT * len(y) * r.aux) / batch).backward()
        out.backward(ex.run(_grad(back), "combine_grad"))
        buf.backward(ex.run(_grad(got), "dispatch_grad"))
        h.backward(_grad(hl))
        return ce.detach()


def _grad(t: torch.Tensor) -> torch.Tensor:
    return t.grad if t.grad is not None else torch.zeros_like(t)


__all__ = ["MoE", "MoEMLP", "Expert", "Exchange", "collective", "Routing", "route", "capacity", "OPS", "AUX_WEIGHT"]
