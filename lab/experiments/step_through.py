"""See a collective happen: one allreduce on P = 2..8 SimComm ranks, traced message by
message, for any registered algorithm (it runs through `lab.comm.allreduce`, the front door every caller uses,
which hands over the buffer the sum forms in; nothing is redrawn by hand).

Two runs of the same algorithm:
  provenance run  fp32, rank r holds x_r[i] = 2^r + 256·i, so every partial sum of value i over a
                  set S of ranks is the exact integer mask(S) + 256·|S|·i: each buffer cell and each
                  value on the wire says which ranks' contributions it holds (P <= 8: mask < 256, all
                  sums < 2^24, exact in fp32).
  data run        seeded N(0, 1) vectors through the chosen codec (requantize mode: decode-add-encode
                  at every hop, Dettmers 2016 §3.2); each message is decoded and compared with the
                  exact (float64) partial sum of the values it carries, as the provenance run names them.
Steps are Lamport rounds: a message sent after receiving one from step s is in step s + 1 or later.

Then the nccl-tests arithmetic for the same run: algbw = message size / time and busbw = algbw ·
2(P−1)/P (nccl-tests docs/PERFORMANCE.md), with the time from the traced steps on a link (each step:
one latency plus the most bytes any rank sends or receives in it, over the link bandwidth).
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from lab.codecs.base import check_seed
from lab.codecs.registry import codec_infos
from lab.codecs.wire import WireFormat
from lab.comm import allreduce, cost, simulate
from lab.comm.algorithms import algorithm_infos, get_algorithm
from lab.comm.allreduce import NATIVE, configure, resolve_codec, resolve_mode
from lab.comm.collectives import OPS, call, collective_names, get_collective

#: ranks the step-through shows (the provenance encoding holds 8 ranks in one byte)
STEP_P = (2, 8)
#: values per rank: 256·8·(n−1) + 255 must stay below 2^24 (exact fp32 integers)
MAX_VALUES = 4096
#: values-per-rank choices a UI offers (840 = lcm(1..8): every P splits it evenly)
STEP_VALUES = (8, 24, 120, 840)
_BASE = 256
#: the columns of a step-through's message table, one row per message
MESSAGE_COLUMNS = ["step", "src", "dst", "values", "bytes", "fp32_bytes", "seq", "contributions_min",
                   "contributions_max", "kind", "ranks", "max_abs_error", "max_abs_value"]


@dataclass
class StepThrough:
    """One traced allreduce (`step_through`). Frames: 0 = before any message, f = after the messages
    of step f−1 arrived and were added (f = 1..steps).

    messages: one row per message, in send order: step, src, dst, values, bytes (on the wire, this
        run's codec), fp32_bytes, seq (index among src→dst messages), contributions_min/max (ranks
        summed into its values; −1 unknown), kind (own data, partial sum, full sum, mixed),
        max_abs_error (decoded vs the exact partial sum of what it carries), max_abs_value.
    masks: frames × P × n array, which ranks are summed into each value of each rank's buffer (bit r:
        rank r; −1: the buffer holds no partial sum there); counts: how many (−1 unknown).
    final: rank, max_abs_error, rel_error of the data run's result against the exact sum.
    `buffers` is the same as a tidy table.
    """

    algorithm: str
    P: int
    n: int
    codec: str
    seed: int
    steps: int
    messages: pd.DataFrame
    masks: np.ndarray
    counts: np.ndarray
    final: pd.DataFrame
    summary: dict = field(default_factory=dict)
    #: ranks per node of a two-level algorithm (hierarchical: node j holds ranks jk..jk+k−1); 0 when the
    #: algorithm sees one flat network
    ranks_per_node: int = 0
    #: the collective (`lab.comm.collectives.OPS`); other ops than all_reduce lay each rank's buffer out as
    #: P slots of `n // P` values (all_gather, reduce_scatter, alltoall) or one of n (broadcast, reduce, sendrecv)
    op: str = "all_reduce"

    def node(self, rank: int) -> int | None:
        """The node of `rank` on a two-level machine (None on a flat one)."""
        return rank // self.ranks_per_node if self.ranks_per_node else None

    def level_bytes(self, upto_step: int | None = None, wire: bool = True) -> dict[str, float]:
        """Bytes sent inside nodes and between nodes in steps 0..upto_step (all when None); a flat
        algorithm's bytes all count as 'between'. wire=False: fp32 bytes."""
        z = self.link_bytes(upto_step, wire=wire)
        if not self.ranks_per_node:
            return {"inside nodes": 0.0, "between nodes": float(z.sum())}
        same = (np.arange(self.P)[:, None] // self.ranks_per_node) == (np.arange(self.P)[None, :] // self.ranks_per_node)
        return {"inside nodes": float(z[same].sum()), "between nodes": float(z[~same].sum())}

    @property
    def nbytes(self) -> int:
        """nccl-tests' size of the op in bytes: one rank's fp32 vector (all_reduce, broadcast, reduce,
        sendrecv), the whole P-slot buffer (all_gather, reduce_scatter), one rank's send buffer (alltoall)."""
        return 4 * self.n

    @property
    def busbw_factor(self) -> float:
        """nccl-tests' factor of this run's op (an allreduce plugin may declare its own)."""
        return cost.busbw_factor(self.P, self.algorithm) if self.op == "all_reduce" else cost.op_busbw_factor(self.op, self.P)

    def contributions(self, frame: int) -> np.ndarray:
        """P × n array: ranks summed into each value of each rank's buffer at `frame` (−1 unknown)."""
        return self.counts[frame]

    @property
    def buffers(self) -> pd.DataFrame:
        """Tidy: frame, rank, index, contributions, ranks (which, e.g. "0,2,3"; "?" unknown)."""
        F, P, n = self.counts.shape
        f, r, i = np.meshgrid(np.arange(F), np.arange(P), np.arange(n), indexing="ij")
        return pd.DataFrame({"frame": f.ravel(), "rank": r.ravel(), "index": i.ravel(),
                             "contributions": self.counts.ravel(),
                             "ranks": [_ranks_text(int(m)) for m in self.masks.ravel()]})

    def link_bytes(self, upto_step: int | None = None, wire: bool = True) -> np.ndarray:
        """P × P array: bytes sent src → dst in steps 0..upto_step (all when None); wire=False: fp32 bytes."""
        m = self.messages if upto_step is None else self.messages[self.messages.step <= upto_step]
        out = np.zeros((self.P, self.P))
        np.add.at(out, (m.src.to_numpy(), m.dst.to_numpy()), m["bytes" if wire else "fp32_bytes"].to_numpy())
        return out


def step_algorithms(op: str = "all_reduce") -> list[str]:
    """Every registered algorithm of `op`, in display order (plugins included): what the step-through offers."""
    if op == "all_reduce":
        return [a.name for a in algorithm_infos()]
    return collective_names(op)


def _check(algorithm: str, P: int, n: int, codec, seed: int):
    names = step_algorithms()
    if algorithm == NATIVE or algorithm not in names:
        raise ValueError(f"algorithm {algorithm!r}: the step-through traces a registered algorithm; "
                         f"allowed: {', '.join(names)}")
    if isinstance(P, bool) or not isinstance(P, int) or not STEP_P[0] <= P <= STEP_P[1]:
        raise ValueError(f"P={P!r}: the step-through shows {STEP_P[0]}..{STEP_P[1]} ranks; allowed: an integer "
                         f"from {STEP_P[0]} to {STEP_P[1]}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_VALUES:
        raise ValueError(f"n={n!r} values per rank; allowed: an integer from 1 to {MAX_VALUES}")
    check_seed(seed)
    c = resolve_codec(codec)
    algo = get_algorithm(algorithm)
    if c is not None and c.phases:
        raise ValueError(f"codec {c.describe()!r} runs its own collective (fp32 sums of low-rank factors P and Q, "
                         "Vogels et al. 2019), not per-hop messages of the algorithm; allowed here: a table, cast "
                         "or block-scaled codec (e.g. dynamic_tree, fp16, mxfp8_e4m3), or 'none'")
    if c is not None and c.stateful:
        raise ValueError(f"codec {c.describe()!r} keeps an error-feedback residual of its own encoding, which "
                         "re-encoded partial sums do not have; allowed here: a codec without 'ef:' (error "
                         "feedback runs in gather mode, on the Collectives and Training pages)")
    if c is not None and not c.requantize and not algo.two_stage:
        two = [a.name for a in algorithm_infos() if a.two_stage]
        raise ValueError(f"codec {c.name!r} cannot be re-encoded at every hop (sparse or sign payloads), so it "
                         f"has no partial sums to step through on {algorithm}; allowed with it: "
                         f"{', '.join(two) or 'no registered algorithm'}, or pick a dense codec")
    resolve_mode(c, "requantize", algorithm)  # stateful codecs (error feedback) say why not
    return c, algo


def _ranks_per_node(algo, P: int, codec) -> int:
    """k when `algo`, configured at its defaults for P ranks, runs on nodes of k ranks (1 < k < P); else 0."""
    if "ranks_per_node" not in algo.options:
        return 0
    k = configure(algo.name, P, codec, "raw" if codec is None else "requantize", {}).get("ranks_per_node")
    return int(k) if isinstance(k, int) and 1 < k < P else 0


class _Wire:
    """The messages of one traced run on SimComm: each send logged with its rank's step clock, each wait
    that blocks advancing the receiver's clock past the matching send's (one step per dependent message)."""

    def __init__(self, P: int) -> None:
        self.log: list[dict] = []
        self.clocks = [0] * P
        self.stamps: dict[tuple[int, int], deque] = defaultdict(deque)
        self.seqs: dict[tuple[int, int], int] = defaultdict(int)

    def watch(self, comm, snap, flat: bool) -> None:
        """Wrap `comm`'s sends and receives; `snap()` records the rank's buffers before each message."""
        r, log, clocks, stamps, seqs = comm.rank, self.log, self.clocks, self.stamps, self.seqs
        send0, recv0 = comm.isend_unchecked, comm.irecv_unchecked

        def isend(t, dst):
            snap()
            stamps[(r, dst)].append(clocks[r])
            payload = t.detach().reshape(-1).clone() if flat else t.detach().clone()
            log.append({"step": clocks[r], "src": r, "dst": dst, "seq": seqs[(r, dst)],
                        "bytes": t.numel() * t.element_size(), "payload": payload})
            seqs[(r, dst)] += 1
            return send0(t, dst)

        def irecv(t, src):
            work = recv0(t, src)
            wait0 = work.wait

            def wait():
                done = getattr(work, "done", False)
                if not done:
                    snap()
                wait0()
                if not done:
                    clocks[r] = max(clocks[r], stamps[(src, r)].popleft() + 1)
            work.wait = wait
            return work

        comm.isend_unchecked, comm.irecv_unchecked = isend, irecv


def _run(algorithm: str, P: int, xs: list[torch.Tensor], codec, snapshots: bool):
    """`lab.comm.allreduce` of xs on P SimComm ranks (requantize mode with a codec); the messages (with a
    copy of each payload), each rank's snapshots (clock, values) of the buffer the sum forms in, the results."""
    wire = _Wire(P)
    log, clocks = wire.log, wire.clocks
    snaps: list[list[tuple[int, torch.Tensor]]] = [[] for _ in range(P)]

    def rank_fn(comm):
        r = comm.rank
        held: list[torch.Tensor] = []  # the buffer allreduce sums in, once it hands it over

        def snap() -> None:
            if snapshots and held:
                snaps[r].append((clocks[r], held[0].clone()))

        def watch(buf: torch.Tensor) -> None:
            held.append(buf)
            snap()

        wire.watch(comm, snap, flat=False)
        out = allreduce(comm, xs[r], algorithm=algorithm, codec=codec, mode="auto" if codec is None else "requantize",
                        check=False, watch=watch)
        snap()
        return out

    out = simulate(rank_fn, P)
    return log, snaps, out


def lamport_trace(algorithm: str, xs: list[torch.Tensor], *, codec=None) -> tuple[pd.DataFrame, list[torch.Tensor]]:
    """One allreduce of the vectors xs (one per rank, P = len(xs) SimComm ranks) with a registered
    `algorithm` and `codec` (requantize mode): every message in send order (step = Lamport round, src,
    dst, bytes, order) and every rank's result."""
    c = resolve_codec(codec)
    resolve_mode(c, "requantize", algorithm)
    log, _, out = _run(algorithm, len(xs), [x.reshape(-1).float() for x in xs], c, snapshots=False)
    df = pd.DataFrame([{"step": m["step"], "src": m["src"], "dst": m["dst"], "bytes": m["bytes"], "order": i}
                       for i, m in enumerate(log)], columns=["step", "src", "dst", "bytes", "order"])
    return df, out


def _provenance(P: int, n: int) -> list[torch.Tensor]:
    idx = torch.arange(n, dtype=torch.float32) * _BASE
    return [idx + float(1 << r) for r in range(P)]


def _decode_masks(v: torch.Tensor, index: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mask, index) of provenance values; mask −1 where a value is no partial sum of them."""
    a = v.double().cpu().numpy()
    ok = np.isfinite(a) & (a == np.round(a)) & (a >= 0)
    ai = np.where(ok, a, 0).astype(np.int64)
    mask = ai % _BASE
    count = _popcount(mask)
    if index is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(count > 0, (ai - mask) // np.maximum(_BASE * count, 1), -1)
        ok &= (count > 0) & ((ai - mask) == q * _BASE * count)
        index = q
    else:
        ok &= (ai - mask) == _BASE * count * index
    return np.where(ok, mask, -1), np.where(ok, index, -1)


def _popcount(mask: np.ndarray) -> np.ndarray:
    """Set bits of each mask (< 256); −1 stays −1."""
    m = np.asarray(mask, dtype=np.int64)
    bits = ((np.where(m >= 0, m, 0)[..., None] >> np.arange(8)) & 1).sum(-1)
    return np.where(m >= 0, bits, -1)


def _ranks_text(mask: int) -> str:
    return ",".join(str(r) for r in range(8) if mask >= 0 and mask >> r & 1) if mask >= 0 else "?"


def _frames(snaps: list, steps: int, P: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Buffers per frame: each rank's provenance masks (steps + 1, P, n) from its last snapshot taken while
    its clock was <= the frame, and their contribution counts."""
    idx = np.arange(n)
    masks = np.full((steps + 1, P, n), -1, dtype=np.int64)
    for f in range(steps + 1):
        for r in range(P):
            cands = [t for clk, t in snaps[r] if clk <= f] or [snaps[r][0][1]]
            masks[f, r] = _decode_masks(cands[-1], idx)[0]
    return masks, _popcount(masks)


def step_through(algorithm: str = "ring", P: int = 4, n: int = 24, *, codec: str | None = None,
                 seed: int = 0) -> StepThrough:
    """Trace one allreduce of n values per rank on P = 2..8 SimComm ranks with `algorithm` (any
    registered one) and `codec` on the wire (None: fp32; requantize mode): every message with its
    step, bytes, the ranks summed into it and its error against the exact partial sum; every rank's
    buffer at every step; the final error. Ben-Nun & Hoefler 2018 (the algorithms), Dettmers 2016
    §3.2 (decode-add-encode at every hop)."""
    c, algo = _check(algorithm, P, n, codec, seed)
    P = int(P)
    # provenance run: fp32, who is in each buffer cell and each message value
    plog, snaps, pout = _run(algorithm, P, _provenance(P, n), None, snapshots=True)
    steps = max((m["step"] for m in plog), default=-1) + 1
    # data run: seeded N(0,1) through the codec
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, generator=gen) for _ in range(P)]
    X = torch.stack(xs).double().numpy()  # P × n
    dlog, _, dout = _run(algorithm, P, xs, c, snapshots=False)

    prov = {(m["src"], m["dst"], m["seq"]): m for m in plog}
    rows = []
    for m in dlog:
        p = prov.get((m["src"], m["dst"], m["seq"]))
        k = p["payload"].numel() if p is not None else -1
        row = {"step": m["step"], "src": m["src"], "dst": m["dst"], "values": k, "bytes": m["bytes"],
               "fp32_bytes": p["bytes"] if p is not None else np.nan, "seq": m["seq"],
               "contributions_min": -1, "contributions_max": -1, "kind": "unknown",
               "max_abs_error": np.nan, "max_abs_value": np.nan, "ranks": "?"}
        if p is not None:
            mask, idx = _decode_masks(p["payload"])
            cnt = _popcount(mask)
            if len(cnt) and (cnt >= 0).all():
                row["contributions_min"], row["contributions_max"] = int(cnt.min()), int(cnt.max())
                lo, hi = row["contributions_min"], row["contributions_max"]
                row["kind"] = ("own data" if hi == 1 else "full sum" if lo == P else
                               "partial sum" if lo > 1 or hi < P else "mixed")
                union = int(np.bitwise_or.reduce(mask))
                row["ranks"] = _ranks_text(union)
                bits = (mask[:, None] >> np.arange(P)[None, :]) & 1  # k × P
                exact = (bits * X[:, idx].T).sum(1)
                try:
                    got = (m["payload"] if c is None else WireFormat.of(c, k, torch.float32)
                           .decode(m["payload"])).double().reshape(-1).numpy()
                    row["max_abs_error"] = float(np.abs(got - exact).max())
                except (ValueError, RuntimeError):  # a payload that is not one codec message of k values
                    pass
                row["max_abs_value"] = float(np.abs(exact).max())
        rows.append(row)
    messages = pd.DataFrame(rows, columns=MESSAGE_COLUMNS)
    masks, counts = _frames(snaps, steps, P, n)

    exact = X.sum(0)
    final = pd.DataFrame([{"rank": r, "max_abs_error": float(np.abs(dout[r].double().numpy() - exact).max()),
                           "rel_error": float(np.linalg.norm(dout[r].double().numpy() - exact)
                                              / max(np.linalg.norm(exact), 1e-300)),
                           "exact_provenance": bool(torch.equal(pout[r], _provenance_sum(P, n)))}
                          for r in range(P)])
    tr = StepThrough(algorithm, P, n, c.describe() if c is not None else "fp32", seed, steps, messages,
                     masks, counts, final, ranks_per_node=_ranks_per_node(algo, P, c))
    tr.summary = traffic_summary(tr)
    return tr


