"""Tensor (model) parallelism on real ranks (`paralab train --mode tensor`): the MLP's Linear layers split over
the ranks of a tensor group, Megatron's column-row pairs (Dettmers 2016 §2.2's two splits; Shoeybi et al. 2019
§3), optionally with sequence parallelism (Korthikanti et al. 2022 §4.2.2), and `--codec` on the activation
collectives (the paper's 8-bit model-parallel activations, §3.4). `--data D` makes a 2-D mesh of D data-parallel
replicas x procs/D tensor ranks (DeviceMesh's layout): each tensor group trains on its shard of every batch and
the gradients are summed over the data group in fp32.

Every rank of a tensor group gets the same batch (`RankLoop`), builds the whole model from the seed and keeps
its slices (`tensor_models`); every rank evaluates (a tensor-parallel forward is collective) and rank 0
reports. With an fp32 wire a step is the single-process step with the same dropout masks, up to the order of
floating-point sums. The language-model tasks' tiny GPT (`lm.GPTConfig`) trains the same way, its attention
heads and MLP blocks split (`TensorParallelGPT`; sequence parallelism over its positions).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lab.backend import Progress, RowSink
from lab.comm.base import Comm
from lab.comm.spans import span

from ..models import build_model
from ..run import evaluate
from .base import Settings, Strategy
from .lm import config_of, is_lm, optimizer
from .loop import RankLoop
from .mesh import check_mesh, mesh_groups
from .tensor_layers import TensorGroup, split_range
from .tensor_models import TensorParallelGPT, TensorParallelMLP, column_widths
from .wire import activation_codec

CARRIES = ("the tensor-parallel activations (all-reduced, reduce-scattered or gathered between layer halves) and "
           "their gradients")


@dataclass(frozen=True)
class TensorSettings(Settings):
    """sequence_parallel: reduce-scatter + all-gather (tokens = the batch's samples) instead of each pair's
    all-reduce. data: data-parallel replicas (procs = data x tensor ranks)."""

    sequence_parallel: bool = False
    data: int = 1

    def tensor_ranks(self, procs: int) -> int:
        return check_mesh(procs, self.data)

    def check(self, cfg: Any, procs: int) -> None:
        if not isinstance(self.sequence_parallel, bool):
            raise ValueError(f"--sequence-parallel {self.sequence_parallel!r}; allowed: true or false")
        T = self.tensor_ranks(procs)
        if T < 2:
            raise ValueError(f"--data {self.data} leaves {T} tensor rank on {procs} processes; tensor parallelism "
                             f"needs >= 2: allowed --data: "
                             + ", ".join(str(d) for d in range(1, procs) if procs % d == 0 and procs // d >= 2))
        if is_lm(cfg) and cfg.heads % T:
            raise ValueError(f"the tiny GPT's {cfg.heads} attention heads cannot be split over {T} tensor ranks; "
                             f"allowed: a number of tensor ranks that divides {cfg.heads}")
        for w in () if is_lm(cfg) else column_widths(tuple(cfg.hidden)):
            if w < T:
                raise ValueError(f"--hidden {','.join(map(str, cfg.hidden))}: a layer of {w} units cannot be split "
                                 f"over {T} tensor ranks; each split layer needs >= {T} units (uneven splits are fine)")
        if cfg.error_feedback:
            raise ValueError("--error-feedback is for gradients summed step after step; tensor parallelism's codec "
                             "carries activations, new every step: drop it")
        codec = activation_codec(cfg.codec, CARRIES)
        if cfg.algorithm != "native":  # (a codec on native is refused by TrainConfig.check)
            from lab.comm.allreduce import configure, resolve_mode

            configure(cfg.algorithm, T, codec, resolve_mode(codec, "auto", cfg.algorithm), {})


def tensor_rank(comm: Comm, cfg: dict[str, Any], settings: dict[str, Any], progress: Progress | None = None,
                on_row: RowSink | None = None, trace: str | None = None) -> dict:
    """One rank of a tensor-parallel run (module docstring; the rank contract is `base`'s). summary: tensor_ranks,
    data, sequence_parallel, parameters_per_rank, activation_bytes_per_step and activation_fp32_bytes_per_step
    (rank 0's activation collectives of a training step: sent, and what fp32 sends). tables['collectives']: per
    rank, group (tensor | data), op, phase (forward | backward | eval | gradients): calls, values, bytes,
    fp32_bytes."""
    c, s = config_of(cfg), TensorSettings(**settings)
    lm = is_lm(c)
    T = s.tensor_ranks(comm.size)
    if s.data > 1:
        groups = mesh_groups(comm, (s.data, T), ("data", "tensor"))
        tcomm, dcomm = groups["tensor"], groups["data"]
    else:
        tcomm, dcomm = comm, None
    replica = comm.rank // T  # this rank's data-parallel replica (DeviceMesh's row-major layout)
    loop = RankLoop(comm, c, f"tensor {c.label()}", progress, on_row, trace)
    ds = loop.data
    torch.manual_seed(c.seed)
    if lm:
        full = ds.build(c)
    else:
        full = build_model("mlp", ds.features, ds.classes, ds.image_shape, hidden=c.hidden, dropout=c.dropout,
                           activation=c.activation)
    n_params = sum(p.numel() for p in full.parameters())
    group = TensorGroup(tcomm, activation_codec(c.codec, CARRIES), c.algorithm)
    if lm:
        model = TensorParallelGPT(full, group, s.sequence_parallel).to(comm.device)
    else:
        model = TensorParallelMLP(full, group, s.sequence_parallel, seed=c.seed + 1).to(comm.device)
    del full
    params = list(model.parameters())
    opt = optimizer(c, params)
    data_group = TensorGroup(dcomm, None, c.algorithm) if dcomm is not None else None
    xte, yte = ds.test_x.to(comm.device), ds.test_y.to(comm.device)

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        total = x.shape[0]
        a, b = split_range(total, s.data, replica)
        xs, ys = x[a:b].to(comm.device), y[a:b].to(comm.device)
        opt.zero_grad(set_to_none=True)
        with span("forward"):  # the batch's mean over its targets (a language model's: its tokens)
            out = model(xs) if lm else model(xs, rows=(a, total))
            loss = F.cross_entropy(out, ys, reduction="sum") / y.numel()
        with span("backward"):
            loss.backward()
        value = loss.detach().reshape(1)
        if data_group is not None:  # the data group's sum of gradients (fp32), the loss riding along
            flat = torch.cat([p.grad.reshape(-1) for p in params] + [value])
            flat = data_group.all_reduce(flat, "gradients", codec=False)
            off = 0
            for p in params:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
            value = flat[-1:]
        with span("optimizer"):
            opt.step()
        return float(value)

    def evaluate_all() -> tuple[float, float]:
        group.evaluating = True
        try:
            return ds.evaluate(model) if lm else evaluate(model, xte, yte)
        finally:
            group.evaluating = False

    out = loop.run(step, evaluate_all)
    groups = [("tensor", group)] + ([("data", data_group)] if data_group is not None else [])
    steps = max(int(out["steps"]), 1)
    train = [r for r in group.table() if r["phase"] != "eval" and r["op"] != "grad_all_reduce"]
    out.update(fp32_bytes=int(round(sum(g.fp32_bytes for _, g in groups))),
               tables=dict(collectives=[dict(r, group=name) for name, g in groups for r in g.table()]))
    out["summary"] = dict(tensor_ranks=T, data=s.data, sequence_parallel=s.sequence_parallel, parameters=n_params,
                          parameters_per_rank=sum(p.numel() for p in params),
                          activation_bytes_per_step=sum(r["bytes"] for r in train) / steps,
                          activation_fp32_bytes_per_step=sum(r["fp32_bytes"] for r in train) / steps)
    return out


STRATEGY = Strategy(
    name="tensor",
    description="each Linear layer split over the ranks, Megatron's column-then-row pairs (one all-reduce per "
                "pair), or sequence parallelism's reduce-scatter and all-gather; a codec on the activations",
    paper="Dettmers 2016 §2.2 (split by output: outputs gathered; by input: outputs summed), §3.4 (8-bit "
          "model-parallel activations); Shoeybi et al. 2019 (Megatron-LM) §3; Korthikanti et al. 2022 §4.2.2",
    settings=TensorSettings,
    rank=tensor_rank,
    models=("mlp",),
    carries=CARRIES,
    min_procs=2,
    order=20,
    lm=True,
    # The link-bound case, by arithmetic (1 Gbit/s = 125 MB/s, 2 ranks). Per step each rank sends what two
    # all-reduces of B·h2 fp32 values send (the row half's outputs; the last column half's input gradient), 4·B·h2
    # bytes each: at B = 1344, h2 = 1024 that is 11 MB, 88 ms, and 8-bit a quarter of it, 22 ms. The flops,
    # 6·B·(32·h1 + h1·h2/2 + 5·h2) = 0.32 GFLOP, grow with h1·h2 while the wire grows with h2 alone, so a narrow
    # first layer (h1 = 64) before a wide second one keeps them low. What is left grows with the wire: the
    # elementwise work on the all-reduced activations (bias, ReLU, their gradients) and the codec's own (~5 ns a
    # value). Sequence parallelism does the elementwise work on half of the samples for the same bytes: measured
    # here, ~25 ms of CPU a step in fp32 and ~36 ms with 8 bits (~34 and ~46 without it), so fp32 ~113 ms and
    # 8-bit ~58 ms a step on the link. digits (64 features) keeps the first layer cheap; 1344 of its 1348
    # training samples make its largest batch.
    bench=dict(cfg=dict(dataset="digits", model="mlp", hidden=(64, 1024), dropout=(0.0, 0.0, 0.0), batch=1344,
                        epochs=16.0, evals_per_epoch=1, optimizer="sgd", lr=0.05, momentum=0.9),
               settings=dict(sequence_parallel=True, data=1)),
)

__all__ = ["STRATEGY", "TensorSettings", "tensor_rank", "CARRIES"]
