"""Parameter consistency models for simulated data parallelism (paper 001, "Parameter (and
Model) consistency"): synchronous, stale-synchronous (bounded asynchronous), asynchronous, EASGD, gossip.

Each model is a generator of `Update`s over `Workers`, with a modelled clock: a worker's
forward+backward takes `compute_s` times a log-normal straggler factor (sigma `straggler`,
seeded), and communication takes what `lab.comm.cost` predicts on the chosen link.

  sync   all K gradients are summed by an allreduce (codec on the wire), every replica steps;
         a step lasts as long as the slowest worker plus the allreduce.
  ssp    parameter server: a worker pushes its gradient (through its codec), the server applies
         it at once (one optimizer step), the worker pulls the fp32 parameters and goes on,
         unless its clock (pushes so far) is more than `staleness` ahead of the slowest worker's,
         in which case it waits. staleness=0 is bulk-synchronous: with plain SGD it equals sync.
  async  the same server with no bound; every push also meets a random network delay
         (exponential, mean `delay_s`), so gradients arrive computed on old parameters.
  easgd  elastic averaging (Zhang et al. 2015, as on paper 001's slide): every worker steps on
         its own shard, and every `period` steps w_i -= alpha (w_i - w~), w~ += (beta/K) sum_i
         (w_i - w~); the differences cross the wire through the codec. Test error is w~'s.
  gossip decentralised averaging (Jin et al. 2016, on paper 001's consistency slide): every worker
         steps on its own shard, then averages its parameters with its neighbours' on a graph (`graph`:
         a ring, or a seeded random graph) with the Metropolis weights W, instead of a global
         allreduce: w_i <- sum_j W_ij w_j. W is symmetric and doubly stochastic, so the mean is kept
         and the workers' disagreement shrinks by at least |lambda_2(W)| per round (the spectral gap
         1 - |lambda_2| sets the rate). The neighbours' parameters cross the wire through the codec.
         Test error is the workers' mean's.
A server update applies a worker's gradient of (its shard's loss sum)/batch, so K pushes on
the same parameters add up to one synchronous step of the mean gradient.
"""
from __future__ import annotations

import copy
import heapq
import math
import random
from dataclasses import dataclass, fields
from typing import Iterator

import torch
from torch import nn

from lab.comm import cost

from .data_parallel import Workers, roundtrip, split_batch, sum_gradients
from .stream import ShardStream

KINDS = ("sync", "ssp", "async", "easgd", "gossip")
GRAPHS = ("ring", "random")


@dataclass(frozen=True)
class Consistency:
    """Which consistency model and its knobs (see the module docstring), declared once: TrainConfig
    extends these settings and the CLI takes its defaults from here. `consistency` is the model's
    name (sync | ssp | async | easgd), `delay_s` the async mean network delay in seconds, `straggler`
    the sigma of the log-normal compute jitter, alpha/beta/period EASGD's (alpha None = beta/K), `graph`
    gossip's neighbours (ring | random)."""

    consistency: str = "sync"
    staleness: int = 2
    delay_s: float = 0.0
    straggler: float = 0.2
    alpha: float | None = None
    beta: float = 0.9
    period: int = 1
    graph: str = "ring"

    def __post_init__(self) -> None:
        self.check_consistency()

    @property
    def kind(self) -> str:
        return self.consistency

    def consistency_model(self) -> "Consistency":
        """Just the consistency settings (of a config that extends them), checked."""
        return Consistency(**{f.name: getattr(self, f.name) for f in fields(Consistency)})

    def check_consistency(self) -> None:
        """Raise ValueError naming the first bad setting and what is allowed."""
        if self.kind not in KINDS:
            raise ValueError(f"consistency {self.kind!r}; allowed: {', '.join(KINDS)}")
        if isinstance(self.staleness, bool) or not isinstance(self.staleness, int) or self.staleness < 0:
            raise ValueError(f"staleness bound {self.staleness!r}; it must be an int >= 0")
        if not (self.delay_s >= 0 and math.isfinite(self.delay_s)):
            raise ValueError(f"delay_s={self.delay_s}; it must be >= 0 seconds")
        if not (self.straggler >= 0 and math.isfinite(self.straggler)):
            raise ValueError(f"straggler={self.straggler}; it must be >= 0 (sigma of a log-normal)")
        if self.alpha is not None and not 0 < self.alpha <= 1:
            raise ValueError(f"EASGD alpha={self.alpha}; allowed: 0 < alpha <= 1")
        if not 0 < self.beta <= 1:
            raise ValueError(f"EASGD beta={self.beta}; allowed: 0 < beta <= 1")
        if isinstance(self.period, bool) or not isinstance(self.period, int) or self.period < 1:
            raise ValueError(f"EASGD period={self.period!r}; it must be an int >= 1")
        if self.graph not in GRAPHS:
            raise ValueError(f"gossip graph {self.graph!r}; allowed: {', '.join(GRAPHS)}")

    def elastic_alpha(self, K: int) -> float:
        """alpha, by default beta/K (EASGD's choice beta = K·alpha)."""
        return self.alpha if self.alpha is not None else self.beta / K