def _provenance_sum(P: int, n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) * (_BASE * P) + float((1 << P) - 1)


def traffic_summary(tr: StepThrough) -> dict:
    """Bytes of the traced run against the busbw convention, as multiples of n (one rank's fp32
    vector): the busiest directed link, the busiest rank (max of sent and received), every rank's
    share 2(P−1)/P of nccl-tests, and the wire bytes with the codec."""
    P, nb = tr.P, tr.nbytes
    fp = tr.link_bytes(wire=False)
    wire = tr.link_bytes(wire=True)
    sent, recv = fp.sum(1), fp.sum(0)
    s, d = np.unravel_index(int(np.argmax(fp)), fp.shape)
    rank = int(np.argmax(np.maximum(sent, recv)))
    f = tr.busbw_factor
    share = 2 * (P - 1) / P if tr.op == "all_reduce" else cost.op_busbw_factor(tr.op, P)
    return {"n_bytes": nb, "busbw_factor": f, "nccl_share": share,
            "busiest_link": (int(s), int(d)), "busiest_link_bytes": float(fp.max()),
            "busiest_link_x_n": float(fp.max()) / nb,
            "busiest_rank": rank, "busiest_rank_bytes": float(max(sent[rank], recv[rank])),
            "busiest_rank_x_n": float(max(sent[rank], recv[rank])) / nb,
            "total_bytes": float(fp.sum()), "total_x_n": float(fp.sum()) / nb,
            "wire_busiest_rank_bytes": float(max(wire.sum(1).max(), wire.sum(0).max())),
            "wire_total_bytes": float(wire.sum()), "messages": len(tr.messages), "steps": tr.steps}


