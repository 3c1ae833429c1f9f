"""The two-level cluster's collectives run for real: alltoall_quantized (ZeRO++ qgZ) and the hierarchical
two-level allreduce on SimComm (NCCL's rules too) and real Gloo processes, their codec counts,
sub-communicators, error at scale, bad input, and the two-level shaped machine."""
from __future__ import annotations

import json
import math

import pytest
import torch

from lab.codecs import get_codec
from lab.codecs.wire import WireFormat
from lab.comm import CommError, allreduce, simulate
from lab.comm.algorithms import get_algorithm
from lab.comm.allreduce import configure
from lab.comm.algorithms import alltoall_quantized as a2a
from lab.comm.algorithms import hierarchical as hier
from lab.comm.pieces import bounds


def _x(rank: int, n: int) -> torch.Tensor:
    """Small integers: every summation order is exact in fp32."""
    i = torch.arange(n)
    return (((i * 7 + rank * 13) % 17) - 8).to(torch.float32)


def _exact(P: int, n: int) -> torch.Tensor:
    return sum((_x(r, n) for r in range(P)), torch.zeros(n))


def _rank(comm, n, algorithm, codec=None, mode="auto", **options):
    return allreduce(comm, _x(comm.rank, n), algorithm=algorithm, codec=codec, mode=mode, **options)


def _normal(rank: int, n: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(500 + rank))


def _normal_rank(comm, n, algorithm, codec=None, mode="auto", **options):
    return allreduce(comm, _normal(comm.rank, n), algorithm=algorithm, codec=codec, mode=mode, **options)


def _variants(P: int) -> list[tuple[str, dict]]:
    """Every new algorithm and form that P allows (non-powers of two included)."""
    out: list[tuple[str, dict]] = [("alltoall_quantized", {}), ("hierarchical", {})]
    for k in hier.divisors(P):
        if 1 < k < P:
            out += [("alltoall_quantized", {"ranks_per_node": k}),
                    ("hierarchical", {"ranks_per_node": k}),
                    ("hierarchical", {"ranks_per_node": k, "inner": "butterfly_sync", "outer": "rabenseifner"}),
                    ("hierarchical", {"ranks_per_node": k, "outer": "alltoall_quantized"})]
    return out


# -- exact sums in fp32 --------------------------------------------------------------------------

@pytest.mark.parametrize("P", range(1, 17))
def test_exact_fp32_sums_every_form(P: int) -> None:
    for algorithm, options in _variants(P):
        for strict in (False, True):
            for n in (0, 1, P - 1, 7, 101):
                out = simulate(_rank, P, n, algorithm, strict=strict, **options)
                want = _exact(P, n)
                for r, y in enumerate(out):
                    assert y.dtype == torch.float32 and y.shape == (n,)
                    assert torch.equal(y, want), (algorithm, options, P, n, strict, r)


@pytest.mark.parametrize("P", [4, 6, 8])
def test_codecs_agree_across_ranks_and_under_nccl_rules(P: int) -> None:
    """With a codec every rank ends with the same numbers, strict (NCCL) or buffered alike."""
    n = 3 * P + 5
    for algorithm, options in _variants(P):
        for codec, mode in (("dynamic_tree", "auto"), ("onebit", "requantize"), ("dynamic_tree", "gather")):
            if codec == "onebit" and algorithm != "alltoall_quantized":
                continue
            strict = simulate(_normal_rank, P, n, algorithm, codec, mode, strict=True, **options)
            loose = simulate(_normal_rank, P, n, algorithm, codec, mode, **options)
            assert all(torch.equal(s, strict[0]) for s in strict), (algorithm, options, codec)
            assert all(torch.equal(s, b) for s, b in zip(strict, loose)), (algorithm, options, codec)


# -- codec counts: alltoall_quantized encodes each value exactly twice ---------------------------