@dataclass
class Update:
    """One parameter update: its mean training loss, samples consumed, bytes sent, the modelled
    clock after it (s), and the staleness of the gradient applied (server updates since its pull)."""

    loss: float
    samples: int
    nbytes: int
    time_s: float
    staleness: int = 0
    clock_gap: int = 0


@dataclass(frozen=True)
class Timing:
    """Modelled seconds: compute per worker step, communication from the cost model (transfer
    only: codec time is left out, as on a GPU where it is ~100x below the transfer). mode:
    'raw' (fp32), 'requantize', 'gather' or 'phased' (a codec's own fp32 allreduces: PowerSGD)."""

    compute_s: float
    link: cost.Link
    algorithm: str
    K: int
    n_values: int
    wire_bytes_per_value: float
    mode: str

    def allreduce_s(self) -> float:
        if self.K == 1:
            return 0.0
        algorithm = "ring" if self.algorithm == "native" else self.algorithm
        if self.mode == "raw":
            return cost.allreduce_time(algorithm, self.K, 4.0 * self.n_values, self.link)
        if self.mode == "phased":  # PowerSGD: fp32 sums of its wire bytes, in 3 allreduces (plain, P, Q)
            return (cost.allreduce_time(algorithm, self.K, self.wire_bytes_per_value * self.n_values, self.link)
                    + 2 * cost.allreduce_time(algorithm, self.K, 0.0, self.link))
        return cost.compressed_time(algorithm, self.K, self.n_values, self.link,
                                    wire_bytes_per_value=self.wire_bytes_per_value,
                                    encode_s_per_value=0.0, decode_s_per_value=0.0, mode=self.mode)

    def push_s(self) -> float:
        return cost.transfer_time(self.wire_bytes_per_value * self.n_values, self.link)

    def pull_s(self) -> float:
        return cost.transfer_time(4.0 * self.n_values, self.link)

    def compute(self, rng: random.Random, straggler: float) -> float:
        return self.compute_s * (rng.lognormvariate(0.0, straggler) if straggler > 0 else 1.0)


def run(model: Consistency, workers: Workers, stream: ShardStream, timing: Timing, seed: int) -> "Runner":
    return {"sync": Sync, "ssp": ParameterServer, "async": ParameterServer, "easgd": Easgd, "gossip": Gossip}[model.kind](
        model, workers, stream, timing, seed)


class Runner:
    """Iterate to get `Update`s; `model` is the network whose test error is reported."""

    def __init__(self, c: Consistency, workers: Workers, stream: ShardStream, timing: Timing, seed: int) -> None:
        self.c, self.workers, self.stream, self.timing = c, workers, stream, timing
        self.rng = random.Random(seed)
        self.clock = 0.0

    @property
    def model(self) -> nn.Module:
        return self.workers.models[0]

    def __iter__(self) -> Iterator[Update]:  # pragma: no cover - every kind defines it
        raise NotImplementedError

    def slowest(self) -> float:
        return max(self.timing.compute(self.rng, self.c.straggler) for _ in range(self.workers.K))


class Sync(Runner):
    def __iter__(self) -> Iterator[Update]:
        while True:
            x, y = self.stream.batch()
            loss, nbytes = self.workers.sync_step(x, y)
            self.clock += self.slowest() + self.timing.allreduce_s()
            yield Update(loss, len(y), nbytes, self.clock)


