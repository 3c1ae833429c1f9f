"""Allreduce algorithms on SimComm: sums, agreement across ranks, codec error bounds, wire
formats and errors. Real processes are in test_dist.py."""
from __future__ import annotations

import math

import pytest
import torch

from lab.codecs import codec_names, get_codec
from lab.comm import CommError, algorithm_names, allreduce, simulate
from lab.comm.algorithms import ALGORITHMS, algorithm_names as registered_algorithms, get_algorithm
from lab.comm.algorithms.common import bounds
from lab.codecs.wire import WireFormat

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

ALGS = algorithm_names()


def _x(rank: int, n: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(1000 + rank))


def _exact(P: int, n: int) -> torch.Tensor:
    acc = torch.zeros(n, dtype=torch.float64)
    for r in range(P):
        acc += _x(r, n).double()
    return acc


def _rank(comm, n, algorithm, codec=None, mode="auto"):
    return allreduce(comm, _x(comm.rank, n), algorithm=algorithm, codec=codec, mode=mode)


def _fp32_tol(P: int, n: int) -> float:
    """fp32 summation-order tolerance for sums of P standard normals."""
    return 4 * P * 2.0**-24 * 6 * math.sqrt(P) + 1e-6


@pytest.mark.parametrize("algorithm", ALGS)
@pytest.mark.parametrize("P", range(1, 9))
def test_sum_equals_exact_on_every_rank(algorithm: str, P: int) -> None:
    for n in (0, 1, P - 1, 7, 1001):
        out = simulate(_rank, P, n, algorithm)
        exact = _exact(P, n)
        for r, y in enumerate(out):
            assert y.shape == (n,) and y.dtype == torch.float32
            assert torch.allclose(y.double(), exact, rtol=0, atol=_fp32_tol(P, n)), (algorithm, P, n, r)
            assert torch.equal(y, out[0]), f"{algorithm} P={P} n={n}: rank {r} differs from rank 0"


@pytest.mark.parametrize("algorithm", ALGS)
@pytest.mark.parametrize("P", [16, 31, 64])
def test_sum_at_scale(algorithm: str, P: int) -> None:
    n = 999
    out = simulate(_rank, P, n, algorithm)
    exact = _exact(P, n)
    assert all(torch.equal(y, out[0]) for y in out)
    assert torch.allclose(out[-1].double(), exact, rtol=0, atol=_fp32_tol(P, n))


def test_matches_native_sum_order_tolerance_and_shape_dtype() -> None:
    def body(comm):
        x = _x(comm.rank, 24).view(4, 6).to(torch.bfloat16)
        return [allreduce(comm, x, algorithm=a) for a in ALGS]

    out = simulate(body, 5)
    for y in out[2]:
        assert y.shape == (4, 6) and y.dtype == torch.bfloat16
        assert torch.allclose(y.float(), out[2][0].float(), atol=0.07)


def test_input_is_not_modified() -> None:
    def body(comm):
        x = _x(comm.rank, 100)
        before = x.clone()
        for a in ALGS:
            allreduce(comm, x, algorithm=a)
        return torch.equal(x, before)

    assert all(simulate(body, 6))


# ------------------------------------------------------------------ codecs on the wire

def _hops(algorithm: str, P: int) -> int | None:
    """The encodes an element goes through on its way (requantize mode), as the algorithm declares it
    (`Algorithm.hops`); None for one that declares none."""
    hops = get_algorithm(algorithm).hops
    return None if hops is None else int(hops(P))


def test_builtin_algorithms_declare_their_hops() -> None:
    """Every built-in algorithm promises an error bound; a plugin may declare none (its bound is then skipped)."""
    from lab.comm.algorithms import algorithm_infos
    from lab.comm.algorithms.base import REGISTRY

    missing = [a.name for a in algorithm_infos() if REGISTRY.builtin(a) and a.hops is None]
    assert not missing, f"declare hops=... (the encodes an element goes through) in: {missing}"
    assert [_hops("ring", P) for P in (2, 5)] == [2, 5] and _hops("tree", 5) == 4
    assert _hops("recursive_doubling", 6) == _hops("rabenseifner", 6) == 4