@pytest.mark.parametrize("P", [2, 3, 4, 7, 16])
@pytest.mark.parametrize("codec", ["dynamic_tree", "onebit", "mxfp8_e4m3"])
def test_alltoall_quantized_is_two_roundings(P: int, codec: str) -> None:
    """Result = the owner's sum in fp32 of every rank's chunk decoded once, encoded once more."""
    n = 1000
    c = get_codec(codec)
    out = simulate(_normal_rank, P, n, "alltoall_quantized", c, "requantize")
    b = bounds(n, P)
    want = torch.empty(n)
    for k in range(P):
        acc = torch.zeros(b[k + 1] - b[k])
        for r in range(P):
            acc += c.decode(c.encode(_normal(r, n)[b[k]:b[k + 1]])).float()
        want[b[k]:b[k + 1]] = c.decode(c.encode(acc)).float()
    assert all(torch.equal(y, out[0]) for y in out)
    assert torch.allclose(out[0], want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("P,k", [(4, 1), (8, 1), (5, 1), (8, 2), (16, 4)])
def test_alltoall_quantized_counts_encoded_values(P: int, k: int, monkeypatch) -> None:
    """Values encoded per rank, counted at the wire format, equal the declared codec counts:
    n (each chunk once) + n/P (the owner's sum) flat; + n/k (node sums) two-level. So every value of
    the result went through 2 encodings flat, 3 two-level, whatever P is."""
    n = 64 * P
    seen: list[int] = []
    real = WireFormat.encode

    def counting(self, x):
        seen.append(x.numel())
        return real(self, x)

    monkeypatch.setattr(WireFormat, "encode", counting)
    simulate(_normal_rank, P, n, "alltoall_quantized", "dynamic_tree", ranks_per_node=k)
    per_rank = sum(seen) / P
    E, D = a2a.codec_counts(P, n, k)
    assert per_rank == pytest.approx(E)
    assert E == pytest.approx(n + (n / k if k > 1 else 0) + n / P)
    assert a2a.encodes_per_value(P, k) == (2 if k == 1 else 3)
    assert get_algorithm("alltoall_quantized").codec_counts(P, n) == a2a.codec_counts(P, n)
    assert get_algorithm("alltoall_quantized").two_stage


def test_ring_encodes_partial_sums_at_every_hop(monkeypatch) -> None:
    """The contrast: the ring encodes n values per rank too, but they are partial sums re-encoded at
    P−1 hops; the error of the two shows it (test_error_at_scale_shape)."""
    seen: list[int] = []
    real = WireFormat.encode
    monkeypatch.setattr(WireFormat, "encode", lambda self, x: (seen.append(x.numel()), real(self, x))[1])
    P, n = 8, 800
    simulate(_normal_rank, P, n, "ring", "dynamic_tree")
    assert sum(seen) / P <= get_algorithm("ring").codec_counts(P, n)[0]


# -- hierarchical: levels, codecs per level ------------------------------------------------------

def test_hierarchical_fp32_inside_is_the_outer_error_only() -> None:
    """intra_codec=None: fp32 inside the node, the codec only across nodes: the result equals the
    outer ring's compressed allreduce of the node sums, bit for bit."""
    P, k, n = 8, 4, 999
    c = get_codec("dynamic_tree")
    out = simulate(_normal_rank, P, n, "hierarchical", c, ranks_per_node=k, intra_codec=None)
    # reference: node sums in fp32 (rank order), then a ring allreduce of them on N = 2 virtual ranks
    sums = [sum((_normal(j * k + i, n) for i in range(k)), torch.zeros(n)) for j in range(P // k)]
    shards = bounds(n, k)

    def outer(comm):
        parts = [allreduce(comm, sums[comm.rank][shards[i]:shards[i + 1]], algorithm="ring", codec=c)
                 for i in range(k)]
        return torch.cat(parts)
    ref = simulate(outer, P // k)[0]
    assert all(torch.equal(y, out[0]) for y in out)
    assert torch.allclose(out[0], ref, rtol=0, atol=1e-5)


def test_hierarchical_levels_of_the_error() -> None:
    """More hops, more error: bf16 inside adds almost nothing to the dynamic tree across."""
    P, n = 16, 4000
    exact = sum(_normal(r, n).double() for r in range(P))

    def rel(**kw):
        y = simulate(_normal_rank, P, n, "hierarchical", "dynamic_tree", **kw)[0].double()
        return float((y - exact).norm() / exact.norm())
    fp32_in, bf16_in, tree_in = rel(ranks_per_node=4, intra_codec=None), rel(ranks_per_node=4, intra_codec="bf16"), \
        rel(ranks_per_node=4)
    assert fp32_in < tree_in and bf16_in < tree_in
    assert bf16_in == pytest.approx(fp32_in, rel=0.1)


def test_cost_coefficients() -> None:
    """Flat links: the hierarchical ring-of-rings has the ring's bandwidth term with k+N−2 latency
    steps per direction; per-level coefficients add up to the flat ones."""
    ring, h = get_algorithm("ring"), get_algorithm("hierarchical")
    for P, m in ((4, 1e6), (16, 3e5), (64, 1e8), (12, 5e4), (7, 1e3)):
        k = hier.default_ranks_per_node(P)
        N = P // k
        a, b = h.coefficients(P, m)
        assert b == pytest.approx(ring.coefficients(P, m)[1])
        assert a == pytest.approx(2 * (k - 1) + 2 * (N - 1))
        assert h.total_bytes(P, m) == pytest.approx(ring.total_bytes(P, m))
        lv = hier.level_coefficients(P, m, k)
        assert lv["intra"][0] + lv["inter"][0] == pytest.approx(a)
        assert a2a.coefficients(P, m) == pytest.approx(get_algorithm("butterfly_sync").coefficients(P, m))
        assert sum(v[1] for v in a2a.level_coefficients(P, m, k).values()) == pytest.approx(b)
    lv = hier.level_coefficients(64, 8e6, 8)
    assert lv["inter"] == pytest.approx(ring.coefficients(8, 1e6))  # 8 nodes, a shard of m/8
    assert hier.level_bytes(64, 8e6, 8)["inter"] == pytest.approx(8 * ring.total_bytes(8, 1e6))
    assert hier.default_ranks_per_node(64) == 8 and hier.default_ranks_per_node(2) == 1
    assert hier.default_ranks_per_node(12) == 3 and hier.default_ranks_per_node(13) == 1


# -- sub-communicators ---------------------------------------------------------------------------

def test_groups_remap_ranks_and_count_bytes() -> None:
    def body(comm):
        node = comm.group([comm.rank - comm.rank % 2, comm.rank - comm.rank % 2 + 1])
        cross = comm.group(list(range(comm.rank % 2, comm.size, 2)))
        comm.reset_counters()
        t = torch.full((10,), float(comm.rank))
        got = torch.empty(10)
        node.exchange([(t, 1 - node.rank)], [(got, 1 - node.rank)]).wait()
        names = cross.allgather_object(("r", comm.rank))
        buf = torch.tensor([float(comm.rank)])
        cross.native_allreduce(buf)
        cross.barrier()
        return node.rank, node.size, float(got[0]), names, float(buf), comm.bytes_sent, node is comm.group(
            [comm.rank - comm.rank % 2, comm.rank - comm.rank % 2 + 1])
    out = simulate(body, 6, strict=True)
    for r, (nr, ns, peer, names, total, sent, cached) in enumerate(out):
        assert (nr, ns) == (r % 2, 2) and peer == r ^ 1 and cached
        assert names == [("r", q) for q in range(r % 2, 6, 2)]
        assert total == sum(range(r % 2, 6, 2))
        assert sent == 40 + 4 * 2  # the exchange and the native allreduce's data; control not counted
    with pytest.raises(CommError, match="distinct ranks of 0..3 that include this rank"):
        simulate(lambda c: c.group([0, 0] if c.rank == 0 else [c.rank]), 4)
    assert simulate(lambda c: c.group(range(c.size)) is c, 3) == [True] * 3


def test_alltoall_default_moves_the_splits() -> None:
    def body(comm):
        P, r = comm.size, comm.rank
        ins = [torch.full((d + 1,), float(10 * r + d)) for d in range(P)]
        out = torch.empty(P * (r + 1))
        comm.alltoall(out, torch.cat(ins), [r + 1] * P, [d + 1 for d in range(P)]).wait()
        return out
    for y, r in zip(simulate(body, 4, strict=True), range(4)):
        assert torch.equal(y, torch.cat([torch.full((r + 1,), float(10 * s + r)) for s in range(4)]))
    with pytest.raises(CommError, match="must be 2 lengths"):
        simulate(lambda c: c.alltoall(torch.empty(2), torch.empty(2), [1, 1, 0], [1, 1]), 2)


# -- error at scale --------------------------------------------------------------------------------

def test_error_at_scale_shape() -> None:
    """Re-quantising per hop (ring) grows with P; encode-twice (alltoall_quantized) stays flat from
    P = 4 to P = 64 (it even shrinks a little: its chunks of n/P values get scales of their own);
    gather is one rounding per contribution; hierarchical's k−1 + N + 1 encodes sit between."""
    from lab.experiments import error_at_scale

    df = error_at_scale(["dynamic_tree"], ["ring", "hierarchical", "gather"], [4, 64], n=4096)
    flat = error_at_scale(["dynamic_tree"], ["alltoall_quantized"], [4, 64], n=4096)  # P² messages: 128 took 5x
    e = {(r.algorithm, r.P): r.rel_error for r in df.itertuples()} | {
        (r.algorithm, r.P): r.rel_error for r in flat.itertuples()}
    assert e[("ring", 64)] > 2 * e[("ring", 4)]
    assert 1 / 1.5 < e[("alltoall_quantized", 64)] / e[("alltoall_quantized", 4)] < 1.5
    assert e[("alltoall_quantized", 64)] < e[("ring", 64)] / 2
    assert e[("hierarchical", 64)] < e[("ring", 64)]
    assert 1 / 1.5 < e[("gather", 64)] / e[("gather", 4)] < 1.5  # one rounding per contribution: flat too
    assert set(df[df.algorithm == "gather"]["mode"]) == {"gather"}
    assert flat["ranks_agree"].all() and df["ranks_agree"].all()


def test_error_at_scale_ranks_per_node_and_errors() -> None:
    from lab.experiments import error_at_scale

    df = error_at_scale(["linear"], ["hierarchical", "alltoall_quantized"], [4, 8], n=256, ranks_per_node=2)
    assert len(df) == 4 and (df["rel_error"] > 0).all()
    with pytest.raises(ValueError, match=r"ranks_per_node=4 does not divide P=2 .* divisors of 2: 1, 2"):
        error_at_scale(["linear"], ["hierarchical"], [2, 8], n=64, ranks_per_node=4)


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm,options,codec,mode,match", [
    ("hierarchical", {"ranks_per_node": 3}, None, "auto", r"ranks_per_node=3 does not divide P=4 .* 1, 2, 4"),
    ("alltoall_quantized", {"ranks_per_node": 0}, None, "auto", r"allowed: the divisors of 4: 1, 2, 4"),
    ("hierarchical", {"inner": "tree"}, None, "auto", r"inner='tree'.*allowed: ring, butterfly_sync"),
    ("hierarchical", {"outer": "hierarchical"}, None, "auto", r"outer='hierarchical'.*allowed: .*ring"),
    ("ring", {"ranks_per_node": 2}, None, "auto", r"'ring' takes no option ranks_per_node; it takes none .*hierarchical"),
    ("hierarchical", {"ranks_per_node": 2, "inner_codec": "bf16"}, None, "auto", r"it takes: ranks_per_node, inner"),
    ("hierarchical", {}, "onebit", "requantize", r"cannot be re-encoded .* alltoall_quantized"),
    ("hierarchical", {"ranks_per_node": 4, "intra_codec": "topk", "outer": "butterfly_sync"}, "bf16", "requantize",
     r"intra_codec 'topk' cannot be re-encoded at every hop of the inner ring; use inner='butterfly_sync'"),
    ("hierarchical", {"ranks_per_node": 1, "outer": "tree"}, "onebit", "requantize", r"cannot be re-encoded"),
])
def test_bad_options_name_the_allowed_values(algorithm, options, codec, mode, match) -> None:
    P = 8 if options.get("ranks_per_node") == 4 else 4
    with pytest.raises(CommError, match=match):
        simulate(_rank, P, 16, algorithm, codec, mode, **options)


def test_two_stage_codecs_on_the_levels() -> None:
    """A sign codec may requantize where each value is encoded twice: alltoall_quantized, and
    hierarchical with a direct inner level and a two-stage outer one (gather mode too)."""
    P, n = 8, 400
    exact = sum(_normal(r, n) for r in range(P))
    for kw in ({}, {"ranks_per_node": 2}):
        y = simulate(_normal_rank, P, n, "alltoall_quantized", "onebit", "requantize", **kw)[0]
        assert float((y - exact).norm() / exact.norm()) < 1.0
    y = simulate(_normal_rank, P, n, "hierarchical", "onebit", "gather", ranks_per_node=2)[0]
    ring = simulate(_normal_rank, P, n, "ring", "onebit", "gather")[0]
    assert torch.equal(y, ring)  # gather mode: the same rounding whatever the pattern


# -- real processes (Gloo) -------------------------------------------------------------------------

def _real(comm, n, algorithm, codec, options):
    y = allreduce(comm, _x(comm.rank, n), algorithm=algorithm, **options)
    z = allreduce(comm, _normal(comm.rank, n), algorithm=algorithm, codec=codec, **options)
    comm.reset_counters()
    allreduce(comm, _normal(comm.rank, n), algorithm=algorithm, codec=codec, check=False, **options)
    return y, z, comm.bytes_sent


# the real-process cases by world size: one launch per P runs them all (each rank process costs a torch import)
REAL_CASES = {
    2: [("alltoall_quantized", {}), ("hierarchical", {})],
    4: [("alltoall_quantized", {}), ("alltoall_quantized", {"ranks_per_node": 2}), ("hierarchical", {"ranks_per_node": 2}),
        ("hierarchical", {"ranks_per_node": 2, "intra_codec": None, "outer": "alltoall_quantized"})],
}


def _real_cases(comm, n, codec, cases):
    return [_real(comm, n, algorithm, codec, options) for algorithm, options in cases]


@pytest.mark.parametrize("P", sorted(REAL_CASES))
def test_real_gloo_processes(P: int) -> None:
    """The same code on torch.distributed (Gloo's all_to_all_single for the flat all-to-all, batched
    point-to-point on sub-groups): exact in fp32, and bit for bit SimComm's numbers with a codec, for
    every (algorithm, options) case of REAL_CASES[P] (one launch of P ranks runs them in turn)."""
    from lab.comm.launch import run

    n = 4099
    out = run(_real_cases, P, n, "dynamic_tree", REAL_CASES[P], timeout=120 * len(REAL_CASES[P]))
    for c, (algorithm, options) in enumerate(REAL_CASES[P]):
        sim = simulate(_real, P, n, algorithm, "dynamic_tree", options)
        for rank, (_, zs, sent_s) in enumerate(sim):
            y, z, sent = out[rank][c]
            assert torch.equal(y, _exact(P, n)), (algorithm, options)
            assert torch.equal(z, zs) and torch.equal(z, out[0][c][1]), (algorithm, options)
            assert sent == sent_s, (algorithm, options)


def _piped_and_plain(comm, n, k, G):
    return (_real(comm, n, "hierarchical", "dynamic_tree", {"ranks_per_node": k, "pipeline": G}),
            _real(comm, n, "hierarchical", "dynamic_tree", {"ranks_per_node": k}))


@pytest.mark.parametrize("P,k,G", [(4, 2, 4), (6, 3, 3)])
def test_pipelined_levels_on_real_processes(P: int, k: int, G: int) -> None:
    """pipeline=G on Gloo: the node level runs in a thread beside the cross-node level; fp32 sums stay exact,
    every rank holds the same codec result, as accurate as the levels one after the other, and the wire
    carries the same bytes plus one scale per extra message. SimComm (not `concurrent`) runs it unpipelined.
    (One launch runs the pipelined and the plain allreduce.)"""
    from lab.comm.launch import run

    n = 1 << 14
    both = run(_piped_and_plain, P, n, k, G, timeout=240)
    piped, plain = [r[0] for r in both], [r[1] for r in both]
    exact = _exact(P, n)
    normal = sum(_normal(r, n) for r in range(P))
    for (y, z, sent), (_, z0, sent0) in zip(piped, plain):
        assert torch.equal(y, exact) and torch.equal(z, piped[0][1])
        err, err0 = float((z - normal).norm() / normal.norm()), float((z0 - normal).norm() / normal.norm())
        assert 0 < err < 1.2 * err0 + 1e-3 and err0 < 0.05
        assert sent0 <= sent <= 1.01 * sent0
    sim = simulate(_real, P, n, "hierarchical", "dynamic_tree", {"ranks_per_node": k, "pipeline": G})
    assert torch.equal(sim[0][1], plain[0][1])


def test_pipeline_option_is_checked() -> None:
    for bad in (0, 65, 2.0, True):
        with pytest.raises(ValueError, match=r"pipeline=.*allowed: an int from 1 .* to 64"):
            configure("hierarchical", 4, None, "raw", {"ranks_per_node": 2, "pipeline": bad})


# -- the two-level machine -------------------------------------------------------------------------

def test_shaped_two_level_topology_commands() -> None:
    from lab.comm.shaped import ShapedLink

    link = ShapedLink(4, rate="1gbit", ranks_per_node=2)
    assert link.hosts == 2 and len(link.namespaces) == 3
    assert link.namespace(0) == link.namespace(1) != link.namespace(2) == link.namespace(3)
    assert link.address(1) == "10.231.0.1" and link.address(2) == "10.231.0.2"
    assert link.env(3)["GLOO_SOCKET_IFNAME"] == link.interface(2)
    cmds = link.setup_commands()
    assert sum(c[:3] == ["ip", "netns", "add"] for c in cmds) == 3
    assert sum("tbf" in c for c in cmds) == 4  # each node's link shaped both ways
    flat = ShapedLink(4, rate="1gbit")
    assert flat.hosts == 4 and len({flat.namespace(r) for r in range(4)}) == 4
    with pytest.raises(ValueError, match="ranks_per_node=3 must divide procs=4; allowed: 1, 2, 4"):
        ShapedLink(4, ranks_per_node=3)


def test_two_level_shaped_machine_really_runs() -> None:
    """Root only: 2 nodes x 2 ranks, each node one namespace, a 1 Gbit/s link between them:
    hierarchical and alltoall_quantized exact in fp32 over it."""
    from lab.comm.launch import run
    from lab.comm.shaped import ShapedLink, available

    ok, why = available()
    if not ok:
        pytest.skip(why)
    with ShapedLink(4, rate="1gbit", ranks_per_node=2) as net:
        out = run(_real, 4, 1 << 14, "hierarchical", "dynamic_tree", {"ranks_per_node": 2}, net=net, timeout=120)
        out2 = run(_real, 4, 1 << 14, "alltoall_quantized", "dynamic_tree", {"ranks_per_node": 2}, net=net,
                   timeout=120)
    for y, _, _ in out + out2:
        assert torch.equal(y, _exact(4, 1 << 14))


# -- the CLI ----------------------------------------------------------------------------------------

def test_cli_scale_and_bench_options(tmp_path) -> None:
    from typer.testing import CliRunner

    from lab.cli import app

    res = CliRunner().invoke(app, ["scale", "--codec", "linear", "--algorithm", "alltoall_quantized", "--algorithm",
                                   "hierarchical", "--algorithm", "gather", "--ranks", "4,8", "--values", "128",
                                   "--ranks-per-node", "2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    assert doc["config"]["ranks_per_node"] == 2 and len(doc["rows"]) == 6
    res = CliRunner().invoke(app, ["scale", "--algorithm", "hierarchical", "--ranks", "6", "--ranks-per-node", "4"])
    assert res.exit_code != 0 and "divisors of 6: 1, 2, 3, 6" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["bench", "compressed", "--procs", "4", "--ranks-per-node", "3", "--algorithm",
                                   "hierarchical"])
    assert res.exit_code != 0 and "allowed: 1, 2, 4" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["bench", "compressed", "--procs", "2", "--intra-codec", "bf16"])
    assert res.exit_code != 0 and "hierarchical's" in res.output
    out = tmp_path / "c.json"
    res = CliRunner().invoke(app, ["bench", "compressed", "--procs", "4", "--values", "4K", "--algorithm",
                                   "hierarchical", "--ranks-per-node", "2", "--intra-codec", "none,bf16", "--codecs",
                                   "dynamic_tree", "--target-s", "0.01", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert [(r["algorithm"], r["codec"].split("[")[0], r.get("intra_codec")) for r in rows] == [
        ("hierarchical", "fp32", "none"), ("hierarchical", "dynamic_tree", "none"),
        ("hierarchical", "dynamic_tree", "bf16"), ("ring", "fp32", None), ("ring", "dynamic_tree", None)]
    assert rows[0]["rel_error"] == 0 and rows[0]["speedup_vs_fp32"] == 1
    assert 0 < rows[1]["rel_error"] < rows[2]["rel_error"] < 0.05 and rows[1]["ranks_per_node"] == 2
    assert math.isfinite(rows[3]["speedup_vs_fp32"])
    # the two levels measured apart in the same run: the fitted machine and each row's model, or why not
    cal = doc["calibration"]
    assert cal["machine"] == "2 nodes x 2 ranks, one NIC per node" and len(cal["levels"]["intra"]) == 3
    if "error" in cal:  # 4K values on loaded cores may not separate latency from bandwidth
        assert cal["error"].startswith("no model") and "model_s" not in rows[0]
    else:
        assert all(r["model_s"] > 0 and math.isfinite(r["model_error"]) for r in rows)
        assert set(cal["codecs"]) == {rows[1]["codec"], "bf16"}


def test_bench_rows_baseline_is_fp32_on_every_level() -> None:
    """bench compressed's fp32 row (the speedups' baseline) and its reference sum leave the intra
    codec out; the codec rows carry it."""
    from lab.comm.bench import codec_speedup_rank

    rows = simulate(codec_speedup_rank, 4, 4096, "hierarchical", [None, "dynamic_tree"], target_s=0.001,
                    max_iters=3, options={"ranks_per_node": 2, "intra_codec": "bf16"}, compare=["ring"])[0]
    assert [(r["algorithm"], r["codec"].split("[")[0]) for r in rows] == [
        ("hierarchical", "fp32"), ("hierarchical", "dynamic_tree"), ("ring", "fp32"), ("ring", "dynamic_tree")]
    assert rows[0]["rel_error"] == 0 and rows[0]["intra_codec"] == "none" and rows[0]["speedup_vs_fp32"] == 1
    assert rows[1]["intra_codec"] == "bf16" and 0 < rows[1]["rel_error"] < 0.05
    assert rows[2]["rel_error"] < 1e-6