class ParameterServer(Runner):
    """ssp and async: one server model and optimizer; the workers' replicas are their pulls."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        w = self.workers
        self.server = copy.deepcopy(w.models[0])
        self.server_opt = w.make_optimizer(list(self.server.parameters()))
        self.version = 0
        self.clocks = [0] * w.K
        self.pulled = [0] * w.K
        self.max_gap = 0

    @property
    def model(self) -> nn.Module:
        return self.server

    def _pull(self, k: int) -> None:
        with torch.no_grad():
            for p, q in zip(self.workers.models[k].parameters(), self.server.parameters()):
                p.copy_(q)
        self.pulled[k] = self.version

    def _schedule(self, heap: list, k: int, start: float) -> None:
        t = start + self.timing.compute(self.rng, self.c.straggler) + self.timing.push_s()
        if self.c.kind == "async" and self.c.delay_s > 0:
            t += self.rng.expovariate(1.0 / self.c.delay_s)
        heapq.heappush(heap, (t, k))

    def __iter__(self) -> Iterator[Update]:
        w, bound = self.workers, (self.c.staleness if self.c.kind == "ssp" else None)
        heap: list = []
        for k in range(w.K):
            self._pull(k)
            self._schedule(heap, k, 0.0)
        waiting: list[int] = []
        while True:
            t, k = heapq.heappop(heap)
            xs, ys = self.stream.shard(k)
            grads, loss = w.gradient(k, xs, ys, self.stream.batch_size)
            nbytes, decoded = 0, []
            for g, name in zip(grads, w.names):
                q, b = roundtrip(w.codecs[k], g, name)
                decoded.append(q)
                nbytes += b
            for p, q in zip(self.server.parameters(), decoded):
                p.grad = q
            self.server_opt.step()
            staleness = self.version - self.pulled[k]
            self.version += 1
            self.clocks[k] += 1
            self.clock = t
            gap = max(self.clocks) - min(self.clocks)
            self.max_gap = max(self.max_gap, gap)
            yield Update(loss, len(ys), nbytes + 4 * w.gradient_values(), t, staleness, gap)
            ready = [k] + waiting
            waiting = []
            for j in ready:
                if bound is not None and self.clocks[j] > min(self.clocks) + bound:
                    waiting.append(j)
                else:
                    self._pull(j)
                    self._schedule(heap, j, t + self.timing.pull_s())


class Easgd(Runner):
    """Synchronous EASGD with a center variable; replicas step on their own shards."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.center = copy.deepcopy(self.workers.models[0])
        self.steps = 0

    @property
    def model(self) -> nn.Module:
        return self.center

    def __iter__(self) -> Iterator[Update]:
        w, K = self.workers, self.workers.K
        alpha, beta = self.c.elastic_alpha(K), self.c.beta
        while True:
            x, y = self.stream.batch()
            self.steps += 1
            elastic = self.steps % self.c.period == 0
            centre = list(self.center.parameters())
            diffs = [[(p.detach() - c.detach()) for p, c in zip(m.parameters(), centre)] for m in w.models] \
                if elastic else None
            loss, nbytes = 0.0, 0
            for k, (xs, ys) in enumerate(split_batch(x, y, K)):
                g, lk = w.gradient(k, xs, ys, len(ys))
                w.apply(k, g)
                loss += lk * len(ys)
            self.clock += self.slowest()
            if elastic:
                summed, nbytes = sum_gradients(diffs, w.codecs, w.exchange, w.names)
                with torch.no_grad():
                    for m, d in zip(w.models, diffs):
                        for p, dk in zip(m.parameters(), d):
                            p.sub_(dk, alpha=alpha)
                    for c, s in zip(centre, summed[0]):
                        c.add_(s, alpha=beta / K)
                self.clock += self.timing.allreduce_s()
            yield Update(loss / len(y), len(y), nbytes, self.clock)


def neighbours(graph: str, K: int, seed: int = 0) -> list[list[int]]:
    """Each worker's neighbours: a ring (i-1, i+1), or a random graph, each pair an edge with probability
    min(1, 3/K) (seeded), drawn again with the next seed until it is connected."""
    if K == 1:
        return [[]]
    if graph == "ring":
        return [sorted({(i - 1) % K, (i + 1) % K} - {i}) for i in range(K)]
    rng = random.Random(seed)
    while True:
        adj = [set() for _ in range(K)]
        for i in range(K):
            for j in range(i + 1, K):
                if rng.random() < min(1.0, 3.0 / K):
                    adj[i].add(j)
                    adj[j].add(i)
        seen, todo = {0}, [0]
        while todo:
            for j in adj[todo.pop()] - seen:
                seen.add(j)
                todo.append(j)
        if len(seen) == K:
            return [sorted(a) for a in adj]


