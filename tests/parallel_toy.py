"""A small parallelism the tests register (a test plugin, not a product strategy): data parallelism by hand.
Each rank computes its slice of the global batch in `microbatches` accumulation steps, sends its flat gradient
to every other rank through the lab's Wire (the codec on it) and sums what it receives. It drives the CLI, the
experiments' front door, converge, the benchmark and torchrun runs without the real strategies; imported by
name in rank processes ($PARALAB_PARALLELISMS or the registry's carried modules)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lab.train.models import build_model, make_optimizer
from lab.train.parallelism import Settings, Strategy, register
from lab.train.parallelism.loop import RankLoop
from lab.train.parallelism.wire import Wire, activation_codec
from lab.train.run import TrainConfig, evaluate


@dataclass(frozen=True)
class ToySettings(Settings):
    microbatches: int = 1

    def check(self, cfg, procs: int) -> None:
        m = self.microbatches
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"--microbatches {m!r}; allowed: an int >= 1")
        if cfg.batch // procs < m:
            raise ValueError(f"--microbatches {m}: a rank's {cfg.batch // procs} samples cannot make {m} "
                             f"micro-batches; allowed: 1..{cfg.batch // procs}")


def toy_rank(comm, cfg: dict, settings: dict, progress=None, on_row=None, trace=None) -> dict:
    c, s = TrainConfig(**cfg), ToySettings(**settings)
    loop = RankLoop(comm, c, f"toy {c.label()}", progress, on_row, trace)
    ds = loop.data
    torch.manual_seed(c.seed)
    model = build_model(c.model, ds.features, ds.classes, ds.image_shape, hidden=c.hidden, dropout=c.dropout,
                        activation=c.activation)
    opt = make_optimizer(c.optimizer, model.parameters(), c.lr, c.momentum)
    wire = Wire(comm, activation_codec(c.codec, "gradients (toy)"))
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    P, r = comm.size, comm.rank

    def step(x, y):
        xs, ys = x.tensor_split(P)[r], y.tensor_split(P)[r]
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for mx, my in zip(xs.tensor_split(s.microbatches), ys.tensor_split(s.microbatches)):
            loss = F.cross_entropy(model(mx), my, reduction="sum") / len(y)
            loss.backward()
            total += float(loss)
        g = torch.cat([p.grad.reshape(-1) for p in params])
        works = [wire.isend(g, d) for d in range(P) if d != r]
        got = [wire.irecv((n,), src) for src in range(P) if src != r]
        summed = g.clone()
        for w, get in got:
            w.wait()
            summed += get()
        for w in works:
            w.wait()
        i = 0
        for p in params:
            p.grad = summed[i:i + p.numel()].view_as(p).clone()
            i += p.numel()
        opt.step()
        return _mean_loss(comm, total)

    def _eval():
        return evaluate(model, ds.test_x, ds.test_y)

    out = loop.run(step, _eval)
    out.update(fp32_bytes=wire.fp32_bytes, summary=dict(microbatches=s.microbatches, parameters=n),
               tables={"per_rank": [dict(rank=r, samples_per_step=c.batch // P, values_sent=wire.fp32_bytes // 4)]})
    return out


def _mean_loss(comm, local: float) -> float:
    """The global batch's mean loss (every rank's share summed), for rank 0's curve."""
    return sum(comm.allgather_object(local))


STRATEGY = Strategy(name="toy", description="data parallelism by hand (test plugin)", paper="test plugin",
                    settings=ToySettings, rank=toy_rank, models=("mlp", "cnn"), carries="gradients (toy)",
                    order=900, bench=dict(cfg=dict(hidden=(64,), dropout=(0.0, 0.0), batch=64, epochs=0.05,
                                                   train_limit=512, evals_per_epoch=1), settings={}))


def install() -> Strategy:
    """Register the toy strategy at run time (idempotent)."""
    return register(STRATEGY, replace=True)