def step_time(tr: StepThrough, link: str | cost.Link = "nvlink4", size_bytes: float | None = None,
              wire: bool = True) -> float:
    """Seconds of the traced run on `link`: each step costs one latency plus the most bytes any rank
    sends or receives in it over the link bandwidth (full duplex, one port per rank), bytes scaled
    from the traced n to `size_bytes` per rank (None: as traced)."""
    lk = cost.get_link(link)
    scale = 1.0 if size_bytes is None else float(size_bytes) / tr.nbytes
    col = "bytes" if wire else "fp32_bytes"
    t = 0.0
    for _, part in tr.messages.groupby("step"):
        out = part.groupby("src")[col].sum()
        inn = part.groupby("dst")[col].sum()
        t += lk.L + max(out.max(), inn.max()) * scale * lk.G
    return t


def busbw_table(tr: StepThrough, link: str | cost.Link = "nvlink4", size_bytes: float = 1 << 28) -> pd.DataFrame:
    """nccl-tests' numbers for the traced run at `size_bytes` per rank on `link`, fp32 and (with a
    codec) on the wire: time_us, algbw_GBps = size / time, busbw_GBps = algbw · 2(P−1)/P, and busbw as
    a fraction of the link bandwidth. A run whose busiest rank moves exactly 2(P−1)/P·n (ring,
    Rabenseifner, butterfly sync) reaches busbw = link bandwidth when latency is negligible."""
    lk = cost.get_link(link)
    if not isinstance(size_bytes, (int, float)) or not size_bytes > 0:
        raise ValueError(f"size_bytes={size_bytes!r}; allowed: a number of bytes > 0")
    f = tr.busbw_factor
    rows = []
    for what, wire in (("fp32", False), (tr.codec, True)) if tr.codec != "fp32" else (("fp32", False),):
        t = step_time(tr, lk, size_bytes, wire=wire)
        algbw = size_bytes / t
        rows.append({"on the wire": what, "time_us": t * 1e6, "algbw_GBps": algbw / 1e9,
                     "busbw_GBps": algbw * f / 1e9, "busbw_of_link": algbw * f / lk.bandwidth_Bps,
                     "link": lk.name, "link_GBps": lk.bandwidth_Bps / 1e9, "size_bytes": float(size_bytes)})
    return pd.DataFrame(rows)


