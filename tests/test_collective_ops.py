"""Every collective op x algorithm (lab.comm.collectives) exact in fp32 against NumPy on SimComm,
codecs on the wire, accumulation dtypes, bad input."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

K = 3  # values per shard / block


def _inputs(P: int, r: int, rows: int):
    """Rank r's input: small integers (every summation order is exact in fp32)."""
    return _cached(r, rows)


@functools.lru_cache(maxsize=None)
def _cached(r: int, rows: int):
    i = np.arange(rows * K).reshape(rows, K)
    return (((i * 7 + r * 13 + 5) % 17) - 8).astype(np.float32)


def _every_op(comm):
    """Each (op, algorithm) once on this rank; {(op, algo): result as NumPy or None}."""
    import torch

    from lab.comm import collectives as C

    P, r = comm.size, comm.rank
    out = {}
    for c in C.collective_infos():
        if c.op in ("all_gather", "broadcast", "sendrecv", "reduce"):
            x = torch.from_numpy(_inputs(P, r, 1)[0])
        else:
            x = torch.from_numpy(_inputs(P, r, P)).reshape(-1)
        kw = {"root": (P - 1) // 2} if c.op in ("broadcast", "reduce") else {}
        if c.op == "all_gather" and c.name == "pat":
            kw["buffer_bytes"] = 2 * K * 4  # two rows per transfer: the split path too
        y = C.call(c.op, comm, x, algorithm=c.name, **kw)
        out[(c.op, c.name)] = None if y is None else y.numpy().copy()
    return out


def _expected(op: str, P: int, r: int):
    if op == "all_gather":
        return np.concatenate([_inputs(P, p, 1)[0] for p in range(P)])
    if op == "reduce_scatter":
        return sum(_inputs(P, p, P) for p in range(P))[r]
    if op == "alltoall":
        return np.concatenate([_inputs(P, p, P)[r] for p in range(P)])
    if op == "broadcast":
        return _inputs(P, (P - 1) // 2, 1)[0]
    if op == "reduce":
        return sum(_inputs(P, p, 1)[0] for p in range(P)) if r == (P - 1) // 2 else None
    if op == "sendrecv":
        return _inputs(P, (r - 1) % P, 1)[0]
    raise AssertionError(op)


@pytest.mark.parametrize("P", range(1, 65))  # every P up to 64: odd, prime, powers of two and neither
def test_every_op_and_algorithm_exact_on_simcomm(P):
    from lab.comm.sim import simulate

    res = simulate(_every_op, P, strict=True)
    for r in range(P):
        for (op, algo), got in res[r].items():
            want = _expected(op, P, r)
            if want is None:
                assert got is None, (op, algo, P, r)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{op}/{algo} P={P} rank {r}")


# -- codecs on the wire

def _codec_ops(comm, codec: str):
    import torch

    from lab.comm import collectives as C

    g = torch.Generator().manual_seed(comm.rank)
    x = torch.randn(4 * comm.size, generator=g)
    comm.reset_counters()
    ag = {"ring": C.all_gather(comm, x, algorithm="ring", codec=codec, check=False)}
    sent = comm.bytes_sent
    ag.update({a: C.all_gather(comm, x, algorithm=a, codec=codec) for a in C.collective_names("all_gather")})
    a2a = {a: C.alltoall(comm, x, algorithm=a, codec=codec) for a in C.collective_names("alltoall")}
    bc = C.broadcast(comm, x, codec=codec, root=1)
    return x, ag, sent, a2a, bc


def test_gather_ops_encode_once_at_the_source_and_receivers_decode():
    """all-gather / all-to-all / broadcast with a codec: each value is the decode of its source's one
    encoding (relayed bytes unchanged: Bruck and PAT give the same numbers as ring and pairwise), the
    all-gather's rows identical on every rank, the wire carrying the payload's bytes, not fp32's."""
    import torch

    from lab.codecs import parse_spec
    from lab.codecs.wire import WireFormat
    from lab.comm.sim import simulate

    P, codec = 5, "dynamic_tree"
    res = simulate(_codec_ops, P, codec, strict=True)
    xs = [r[0] for r in res]
    n = xs[0].numel()
    fmt = WireFormat.of(parse_spec(codec), n)
    whole = torch.cat([fmt.decode(fmt.encode(x)).reshape(-1) for x in xs])
    k = n // P
    blk = WireFormat.of(parse_spec(codec), k)
    for r, (x, ag, sent, a2a, bc) in enumerate(res):
        for a, y in ag.items():
            assert torch.equal(y, whole), a
        assert not torch.equal(whole, torch.cat(xs))  # the codec did round
        assert sent == (P - 1) * fmt.nbytes < (P - 1) * 4 * n / 2  # the ring's wire: 8-bit payloads
        want = torch.cat([x[r * k:(r + 1) * k] if p == r else blk.decode(blk.encode(xs[p][r * k:(r + 1) * k])).reshape(-1)
                          for p, x in enumerate(xs)])
        for a, y in a2a.items():
            assert torch.equal(y, want), a
        assert torch.equal(bc, xs[1] if r == 1 else fmt.decode(fmt.encode(xs[1])).reshape(-1))


def _rs(comm, algorithm: str, codec, mode: str, accumulate: str = "fp32", seed: int = 0):
    import torch

    from lab.comm import collectives as C

    g = torch.Generator().manual_seed(seed * 1000 + comm.rank)
    x = torch.randn(64 * comm.size, generator=g)
    if accumulate != "fp32":  # inputs exact in the accumulation dtype: the error is the sums' alone
        x = x.to(torch.bfloat16).to(torch.float16).float()
    y = C.reduce_scatter(comm, x, algorithm=algorithm, codec=codec, mode=mode, accumulate=accumulate)
    z = C.reduce(comm, x[:64], codec=codec if codec and mode != "oneshot" else None, accumulate=accumulate)
    return x, y, z


def _rel(got, want) -> float:
    return float((got.double() - want).norm() / want.norm())


def test_reduce_scatter_requantize_per_hop_and_oneshot_qgz():
    """Requantize: the ring's error grows with the hops (P=8 above P=2); one-shot on 'direct' encodes
    each block once: exactly the owner's sum of decoded blocks (its own block exact), for a codec
    that could not requantize at all (onebit)."""
    import torch

    from lab.codecs import parse_spec
    from lab.codecs.wire import WireFormat
    from lab.comm.sim import simulate

    errs = {}
    for P in (2, 8):
        res = simulate(_rs, P, "ring", "fp8_e4m3", "requantize")
        total = sum(r[0].double() for r in res)
        k = total.numel() // P
        errs[P] = max(_rel(y, total[r * k:(r + 1) * k]) for r, (_, y, _) in enumerate(res))
    assert 0 < errs[2] < errs[8]
    P = 4
    res = simulate(_rs, P, "direct", "onebit", "oneshot", strict=True)
    k = res[0][0].numel() // P
    fmt = WireFormat.of(parse_spec("onebit"), k)
    for r, (_, y, _) in enumerate(res):
        want = torch.zeros(k)
        for p in range(P):
            blk = res[p][0][r * k:(r + 1) * k]
            want += blk if p == r else fmt.decode(fmt.encode(blk)).reshape(-1)
        assert torch.equal(y, want)


@pytest.mark.parametrize("accumulate", ["bf16", "fp16"])
def test_accumulate_dtype_error_grows_with_P(accumulate):
    """Summing in bf16/fp16 (NCCL sums in the input's dtype) rounds at every addition: the error of
    reduce_scatter and reduce grows with P; fp32 accumulation of the same inputs is exact to 1e-6."""
    from lab.comm.sim import simulate

    errs = {}
    for P in (2, 8, 32):
        for acc in (accumulate, "fp32"):
            res = simulate(_rs, P, "ring", None, "auto", acc)
            total = sum(r[0].double() for r in res)
            k = total.numel() // P
            rs = max(_rel(y, total[r * k:(r + 1) * k]) for r, (_, y, _) in enumerate(res))
            red = _rel(res[0][2], total[:64])
            errs[(P, acc)] = (rs, red)
    for P in (2, 8, 32):
        assert max(errs[(P, "fp32")]) < 1e-6
    for i in range(2):
        assert errs[(2, accumulate)][i] < errs[(8, accumulate)][i] < errs[(32, accumulate)][i]


# -- bad input: one line naming what is allowed

@pytest.mark.parametrize("call,needle", [
    (lambda C, c, x: C.all_gather(c, x, algorithm="no_such_all_gather"),
     lambda C: "allowed: " + ", ".join(C.collective_names("all_gather"))),
    (lambda C, c, x: C.reduce_scatter(c, x[:5]), "multiple of 2"),
    (lambda C, c, x: C.alltoall(c, x[:3]), "multiple of 2"),
    (lambda C, c, x: C.all_gather(c, x, codec="powersgd"), "only sums"),
    (lambda C, c, x: C.all_gather(c, x, codec="ef:onebit"), "without memory"),
    (lambda C, c, x: C.reduce_scatter(c, x, codec="onebit"), "algorithm 'direct'"),
    (lambda C, c, x: C.reduce_scatter(c, x, codec="fp16", mode="oneshot"), "runs on reduce_scatter algorithm 'direct'"),
    (lambda C, c, x: C.reduce_scatter(c, x, accumulate="int8"), "allowed: fp32, bf16, fp16"),
    (lambda C, c, x: C.reduce_scatter(c, x, algorithm="ring", buffer_bytes=4), "it takes none"),
    (lambda C, c, x: C.broadcast(c, x, root=2), "allowed: a rank 0..1"),
    (lambda C, c, x: C.call("gather", c, x), "allowed: all_reduce, all_gather"),
])
def test_bad_input_is_one_line_naming_what_is_allowed(call, needle):
    import torch

    from lab.comm import collectives as C
    from lab.comm.sim import simulate

    def body(comm):
        try:
            call(C, comm, torch.ones(8))
        except ValueError as e:
            return str(e)
        return None

    msgs = simulate(body, 2)
    needle = needle(C) if callable(needle) else needle  # the registry's names, read when the test runs
    for m in msgs:
        assert m is not None and "\n" not in m and needle in m, m


def test_cost_model_and_busbw_factors():
    """nccl-tests' factors per op; ring all-gather's a·L + b·G; PAT's transfers grow once a step's rows
    overflow its buffer; every algorithm's bytes per rank on P = 8."""
    from lab.comm import cost
    from lab.comm.collectives import OPS, collective_names, get_collective

    assert OPS["all_gather"].busbw_factor(8) == OPS["reduce_scatter"].busbw_factor(8) == 7 / 8
    assert OPS["alltoall"].busbw_factor(8) == 7 / 8 and OPS["all_reduce"].busbw_factor(8) == 14 / 8
    assert OPS["broadcast"].busbw_factor(8) == OPS["reduce"].busbw_factor(8) == OPS["sendrecv"].busbw_factor(8) == 1
    assert get_collective("all_gather", "ring").coefficients(8, 800) == (7, 700)
    assert get_collective("all_gather", "pat").coefficients(8, 800)[0] == 3
    assert get_collective("all_gather", "pat").coefficients(8, 8 * 2**30)[0] > 3  # 1 GiB rows: one per transfer
    assert get_collective("alltoall", "bruck").coefficients(8, 800) == (3, 12 / 8 * 800)
    t = cost.collective_time("all_gather", "ring", 8, 800, cost.custom_link(1.0, 1.0))
    assert t == pytest.approx(7e-6 + 700 / 1e9)
    assert cost.collective_time("broadcast", "binomial", 1, 800, "ib_fdr") == 0.0
    with pytest.raises(ValueError, match="allowed: " + ", ".join(collective_names("reduce_scatter"))):
        cost.collective_time("reduce_scatter", "bruck", 8, 800, "ib_fdr")


def test_real_gloo_ranks_every_op():
    """One launch of 3 Gloo processes (P not a power of two): every op and algorithm exact in fp32,
    and an all-gather with a codec equal bit for bit to SimComm's."""
    from lab.comm.launch import run
    from lab.comm.sim import simulate

    P = 3
    out = run(_gloo_body, P, timeout=120)
    sim = simulate(_gloo_body, P)
    for r in range(P):
        for (op, algo), got in out[r][0].items():
            want = _expected(op, P, r)
            if want is None:
                assert got is None
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{op}/{algo} rank {r}")
        for a, y in out[r][1].items():
            assert (y == sim[r][1][a]).all(), a


def _gloo_body(comm):
    from lab.comm import collectives as C

    x = __import__("torch").arange(6.0) * (comm.rank + 1) / 7
    return _every_op(comm), {a: C.all_gather(comm, x, algorithm=a, codec="mxfp8_e4m3").numpy()
                             for a in C.collective_names("all_gather")}


def test_cli_bench_collectives_op(tmp_path):
    """`bench collectives --op reduce_scatter`: nccl-tests' columns with redop, native first and every
    algorithm after it, #wrong 0, busbw = algbw·(P-1)/P, a result that matches the command's schema;
    an unknown op is one line naming the allowed ones."""
    import jsonschema
    from typer.testing import CliRunner

    from lab.cli import app
    from lab.comm.collectives import collective_names

    out = tmp_path / "rs.json"
    res = CliRunner().invoke(app, ["bench", "collectives", "--op", "reduce_scatter", "-p", "2", "-b", "64", "-e", "64",
                                   "-n", "1", "-w", "0", "--timeout", "120", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "# op: reduce_scatter   algorithm: native" in res.output and "redop" in res.output
    data = json.loads(out.read_text())
    schema = json.loads((Path(__file__).parent.parent / "docs/schemas/bench-collectives.schema.json").read_text())
    jsonschema.validate(data, schema)
    algos = list(dict.fromkeys(r["algorithm"] for r in data["rows"]))
    assert algos == ["native", *collective_names("reduce_scatter")]
    for r in data["rows"]:
        assert r["wrong"] == 0 and r["op"] == "reduce_scatter" and r["redop"] == "sum"
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] / 2)
    bad = CliRunner().invoke(app, ["bench", "collectives", "--op", "gather"])
    assert bad.exit_code != 0 and "allowed: all_reduce, all_gather" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_pat_reduce_scatter_at_1024_simulated_ranks():
    """SimComm's whole range: PAT's 10 aggregated steps on 1024 ranks leave rank r the sum of block r."""
    import torch

    from lab.comm import collectives as C
    from lab.comm.sim import simulate

    def body(comm):
        x = torch.arange(comm.size, dtype=torch.float32) + comm.rank  # block j of rank r: j + r
        return C.reduce_scatter(comm, x, algorithm="pat", check=False).item()

    P = 1024
    got = simulate(body, P)
    assert got == [P * r + P * (P - 1) / 2 for r in range(P)]


def test_a_plugin_collective_is_found_by_every_list():
    """A Collective registered at run time (here a linear all-gather through rank 0) joins the op's
    algorithm list, the front door, the cost model and the step-through; built-ins cannot be removed."""
    import torch

    from lab.comm import collectives as C
    from lab.comm import cost
    from lab.comm.sim import simulate
    from lab.experiments import op_catalog, op_step_through

    def run(comm, rows):
        P, r = comm.size, comm.rank
        if r == 0:
            comm.exchange(recvs=[(rows[p], p) for p in range(1, P)]).wait()
            comm.exchange([(rows, p) for p in range(1, P)]).wait()
        else:
            comm.exchange([(rows[r], 0)]).wait()
            comm.exchange(recvs=[(rows, 0)]).wait()

    c = C.Collective(op="all_gather", name="star_gather", summary="through rank 0", citation="test",
                     run=run, coefficients=lambda P, m: (2.0, (P - 1) * m / P + (P - 1) * m),
                     total_bytes=lambda P, m: (P - 1) * m / P + (P - 1) * m)
    C.register(c)
    try:
        assert "star_gather" in C.collective_names("all_gather") and "star_gather" in set(op_catalog("all_gather").name)
        out = simulate(lambda comm: C.all_gather(comm, torch.tensor([float(comm.rank)]), algorithm="star_gather"), 5)
        assert all(torch.equal(o, torch.arange(5.0)) for o in out)
        assert cost.collective_time("all_gather", "star_gather", 4, 400, cost.custom_link(1.0, 1.0)) > 0
        assert op_step_through("all_gather", "star_gather", 4, 4).final.exact_provenance.all()
        with pytest.raises(ValueError, match="built-in"):
            C.unregister("all_gather", "ring")
    finally:
        C.unregister("all_gather", "star_gather")
    assert "star_gather" not in C.collective_names("all_gather")


def test_one_binomial_tree_walk_serves_broadcast_reduce_and_the_tree_allreduce():
    """`lab.comm.rank_trees.binomial` is the one walk of the binomial tree (Thakur et al. 2005 §4.2, §4.4):
    every rank but the root has one parent, which lists it among its children; a subtree of child k of v
    is the k - v indices from k; the root has ceil(log2 P) children (the rounds). Broadcast, reduce and the tree allreduce use it."""
    import inspect

    from lab.comm.algorithms import tree
    from lab.comm.collectives import broadcast_binomial, reduce_binomial
    from lab.comm.rank_trees import binomial, log2_ceil

    for P in list(range(1, 18)) + [31, 33, 64]:
        walks = {v: binomial(v, P) for v in range(P)}
        assert walks[0][0] is None
        for v, (parent, kids) in walks.items():
            assert kids == sorted(kids) and all(v < k < P for k in kids)
            if v:
                assert v in walks[parent][1]
            for k in kids:
                assert {u for u in range(k, min(2 * k - v, P))} == _subtree(walks, k)
        assert len(walks[0][1]) == log2_ceil(P)
    for mod in (broadcast_binomial, reduce_binomial, tree):
        assert "binomial(" in inspect.getsource(mod.run if hasattr(mod, "run") else mod.reduce)


def _subtree(walks: dict, v: int) -> set:
    return {v}.union(*(_subtree(walks, k) for k in walks[v][1]))