def mixing_matrix(adj: list[list[int]]) -> torch.Tensor:
    """Metropolis weights (Xiao & Boyd 2004): W_ij = 1 / (1 + max(d_i, d_j)) on each edge, the rest on the
    diagonal; symmetric and doubly stochastic (float64, K x K)."""
    K = len(adj)
    W = torch.zeros(K, K, dtype=torch.float64)
    for i, a in enumerate(adj):
        for j in a:
            W[i, j] = 1.0 / (1 + max(len(a), len(adj[j])))
        W[i, i] = 1.0 - W[i].sum()
    return W


def second_eigenvalue(W: torch.Tensor) -> float:
    """|lambda_2|: the largest eigenvalue modulus of W after the 1 of the mean; the disagreement shrinks by
    at least this factor per gossip round."""
    ev = torch.linalg.eigvalsh(W).abs().sort(descending=True).values
    return float(ev[1]) if len(ev) > 1 else 0.0


def gossip_round(params: list[list[torch.Tensor]], W: torch.Tensor,
                 sent: list[list[torch.Tensor]] | None = None) -> None:
    """One gossip round in place: worker i's tensors become W_ii (its own) + sum_{j != i} W_ij (what worker j
    sent: `sent[j]`, its tensors through the codec; its own tensors when None)."""
    K = len(params)
    sent = params if sent is None else sent
    with torch.no_grad():
        for t in range(len(params[0])):
            own = torch.stack([params[k][t] for k in range(K)]).to(torch.float64)
            wire = torch.stack([sent[k][t] for k in range(K)]).to(torch.float64)
            d = torch.diagonal(W).view(-1, *[1] * (own.dim() - 1))
            mixed = torch.tensordot(W, wire, dims=1) + d * (own - wire)
            for k in range(K):
                params[k][t].copy_(mixed[k].to(params[k][t].dtype))


class Gossip(Runner):
    """Every worker steps on its shard, then mixes with its neighbours (W); test error is the mean's."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.adj = neighbours(self.c.graph, self.workers.K, self.rng.randrange(2**31))
        self.W = mixing_matrix(self.adj)
        self.mean = copy.deepcopy(self.workers.models[0])

    @property
    def model(self) -> nn.Module:
        with torch.no_grad():
            for i, p in enumerate(self.mean.parameters()):
                p.copy_(torch.stack([list(m.parameters())[i] for m in self.workers.models]).mean(0))
        return self.mean

    def disagreement(self) -> float:
        """sqrt(sum_k ||w_k - mean||^2) over every parameter."""
        total = 0.0
        for ps in zip(*(m.parameters() for m in self.workers.models)):
            x = torch.stack([p.detach() for p in ps]).double()
            total += float(((x - x.mean(0)) ** 2).sum())
        return total ** 0.5

    def __iter__(self) -> Iterator[Update]:
        w, K = self.workers, self.workers.K
        degree = max(len(a) for a in self.adj)
        while True:
            x, y = self.stream.batch()
            loss = 0.0
            for k, (xs, ys) in enumerate(split_batch(x, y, K)):
                g, lk = w.gradient(k, xs, ys, len(ys))
                w.apply(k, g)
                loss += lk * len(ys)
            self.clock += self.slowest()
            nbytes = 0
            if K > 1:
                own = [[p.detach() for p in m.parameters()] for m in w.models]
                sent = []  # what each worker's neighbours receive of its parameters
                for k in range(K):
                    out = []
                    for p, name in zip(own[k], w.names):
                        q, b = roundtrip(w.codecs[k], p.clone(), f"gossip:{name}")
                        out.append(q)
                        nbytes += b * len(self.adj[k])
                    sent.append(out)
                gossip_round(own, self.W, sent)
                self.clock += degree * self.timing.push_s()  # one message to each neighbour, in turn
            yield Update(loss / len(y), len(y), nbytes, self.clock)


__all__ = ["Consistency", "Update", "Timing", "KINDS", "GRAPHS", "run", "neighbours", "mixing_matrix",
           "second_eigenvalue", "gossip_round"]