def algorithm_traffic(P: int = 4, n: int = 24, link: str | cost.Link = "nvlink4",
                      size_bytes: float = 1 << 28, op: str = "all_reduce") -> pd.DataFrame:
    """Every registered algorithm of `op` traced at P ranks (fp32): steps, messages, bytes through the
    busiest link and the busiest rank as multiples of n (nccl-tests' size), the op's busbw factor, and
    the busbw the step model gives on `link` as a fraction of its bandwidth. An algorithm that cannot
    run at this P is a row whose `note` says why."""
    rows = []
    for name in step_algorithms(op):
        try:
            tr = step_through(name, P, n) if op == "all_reduce" else op_step_through(op, name, P, n)
        except ValueError as e:
            rows.append({"algorithm": name, "note": str(e)})
            continue
        s = tr.summary
        b = busbw_table(tr, link, size_bytes).iloc[0]
        rows.append({"algorithm": name, "steps": tr.steps, "messages": s["messages"],
                     "busiest_link_x_n": s["busiest_link_x_n"], "busiest_rank_x_n": s["busiest_rank_x_n"],
                     "nccl_share_x_n": s["nccl_share"], "busbw_factor": s["busbw_factor"],
                     "busbw_of_link": float(b.busbw_of_link), "note": "",
                     "busiest_rank": s["busiest_rank"], "busiest_rank_bytes": s["busiest_rank_bytes"],
                     "busiest_link": f"{s['busiest_link'][0]} → {s['busiest_link'][1]}",
                     "busiest_link_bytes": s["busiest_link_bytes"], "n_bytes": tr.nbytes})
    return pd.DataFrame(rows, columns=["algorithm", "steps", "messages", "busiest_link_x_n", "busiest_rank_x_n",
                                       "nccl_share_x_n", "busbw_factor", "busbw_of_link", "note", "busiest_rank",
                                       "busiest_rank_bytes", "busiest_link", "busiest_link_bytes", "n_bytes"])


