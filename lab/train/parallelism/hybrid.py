"""Hybrid parallelism on real ranks: the small CNN's conv layers data-parallel, its dense head model-parallel
(Krizhevsky 2014, "One weird trick for parallelizing convolutional neural networks" §3; Dettmers 2016 §2.4 and
his CIFAR-10 run: 1-bit with error feedback on the conv gradients, 8-bit on the model-parallel activations).

Every rank holds the conv `features` (same seed) and runs them on its share of the global batch
(`tensor_split`); their gradients are summed over the ranks as one bucket, like DDP's, by `lab.comm.allreduce`
with the registered `algorithm` and `grads_codec` on its wire (error feedback allowed: each rank keeps its
residual of the bucket; a block-scaled codec scales finer than the bucket). The dense layer is split by
output (Dettmers §2.2): rank r owns rows r of its weight (`tensor_split` of the classes).
Forward, the features of every shard are all-gathered (codec `--codec`, encoded once by their owner), so each
rank holds the whole batch's features; dropout is drawn on them from the unsplit model's random stream (the
same mask on every rank); each rank computes its slice of the logits, and the slices are all-gathered (the
codec too) so that every rank computes the loss. Backward, each rank's gradient with respect to the whole
batch's features (from its slice of the weight) is reduce-scattered (codec) back to the shards' owners,
which run the conv backward. With no codec a step equals the single-process step up to float rounding.

The trade the paper makes: conv layers hold few parameters and most of the compute, dense layers most of
the parameters, so the head's activations are cheaper to send than its gradients. The summary shows both
sides per step: the conv gradients' bytes, the activations' bytes, and what the head's gradients would
cost data-parallel (on this small CNN the head is small: its activations cost more than its gradients).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.codecs.registry import parse_spec
from lab.comm.algorithms import get_algorithm
from lab.comm.allreduce import NATIVE, allreduce, check_algorithm, configure, resolve_mode
from lab.comm.base import Comm
from lab.comm.collectives import api as collectives
from lab.comm.spans import span

from ..models import build_model, make_optimizer
from ..run import TrainConfig, evaluate as evaluate_model, load_data
from .base import Settings, Strategy
from .loop import RankLoop
from .wire import NO_CODEC, activation_codec

CARRIES = "the model-parallel head's activations (conv features, their gradients, the logits)"
#: the collectives' algorithm for the model-parallel exchanges: every slice straight to every rank, each
#: block encoded once by its source (Dettmers §2.2's sends; the rows are never re-encoded on the way)
EXCHANGE = "direct"
#: the error-feedback key of the conv gradients' bucket
BUCKET = "features"
#: the traffic of one step, by kind (tables["traffic"])
KINDS = ("conv_gradients", "features", "feature_gradients", "logits")


def grads_codec(spec: str | None) -> Codec | None:
    """The conv gradients' codec `spec` names (error feedback allowed), or None for fp32; ValueError naming
    the option for an unknown codec."""
    if spec in NO_CODEC:
        return None
    if not isinstance(spec, str):
        raise ValueError(f"--grads-codec {spec!r}; allowed: a codec spec string, e.g. ef:onebit")
    try:
        return parse_spec(spec)
    except ValueError as e:
        raise ValueError(f"--grads-codec {spec!r}: {e}") from None


def _check_allreduce(codec: Codec | None, algorithm: str, procs: int) -> None:
    """The conv gradients' allreduce runs: the algorithm is known, the codec rides it (one line each)."""
    if not isinstance(algorithm, str):
        raise ValueError(f"--algorithm {algorithm!r}; allowed: a registered allreduce algorithm's name")
    try:
        check_algorithm(algorithm)
    except ValueError as e:
        raise ValueError(f"--algorithm: {e}") from None
    try:
        how = resolve_mode(codec, "auto", algorithm)
    except ValueError as e:
        raise ValueError(f"--grads-codec {codec.describe() if codec else None!r} on --algorithm {algorithm}: {e}") \
            from None
    if algorithm == NATIVE and how != "raw":
        raise ValueError("--algorithm native (torch's all_reduce) carries fp32 only; pick a registered algorithm "
                         "such as ring to put --grads-codec on the wire")
    configure(algorithm, procs, codec, how, {})


