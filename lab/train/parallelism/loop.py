"""The training loop every strategy's rank shares: the seeded batch order (every rank draws the same global
batches; the strategy decides which part each rank computes), evaluations at the same samples as the
simulated and DDP runs, rank 0's curve rows, progress, step times and the traced steps. The data is an image
set, or a language-model task's corpus (`lm.LMData`: windows of tokens and their next tokens; an epoch is as
many windows as the training split holds)."""
from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from typing import Any, Callable

import torch

from lab.backend import Progress, RowSink
from lab.comm.base import Comm
from lab.comm.timesplit import Tracer

from ..run import TrainConfig
from ..stream import ShardStream
from .lm import LMData, rank_data

#: the steps a traced run records (0-based, after two warm-up steps), left out of step_s (as DDP's)
TRACED_STEPS = range(2, 5)


class RankLoop:
    """One rank's loop over `cfg`'s batches. `data`: the rank's Dataset (features, classes, image_shape,
    train_x/y, test_x/y), or for a language-model config (`lm.GPTConfig`) its `lm.LMData`; `label`: what
    progress messages call the run."""

    def __init__(self, comm: Comm, cfg: TrainConfig, label: str, progress: Progress | None = None,
                 on_row: RowSink | None = None, trace: str | None = None) -> None:
        self.comm, self.cfg, self.label = comm, cfg, label
        self.progress, self.on_row = progress, on_row
        self.data = rank_data(cfg)
        self.tracer = Tracer(comm, trace) if trace else None

    def run(self, step: Callable[[torch.Tensor, torch.Tensor], float | None],
            evaluate: Callable[[], tuple[float, float]]) -> dict[str, Any]:
        """Train: step(x, y) on each global batch (every rank calls it with the same batch; rank 0's return is
        the batch's mean loss), evaluate() (every rank calls it; rank 0's (test error %, test loss) is kept; a
        language model's (perplexity, loss per token), in the same columns) at each evaluation point. Returns
        rows (rank 0), steps, step_s, bytes_sent and, traced, split."""
        c, comm, ds = self.cfg, self.comm, self.data
        lm = isinstance(ds, LMData)
        stream = ds.stream(c.batch, c.seed) if lm else ShardStream(ds.train_x, ds.train_y, c.batch, 1, c.seed)
        N = ds.samples_per_epoch if lm else len(ds.train_y)
        total = int(round(c.epochs * N))
        every = max(1, N // c.evals_per_epoch)
        rows: list[dict] = []
        times: list[float] = []
        losses: list[float] = []
        b0 = comm.bytes_sent
        step_no, next_eval = 0, every
        t0 = time.perf_counter()
        while stream.samples < total:
            x, y = stream.batch()
            traced = self.tracer is not None and step_no in TRACED_STEPS
            t = time.perf_counter()
            with self.tracer.step(f"train step {step_no + 1}") if traced else nullcontext():
                loss = step(x, y)
            if not traced:
                times.append(time.perf_counter() - t)
            if loss is not None:
                losses.append(float(loss))
            step_no += 1
            if stream.samples >= next_eval or stream.samples >= total:
                err, tloss = evaluate()
                row = dict(step=step_no, samples=stream.samples, epoch=stream.samples / N,
                           train_loss=sum(losses) / len(losses) if losses else float("nan"),
                           test_error=err, test_loss=tloss, bytes=comm.bytes_sent - b0,
                           wall_s=time.perf_counter() - t0)
                losses = []
                if comm.rank == 0:
                    rows.append(row)
                    if self.on_row:
                        self.on_row(row)
                if self.progress:
                    self.progress(min(stream.samples / total, 1.0),
                                  f"{self.label}: epoch {stream.samples / N:.2f}, "
                                  + (f"perplexity {err:.1f}" if lm else f"test error {err:.2f}%"))
                while next_eval <= stream.samples:
                    next_eval += every
        warm = times[min(len(times) - 1, 2):]
        out: dict[str, Any] = dict(rows=rows, steps=step_no, step_s=statistics.median(warm),
                                   bytes_sent=comm.bytes_sent - b0)
        if self.tracer is not None:
            out["split"] = self.tracer.step_split()
            self.tracer.save()
        return out


__all__ = ["RankLoop", "TRACED_STEPS"]