def step_codecs() -> list[str]:
    """Codec names the step-through offers: every registered codec that carries partial sums (not
    fp32 itself, not gather-only ones unless an algorithm runs them in two stages)."""
    two = any(a.two_stage for a in algorithm_infos())
    return [c.name for c in codec_infos() if not c.work.raw and not c.phased
            and (not c.gather_only or (two and c.two_stage))]


# -- every other collective: all-gather filling buffers, reduce-scatter leaving shards, ...

#: why nccl-tests' factor is what it is, per op: the bytes each rank must move at least, as a share of the size S
OP_BUSBW_WHY = {
    "all_reduce": "each rank must send out the (P−1)/P of its vector that others reduce and receive the (P−1)/P "
                  "of the result it did not compute: 2(P−1)/P·S",
    "all_gather": "each rank must receive the P−1 shards it does not hold, (P−1)/P of the gathered S",
    "reduce_scatter": "each rank must send the P−1 shards other ranks own (summed or not), (P−1)/P of its S",
    "alltoall": "each rank keeps one of its P blocks and must send the other P−1 away: (P−1)/P of its S",
    "broadcast": "every rank but the root must receive the whole buffer once: 1·S",
    "reduce": "every rank's whole buffer must reach the root, summed on the way: 1·S through the root's link",
    "sendrecv": "each rank sends its buffer once and receives one: 1·S",
}

