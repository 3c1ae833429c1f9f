"""Expert parallelism (`--mode expert`): the MLP with a mixture-of-experts layer whose E experts are split E / P
per rank; tokens reach their experts by an all-to-all (dispatch, `--codec` on it) and come back by the reverse
all-to-all (combine, fp32 or bf16). The rest of the model (input layer, router, head) is data-parallel: every
rank holds it and its gradients are summed in fp32 over all ranks. Each rank computes its shard of every global
batch (`tensor_split`). The MoE layer, its gating and capacity: `moe.py` (GShard §2; Switch Transformer §2).

The model: input -> Linear(features, d) -> ReLU -> h + MoE(h) -> Linear(d, classes), d = the first --hidden
width (the others are not used), each expert d -> expert_hidden -> d; dropout: the first --dropout rate on the
input, the last before the head. The loss of a rank is its cross-entropy sum over the global batch size plus
Switch's load-balancing loss (weight `AUX_WEIGHT`) times its share of the batch: summed over ranks, the
gradient of the global batch's mean loss. Evaluation runs on every rank (the forward is collective): each
its shard of the test set, in chunks of --batch.

The summary adds, over the training steps: the capacity, the tokens per expert (`load_imbalance`: the mean
over steps of max / mean of the global assignments per expert; `load_imbalance_max`), `dropped_fraction`
(assignments past the capacity / assignments), `aux_loss`, and per all-to-all (dispatch, combine,
dispatch_grad, combine_grad) `<op>_s` (the slowest rank's median seconds per step after two warm-up steps),
`<op>_bytes` and `<op>_fp32_bytes` (summed over steps and ranks), `dispatch_bytes_ratio`; evaluations'
all-to-alls count in the run's bytes only. tables["experts"]: rank, step, expert, tokens, dropped (what rank
`rank` routed to `expert` that step, and what went past the capacity); tables["alltoall"]: rank, step, op,
seconds, bytes, fp32_bytes.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lab.backend import Progress, RowSink
from lab.comm.allreduce import allreduce
from lab.comm.base import Comm
from lab.comm.spans import span

from ..models import make_optimizer
from ..run import TrainConfig
from .base import Settings, Strategy
from .loop import TRACED_STEPS, RankLoop
from .moe import OPS, Exchange, MoEMLP, capacity, collective
from .wire import activation_codec

COMBINE = ("fp32", "bf16")
#: the most experts (DeepSeek-V3 routes over 256) and the widest expert a run takes
MAX_EXPERTS, MAX_EXPERT_HIDDEN = 256, 65536
CARRIES = "the tokens dispatched to the experts (and the gradients sent to them)"


def _int(name: str, v: Any, low: int, high: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValueError(f"--{name.replace('_', '-')} {v!r}; allowed: an integer {low}..{high}")
    return v


@dataclass(frozen=True)
class ExpertSettings(Settings):
    """experts: E, split E / P per rank. top_k: experts per token (1: Switch, 2: GShard). capacity_factor:
    slots per expert = min(tokens, ceil(capacity_factor * tokens * top_k / E)) per source rank. combine: the
    precision of the all-to-alls back to the source ranks (fp32 | bf16). expert_hidden: each expert's width."""

    experts: int = 4
    top_k: int = 1
    capacity_factor: float = 1.25
    combine: str = "fp32"
    expert_hidden: int = 256

    def check(self, cfg: Any, procs: int) -> None:
        E = _int("experts", self.experts, 1, MAX_EXPERTS)
        if E % procs:
            raise ValueError(f"--experts {E} cannot be split over {procs} processes (each rank holds experts / "
                             f"processes); allowed: a multiple of {procs}")
        k = self.top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"--top-k {k!r}; allowed: an integer 1..{E} (the experts)")
        if k > E:
            raise ValueError(f"--top-k {k} is more than the {E} experts; allowed: 1..{E}")
        cf = self.capacity_factor
        if isinstance(cf, bool) or not isinstance(cf, (int, float)) or not (cf > 0 and math.isfinite(cf)):
            raise ValueError(f"--capacity-factor {cf!r}; allowed: a number > 0 (1.0: exactly the even share; "
                             "Switch uses 1.0-1.25)")
        if self.combine not in COMBINE:
            raise ValueError(f"--combine {self.combine!r}; allowed: {', '.join(COMBINE)}")
        _int("expert_hidden", self.expert_hidden, 1, MAX_EXPERT_HIDDEN)
        if not cfg.hidden:
            raise ValueError("--mode expert needs a --hidden width (d, the width the experts read and write)")
        if cfg.error_feedback:
            raise ValueError(f"--error-feedback is for gradients summed step after step; --mode expert's codec "
                             f"carries {CARRIES}, new every step")
        activation_codec(cfg.codec, CARRIES)


