"""PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019, Algorithm 1 with error feedback, §3):
rank-r gradient compression by one step of power iteration, as PyTorch's own DDP hook runs it
(`torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook`).

Per tensor (a stream `key`: a parameter), every rank:
  M = x + e                  the error-compensated gradient, viewed as (shape[0], -1) (torch's hook);
  P = M Q                    Q (m×r) warm-started: last step's Q (orthogonalised), or seeded N(0,1) at first;
  P <- allreduce(P)          phase 1 (an fp32 sum over ranks);
  P^ = orthogonalise(P)      Gram-Schmidt for r <= 2, Householder QR above (torch's `_orthogonalize` rule);
  Q = M^T P^                 ...
  Q <- allreduce(Q)          phase 2;
  result = P^ Q^T            the sum over ranks' rank-r approximation, the same on every rank;
  e = M - result / ranks     error feedback: what this rank's share lost (the paper's e, torch's error_dict).
Both phases are linear in M for a P^ and Q every rank shares, so the payloads are summable: the
collective moves (n + m)·r fp32 values per n×m matrix instead of n·m. A matrix where
(n + m)·r·min_compression_rate >= n·m (biases, vectors, tiny layers) travels uncompressed in one fp32
allreduce with the others (its error-feedback share is x - sum/ranks, as torch's hook keeps for a
whole bucket). The first `start_iter` steps of a stream send everything uncompressed (warm-up).

On one rank, `encode` is the same computation without the allreduces and without memory (a fresh
seeded Q each call): P^ and Q are the payload and decode is P^ Q^T. `encode_as(x, key)` runs the
stream with error feedback and warm start on one rank. Collectives call `reduce_phased`, which
`lab.comm.allreduce` (any algorithm's fp32 sum) and `lab.train.ddp_hook` (torch.distributed)
both use. Arithmetic is fp32 whatever the input dtype.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import torch

from lab.codecs.base import Codec, Encoded, Field, Layout, check_seed, prepare
from lab.codecs.registry import (CodecInfo, OptionSpec, WorkModel, check_nonfinite, nonfinite_option, register,
                                 seed_option)

Allreduce = Callable[[torch.Tensor], torch.Tensor]
_Payload = "tuple[torch.Tensor, torch.Tensor] | None"  # one tensor's (P^, Q), None when sent uncompressed


def matrix_shape(shape: Sequence[int], cols: int | None = None) -> tuple[int, int]:
    """The (n, m) matrix PowerSGD sees for a tensor of `shape`: torch's hook views it as
    (shape[0], -1) (a vector is one column, a 0-d tensor 1×1); with `cols`, as rows of `cols`
    values (the last row zero-padded)."""
    numel = 1
    for s in shape:
        numel *= int(s)
    if cols is not None:
        return (-(-numel // cols) if numel else 0, cols)
    if len(shape) == 0:
        return (1, 1)
    n = int(shape[0])
    return (n, numel // n if n else 0)


def should_compress(n: int, m: int, rank: int, min_compression_rate: float) -> bool:
    """torch's `_should_compress`: (n + m)·r·min_compression_rate < n·m, r = min(n, m, rank)."""
    r = min(n, m, rank)
    return (n + m) * r * min_compression_rate < n * m


def orthogonalize(mat: torch.Tensor, eps: float = 0.0) -> None:
    """Orthonormalise the columns of `mat` (1 × n × r) in place, as torch's `_orthogonalize`:
    Gram-Schmidt for r <= 2, Householder QR (`torch.linalg.qr`) above. A column that is all zero
    stays zero (torch's hook leaves NaN there unless eps > 0)."""
    r = mat.shape[2]
    if r <= 2:
        for i in range(r):
            col = mat[:, :, i:i + 1]
            norm = torch.norm(col, dim=1, keepdim=True)
            if eps == 0:
                col /= torch.where(norm == 0, torch.ones_like(norm), norm)
            else:
                col /= norm + eps
            if i + 1 < r:
                rest = mat[:, :, i + 1:]
                rest -= torch.sum(col * rest, dim=1, keepdim=True) * col
    else:
        torch.linalg.qr(mat, out=(mat, torch.empty(mat.shape[0], r, r, dtype=mat.dtype, device=mat.device)))