@dataclass(frozen=True, eq=False)
class HybridSettings(Settings):
    """grads_codec: the conv gradients' codec (spec string, `ef:` allowed; None = fp32); algorithm: their
    allreduce (a registered algorithm, or native)."""

    grads_codec: str | None = None
    algorithm: str = "ring"

    def check(self, cfg: Any, procs: int) -> None:
        """One-line ValueError before any rank starts: the model, the ranks against the classes, the codecs."""
        if cfg.model != "cnn":
            raise ValueError(f"--mode hybrid runs the small CNN's conv layers data-parallel and its dense head "
                             f"model-parallel; use --model cnn, not {cfg.model}")
        if getattr(cfg, "error_feedback", False):
            raise ValueError("--error-feedback: in --mode hybrid --codec carries activations, new every step; put "
                             "error feedback on the conv gradients with --grads-codec ef:NAME")
        if cfg.consistency_model().kind != "sync":
            raise ValueError("--mode hybrid: model-parallel ranks work in lock step; consistency must be 'sync'")
        act = activation_codec(cfg.codec, CARRIES)
        if act is not None:
            collectives.resolve_mode("reduce_scatter", act, "auto", EXCHANGE)
        _check_allreduce(grads_codec(self.grads_codec), self.algorithm, procs)
        classes = load_data(cfg).classes
        if classes < procs:
            raise ValueError(f"--mode hybrid splits the dense layer's {classes} outputs (classes) over the ranks; "
                             f"{procs} processes leave some without one: use at most {classes}")