def exchange_codecs(codec: str | None, combine: str) -> dict[str, Any]:
    """Each all-to-all's codec (moe.py): towards the experts `codec`, back to the source ranks `combine`."""
    towards = activation_codec(codec, CARRIES)
    back = None if combine == "fp32" else activation_codec(combine, "the combined expert outputs")
    return dict(dispatch=towards, combine_grad=towards, combine=back, dispatch_grad=back)


def build(comm: Comm, c: TrainConfig, s: ExpertSettings, features: int, classes: int) -> MoEMLP:
    """The model as every rank builds it (seed c.seed: all E experts, then this rank's kept)."""
    torch.manual_seed(c.seed)
    model = MoEMLP(features, classes, int(c.hidden[0]), s.experts, s.expert_hidden, s.top_k, s.capacity_factor,
                   c.dropout).to(comm.device)
    model.moe.shard(Exchange(comm, exchange_codecs(c.codec, s.combine)))
    return model


def train_step(comm: Comm, model: MoEMLP, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               algorithm: str = "ring") -> float:
    """One step on the global batch (x, y): this rank's shard forward through the experts' ranks and backward,
    the dense gradients summed over ranks in fp32 (with the cross-entropy sums), the optimizer. Returns the
    global batch's mean cross-entropy."""
    P, B = comm.size, len(y)
    xs, ys = x.tensor_split(P)[comm.rank], y.tensor_split(P)[comm.rank]
    dense = model.dense()
    opt.zero_grad(set_to_none=True)
    with span("forward"):  # forward and backward, stage by stage with the all-to-alls between (MoEMLP.step)
        ce = model.step(xs, ys, B, -(-B // P))
    with span("backward"):
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in dense]
                         + [ce.reshape(1)])
        total = collective(allreduce, comm, flat, algorithm=algorithm, check=False)
        i = 0
        for p in dense:
            p.grad = total[i:i + p.numel()].view_as(p).clone()
            i += p.numel()
    with span("optimizer"):
        opt.step()
    return float(total[-1]) / B