@dataclass
class _Item:
    """One tensor of a call: its matrix view, rank and where its P and Q sit in the call's buffers."""

    index: int
    n: int
    m: int
    r: int
    M: torch.Tensor
    p: torch.Tensor | None = None
    q: torch.Tensor | None = None


class PowerSGD(Codec):
    """Rank-r PowerSGD with warm start and error feedback (torch's PowerSGDState options)."""

    name: ClassVar[str] = "powersgd"
    summable: ClassVar[bool] = True
    requantize: ClassVar[bool] = False
    stochastic: ClassVar[bool] = True
    stateful: ClassVar[bool] = True
    phases: ClassVar[int] = 2

    def __init__(self, *, rank: int = 1, min_compression_rate: float = 2.0, start_iter: int = 0,
                 error_feedback: bool = True, warm_start: bool = True, eps: float = 0.0,
                 cols: int | None = None, seed: int = 0, nonfinite: str = "raise") -> None:
        for k, v, lo in (("rank", rank, 1), ("start_iter", start_iter, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{k}={v!r}; allowed: an int >= {lo}")
        if cols is not None and (isinstance(cols, bool) or not isinstance(cols, int) or cols < 1):
            raise ValueError(f"cols={cols!r}; allowed: an int >= 1 or none (torch's (shape[0], -1) view)")
        for k, v in (("min_compression_rate", min_compression_rate), ("eps", eps)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise ValueError(f"{k}={v!r}; allowed: a finite number >= 0")
        for k, v in (("error_feedback", error_feedback), ("warm_start", warm_start)):
            if not isinstance(v, bool):
                raise ValueError(f"{k}={v!r}; allowed: true or false")
        check_nonfinite(nonfinite)
        self.rank, self.min_compression_rate, self.start_iter = rank, float(min_compression_rate), start_iter
        self.error_feedback, self.warm_start, self.eps, self.cols = error_feedback, warm_start, float(eps), cols
        self.seed, self.nonfinite = check_seed(seed), nonfinite
        self.reset()

    # -- memory
    def reset(self, key: str | None = None) -> None:
        """Forget the residual, warm-start Q and step count of `key` (every key when None; the
        seed stream restarts too)."""
        if key is None:
            self._residual: dict[str, torch.Tensor] = {}
            self._q: dict[str, torch.Tensor] = {}
            self._steps: dict[str, int] = defaultdict(int)
            # torch's PowerSGDState draws each fresh Q's seed from numpy's RandomState(random_seed)
            self._rng = np.random.RandomState(self.seed % 2**32)
        else:
            for d in (self._residual, self._q, self._steps):
                d.pop(key, None)

    def residual(self, key: str = "default") -> torch.Tensor | None:
        """The fp32 error-feedback residual of `key` (the input's shape), or None."""
        return self._residual.get(key)

    def keys(self) -> list[str]:
        """Keys with a stored residual."""
        return list(self._residual)

    # -- sizes
    def plan(self, shape: Sequence[int]) -> tuple[int, int, int] | None:
        """(n, m, r) of a tensor of `shape` that is compressed, None if it travels uncompressed."""
        n, m = matrix_shape(shape, self.cols)
        r = min(n, m, self.rank)
        return (n, m, r) if n and m and should_compress(n, m, self.rank, self.min_compression_rate) else None

    def wire_values(self, shape: Sequence[int]) -> tuple[int, int, int]:
        """fp32 values one rank sends into the (P, Q, uncompressed) allreduces for a tensor of
        `shape` after warm-up: ((n·r, m·r, 0) when compressed, (0, 0, numel) when not)."""
        numel = 1
        for s in shape:
            numel *= int(s)
        p = self.plan(shape)
        return (p[0] * p[2], p[1] * p[2], 0) if p else (0, 0, numel)

    def layout(self, n: int) -> Layout:
        """A flat tensor of n values is an n×1 matrix (torch's view) and travels uncompressed
        (with `cols`, as rows of `cols` values: P^ and Q when that compresses)."""
        return self.layout_of((n,))

    def layout_of(self, shape: Sequence[int]) -> Layout:
        """The payload of a tensor of `shape`: P^ (n×r) and Q (m×r) fp32, or the fp32 values."""
        p = self.plan(shape)
        if p is None:
            numel = 1
            for s in shape:
                numel *= int(s)
            return (Field("values", torch.float32, (numel,)),)
        n, m, r = p
        return (Field("p", torch.float32, (n, r)), Field("q", torch.float32, (m, r)))

    # -- the collective
    def reduce_phased(self, xs: Sequence[torch.Tensor], keys: Sequence[str], allreduce: Allreduce,
                      ranks: int) -> list[torch.Tensor]:
        """PowerSGD's collective over the tensors of one call (a DDP bucket, or one tensor):
        `allreduce(t)` sums a flat fp32 tensor over the `ranks` ranks (in place, returning it) and
        is called three times: uncompressed tensors, then P, then Q. Returns the fp32 sums
        (each of its x's shape), the same on every rank; updates the error-feedback residuals
        and warm-start Qs of `keys`. Every rank must call it with the same shapes and keys.
        Contiguous float32 xs are worked on in place, as torch's hook works in the DDP bucket (M Q
        of a single column is a matrix-vector product whose rounding follows M's memory alignment),
        so they are overwritten."""
        return self._run(xs, list(keys), allreduce, ranks, stateful=True, inplace=True)[0]

    def _run(self, xs: Sequence[torch.Tensor], keys: list[str] | None, allreduce: Allreduce, ranks: int,
             stateful: bool, inplace: bool = False) -> tuple[list[torch.Tensor], list[_Payload]]:
        if keys is not None and len(keys) != len(xs):
            raise ValueError(f"{len(xs)} tensors but {len(keys)} keys")
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise ValueError(f"ranks={ranks!r}; allowed: an int >= 1")
        flat = [prepare(x, self.nonfinite).float() for x in xs]
        if not inplace:
            flat = [f.clone() if f.data_ptr() == x.data_ptr() else f for f, x in zip(flat, xs)]
        corrected, kept, items, plain = [], [], [], []
        for i, (x, f) in enumerate(zip(xs, flat)):
            key = keys[i] if keys is not None else None
            warm_up = stateful and self._steps[key] < self.start_iter
            if stateful:
                self._steps[key] += 1
            res = self._residual.get(key) if stateful and self.error_feedback and not warm_up else None
            if res is not None and res.shape != x.shape:
                raise ValueError(f"powersgd key {key!r} holds a residual of shape {tuple(res.shape)}, got an input "
                                 f"of shape {tuple(x.shape)}; use another key or reset({key!r})")
            c = f.add_(res.reshape(-1).to(f.device)) if res is not None else f
            corrected.append(c)  # M, in the caller's memory when in place
            kept.append(c.clone() if stateful and self.error_feedback and not warm_up else None)
            p = None if warm_up else self.plan(x.shape)
            if p is None:
                plain.append(i)
                continue
            n, m, r = p
            if c.numel() < n * m:  # `cols` pads the last row with zeros
                c = torch.cat([c, c.new_zeros(n * m - c.numel())])
            items.append(_Item(i, n, m, r, c.view(n, m)))
        out: list[torch.Tensor | None] = [None] * len(xs)
        payloads: list[_Payload] = [None] * len(xs)
        # phase 0: the uncompressed tensors in one fp32 allreduce (torch's hook does this first)
        if plain:
            summed = _sum(allreduce, torch.cat([corrected[i] for i in plain]))
            for i, part in zip(plain, summed.split([corrected[i].numel() for i in plain])):
                out[i] = part
        if items:
            self._compress(items, keys, allreduce, stateful)
            for it in items:
                assert it.p is not None and it.q is not None
                approx = torch.bmm(it.p.unsqueeze(0), it.q.unsqueeze(0).transpose(1, 2))[0]
                out[it.index] = approx.reshape(-1)[:corrected[it.index].numel()]
                payloads[it.index] = (it.p, it.q)
        results = [o.view(x.shape) for o, x in zip(out, xs)]  # type: ignore[union-attr]
        if stateful and self.error_feedback:
            for i, (x, c, o) in enumerate(zip(xs, kept, out)):
                if c is not None and keys is not None:
                    self._residual[keys[i]] = (c - o / ranks if ranks != 1 else c - o).view(x.shape)
        return results, payloads

    def _compress(self, items: list[_Item], keys: list[str] | None, allreduce: Allreduce, stateful: bool) -> None:
        """Phases 1 and 2 for the compressed matrices of one call, in torch's hook's order:
        tensors grouped by shape (the order Q's random start is drawn in), P = M Q for all of them,
        one allreduce of every P, orthogonalise, Q = M^T P^, one allreduce of every Q."""
        groups: dict[tuple[int, int], list[_Item]] = defaultdict(list)
        for it in items:
            groups[(it.n, it.m)].append(it)
        order = [it for g in groups.values() for it in g]
        device = order[0].M.device
        p_buf = torch.empty(sum(it.n * it.r for it in order), device=device)
        q_buf = torch.empty(sum(it.m * it.r for it in order), device=device)
        pv, qv, po, qo = [], [], 0, 0
        for it in order:
            pv.append(p_buf[po:po + it.n * it.r].view(1, it.n, it.r))
            qv.append(q_buf[qo:qo + it.m * it.r].view(1, it.m, it.r))
            po, qo = po + it.n * it.r, qo + it.m * it.r
        item_keys = [keys[it.index] for it in order] if (stateful and keys is not None) else None
        warm = (self.warm_start and item_keys is not None
                and all(k in self._q and self._q[k].shape == (it.m, it.r) for k, it in zip(item_keys, order)))
        if warm:
            assert item_keys is not None
            for k, q in zip(item_keys, qv):
                q.copy_(self._q[k].view_as(q))
                orthogonalize(q, self.eps)
        else:  # torch: manual_seed(rng.randint(1e9)), then randn per Q in this order, each orthogonalised
            rng = self._rng if stateful else np.random.RandomState(self.seed % 2**32)
            g = torch.Generator().manual_seed(int(rng.randint(1_000_000_000)))
            for q in qv:
                q.copy_(torch.randn(*q.shape, generator=g, device="cpu", dtype=torch.float32))
                orthogonalize(q, self.eps)
        for it, p, q in zip(order, pv, qv):
            torch.bmm(it.M.unsqueeze(0), q, out=p)
        p_buf = _sum(allreduce, p_buf)
        pv = [p_buf[o:o + it.n * it.r].view(1, it.n, it.r)  # (an allreduce may return a new tensor)
              for o, it in zip(_offsets([i.n * i.r for i in order]), order)]
        for p in pv:
            orthogonalize(p, self.eps)
        for it, p, q in zip(order, pv, qv):
            torch.bmm(it.M.unsqueeze(0).transpose(1, 2), p, out=q)
        q_buf = _sum(allreduce, q_buf)
        qv = [q_buf[o:o + it.m * it.r].view(1, it.m, it.r)
              for o, it in zip(_offsets([i.m * i.r for i in order]), order)]
        for it, p, q in zip(order, pv, qv):
            it.p, it.q = p[0], q[0]
        if item_keys is not None:
            for k, q in zip(item_keys, qv):
                if self.warm_start:
                    self._q[k] = q[0].clone()
                else:
                    self._q.pop(k, None)

    # -- the codec interface (one rank)
    def _encoded(self, x: torch.Tensor, results: list[torch.Tensor],
                 payloads: list[_Payload]) -> Encoded:
        pq = payloads[0]
        if pq is None:
            tensors = {"values": results[0].reshape(-1).contiguous()}
            layout: Layout = (Field("values", torch.float32, (x.numel(),)),)
            meta: dict[str, Any] = {"compressed": False}
        else:
            tensors = {"p": pq[0].contiguous(), "q": pq[1].contiguous()}
            layout = self.layout_of(x.shape)
            meta = {"compressed": True, "matrix": matrix_shape(x.shape, self.cols), "rank": pq[0].shape[1]}
        wire = sum(t.numel() for t in tensors.values()) * 4 if x.numel() else 0
        return Encoded(self.name, torch.Size(x.shape), x.dtype, tensors, wire, meta, layout)

    def encode(self, x: torch.Tensor) -> Encoded:
        """One rank, no memory: P^ and Q from a fresh seeded Q (or the fp32 values when the
        matrix view does not compress: vectors, small matrices, and matrices so close to
        float32's maximum that M Q overflows)."""
        results, payloads = self._run([x], None, _identity, 1, stateful=False)
        if payloads[0] is not None and not (_finite(payloads[0][0]) and _finite(payloads[0][1])
                                            and _finite(results[0])):
            results, payloads = [prepare(x, self.nonfinite).float().view(x.shape)], [None]
        return self._encoded(x, results, payloads)

    def encode_as(self, x: torch.Tensor, key: str) -> Encoded:
        """One rank's step of the stream `key`: error feedback and warm-started Q."""
        results, payloads = self._run([x], [key], _identity, 1, stateful=True)
        if not _finite(results[0]):
            self.reset(key)
            raise ValueError(f"powersgd: the rank-{self.rank} product of key {key!r} overflows float32 "
                             "(input near float32's maximum); scale the input down")
        return self._encoded(x, results, payloads)

    def decode(self, enc: Encoded) -> torch.Tensor:
        """P^ Q^T (or the values) in enc's shape and dtype; beyond the dtype's range saturates."""
        if enc.codec != self.name:
            raise ValueError(f"payload was encoded by {enc.codec!r}, not {self.name!r}")
        if "values" in enc.tensors:
            flat = enc.tensors["values"]
        else:
            p, q = enc.tensors["p"], enc.tensors["q"]
            flat = torch.bmm(p.unsqueeze(0), q.unsqueeze(0).transpose(1, 2)).reshape(-1)[:enc.numel]
        big = torch.finfo(enc.dtype).max
        if enc.dtype != torch.float32:
            flat = flat.clamp(-big, big)
        return flat.to(enc.dtype).view(enc.shape)

    def describe(self) -> str:
        opts = [f"rank={self.rank}", f"cols={self.cols}" if self.cols is not None else "vectors uncompressed"]
        if not self.error_feedback:
            opts.append("no error feedback")
        if not self.warm_start:
            opts.append("no warm start")
        return f"powersgd({', '.join(opts)})"


def _identity(t: torch.Tensor) -> torch.Tensor:
    return t


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


def _sum(allreduce: Allreduce, t: torch.Tensor) -> torch.Tensor:
    out = allreduce(t) if t.numel() else t
    return t if out is None else out


def _offsets(sizes: list[int]) -> list[int]:
    out, o = [], 0
    for s in sizes:
        out.append(o)
        o += s
    return out


def make_powersgd(*, rank: int = 1, min_compression_rate: float = 2.0, start_iter: int = 0,
                  error_feedback: bool = True, warm_start: bool = True, eps: float = 0.0, cols: int | None = None,
                  seed: int = 0, nonfinite: str = "raise") -> PowerSGD:
    """Registry factory for `PowerSGD` (torch's PowerSGDState defaults, start_iter 0)."""
    return PowerSGD(rank=rank, min_compression_rate=min_compression_rate, start_iter=start_iter,
                    error_feedback=error_feedback, warm_start=warm_start, eps=eps, cols=cols, seed=seed,
                    nonfinite=nonfinite)


OPTIONS = (
    OptionSpec("rank", int, 1, range=(1, None), help="matrix approximation rank r (torch's matrix_approximation_rank)"),
    OptionSpec("min_compression_rate", float, 2.0, range=(0.0, None),
               help="compress a matrix only if n·m > (n+m)·r·this; smaller ones travel uncompressed"),
    OptionSpec("start_iter", int, 0, range=(0, None),
               help="steps of each tensor sent uncompressed before compressing (torch's start_powerSGD_iter)"),
    OptionSpec("error_feedback", bool, True, help="keep what the rank-r sum lost and add it next step"),
    OptionSpec("warm_start", bool, True, help="start each power iteration from the last step's Q"),
    OptionSpec("eps", float, 0.0, range=(0.0, None), help="added to column norms in Gram-Schmidt "
                                                            "(torch's orthogonalization_epsilon)"),
    OptionSpec("cols", int, None, range=(1, None),
               help="view tensors as rows of this many values (none: torch's (shape[0], -1); a vector is "
                    "one column and travels uncompressed)"),
    seed_option(),
    nonfinite_option(),
)

# Work model (lab.plan.wire): per gradient value, torch's hook reads and writes the value to add the
# residual (12 B), copies it (8 B), reads it for M Q and M^T P (8 B), writes P Q^T (4 B) and
# the new residual (12 B): 44 B, i.e. 40 B beyond the 4-byte read of the base model; kernels per
# matrix: 3 matmuls, ~3 per orthogonalised column of P and Q (r = 1..2), the residual ops.
register(CodecInfo("powersgd", "PowerSGD (Vogels et al. 2019): rank-r power iteration, P and Q allreduced in fp32, "
                               "warm start, error feedback (torch's powerSGD_hook)",
                   make_powersgd, OPTIONS, gradient_only=True,
                   work=WorkModel(extra_encode_bytes=36.0, encode_kernels=12, decode_kernels=1)))
