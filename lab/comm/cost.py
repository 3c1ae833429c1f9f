"""Cost models of allreduce algorithms, link presets, and a fit of latency/bandwidth.

Notation of Ben-Nun & Hoefler (paper 001, "Parallel Reductions for Parameter Updates"):
L is the latency of one message in seconds, G the time per byte in seconds (1/bandwidth), and
m = γm the message size in bytes. Every model is linear in L and G: time = a·L + b·G, and
`coefficients` returns (a, b). The coefficients, the bytes sent, the codec counts and the
bus-bandwidth factor are each algorithm's own (`lab.comm.algorithms.<name>.ALGORITHM`, one module
per algorithm, registered plugins included); this module adds links, input checks, P = 1 (costs 0),
the lower bound L·log2P + 2mG(P−1)/P (real log2 P), compression and the fit.

Shared medium (`Link.shared`): ranks that are processes on one host (or behind one hub) do
not have a link each; every byte any rank sends costs the same cores and memory. Then the
bandwidth term counts the bytes of all ranks (`total_bytes`), not the critical path. The
latency term is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import pandas as pd

from .algorithms.base import Algorithm, algorithm_names, get_algorithm

__all__ = [
    "ALGORITHMS", "MODES", "Link", "LINKS", "get_link", "custom_link",
    "Algorithm", "coefficients", "shared_coefficients", "total_bytes", "allreduce_time", "lower_bound", "busbw_factor", "predict",
    "transfer_time", "compressed_transfer_time", "codec_counts", "compressed_time",
    "Fit", "fit_link", "collective_coefficients", "collective_time", "op_busbw_factor",
]



def __getattr__(name: str):
    if name == "ALGORITHMS":  # live: every registered algorithm's name, in display order
        return tuple(algorithm_names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MODES: tuple[str, ...] = ("requantize", "gather")


def _real(x) -> bool:
    """A real number (bool included): float and int by their type, the numbers ABC (numpy scalars) otherwise;
    the cost model checks ~10^5 numbers a call and the ABC's check is the slow one."""
    return type(x) in (float, int) or isinstance(x, Real)


def _integral(x) -> bool:
    return type(x) is int or isinstance(x, Integral)


# -- links