def evaluate(comm: Comm, model: MoEMLP, x: torch.Tensor, y: torch.Tensor, chunk: int) -> tuple[float, float]:
    """(test error %, mean cross-entropy) over (x, y), in global chunks of `chunk` samples, each rank its shard
    of each (the forward is collective: every rank calls it)."""
    P, r = comm.size, comm.rank
    wrong, total = 0, 0.0
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(y), chunk):
            xb, yb = x[i:i + chunk].tensor_split(P)[r], y[i:i + chunk].tensor_split(P)[r]
            out = model(xb, -(-len(y[i:i + chunk]) // P))
            wrong += int((out.argmax(1) != yb).sum())
            total += float(F.cross_entropy(out, yb, reduction="sum"))
    model.train(was)
    sums = collective(comm.allgather_object, (wrong, total))
    return 100.0 * sum(w for w, _ in sums) / len(y), sum(t for _, t in sums) / len(y)


def expert_rank(comm: Comm, cfg: dict, settings: dict, progress: Progress | None = None,
                on_row: RowSink | None = None, trace: str | None = None) -> dict:
    """Train on this rank (the strategy's rank function, `base.py`)."""
    c, s = TrainConfig(**cfg), ExpertSettings(**settings)
    loop = RankLoop(comm, c, f"expert {c.label()}", progress, on_row, trace)
    ds = loop.data
    model = build(comm, c, s, ds.features, ds.classes)
    ex = model.moe.exchange
    assert ex is not None
    opt = make_optimizer(c.optimizer, model.parameters(), c.lr, c.momentum)
    torch.manual_seed(c.seed + 1 + comm.rank)  # dropout masks differ across ranks
    xte, yte = ds.test_x.to(comm.device), ds.test_y.to(comm.device)
    experts: list[dict] = []
    alltoall: list[dict] = []
    auxes: list[float] = []

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        n = len(auxes) + 1
        ex.begin_step()
        loss = train_step(comm, model, opt, x.to(comm.device), y.to(comm.device), c.algorithm)
        got, rt = ex.end_step(), model.moe.last
        assert rt is not None
        auxes.append(float(model.moe.aux.detach()))
        for e in range(s.experts):
            experts.append(dict(rank=comm.rank, step=n, expert=e, tokens=int(rt.tokens[e]), dropped=int(rt.dropped[e])))
        for op in OPS:
            sec, sent, fp32 = got[op]
            alltoall.append(dict(rank=comm.rank, step=n, op=op, seconds=sec, bytes=sent, fp32_bytes=fp32))
        return loss

    out = loop.run(step, lambda: evaluate(comm, model, xte, yte, c.batch))
    out["fp32_bytes"] = out["bytes_sent"] - sum(ex.bytes.values()) + sum(ex.fp32_bytes.values())
    out["tables"] = dict(experts=experts, alltoall=alltoall)
    gathered = collective(comm.allgather_object, (experts, alltoall, auxes))
    if comm.rank == 0:
        out["summary"] = summarize(c, s, comm.size, gathered, traced=trace is not None)
        per_expert = sum(p.numel() for p in model.moe.experts[0].parameters())
        out["summary"].update(parameters=sum(p.numel() for p in model.dense()) + s.experts * per_expert,
                              expert_parameters_per_rank=len(model.moe.experts) * per_expert)
    return out


def summarize(c: TrainConfig, s: ExpertSettings, P: int, gathered: list, traced: bool = False) -> dict:
    """The run's MoE numbers from every rank's (experts rows, alltoall rows, aux losses) (module docstring):
    load imbalance over the global tokens per expert, dropped fraction, per op the median seconds of a step
    after the warm-up (the slowest rank's; traced steps left out) and the bytes summed over steps and ranks."""
    ex_rows = [row for g in gathered for row in g[0]]
    a2a = [row for g in gathered for row in g[1]]
    steps = max((r["step"] for r in ex_rows), default=0)
    load = torch.zeros(steps, s.experts)
    dropped = 0
    for r in ex_rows:
        load[r["step"] - 1, r["expert"]] += r["tokens"]
        dropped += r["dropped"]
    per_step = (load.max(1).values / load.mean(1).clamp(min=1e-12)) if steps else torch.zeros(0)
    assigned = float(load.sum())
    out: dict[str, Any] = dict(
        experts=s.experts, experts_per_rank=s.experts // P, top_k=s.top_k, capacity_factor=s.capacity_factor,
        capacity=capacity(-(-c.batch // P), s.experts, s.top_k, s.capacity_factor), d=int(c.hidden[0]),
        expert_hidden=s.expert_hidden, dispatch_codec=c.codec if activation_codec(c.codec) else "fp32",
        combine=s.combine, tokens_per_expert=(load.sum(0) / max(steps, 1)).tolist(),
        load_imbalance=float(per_step.mean()) if steps else float("nan"),
        load_imbalance_max=float(per_step.max()) if steps else float("nan"),
        dropped_fraction=dropped / assigned if assigned else float("nan"),
        aux_loss=statistics.fmean(a for g in gathered for a in g[2]) if steps else float("nan"))
    skip = set(range(min(2, steps - 1))) | (set(TRACED_STEPS) if traced else set())  # 0-based steps
    for op in OPS:
        rows = [r for r in a2a if r["op"] == op]
        medians = [statistics.median([r["seconds"] for r in rows if r["rank"] == k and r["step"] - 1 not in skip]
                                     or [float("nan")]) for k in range(P)]
        out[f"{op}_s"] = max(medians)
        out[f"{op}_bytes"] = sum(r["bytes"] for r in rows)
        out[f"{op}_fp32_bytes"] = sum(r["fp32_bytes"] for r in rows)
    f = out["dispatch_fp32_bytes"]
    out["dispatch_bytes_ratio"] = out["dispatch_bytes"] / f if f else float("nan")
    return out


#: the benchmark's case (1 Gbit/s, 2 ranks; see the module's STRATEGY): each rank's dispatch sends half of its
#: [E, C, d] block: E * C = 4 * ceil(1.25 * 512 / 4) = 640 rows of d = 4096 values, half of 10.5 MB fp32 =
#: 5.2 MB, 42 ms at 125 MB/s; dynamic_tree's 8 bits carry it in 1.3 MB (10.5 ms) plus encoding 5.2 MB and
#: decoding 1.3 MB at ~1.6-1.8 GB/s of fp32 per core (~6 ms): ~2.5x less dispatch time, the link its bound
BENCH = dict(cfg=dict(dataset="digits", model="mlp", hidden=(4096,), dropout=(0.0, 0.0), batch=1024, epochs=8.0,
                      evals_per_epoch=1, lr=0.001, codec="dynamic_tree", seed=0),
             settings=dict(experts=4, top_k=1, capacity_factor=1.25, combine="fp32", expert_hidden=256))

STRATEGY = Strategy(
    name="expert",
    description="mixture of experts split across ranks: tokens go to their experts by an all-to-all (dispatch) "
                "and come back by another (combine); the rest of the model is data-parallel",
    paper="Shazeer et al. 2017 §2 (top-k gating); GShard (Lepikhin et al. 2020) §2 (capacity, all-to-all "
          "dispatch and combine); Switch Transformer (Fedus et al. 2021) §2 (top-1, load-balancing loss)",
    settings=ExpertSettings,
    rank=expert_rank,
    models=("mlp",),
    carries=CARRIES,
    min_procs=2,
    order=40,
    bench=BENCH,
)

__all__ = ["STRATEGY", "ExpertSettings", "expert_rank", "train_step", "evaluate", "build", "exchange_codecs",
           "summarize", "COMBINE", "BENCH", "MAX_EXPERTS", "MAX_EXPERT_HIDDEN"]