def test_hops_come_from_the_algorithm_registered_later() -> None:
    """The bound reads the registry when it runs, so a plugin registered after import brings its own hops."""
    from dataclasses import replace

    from lab.comm.algorithms import get_algorithm, register, unregister

    ring = get_algorithm("ring")

    def reduce(comm, buf, channel):  # defined here: the algorithm is this module's plugin, not a built-in
        return ring.reduce(comm, buf, channel)

    register(replace(ring, name="ring_copy_for_test", reduce=reduce, module="", hops=None))
    try:
        assert _hops("ring_copy_for_test", 4) is None
        register(replace(ring, name="ring_copy_for_test", reduce=reduce, module="", hops=lambda P: 2 * P), replace=True)
        assert _hops("ring_copy_for_test", 4) == 8
    finally:
        unregister("ring_copy_for_test")


@pytest.mark.parametrize("algorithm", registered_algorithms())
@pytest.mark.parametrize("P", [2, 3, 5, 8])
def test_linear_requantize_error_bound(algorithm: str, P: int) -> None:
    """Nearest rounding to k/127 of the absmax errs by at most absmax/254 per encode, and every
    partial sum's absmax is at most S = sum of the ranks' absmax: |error| <= hops * S / 254."""
    hops = _hops(algorithm, P)
    if hops is None:
        pytest.skip(f"algorithm {algorithm!r} declares no hops (no error bound promised)")
    n = 1000
    out = simulate(_rank, P, n, algorithm, get_codec("linear"))
    exact = _exact(P, n)
    S = sum(float(_x(r, n).abs().max()) for r in range(P))
    err = (out[0].double() - exact).abs().max().item()
    assert err <= hops * S / 254 * (1 + 1e-5) + 1e-5
    assert err > 0  # the codec really was on the wire
    assert all(torch.equal(y, out[0]) for y in out)