@dataclass(frozen=True)
class Link:
    """One link: latency L per message (s) and one-direction bandwidth 1/G (bytes/s)."""

    name: str
    latency_s: float
    bandwidth_Bps: float
    source: str
    shared: bool = False  # one medium for all ranks: the bandwidth term counts every rank's bytes

    def __post_init__(self) -> None:
        if not (_real(self.latency_s) and math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise ValueError(f"Link {self.name!r}: latency_s must be a finite number >= 0, got {self.latency_s!r}")
        if not (_real(self.bandwidth_Bps) and math.isfinite(self.bandwidth_Bps)
                and self.bandwidth_Bps > 0):
            raise ValueError(f"Link {self.name!r}: bandwidth_Bps must be a finite number > 0, "
                             f"got {self.bandwidth_Bps!r}")

    @property
    def L(self) -> float:
        """Latency per message, seconds."""
        return float(self.latency_s)

    @property
    def G(self) -> float:
        """Seconds per byte (1/bandwidth)."""
        return 1.0 / self.bandwidth_Bps


_NOMINAL = "latency nominal"


def _preset(name: str, latency_us: float, GBps: float, source: str) -> Link:
    return Link(name, latency_us * 1e-6, GBps * 1e9, source)


# Bandwidths are per direction, GB = 1e9 bytes. Latencies are nominal, not measured: ~1–2 µs
# for PCIe, NVLink and InfiniBand verbs, ~10–50 µs for TCP over Ethernet. Fit your own with fit_link.
LINKS: dict[str, Link] = {link.name: link for link in (
    _preset("pcie3", 2.0, 7.0, "Dettmers 2016 §2.3.2: PCIe 3.0 ~7 GB/s practical with >2 GPUs; "
            f"{_NOMINAL} 2 µs"),
    _preset("pcie3_2gpu", 2.0, 14.0, "Dettmers 2016 §2.3.2: PCIe 3.0 ~14 GB/s practical with 2 GPUs; "
            f"{_NOMINAL} 2 µs"),
    _preset("pcie4_x16", 2.0, 31.5, "PCIe 4.0 x16 line rate 16 GT/s x16, 128b/130b = 31.5 GB/s; "
            f"{_NOMINAL} 2 µs"),
    _preset("pcie5_x16", 2.0, 63.0, "PCIe 5.0 x16 line rate 32 GT/s x16, 128b/130b = 63 GB/s; "
            f"{_NOMINAL} 2 µs"),
    _preset("nvlink3", 1.0, 300.0, "NVLink 3 (A100 SXM) line rate 600 GB/s total = 300 GB/s per "
            f"direction; {_NOMINAL} 1 µs"),
    _preset("nvlink4", 1.0, 450.0, "NVLink 4 (H100 SXM) line rate 900 GB/s total = 450 GB/s per "
            f"direction; {_NOMINAL} 1 µs"),
    _preset("nvlink5", 1.0, 900.0, "NVLink 5 (B200 / GB200) line rate 1.8 TB/s total = 900 GB/s per "
            f"direction; {_NOMINAL} 1 µs"),
    _preset("ib_qdr", 1.5, 3.0, "Dettmers 2016 §2.3.2: InfiniBand QDR ~3 GB/s practical; "
            f"{_NOMINAL} 1.5 µs"),
    _preset("ib_fdr", 1.5, 7.0, "Dettmers 2016 §2.3.2: InfiniBand FDR ~7 GB/s practical; "
            f"{_NOMINAL} 1.5 µs"),
    _preset("ib_hdr", 1.5, 25.0, f"InfiniBand HDR line rate 200 Gb/s = 25 GB/s; {_NOMINAL} 1.5 µs"),
    _preset("ib_ndr", 1.5, 50.0, f"InfiniBand NDR line rate 400 Gb/s = 50 GB/s; {_NOMINAL} 1.5 µs"),
    _preset("eth1g", 50.0, 0.125, f"Ethernet 1 Gb/s line rate = 0.125 GB/s; {_NOMINAL} 50 µs (TCP)"),
    _preset("eth10g", 20.0, 1.25, f"Ethernet 10 Gb/s line rate = 1.25 GB/s; {_NOMINAL} 20 µs (TCP)"),
    _preset("eth25g", 15.0, 3.125, f"Ethernet 25 Gb/s line rate = 3.125 GB/s; {_NOMINAL} 15 µs (TCP)"),
    _preset("eth100g", 10.0, 12.5, f"Ethernet 100 Gb/s line rate = 12.5 GB/s; {_NOMINAL} 10 µs (TCP)"),
    _preset("eth200g", 5.0, 25.0, f"Ethernet 200 Gb/s line rate = 25 GB/s; {_NOMINAL} 5 µs (RoCE)"),
    _preset("eth400g", 5.0, 50.0, f"Ethernet 400 Gb/s line rate = 50 GB/s; {_NOMINAL} 5 µs (RoCE)"),
)}


def get_link(name_or_link: str | Link) -> Link:
    """A preset by name, or the given Link unchanged."""
    if isinstance(name_or_link, Link):
        return name_or_link
    if isinstance(name_or_link, str) and name_or_link in LINKS:
        return LINKS[name_or_link]
    raise ValueError(f"unknown link {name_or_link!r}: give a Link or one of the presets "
                     f"{', '.join(LINKS)}")


def custom_link(latency_us: float, bandwidth_GBps: float, name: str = "custom") -> Link:
    """A Link from latency in microseconds and one-direction bandwidth in GB/s (1e9 bytes/s)."""
    for what, v, ok, allowed in (("latency_us", latency_us, lambda x: x >= 0, ">= 0"),
                                 ("bandwidth_GBps", bandwidth_GBps, lambda x: x > 0, "> 0")):
        if not (isinstance(v, Real) and math.isfinite(v) and ok(v)):
            raise ValueError(f"{what} must be a finite number {allowed}, got {v!r}")
    return Link(name, latency_us * 1e-6, bandwidth_GBps * 1e9,
                f"user-supplied: {latency_us:g} µs, {bandwidth_GBps:g} GB/s")


# -- input checks

def check_P(P: int) -> int:
    if isinstance(P, bool) or not _integral(P) or P < 1:
        raise ValueError(f"P (ranks or GPUs) must be an int >= 1, got {P!r}")
    return int(P)


def _check_nonneg(what: str, x: float) -> float:
    if isinstance(x, bool) or not _real(x) or not math.isfinite(x) or x < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {x!r}")
    return float(x)


def check_algorithm(algorithm: str) -> str:
    """`algorithm` if it is registered, else ValueError naming the known ones."""
    get_algorithm(algorithm)
    return algorithm


# -- allreduce models

def coefficients(algorithm: str, P: int, nbytes: float) -> tuple[float, float]:
    """(a, b) with allreduce time = a·L + b·G (b in bytes): the algorithm's own coefficients (paper 001)."""
    algo = get_algorithm(algorithm)
    P = check_P(P)
    m = _check_nonneg("nbytes", nbytes)
    if P == 1:
        return 0.0, 0.0
    return algo.coefficients(P, m)


def total_bytes(algorithm: str, P: int, nbytes: float) -> float:
    """Bytes all ranks together send in one allreduce of `nbytes` per rank."""
    algo = get_algorithm(algorithm)
    P = check_P(P)
    m = _check_nonneg("nbytes", nbytes)
    return 0.0 if P == 1 else algo.total_bytes(P, m)


def shared_coefficients(algorithm: str, P: int, nbytes: float) -> tuple[float, float]:
    """(a, b) on a shared medium: the algorithm's latency term, every rank's bytes."""
    a, _ = coefficients(algorithm, P, nbytes)
    return a, (total_bytes(algorithm, P, nbytes) if P > 1 else 0.0)


def allreduce_time(algorithm: str, P: int, nbytes: float, link: Link | str) -> float:
    """Seconds for an allreduce of `nbytes` bytes per rank on P ranks (paper 001 slide)."""
    lk = get_link(link)
    a, b = (shared_coefficients if lk.shared else coefficients)(algorithm, P, nbytes)
    return a * lk.L + b * lk.G


def predict(algorithm: str, P: int, nbytes: float, link: Link | str) -> float:
    """Same as `allreduce_time`; reads well next to `fit_link`."""
    return allreduce_time(algorithm, P, nbytes, link)


def lower_bound(P: int, nbytes: float, link: Link | str) -> float:
    """L·log2P + 2mG(P−1)/P, paper 001's lower bound for any allreduce (real log2 for any P)."""
    P = check_P(P)
    m = _check_nonneg("nbytes", nbytes)
    lk = get_link(link)
    return math.log2(P) * lk.L + 2.0 * m * (P - 1) / P * lk.G


def busbw_factor(P: int, algorithm: str | None = None) -> float:
    """Bus-bandwidth factor (busbw = algbw · factor): the algorithm's own, by default nccl-tests'
    allreduce 2(P−1)/P; 1.0 for P = 1 (busbw = algbw, not 0)."""
    P = check_P(P)
    if algorithm is None:
        return 1.0 if P == 1 else 2.0 * (P - 1) / P
    return get_algorithm(algorithm).busbw_factor(P)


# -- the other collectives (lab.comm.collectives: one plugin per op x algorithm)

def collective_coefficients(op: str, algorithm: str, P: int, nbytes: float) -> tuple[float, float]:
    """(a, b) with time = a·L + b·G for `op` by `algorithm` on P ranks, nbytes = nccl-tests' size of
    the op (`lab.comm.collectives.OPS`); op 'all_reduce' is `coefficients`. (0, 0) for P = 1."""
    from .collectives import get_collective

    P = check_P(P)
    m = _check_nonneg("nbytes", nbytes)
    if op == "all_reduce":
        return coefficients(algorithm, P, m)
    c = get_collective(op, algorithm)
    return (0.0, 0.0) if P == 1 else tuple(float(v) for v in c.coefficients(P, m))  # type: ignore[return-value]


def collective_time(op: str, algorithm: str, P: int, nbytes: float, link: Link | str) -> float:
    """Seconds for one `op` of nccl-tests size nbytes by `algorithm` on P ranks with per-rank links;
    a shared medium (`Link.shared`) counts every rank's bytes (`Collective.total_bytes`)."""
    from .collectives import get_collective

    lk = get_link(link)
    a, b = collective_coefficients(op, algorithm, P, nbytes)
    if lk.shared and P > 1:
        b = (total_bytes(algorithm, P, nbytes) if op == "all_reduce"
             else get_collective(op, algorithm).total_bytes(P, float(nbytes)))
    return a * lk.L + b * lk.G


def op_busbw_factor(op: str, P: int) -> float:
    """nccl-tests' bus-bandwidth factor of `op` (doc/PERFORMANCE.md): allreduce 2(P-1)/P, all-gather,
    reduce-scatter and all-to-all (P-1)/P, broadcast, reduce and sendrecv 1; 1.0 for P = 1."""
    from .collectives import check_op

    return check_op(op).busbw_factor(check_P(P))


# -- point to point and compression

def transfer_time(nbytes: float, link: Link | str) -> float:
    """One point-to-point message: L + nbytes·G (Dettmers 2016 Figure 2's transfer)."""
    lk = get_link(link)
    return lk.L + _check_nonneg("nbytes", nbytes) * lk.G


def _check_codec(n_values: int, wire_bytes_per_value: float, encode_s_per_value: float,
                 decode_s_per_value: float, side_bytes: float) -> tuple[int, float, float, float, float]:
    if isinstance(n_values, bool) or not _integral(n_values) or n_values < 0:
        raise ValueError(f"n_values must be an int >= 0, got {n_values!r}")
    return (int(n_values), _check_nonneg("wire_bytes_per_value", wire_bytes_per_value),
            _check_nonneg("encode_s_per_value", encode_s_per_value),
            _check_nonneg("decode_s_per_value", decode_s_per_value),
            _check_nonneg("side_bytes", side_bytes))


def compressed_transfer_time(n_values: int, link: Link | str, *, wire_bytes_per_value: float,
                             encode_s_per_value: float, decode_s_per_value: float,
                             side_bytes: float = 0.0) -> float:
    """Compress + transfer + decompress of n values, point to point (Dettmers 2016 §3.3)."""
    n, w, enc, dec, side = _check_codec(n_values, wire_bytes_per_value, encode_s_per_value,
                                        decode_s_per_value, side_bytes)
    return n * enc + transfer_time(w * n + side, link) + n * dec


def codec_counts(algorithm: str, P: int, n_values: int, mode: str = "requantize") -> tuple[float, float]:
    """(values encoded, values decoded) on the critical path of a compressed allreduce.

    See `compressed_time` for the table. Returns (0, 0) for P = 1.
    """
    check_algorithm(algorithm)
    P = check_P(P)
    n = float(_check_codec(n_values, 0, 0, 0, 0)[0])
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: known are {', '.join(MODES)}")
    if P == 1:
        return 0.0, 0.0
    if mode == "gather":
        return n, P * n
    algo = get_algorithm(algorithm)
    if algo.codec_counts is None:
        raise ValueError(f"algorithm {algorithm!r} declares no codec counts: its compressed time has no model")
    return algo.codec_counts(P, n)


def allgather_coefficients(algorithm: str, P: int, payload: float) -> tuple[float, float]:
    """(a, b) of an allgather of one `payload`-byte row per rank, in each algorithm's own form."""
    algo = get_algorithm(algorithm)
    if P == 1:
        return 0.0, 0.0
    if algo.gather_coefficients is None:
        raise ValueError(f"algorithm {algorithm!r} has no gather form (modes: {', '.join(algo.modes)})")
    return algo.gather_coefficients(P, payload)


def compressed_time(algorithm: str, P: int, n_values: int, link: Link | str, *,
                    wire_bytes_per_value: float, encode_s_per_value: float,
                    decode_s_per_value: float, side_bytes: float = 0.0,
                    mode: str = "requantize") -> float:
    """Seconds for a compressed allreduce: transfer + codec time (Dettmers 2016 §3.3).

    mode "requantize": the algorithm's own pattern on messages of m = w·n + side_bytes bytes
    (side_bytes is counted once in m, so segments carry their share of it), plus codec time
    enc·E + dec·D, where E and D count the values one rank encodes and decodes in sequence
    along the critical path, as `lab.comm.channel` does it: a reduction hop is decode-add-encode;
    a fully reduced piece is encoded once by its owner, who keeps the decoded value; received
    final pieces are decoded as they arrive and forwarded unchanged. Codec work is not
    overlapped with transfers. E and D are the algorithm's own `codec_counts` (each module of
    `lab.comm.algorithms` states and explains them; e.g. ring: E = n, D = n(2P−1)/P).

    mode "gather" (sparse and sign codecs): each rank encodes its n values once (E = n), the
    P payloads of q = w·n + side_bytes bytes are all-gathered in the algorithm's own allgather form
    (its `gather_coefficients`; e.g. ring (P−1)(L + qG)), and each rank decodes all P (D = P·n).
    """
    n, w, enc, dec, side = _check_codec(n_values, wire_bytes_per_value, encode_s_per_value,
                                        decode_s_per_value, side_bytes)
    E, D = codec_counts(algorithm, P, n, mode)
    if P == 1:
        return 0.0
    lk = get_link(link)
    if mode == "gather":
        a, b = allgather_coefficients(algorithm, P, w * n + side)
        comm = a * lk.L + b * lk.G
    else:
        comm = allreduce_time(algorithm, P, w * n + side, lk)
    return comm + E * enc + D * dec


# -- calibration

@dataclass
class Fit:
    """A fitted link and how well it predicts the rows it was fitted to."""

    link: Link                 # fitted L and 1/G, name "fitted"
    rows: pd.DataFrame         # the rows used + predicted_s + rel_error ((predicted − seconds)/seconds)
    median_rel_error: float    # median of |rel_error|
    max_rel_error: float       # max of |rel_error|
    left_out: pd.DataFrame | None = None  # rows left out as stalled (`fit_link`'s trim) + predicted_s


_KINDS = ("pingpong", "allreduce")


def _row_coefficients(row: pd.Series, shared: bool = False) -> tuple[float, float]:
    if row["kind"] == "pingpong":
        return 1.0, _check_nonneg("nbytes", float(row["nbytes"]))
    P = row["P"]
    if isinstance(P, float) and P.is_integer():
        P = int(P)
    return (shared_coefficients if shared else coefficients)(row["algorithm"], P, float(row["nbytes"]))


def _solve(A: np.ndarray) -> tuple[float, float] | None:
    """Least squares of A·(L, G) = 1 with L >= 0; None without a positive G."""
    (L, G), *_ = np.linalg.lstsq(A, np.ones(len(A)), rcond=None)
    if L < 0:  # the constrained optimum lies on L = 0: refit G alone
        x = A[:, 1]
        L, G = 0.0, float(x.sum() / (x @ x))
    return (float(L), float(G)) if G > 0 else None


STALLED = 2.0  # a row measured over STALLED x what the fit of the other rows predicts was stalled (trim)


def fit_link(rows: pd.DataFrame | list[dict], *, min_bytes: int = 0, shared: bool = False, trim: float = 0.0) -> Fit:
    """Fit L >= 0 and G > 0 to measured times by least squares on relative error.

    Rows: kind ("pingpong": one-way time L + nbytes·G; "allreduce": `coefficients` of
    algorithm, P), algorithm, P, nbytes, seconds. Rows with nbytes < min_bytes are left out,
    and so are allreduce rows with P = 1 (the model predicts 0). Each row is weighted by
    1/seconds; if the free fit gives L < 0, L is clamped to 0 and G refitted.
    shared=True fits a shared-medium link (ranks on one host): see `Link.shared`.
    trim: up to this fraction of the rows may be left out as stalled (a loaded host only ever makes
    a call slower): one at a time, of the rows measured over STALLED x what the fit of the other rows
    predicts, the one whose removal fits the rest best goes (`Fit.left_out`). 0: every row counts.
    """
    df = pd.DataFrame(rows).reset_index(drop=True)
    missing = {"kind", "nbytes", "seconds"} - set(df.columns)
    if "kind" in df and (df["kind"] == "allreduce").any():
        missing |= {"algorithm", "P"} - set(df.columns)
    if missing:
        raise ValueError(f"rows lack columns {sorted(missing)}: need kind, algorithm, P, nbytes, seconds")
    bad_kind = sorted({str(k) for k in df["kind"]} - set(_KINDS))
    if bad_kind:
        raise ValueError(f"unknown kind {bad_kind}: allowed are {', '.join(_KINDS)}")
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim={trim!r}: allowed is a fraction in [0, 0.5)")
    secs = pd.to_numeric(df["seconds"], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(secs) & (secs > 0))
    if bad.any():
        raise ValueError(f"seconds must be finite and > 0, got {df['seconds'][bad].tolist()}")
    nbytes = pd.to_numeric(df["nbytes"], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(nbytes) & (nbytes >= 0))
    if bad.any():
        raise ValueError(f"nbytes must be finite and >= 0, got {df['nbytes'][bad].tolist()}")
    df = df[nbytes >= min_bytes].reset_index(drop=True)
    ab = np.array([_row_coefficients(r, shared) for _, r in df.iterrows()], dtype=float).reshape(-1, 2)
    keep = ab.any(axis=1)
    df, ab = df[keep].reset_index(drop=True), ab[keep]
    if len(df) < 2:
        raise ValueError(f"need at least 2 usable rows (nbytes >= min_bytes={min_bytes}, "
                         f"not allreduce with P = 1), got {len(df)}")
    t = df["seconds"].to_numpy(dtype=float)
    A = ab / t[:, None]
    if np.linalg.matrix_rank(A) < 2:
        raise ValueError("rows cannot separate L from G: give at least two different message sizes "
                         "(or pingpong and allreduce rows)")
    used = np.ones(len(df), dtype=bool)
    sol = _solve(A)
    budget = int(trim * len(df))
    group = np.array([repr(k) for k in df.reindex(columns=["kind", "algorithm", "P"]).itertuples(index=False)])
    nb = df["nbytes"].to_numpy(dtype=float)
    while sol is None and budget:  # no fit at all: first the rows slower than a larger message of their kind
        larger = [(i, used & (group == group[i]) & (nb > nb[i])) for i in np.flatnonzero(used)]
        worst = max(((t[i] / t[m].min(), i) for i, m in larger if m.any()), default=(0.0, -1))
        if worst[0] <= 1.0:
            break
        used[worst[1]] = False
        budget -= 1
        sol = _solve(A[used]) if np.linalg.matrix_rank(A[used]) == 2 else None
    for _ in range(budget):
        stalled = []  # rows measured over STALLED x what the fit of the other rows predicts
        for i in np.flatnonzero(used):
            u = used.copy()
            u[i] = False
            if np.linalg.matrix_rank(A[u]) == 2 and (s := _solve(A[u])) is not None and t[i] > STALLED * (ab[i] @ s):
                stalled.append((float(np.sum((A[u] @ np.array(s) - 1) ** 2)), i, s))
        if not stalled:
            break
        _, i, sol = min(stalled)  # the one whose removal fits the rest best
        used[i] = False
    if sol is None:
        raise ValueError("fit gives no positive G: the rows carry too little bandwidth information; "
                         "include larger messages")
    L, G = sol
    link = Link("fitted", float(L), 1.0 / float(G),
                f"least-squares fit (relative error) to {int(used.sum())} measured rows", shared)
    df = df.assign(predicted_s=ab @ np.array([link.L, link.G]))
    out, left = df[used].reset_index(drop=True), df[~used].reset_index(drop=True)
    out["rel_error"] = (out["predicted_s"] - t[used]) / t[used]
    err = out["rel_error"].abs()
    return Fit(link, out, float(err.median()), float(err.max()), left if len(left) else None)