#: the op's slot layout: P slots (shards, blocks, gathered rows) or one buffer
_SLOTTED = ("all_gather", "reduce_scatter", "alltoall")


def _slots(op: str, P: int) -> int:
    return P if op in _SLOTTED else 1


def _op_input(op: str, P: int, r: int, k: int, root: int) -> torch.Tensor:
    """Rank r's input in the provenance run: value g of a slot holds 2^src + 256·g, so a sum over ranks S is
    mask(S) + 256·|S|·g (-1: no data, a broadcast's non-root ranks)."""
    g = torch.arange(_slots(op, P) * k, dtype=torch.float32) * _BASE
    mine = g + float(1 << r)
    if op == "all_gather":
        return mine.view(P, k)[r].clone()
    if op == "reduce_scatter":
        return mine.view(P, k).clone()
    if op == "alltoall":  # every block carries the slot index it lands in at its destination
        return mine.view(P, k)[r].repeat(P, 1)
    if op == "broadcast" and r != root:
        return torch.full_like(g, -1.0)
    return mine.clone()


def _mark_unarrived(op: str, buf: torch.Tensor, r: int) -> None:
    """-1 (no provenance) in the slots of the buffer the collective works in that nothing has arrived in yet:
    until a message lands there they hold whatever the memory held."""
    if op in ("all_gather", "alltoall"):
        rows = buf.view(buf.shape[0], -1)
        own = rows[r].clone()
        rows.fill_(-1.0)
        rows[r] = own
    elif op == "sendrecv":
        buf.fill_(-1.0)