@pytest.mark.parametrize("P", [2, 3, 5])
def test_ring_pipelines_long_segments_as_chunks(P: int, monkeypatch) -> None:
    """Segments longer than the channel's chunk travel as several messages that move on one by
    one; sums, agreement across ranks and the linear codec's error bound are unchanged."""
    from lab.comm import channel

    monkeypatch.setattr(channel, "CHUNK", 16)
    for n in (0, 1, 15, 16 * P, 1001):
        out = simulate(_rank, P, n, "ring")
        assert all(torch.equal(y, out[0]) for y in out)
        assert torch.allclose(out[0].double(), _exact(P, n), rtol=0, atol=_fp32_tol(P, n)), (P, n)

    n = 1001
    q = simulate(_rank, P, n, "ring", get_codec("linear"))
    S = sum(float(_x(r, n).abs().max()) for r in range(P))
    assert all(torch.equal(y, q[0]) for y in q)
    assert 0 < (q[0].double() - _exact(P, n)).abs().max().item() <= P * S / 254 * (1 + 1e-5) + 1e-5

    def messages(comm):
        comm.reset_counters()
        allreduce(comm, _x(comm.rank, n), algorithm="ring", codec="linear", check=False)
        return comm.messages_sent, comm.bytes_sent
    seg = -(-n // P)
    chunks = -(-seg // 16)
    msgs, nbytes = simulate(messages, P)[0]
    assert msgs >= 2 * (P - 1) * (chunks - 1)  # one message per chunk, not one per segment
    assert nbytes <= 2 * (P - 1) * (seg + 4 * chunks)  # codes + one scale per chunk


def test_gather_mode_is_one_rounding_and_the_same_for_every_algorithm() -> None:
    P, n = 6, 500
    codec = get_codec("dynamic_tree")
    exact_rounded = sum(codec.roundtrip(_x(r, n)).double() for r in range(P))
    results = [simulate(_rank, P, n, a, codec, "gather")[P - 1] for a in ALGORITHMS]
    for y in results:
        assert torch.equal(y, results[0])
        assert torch.allclose(y.double(), exact_rounded, atol=1e-5)


def test_gather_with_own_vector_exact_and_with_error_feedback() -> None:
    """own='exact' (Dettmers 2016 §3.4's scheme) adds a rank's own vector in fp32; an
    ErrorFeedback codec encodes vector + residual and keeps the new residual per key."""
    from lab.codecs import ErrorFeedback

    P, n = 3, 300
    codec = get_codec("linear")

    def rank(comm, own, ef):
        c = ErrorFeedback(get_codec("onebit")) if ef else codec
        y = allreduce(comm, _x(comm.rank, n), algorithm="tree", codec=c, mode="gather", own=own, key="w")
        return y, c
    out = simulate(rank, P, "exact", False)
    for r in range(P):
        expect = _x(r, n) + sum(codec.roundtrip(_x(j, n)) for j in range(P) if j != r)
        assert torch.allclose(out[r][0], expect, atol=1e-5)
    out = simulate(rank, P, "compressed", True)
    total = sum(_x(r, n) for r in range(P))
    residuals = sum(c._residual["w"] for _, c in out)
    assert torch.allclose(out[0][0] + residuals, total, atol=1e-4)
    with pytest.raises(CommError, match="own='exact' .* needs a codec in mode='gather'"):
        simulate(lambda comm: allreduce(comm, _x(comm.rank, n), codec=codec, own="exact"), 2)
    with pytest.raises(CommError, match="re-encoded partial sums have none: use mode='gather'"):
        simulate(lambda comm: allreduce(comm, _x(comm.rank, n), codec=ErrorFeedback(codec), mode="requantize"), 2)


@pytest.mark.parametrize("codec", ["topk", "onebit", "randomk"])
def test_sparse_and_sign_codecs_gather_and_decode(codec: str) -> None:
    P, n = 4, 400
    c = get_codec(codec, ratio=0.25) if codec != "onebit" else get_codec(codec)
    expect = sum(c.decode(c.encode(_x(r, n))).double() for r in range(P)) if codec != "randomk" else None
    out = simulate(_rank, P, n, "ring", c)
    assert all(torch.equal(y, out[0]) for y in out)
    if expect is not None:
        assert torch.allclose(out[0].double(), expect, atol=1e-5)
    with pytest.raises(CommError, match="cannot be re-encoded"):
        simulate(_rank, 2, n, "ring", c, "requantize")


@pytest.mark.parametrize("algorithm", ["butterfly_sync", "parameter_server"])
def test_one_bit_two_stage_encodes_each_value_twice(algorithm: str) -> None:
    """Seide et al.'s 1-bit SGD exchange: every rank's part encoded once, the owner's sum (own part
    exact) encoded again and sent back; 2(P-1)/P of the packed bits per rank on butterfly_sync."""
    P, n = 4, 1000
    c = get_codec("onebit")
    out = simulate(_rank, P, n, algorithm, c, "requantize")
    assert all(torch.equal(y, out[0]) for y in out)
    if algorithm == "butterfly_sync":
        parts = [bounds(n, P)[k:k + 2] for k in range(P)]
        owners = range(P)
    else:
        parts, owners = [[0, n]], [0]
    expect = torch.empty(n)
    for (a, b), k in zip(parts, owners):
        acc = torch.zeros(b - a)
        for r in range(P):
            piece = _x(r, n)[a:b]
            acc += piece if r == k else c.decode(c.encode(piece))
        expect[a:b] = c.decode(c.encode(acc))
    assert torch.allclose(out[0], expect, atol=1e-5)

    def sent(comm, mode):
        comm.reset_counters()
        allreduce(comm, _x(comm.rank, 8000), algorithm="butterfly_sync", codec=c, mode=mode, check=False)
        return comm.bytes_sent
    two, gather = simulate(sent, P, "requantize")[1], simulate(sent, P, "gather")[1]
    assert two == 2 * (P - 1) * (8000 // P // 8 + 8)  # packed bits + two means, to and from each owner
    assert two < gather / 1.4
    with pytest.raises(CommError, match="use mode='gather', or algorithm butterfly_sync or alltoall_quantized or parameter_server"):
        simulate(_rank, P, n, "tree", c, "requantize")


def test_requantized_ring_error_compounds_with_P() -> None:
    """The error-at-scale what-if: re-quantising at every hop of a ring grows the error with P."""
    def rel(P):
        y = simulate(_rank, P, 4096, "ring", get_codec("dynamic_tree"))[0].double()
        e = _exact(P, 4096)
        return ((y - e).norm() / e.norm()).item()

    small, large = rel(4), rel(64)
    assert large > 1.5 * small


def test_codec_bytes_on_the_wire() -> None:
    """8-bit payloads put ~1/4 of the fp32 bytes on the wire."""
    def body(comm, codec):
        comm.reset_counters()
        allreduce(comm, _x(comm.rank, 4096), algorithm="ring", codec=codec, check=False)
        return comm.bytes_sent

    raw = sum(simulate(body, 4, None))
    q = sum(simulate(body, 4, get_codec("linear")))
    assert raw == 2 * 3 * 4096 * 4  # 2(P-1) steps of n/P values per rank, 4 ranks
    assert q == 2 * 3 * (4096 + 4 * 4)  # 1 byte per value + one 4-byte scale per segment message


@pytest.mark.parametrize("name", codec_names())
def test_wire_format_roundtrip(name: str) -> None:
    opts = {"layout": {"total_bits": 4}, "topk": {"ratio": 0.1}, "randomk": {"ratio": 0.1}}.get(name, {})
    codec = get_codec(name, **opts)
    for n in (1, 1001):
        x = _x(0, n)
        fmt = WireFormat.of(codec, n)
        enc = codec.encode(x)
        buf = fmt.pack(enc)
        assert buf.dtype == torch.uint8 and buf.numel() == fmt.nbytes
        assert enc.wire_bytes <= fmt.nbytes <= enc.wire_bytes + 8
        assert torch.equal(codec.decode(fmt.unpack(buf)), codec.decode(enc))


# ------------------------------------------------------------------ errors

def test_lengths_that_differ_fail_before_any_traffic() -> None:
    def body(comm):
        try:
            allreduce(comm, torch.ones(10 + comm.rank), algorithm="ring")
        except CommError as e:
            return str(e), comm.bytes_sent
        return "no error", comm.bytes_sent

    for msg, sent in simulate(body, 3):
        assert "ranks disagree" in msg and "rank 2: (12" in msg and sent == 0


def test_bad_arguments_name_what_is_allowed() -> None:
    with pytest.raises(CommError, match="unknown algorithm 'hypercube'; known: native, tree"):
        simulate(_rank, 2, 4, "hypercube")
    with pytest.raises(CommError, match="native all_reduce carries fp32 only"):
        simulate(_rank, 2, 4, "native", get_codec("fp16"))
    with pytest.raises(CommError, match="mode='fast'"):
        simulate(_rank, 2, 4, "ring", get_codec("fp16"), "fast")
    with pytest.raises(ValueError, match="1..1024 virtual ranks"):
        simulate(_rank, 1025, 4, "ring")
    with pytest.raises(CommError, match="floating-point"):
        simulate(lambda c: allreduce(c, torch.ones(3, dtype=torch.int64)), 2)


def test_deadlock_is_reported() -> None:
    def body(comm):
        comm.recv(torch.empty(1), (comm.rank + 1) % comm.size)

    with pytest.raises(CommError, match="deadlock: 3 rank"):
        simulate(body, 3)


class _Interrupt(BaseException):
    """Like Streamlit's stop and rerun: a BaseException raised inside a rank (its progress callback)."""


def test_no_rank_is_left_suspended_when_a_run_stops_early() -> None:
    """Ranks still blocked when simulate leaves (a deadlock, a rank that raised, an interrupt) are unwound in the
    caller's thread (their `finally` runs there), not left for another thread to free: the dashboard's server
    once died in _greenlet (Streamlit runs each rerun in a new thread)."""
    from greenlet import getcurrent

    for stop, caught in ((lambda c: c.recv(torch.empty(1), 0), CommError),
                         (lambda c: _raise(c, ValueError("rank 2 fails")), CommError),
                         (lambda c: _raise(c, _Interrupt()), _Interrupt)):
        ranks, unwound = [], []

        def body(comm, stop=stop):
            ranks.append(getcurrent())
            try:
                if comm.rank == 2:  # the last rank to start: ranks 0 and 1 are waiting for it by then
                    stop(comm)
                comm.recv(torch.empty(1), 2)
            finally:
                unwound.append(comm.rank)

        with pytest.raises(caught):
            simulate(body, 3)
        assert len(ranks) == 3 and all(g.dead for g in ranks), [g.dead for g in ranks]
        assert sorted(unwound) == [0, 1, 2]


def _raise(comm, e: BaseException) -> None:
    raise e


def test_bounds_cover_the_vector() -> None:
    for n in (0, 1, 5, 17):
        for parts in (1, 2, 3, 8):
            b = bounds(n, parts)
            assert b[0] == 0 and b[-1] == n and all(b[i] <= b[i + 1] for i in range(parts))
            assert max(b[i + 1] - b[i] for i in range(parts)) - min(b[i + 1] - b[i] for i in range(parts)) <= 1


# -- NCCL's point-to-point rules (SimComm strict=True, base.py): every exchange is deadlock-free


@pytest.mark.parametrize("P", [2, 3, 4, 5, 6, 7, 8, 16, 33, 64])
def test_every_algorithm_keeps_nccl_rules(P: int) -> None:
    """Rendezvous sends and batches run in order per rank, as on NCCL: every algorithm completes,
    raw, requantized and gathered (raw only beyond 16 ranks: codec work is slow there), with the
    same numbers as with buffered sends."""
    n = 3 * P + 2
    dt = get_codec("dynamic_tree")
    for codec, mode in ((None, "auto"),) + (((dt, "requantize"), (dt, "gather")) if P <= 16 else ()):
        for a in ALGS[1:]:
            strict = simulate(_rank, P, n, a, codec, mode, strict=True)
            loose = simulate(_rank, P, n, a, codec, mode)
            assert all(torch.equal(s, b) for s, b in zip(strict, loose)), (a, P, mode)
    assert torch.allclose(strict[0].double(), _exact(P, n), rtol=0, atol=0.03 * float(_exact(P, n).abs().max()))


@pytest.mark.parametrize("P", [2, 3, 5])
def test_ring_chunks_keep_nccl_rules(P: int, monkeypatch) -> None:
    """Chunked ring steps (segments of different chunk counts too) under NCCL's rules: one batch
    per chunk of a step, no receive posted ahead."""
    from lab.comm import channel

    monkeypatch.setattr(channel, "CHUNK", 16)
    for n in (1, 16 * P + P - 1, 1001):
        for codec in (None, get_codec("linear")):
            strict = simulate(_rank, P, n, "ring", codec, strict=True)
            assert all(torch.equal(s, b) for s, b in zip(strict, simulate(_rank, P, n, "ring", codec))), (P, n)


def test_strict_sim_catches_what_hangs_on_nccl() -> None:
    """Both ranks send first, or both post a receive first, to each other: NCCL hangs (one stream
    per pair, messages beyond its buffer), and so does the strict simulator; one batch does not."""
    def send_first(comm):
        peer = 1 - comm.rank
        w = comm.isend(torch.ones(4), peer)
        comm.recv(torch.empty(4), peer)
        w.wait()

    def recv_first(comm):
        peer, got = 1 - comm.rank, torch.empty(4)
        w = comm.irecv(got, peer)
        comm.send(torch.full((4,), float(comm.rank)), peer)
        w.wait()
        return got

    def batch(comm):
        peer, got = 1 - comm.rank, torch.empty(4)
        comm.exchange([(torch.full((4,), float(comm.rank)), peer)], [(got, peer)]).wait()
        return got

    for fn in (send_first, recv_first):
        simulate(fn, 2)  # buffered sends (Gloo-like): fine
        with pytest.raises(CommError, match="deadlock: 2 rank.*rank 0 waits for (send to|receive from) rank 1"):
            simulate(fn, 2, strict=True)
    assert [float(g[0]) for g in simulate(batch, 2, strict=True)] == [1.0, 0.0]
    with pytest.raises(CommError, match=r"1 operation\(s\) never matched \(rank 0: send to rank 1\)"):
        simulate(lambda c: c.isend(torch.ones(3), 1) if c.rank == 0 else None, 2, strict=True)
    with pytest.raises(CommError, match="message from rank 0 is \\(3,\\)"):
        simulate(lambda c: c.exchange([(torch.ones(3), 1)]) if c.rank == 0
                 else c.exchange(recvs=[(torch.empty(2), 0)]).wait(), 2, strict=True)


def test_exchange_counts_skips_empty_and_checks_peers() -> None:
    def body(comm):
        peer = 1 - comm.rank
        got, none = torch.empty(5), torch.empty(0)
        b = comm.exchange([(torch.arange(5.0) + comm.rank, peer), (torch.empty(0), peer)], [(none, peer), (got, peer)])
        b.wait()
        b.wait()  # again: returns at once
        return got, comm.messages_sent, comm.bytes_sent, comm.receive_ahead

    for strict in (False, True):
        (g0, m, nb, ahead), (g1, *_) = simulate(body, 2, strict=strict)
        assert torch.equal(g0, torch.arange(5.0) + 1) and torch.equal(g1, torch.arange(5.0))
        assert (m, nb, ahead) == (1, 20, not strict)
    with pytest.raises(CommError, match="peer 2 is not another rank of 0..1"):
        simulate(lambda c: c.exchange(recvs=[(torch.empty(1), 2)]), 2)