class HybridCNN:
    """One rank of the hybrid small CNN: its conv replica, its slice of the dense layer, its optimizer, and
    the step (module docstring). `data`: the rank's Dataset. Counts each kind of traffic (`KINDS`) in wire
    bytes and in what the same messages weigh in fp32."""

    def __init__(self, comm: Comm, cfg: TrainConfig, data: Any, settings: HybridSettings) -> None:
        self.comm, self.cfg, self.data = comm, cfg, data
        P, r = comm.size, comm.rank
        self.device = comm.device
        with torch.random.fork_rng(devices=[]):  # the single process's stream: model init, then its dropout
            torch.manual_seed(cfg.seed)
            model = build_model("cnn", data.features, data.classes, data.image_shape, dropout=cfg.dropout)
            #: the head's dropout draws from here: where the unsplit model's global stream stands after its init
            self.gen = torch.Generator().manual_seed(0)
            self.gen.set_state(torch.get_rng_state())
        self.model = model.to(self.device)
        self.conv = self.model.features
        self.image_shape = tuple(self.model.image_shape)
        self.p = float(self.model.head[1].p)
        linear = self.model.head[2]
        self.cols = [len(c) for c in torch.arange(data.classes).tensor_split(P)]
        self.col0 = sum(self.cols[:r])
        rows = slice(self.col0, self.col0 + self.cols[r])
        self.weight = nn.Parameter(linear.weight.detach()[rows].clone())
        self.bias = nn.Parameter(linear.bias.detach()[rows].clone())
        self.opt = make_optimizer(cfg.optimizer, [*self.conv.parameters(), self.weight, self.bias], cfg.lr,
                                  cfg.momentum)
        self.codec = grads_codec(settings.grads_codec)
        self.act = activation_codec(cfg.codec, CARRIES)
        self.algorithm = settings.algorithm
        self.bytes = dict.fromkeys(KINDS, 0)
        self.fp32 = dict.fromkeys(KINDS, 0)
        self.steps = 0

    # -- the exchanges, each counted
    def _counted(self, kind: str, fp32: int, fn: Any, *args: Any, **kw: Any) -> torch.Tensor:
        before = self.comm.bytes_sent
        out = fn(*args, **kw)
        self.bytes[kind] += self.comm.bytes_sent - before
        self.fp32[kind] += fp32
        return out

    def gather_rows(self, mine: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        """The rows of every rank's `mine` (rank p holds sizes[p] rows), concatenated in rank order: padded to the
        largest share, all-gathered through the activation codec (each block encoded once by its owner)."""
        P, m = self.comm.size, max(sizes)
        block = torch.zeros((m, *mine.shape[1:]), dtype=torch.float32, device=self.device)
        block[:len(mine)] = mine
        got = self._counted("features", (P - 1) * 4 * block.numel(), collectives.all_gather, self.comm, block,
                            algorithm=EXCHANGE, codec=self.act, check=False)
        return torch.cat([got[p * m:p * m + sizes[p]] for p in range(P)])

    def gather_cols(self, mine: torch.Tensor) -> torch.Tensor:
        """Every rank's columns of the logits (rank p holds cols[p]), side by side: all-gathered (codec)."""
        P, B, m = self.comm.size, mine.shape[0], max(self.cols)
        block = torch.zeros((B, m), dtype=torch.float32, device=self.device)
        block[:, :mine.shape[1]] = mine
        got = self._counted("logits", (P - 1) * 4 * block.numel(), collectives.all_gather, self.comm, block,
                            algorithm=EXCHANGE, codec=self.act, check=False)
        return torch.cat([got[p * B:(p + 1) * B, :self.cols[p]] for p in range(P)], dim=1)

    def scatter_rows(self, full: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        """This rank's rows of the sum over ranks of `full` (rows of every shard in rank order): each block sent
        to its owner through the activation codec, which sums them (reduce-scatter)."""
        P, r, m = self.comm.size, self.comm.rank, max(sizes)
        blocks = torch.zeros((P * m, *full.shape[1:]), dtype=torch.float32, device=self.device)
        start = 0
        for p, n in enumerate(sizes):
            blocks[p * m:p * m + n] = full[start:start + n]
            start += n
        mine = self._counted("feature_gradients", (P - 1) * 4 * (blocks.numel() // P), collectives.reduce_scatter,
                             self.comm, blocks, algorithm=EXCHANGE, codec=self.act, check=False)
        return mine[:sizes[r]]

    def sum_conv_grads(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """The sums over ranks of the conv gradients (in the conv's parameter order), as one bucket (DDP's): one
        allreduce by `algorithm` with `grads_codec` on its wire (an error-feedback residual kept under
        `BUCKET`); native: torch's own all_reduce, counted at Gloo's ring volume, as the DDP hook counts it."""
        flat = torch.cat([g.reshape(-1) for g in grads])
        P, nbytes = self.comm.size, 4 * flat.numel()
        if self.algorithm == NATIVE:
            fp32 = 2 * (P - 1) * nbytes // P
            total = allreduce(self.comm, flat, algorithm=NATIVE, check=False)
            self.bytes["conv_gradients"] += fp32
            self.fp32["conv_gradients"] += fp32
        else:
            fp32 = round(get_algorithm(self.algorithm).bytes_per_rank(P, nbytes))
            total = self._counted("conv_gradients", fp32, allreduce, self.comm, flat, algorithm=self.algorithm,
                                  codec=self.codec, key=BUCKET, check=False)
        return [t.view_as(g) for t, g in zip(total.split([g.numel() for g in grads]), grads)]

    # -- training
    def _dropout(self, x: torch.Tensor) -> torch.Tensor:
        """The head's dropout on the whole batch's features, drawn as torch's own (bernoulli, then / (1-p))."""
        if self.p == 0:
            return x
        noise = torch.empty(x.shape, dtype=x.dtype).bernoulli_(1 - self.p, generator=self.gen)
        return x * noise.div_(1 - self.p).to(self.device)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """One training step on the global batch (x, y) (every rank passes the same); the batch's mean loss."""
        P, r = self.comm.size, self.comm.rank
        sizes = [len(t) for t in torch.arange(len(y)).tensor_split(P)]
        start = sum(sizes[:r])
        xs = x[start:start + sizes[r]].to(self.device)
        y = y.to(self.device)
        self.opt.zero_grad(set_to_none=True)
        with span("forward"):
            feats = self.conv(xs.view(-1, 1, *self.image_shape)).flatten(1)
            full = self.gather_rows(feats.detach(), sizes).requires_grad_(True)
            z = F.linear(self._dropout(full), self.weight, self.bias)
            logits = self.gather_cols(z.detach()).requires_grad_(True)
            loss = F.cross_entropy(logits, y)
        with span("backward"):
            loss.backward()
            z.backward(logits.grad[:, self.col0:self.col0 + self.cols[r]])
            feats.backward(self.scatter_rows(full.grad, sizes))
            params = list(self.conv.parameters())
            summed = self.sum_conv_grads([p.grad for p in params])
            for p, g in zip(params, summed):
                p.grad = g.view_as(p)
        with span("optimizer"):
            self.opt.step()
        self.steps += 1
        return float(loss.detach())

    def head(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole dense layer (weight, bias), its slices gathered as control traffic (not counted)."""
        parts = self.comm.allgather_object((self.weight.detach().cpu(), self.bias.detach().cpu()))
        return torch.cat([w for w, _ in parts]), torch.cat([b for _, b in parts])

    def evaluate(self) -> tuple[float, float]:
        """(test error %, test loss) of the whole model on rank 0 (NaN on the others); every rank calls it."""
        w, b = self.head()
        if self.comm.rank != 0:
            return math.nan, math.nan
        linear = self.model.head[2]
        with torch.no_grad():
            linear.weight.copy_(w)
            linear.bias.copy_(b)
        return evaluate_model(self.model, self.data.test_x.to(self.device), self.data.test_y.to(self.device))

    # -- what it sent
    def traffic(self) -> list[dict]:
        """This rank's wire bytes per step by kind, and what the same messages weigh in fp32."""
        n = max(self.steps, 1)
        return [dict(kind=k, bytes_per_step=self.bytes[k] / n, fp32_bytes_per_step=self.fp32[k] / n) for k in KINDS]

    def summary(self) -> dict[str, Any]:
        """Per step, all ranks together (every rank calls it; a control gather): the conv gradients' bytes
        against the activations', and what the dense head's gradients would cost data-parallel."""
        rows = self.comm.allgather_object(self.traffic())
        total = {k: sum(r[i]["bytes_per_step"] for r in rows) for i, k in enumerate(KINDS)}
        fp32 = {k: sum(r[i]["fp32_bytes_per_step"] for r in rows) for i, k in enumerate(KINDS)}
        P = self.comm.size
        conv_params = sum(p.numel() for p in self.conv.parameters())
        dense_params = self.model.head[2].weight.numel() + self.model.head[2].bias.numel()
        algo = "ring" if self.algorithm == NATIVE else self.algorithm
        act = [k for k in KINDS if k != "conv_gradients"]
        act_bytes, act_fp32 = sum(total[k] for k in act), sum(fp32[k] for k in act)
        return dict(grads_codec=self.codec.describe() if self.codec else "fp32",
                    activation_codec=self.act.describe() if self.act else "fp32", algorithm=self.algorithm,
                    parameters=conv_params + dense_params, conv_params=conv_params, dense_params=dense_params,
                    conv_grad_bytes_per_step=total["conv_gradients"],
                    conv_grad_fp32_bytes_per_step=fp32["conv_gradients"],
                    conv_grad_bytes_ratio=_ratio(total["conv_gradients"], fp32["conv_gradients"]),
                    activation_bytes_per_step=act_bytes, activation_fp32_bytes_per_step=act_fp32,
                    activation_bytes_ratio=_ratio(act_bytes, act_fp32),
                    dense_grad_fp32_bytes_if_data_parallel=P * get_algorithm(algo).bytes_per_rank(P, 4 * dense_params))


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def hybrid_rank(comm: Comm, cfg: dict, settings: dict, progress: Any = None, on_row: Any = None,
                trace: str | None = None) -> dict:
    """Train on this rank (the strategy's rank function, `base.py`)."""
    c, s = TrainConfig(**cfg), HybridSettings(**settings)
    net_label = f"hybrid conv {s.grads_codec or 'fp32'}, head {c.codec or 'fp32'}"
    loop = RankLoop(comm, c, net_label, progress, on_row, trace)
    net = HybridCNN(comm, c, loop.data, s)
    out = loop.run(net.step, net.evaluate)
    out["fp32_bytes"] = sum(net.fp32.values())
    out["summary"] = net.summary()
    out["tables"] = {"traffic": net.traffic()}
    return out


#: the benchmark's case (2 ranks; see STRATEGY). Per step each rank sends, in fp32, its shard's conv features
#: (256 samples x 128 values x 4 B = 131 kB), the other shard's feature gradients (131 kB), its 5 columns of the
#: logits (10 kB) and the conv gradients' bucket (4,800 x 4 B = 19 kB): 291 kB. Its compute, the small CNN's
#: forward and backward on 256 digits, is ~3-6 ms on one core (~12-25 us a sample). At 1 Gbit/s the 291 kB take
#: 2.3 ms: no batch makes this model link-bound there (bytes and compute both grow with the batch, 4.3 us of
#: link against >= 6 us of compute a sample). At 100 Mbit/s they take 23 ms, ~80-90 % of the step: 8 bits on
#: the activations and 1 bit on the conv gradients carry 69 kB (5.5 ms), so the step should shrink ~2-2.5x.
#: 64 steps of RMSProp reach a test loss ~0.3-0.35 in fp32 and with the codecs (simulated, seeds 0 and 1).
BENCH = dict(cfg=dict(model="cnn", dataset="digits", batch=512, epochs=24.0, evals_per_epoch=1, optimizer="rmsprop",
                      lr=0.003, codec="dynamic_tree", seed=0),
             settings=dict(grads_codec="ef:onebit"), link_rate="100mbit")

STRATEGY = Strategy(
    name="hybrid",
    description="conv layers data-parallel (gradients summed), dense layers model-parallel (split by output)",
    paper="Krizhevsky 2014, One weird trick §3; Dettmers 2016 §2.2, §2.4, §3.4 (1-bit conv gradients with error "
          "feedback, 8-bit model-parallel activations)",
    settings=HybridSettings,
    rank=hybrid_rank,
    models=("cnn",),
    carries=CARRIES,
    min_procs=2,
    order=30,
    bench=BENCH,
)

__all__ = ["STRATEGY", "BENCH", "BUCKET", "EXCHANGE", "KINDS", "HybridSettings", "HybridCNN", "hybrid_rank",
           "grads_codec"]
