"""Training runs for the paper's experiments: the MLP on MNIST-like data (§IV-A/B) and the LSTM
language model (§IV-C), with conventional dropout, RDP or TDP. Time per epoch is wall-clock of
the training steps (forward, backward, optimizer) only; evaluation is outside it.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable, Optional, Sequence

import pandas as pd
import torch
import torch.nn.functional as F

from .models import DropoutLSTM, DropoutMLP, clip_grad_norm, sgd
from .tile_pattern import DEFAULT_TILE
from lab.backend import Progress, RowSink



@torch.no_grad()

def epoch_spread(epoch_times: list[float]) -> dict[str, float]:
    """The spread of the per-epoch times (seconds): fastest and slowest epoch, the first left out when there
    are more than two (it carries warm-up). A speedup is within noise when these ranges overlap."""
    t = epoch_times[1:] if len(epoch_times) > 2 else epoch_times
    return {"epoch_s_lo": min(t), "epoch_s_hi": max(t)}

def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1024) -> float:
    """Top-1 accuracy in percent (eval mode: dense, no dropout)."""
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, len(y), batch):
        correct += int((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum())
    model.train(was)
    return 100.0 * correct / max(1, len(y))


class _Curve:
    """Averages the training loss between logged points, adds the end-of-epoch evaluation, streams
    each row to on_point and reports progress; the shared bookkeeping of both training loops."""

    def __init__(self, kind: str, epochs: int, steps_per_epoch: int, points_per_epoch: int,
                 loss_column: Callable[[float], tuple[str, float]], progress: Optional[Progress],
                 on_point: Optional[RowSink]) -> None:
        self.kind, self.epochs, self.steps_per_epoch = kind, epochs, steps_per_epoch
        self.log_every = max(1, steps_per_epoch // max(1, points_per_epoch))
        self.loss_column, self.progress, self.on_point = loss_column, progress, on_point
        self.rows: list[dict] = []
        self.step, self.run_loss, self.run_n = 0, 0.0, 0

    def add(self, epoch: int, k: int, loss: float, end_of_epoch: Callable[[], dict]) -> None:
        """Record step k (0-based) of epoch; end_of_epoch() gives the evaluation columns."""
        self.step += 1
        self.run_loss += loss
        self.run_n += 1
        last = k + 1 == self.steps_per_epoch
        if (k + 1) % self.log_every == 0 or last:
            name, value = self.loss_column(self.run_loss / self.run_n)
            row = {"step": self.step, "epoch": epoch + (k + 1) / self.steps_per_epoch, name: value}
            if last:
                row.update(end_of_epoch())
            self.rows.append(row)
            if self.on_point:
                self.on_point(dict(row))
            self.run_loss, self.run_n = 0.0, 0
        if self.progress:
            self.progress((epoch + (k + 1) / self.steps_per_epoch) / self.epochs,
                          f"{self.kind} epoch {epoch + 1}/{self.epochs}, step {k + 1}/{self.steps_per_epoch}")


def train_mlp(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor,
              classes: int, *, hidden: Sequence[int] = (2048, 2048), rates: Sequence[float] = (0.5, 0.5),
              kind: str = "row", epochs: int = 1, batch: int = 128, lr: float = 0.01, momentum: float = 0.9,
              max_dp: Optional[int] = None, tile: tuple[int, int] = DEFAULT_TILE, seed: int = 0,
              points_per_epoch: int = 4, progress: Optional[Progress] = None,
              on_point: Optional[RowSink] = None) -> tuple[pd.DataFrame, dict]:
    """One MLP run (§IV-A): SGD with momentum, cross-entropy; returns (curve, summary)."""
    if epochs < 1 or batch < 1 or lr <= 0 or not 0 <= momentum < 1:
        raise ValueError("need epochs >= 1, batch >= 1, lr > 0 and 0 <= momentum < 1")
    if batch > len(train_y):
        raise ValueError(f"batch {batch} is larger than the {len(train_y)} training samples")
    torch.manual_seed(seed)  # conventional dropout's masks
    model = DropoutMLP([train_x.shape[1], *hidden, classes], rates, kind, max_dp=max_dp, tile=tile, seed=seed)
    opt = sgd(model.parameters(), lr, momentum)
    gen = torch.Generator().manual_seed(seed + 17)
    steps_per_epoch = len(train_y) // batch
    log = _Curve(kind, epochs, steps_per_epoch, points_per_epoch, lambda m: ("train_loss", m), progress, on_point)
    epoch_times = []
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(train_y), generator=gen)
        elapsed = 0.0
        for k in range(steps_per_epoch):
            idx = order[k * batch:(k + 1) * batch]
            xb, yb = train_x[idx], train_y[idx]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            elapsed += time.perf_counter() - t0
            log.add(epoch, k, float(loss.detach()),
                    lambda: {"test_acc": accuracy(model, test_x, test_y), "epoch_time_s": elapsed})
        epoch_times.append(elapsed)
    curve = log.rows
    summary = {"test_acc": curve[-1]["test_acc"], "epoch_s": statistics.median(epoch_times),
               "first_epoch_s": epoch_times[0], "epochs": epochs, "steps_per_epoch": steps_per_epoch,
               "final_train_loss": curve[-1]["train_loss"], **epoch_spread(epoch_times)}
    return pd.DataFrame(curve), summary


@torch.no_grad()
def evaluate_lm(model: DropoutLSTM, columns: torch.Tensor, bptt: int) -> tuple[float, float]:
    """(perplexity, next-word accuracy %) over batchified columns, eval mode."""
    from lab.data.text import bptt_batches

    was = model.training
    model.eval()
    state = model.init_state(columns.shape[1])
    total, n, correct = 0.0, 0, 0
    for inp, tgt in bptt_batches(columns, bptt):
        logits, state = model(inp, state)
        total += float(F.cross_entropy(logits, tgt.reshape(-1), reduction="sum"))
        correct += int((logits.argmax(1) == tgt.reshape(-1)).sum())
        n += tgt.numel()
    model.train(was)
    return math.exp(total / max(1, n)), 100.0 * correct / max(1, n)


def train_lstm(train: torch.Tensor, valid: torch.Tensor, test: torch.Tensor, vocab: int, *, hidden: int = 256,
               layers: int = 2, rates: Sequence[float] = (0.5, 0.5), kind: str = "row", epochs: int = 1,
               batch: int = 20, bptt: int = 35, lr: float = 1.0, lr_decay: float = 0.8, clip: float = 5.0,
               max_dp: Optional[int] = None, tile: tuple[int, int] = DEFAULT_TILE, seed: int = 0,
               points_per_epoch: int = 4, progress: Optional[Progress] = None, on_point: Optional[RowSink] = None
               ) -> tuple[pd.DataFrame, dict]:
    """One LSTM LM run (§IV-C): truncated BPTT, plain SGD (lr decays by lr_decay per epoch after the
    first), gradient-norm clipping; returns (curve, summary) with perplexity and word accuracy."""
    from lab.data.text import batchify, bptt_batches

    if epochs < 1 or lr <= 0 or not 0 < lr_decay <= 1 or clip <= 0:
        raise ValueError("need epochs >= 1, lr > 0, 0 < lr_decay <= 1 and clip > 0")
    torch.manual_seed(seed)
    model = DropoutLSTM(vocab, hidden, layers, rates, kind, max_dp=max_dp, tile=tile, seed=seed)
    params = list(model.parameters())
    opt = sgd(params, lr)
    tr, va, te = batchify(train, batch), batchify(valid, batch), batchify(test, batch)
    steps_per_epoch = math.ceil((tr.shape[0] - 1) / bptt)
    log = _Curve(kind, epochs, steps_per_epoch, points_per_epoch, lambda m: ("train_ppl", math.exp(min(50.0, m))),
                 progress, on_point)
    epoch_times = []
    for epoch in range(epochs):
        for grp in opt.param_groups:
            grp["lr"] = lr * lr_decay ** epoch
        model.train()
        state = model.init_state(batch)
        elapsed = 0.0
        for k, (inp, tgt) in enumerate(bptt_batches(tr, bptt)):
            t0 = time.perf_counter()
            state = [(h.detach(), c.detach()) for h, c in state]
            opt.zero_grad(set_to_none=True)
            logits, state = model(inp, state)
            loss = F.cross_entropy(logits, tgt.reshape(-1))
            loss.backward()
            clip_grad_norm(params, clip)
            opt.step()
            elapsed += time.perf_counter() - t0
            log.add(epoch, k, float(loss.detach()),
                    lambda: dict(zip(("valid_ppl", "valid_acc", "epoch_time_s"),
                                     (*evaluate_lm(model, va, bptt), elapsed))))
        epoch_times.append(elapsed)
    curve = log.rows
    test_ppl, test_acc = evaluate_lm(model, te, bptt)
    summary = {"test_ppl": test_ppl, "test_acc": test_acc, "valid_ppl": curve[-1]["valid_ppl"],
               "epoch_s": statistics.median(epoch_times), "first_epoch_s": epoch_times[0], "epochs": epochs,
               "steps_per_epoch": steps_per_epoch, **epoch_spread(epoch_times)}
    return pd.DataFrame(curve), summary
