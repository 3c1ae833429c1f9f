"""Rank functions for test_parallel_expert.py (module level, so that rank processes can import them), and the
single-process mixture-of-experts step they are checked against: written out token by token, with nothing of
lab.train.parallelism.moe but the model's parameters."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from lab.train.models import make_optimizer
from lab.train.parallelism.expert import ExpertSettings, build, train_step
from lab.train.parallelism.moe import AUX_WEIGHT, MoEMLP
from lab.train.run import TrainConfig

FEATURES, CLASSES = 12, 5


def batches(steps: int, batch: int, seed: int = 7) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, FEATURES, generator=g), torch.randint(0, CLASSES, (batch,), generator=g))
            for _ in range(steps)]


def reference_step(model: MoEMLP, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, P: int,
                   top_k: int, factor: float) -> tuple[float, list[list[int]], list[list[int]]]:
    """One step of the whole model in one process: the global batch cut as the ranks cut it, each shard
    routed with its own capacity (ceil(factor * ceil(B / P) * k / E)), first choices served before second
    ones; the loss sum over shards of (cross-entropy sum + AUX_WEIGHT * n * Switch's loss) / B. Returns the
    mean cross-entropy and, per shard, the assignments and the dropped ones per expert. An expert that no
    token reached has a zero gradient, as on the ranks (which run every expert on its padded block)."""
    B, E = len(y), model.moe.E
    cap = math.ceil(factor * math.ceil(B / P) * top_k / E)
    opt.zero_grad(set_to_none=True)
    loss, ce_total, tokens, dropped = 0.0, 0.0, [], []
    for xs, ys in zip(x.tensor_split(P), y.tensor_split(P)):
        h = torch.relu(model.inp(xs))
        probs = torch.softmax(model.moe.router(h), -1)
        gate, idx = probs.topk(top_k, -1)
        if top_k > 1:
            gate = gate / gate.sum(-1, keepdim=True)
        fill, kept = [0] * E, torch.zeros(len(ys), top_k, dtype=torch.bool)
        shard_tokens, shard_dropped = [0] * E, [0] * E
        for j in range(top_k):
            for t in range(len(ys)):
                e = int(idx[t, j])
                shard_tokens[e] += 1
                if fill[e] < cap:
                    fill[e] += 1
                    kept[t, j] = True
                else:
                    shard_dropped[e] += 1
        moe = torch.zeros_like(h)
        for t in range(len(ys)):
            for j in range(top_k):
                if kept[t, j]:
                    moe[t] = moe[t] + gate[t, j] * model.moe.experts[int(idx[t, j])](h[t:t + 1])[0]
        ce = F.cross_entropy(model.head(h + moe), ys, reduction="sum")
        first = torch.bincount(idx[:, 0], minlength=E).float() / len(ys)
        aux = E * (first * probs.mean(0)).sum()
        loss = loss + (ce + AUX_WEIGHT * len(ys) * aux) / B
        ce_total += float(ce.detach())
        tokens.append(shard_tokens)
        dropped.append(shard_dropped)
    loss.backward()
    for p in model.parameters():  # an expert no token reached: a zero gradient (its momentum still moves it)
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    opt.step()
    return ce_total / B, tokens, dropped


def equal_to_one_process(comm, cfg: dict, settings: dict, steps: int = 3) -> dict:
    """`steps` steps of the expert-parallel model (identity codec) beside the single-process reference on the
    same batches: the largest difference of any parameter this rank holds, and of the losses, and whether the
    routing counts agree."""
    c, s = TrainConfig(**cfg), ExpertSettings(**settings)
    model = build(comm, c, s, FEATURES, CLASSES)
    torch.manual_seed(c.seed)
    ref = MoEMLP(FEATURES, CLASSES, c.hidden[0], s.experts, s.expert_hidden, s.top_k, s.capacity_factor, c.dropout)
    opt = make_optimizer(c.optimizer, model.parameters(), c.lr, c.momentum)
    ref_opt = make_optimizer(c.optimizer, ref.parameters(), c.lr, c.momentum)
    P, r = comm.size, comm.rank
    loss_diff, routing_equal, dropped = 0.0, True, 0
    for x, y in batches(steps, c.batch):
        loss = train_step(comm, model, opt, x, y, c.algorithm)
        want, tokens, drop = reference_step(ref, ref_opt, x, y, P, s.top_k, s.capacity_factor)
        loss_diff = max(loss_diff, abs(loss - want))
        rt = model.moe.last
        routing_equal &= rt.tokens.tolist() == tokens[r] and rt.dropped.tolist() == drop[r]
        dropped += sum(drop[r])
    n = s.experts // P
    mine = dict(model.named_parameters())
    theirs = {k: v for k, v in ref.named_parameters() if not k.startswith("moe.experts.")}
    for i in range(n):  # this rank's i-th expert is the reference's expert r * n + i
        theirs.update({f"moe.experts.{i}.{k}": v for k, v in ref.moe.experts[r * n + i].named_parameters()})
    assert sorted(mine) == sorted(theirs), (sorted(mine), sorted(theirs))
    param_diff = max(float((mine[k] - theirs[k]).detach().abs().max()) for k in mine)
    moved = max(float((theirs[k].detach() - v).abs().max()) for k, v in _initial(c, s).items() if k in theirs)
    return dict(param_diff=param_diff, loss_diff=loss_diff, routing_equal=routing_equal, dropped=dropped,
                moved=moved, experts_held=n)


def _initial(c: TrainConfig, s: ExpertSettings) -> dict[str, torch.Tensor]:
    torch.manual_seed(c.seed)
    m = MoEMLP(FEATURES, CLASSES, c.hidden[0], s.experts, s.expert_hidden, s.top_k, s.capacity_factor, c.dropout)
    return {k: copy.deepcopy(v.detach()) for k, v in m.named_parameters()}


def codec_steps(comm, cfg: dict, settings: dict, steps: int = 2) -> dict:
    """`steps` steps with the config's codec: the Exchange's bytes per all-to-all, the rank's wire bytes and
    the final parameters (to compare with an fp32 run)."""
    c, s = TrainConfig(**cfg), ExpertSettings(**settings)
    model = build(comm, c, s, FEATURES, CLASSES)
    opt = make_optimizer(c.optimizer, model.parameters(), c.lr, c.momentum)
    ex = model.moe.exchange
    b0 = comm.bytes_sent
    losses = [train_step(comm, model, opt, x, y, c.algorithm) for x, y in batches(steps, c.batch)]
    return dict(bytes=dict(ex.bytes), fp32_bytes=dict(ex.fp32_bytes), sent=comm.bytes_sent - b0, losses=losses,
                dense=sum(p.numel() for p in model.dense()),
                params={k: v.detach().clone() for k, v in model.named_parameters()})


def forced_gate(comm, cfg: dict, settings: dict, bias: list[float]) -> dict:
    """One evaluation forward with the router forced by its bias (weights zero): the routing counts, and the
    largest difference between each dropped token's logits and the residual path alone, head(h)."""
    c, s = TrainConfig(**cfg), ExpertSettings(**settings)
    model = build(comm, c, s, FEATURES, CLASSES)
    with torch.no_grad():
        model.moe.router.weight.zero_()
        model.moe.router.bias.copy_(torch.tensor(bias))
    x = batches(1, c.batch)[0][0].tensor_split(comm.size)[comm.rank]
    model.eval()
    with torch.no_grad():
        out = model(x, -(-c.batch // comm.size))
        rt = model.moe.last
        alone = model.head(torch.relu(model.inp(x)))
    gone = ~rt.kept.any(1)
    return dict(tokens=rt.tokens.tolist(), dropped=rt.dropped.tolist(), shard=len(x),
                residual_only=float((out[gone] - alone[gone]).abs().max()) if gone.any() else None,
                kept_differ=bool((out[~gone] - alone[~gone]).abs().max() > 0) if (~gone).any() else None,
                gone=int(gone.sum()))


def gloo_cases(comm) -> dict:
    """The 2-rank Gloo checks: top-2 equal to one process, and an 8-bit dispatch with a bf16 combine."""
    cfg = dict(hidden=(16,), dropout=(0.0, 0.0), batch=10, optimizer="sgd", lr=0.1, workers=2)
    st = dict(experts=4, top_k=2, capacity_factor=1.0, expert_hidden=8)
    return dict(equal=equal_to_one_process(comm, cfg, st),
                codec=codec_steps(comm, dict(cfg, codec="dynamic_tree"), dict(st, combine="bf16")))