def op_step_through(op: str = "all_gather", algorithm: str = "ring", P: int = 4, n: int = 24, *,
                    root: int = 0) -> StepThrough:
    """Trace one `op` (any nccl-tests collective but all_reduce, which is `step_through`) by `algorithm` on
    P = 2..8 SimComm ranks, fp32, message by message: n values per rank's buffer, laid out as P slots
    of n // P values for all_gather (the gathered rows), reduce_scatter (the shards, rank r's ending
    as the sum) and alltoall (the blocks received), one buffer for broadcast, reduce and sendrecv.
    Buffers and messages say which ranks' data each value holds (the provenance encoding of
    `step_through`). The op runs through its front door, `lab.comm.collectives.call`."""
    if op == "all_reduce" or op not in OPS:
        raise ValueError(f"op {op!r}; allowed here: {', '.join(o for o in OPS if o != 'all_reduce')} "
                         "(all_reduce: step_through)")
    get_collective(op, algorithm)  # an unknown algorithm of the op says which there are
    if isinstance(P, bool) or not isinstance(P, int) or not STEP_P[0] <= P <= STEP_P[1]:
        raise ValueError(f"P={P!r}: the step-through shows {STEP_P[0]}..{STEP_P[1]} ranks; allowed: an integer "
                         f"from {STEP_P[0]} to {STEP_P[1]}")
    slots = _slots(op, P)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_VALUES or n % slots:
        raise ValueError(f"n={n!r} values per rank; allowed for {op} on {P} ranks: a multiple of {slots} from "
                         f"{slots} to {MAX_VALUES}")
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < P:
        raise ValueError(f"root={root!r}; allowed: a rank 0..{P - 1}")
    k = n // slots
    wire = _Wire(P)
    log, clocks = wire.log, wire.clocks
    snaps: list[list[tuple[int, torch.Tensor]]] = [[] for _ in range(P)]

    where = {"root": root} if op in ("broadcast", "reduce") else {}

    def rank_fn(comm):
        r = comm.rank
        held: list[torch.Tensor] = []  # the buffer the collective works in, once it hands it over

        def snap() -> None:
            if held:
                snaps[r].append((clocks[r], held[0].reshape(-1).clone()))

        def watch(buf: torch.Tensor) -> None:
            _mark_unarrived(op, buf, r)
            held.append(buf)
            snap()

        wire.watch(comm, snap, flat=True)
        call(op, comm, _op_input(op, P, r, k, root), algorithm=algorithm, check=False, watch=watch, **where)
        snap()
        return held[0].reshape(-1).clone()

    out = simulate(rank_fn, P)
    steps = max((m["step"] for m in log), default=-1) + 1
    gather = not OPS[op].reduces
    rows = []
    for m in log:
        mask, _ = _decode_masks(m["payload"])
        cnt = _popcount(mask)
        row = {"step": m["step"], "src": m["src"], "dst": m["dst"], "values": m["payload"].numel(),
               "bytes": m["bytes"], "fp32_bytes": m["bytes"], "seq": m["seq"], "contributions_min": -1,
               "contributions_max": -1, "kind": "unknown", "ranks": "?", "max_abs_error": np.nan,
               "max_abs_value": np.nan}
        if len(cnt) and (cnt >= 0).all():
            lo, hi = int(cnt.min()), int(cnt.max())
            row.update(contributions_min=lo, contributions_max=hi, ranks=_ranks_text(int(np.bitwise_or.reduce(mask))))
            row["kind"] = ("data" if gather else "own data" if hi == 1 else "full sum" if lo == P else
                           "partial sum" if lo > 1 or hi < P else "mixed")
        rows.append(row)
    messages = pd.DataFrame(rows, columns=MESSAGE_COLUMNS)
    masks, counts = _frames(snaps, steps, P, n)
    final = pd.DataFrame([{"rank": r, "max_abs_error": 0.0, "rel_error": 0.0,
                           "exact_provenance": bool(_op_done(op, P, r, k, root, out[r]))} for r in range(P)])
    tr = StepThrough(algorithm, P, n, "fp32", 0, steps, messages, masks, counts, final, op=op)
    tr.summary = traffic_summary(tr)
    return tr


def _op_done(op: str, P: int, r: int, k: int, root: int, got: torch.Tensor) -> bool:
    """Whether rank r's watched buffer ends as the op promises (provenance values)."""
    g = torch.arange(_slots(op, P) * k, dtype=torch.float32) * _BASE
    full = float((1 << P) - 1)
    if op in ("all_gather", "alltoall"):
        want = g + torch.tensor([float(1 << j) for j in range(P)]).repeat_interleave(k)
        return bool(torch.equal(got, want))
    if op == "reduce_scatter":
        return bool(torch.equal(got.view(P, k)[r], (g * P + full).view(P, k)[r]))
    if op == "broadcast":
        return bool(torch.equal(got, g + float(1 << root)))
    if op == "reduce":
        return r != root or bool(torch.equal(got, g * P + full))
    return bool(torch.equal(got, g + float(1 << ((r - 1) % P))))


def op_busbw_text(tr: StepThrough) -> str:
    """nccl-tests' factor of the run's op explained from this run's own message counts."""
    s = tr.summary
    P, S, x = tr.P, tr.nbytes, s["busiest_rank_x_n"]
    share = s["nccl_share"]
    sent, recv = tr.link_bytes(wire=False).sum(1), tr.link_bytes(wire=False).sum(0)
    msgs = tr.messages.groupby("src").size().reindex(range(P), fill_value=0)
    eq = abs(x - share) < 1e-9
    return (f"**Why {share:.3g}.** For {tr.op} {OP_BUSBW_WHY[tr.op]}; at P = {P} that is {share:.3g}·S, with "
            f"S = {S} B here. **This run:** {len(tr.messages)} messages in {tr.steps} steps; rank "
            f"{s['busiest_rank']} is the busiest, sending {sent[s['busiest_rank']]:,.0f} B in "
            f"{int(msgs[s['busiest_rank']])} messages and receiving {recv[s['busiest_rank']]:,.0f} B: "
            f"{x:.3g}·S. "
            + (f"That is exactly the {share:.3g}·S busbw = algbw × {share:.3g} assumes, so busbw can reach the "
               "link's bandwidth." if eq else
               f"That is {x / share:.2g}× the {share:.3g}·S busbw assumes, so its busbw reaches at most "
               f"{min(share / x, 1):.0%} of the link's bandwidth." if x > share else
               f"That is less than the {share:.3g}·S nccl-tests assumes."))


__all__ = ["StepThrough", "step_through", "lamport_trace", "step_algorithms", "step_codecs", "traffic_summary", "step_time",
           "busbw_table", "algorithm_traffic", "STEP_P", "STEP_VALUES", "MAX_VALUES", "op_step_through", "op_busbw_text",
           "OP_BUSBW_WHY"]
