"""An allreduce algorithm is one plugin (docs/design.md rule 6). A trivial algorithm written in one module of a
temporary package and registered through the public API reaches `allreduce`, the cost model, the
CLI (`paralab bench collectives`, `paralab scale`) and the Collectives page."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

PLUGIN = '''
"""star_chain: every rank sends its vector to rank 0 (plain sends, in rank order), rank 0 adds them
and the sum travels back along the chain 0 -> 1 -> ... -> P-1. Test plugin, one module."""
from lab.comm.algorithms import Algorithm, register


def reduce(comm, buf, ch):
    P, r, n = comm.size, comm.rank, buf.numel()
    if P == 1:
        return
    if r == 0:
        for i in range(1, P):
            ch.add_into(ch.recv(n, i), buf)
        payload = ch.finalize(buf)
    else:
        ch.send(ch.encode(buf), 0)
        payload = ch.recv_into(buf, r - 1)
    if r + 1 < P:
        ch.send(payload, r + 1)


def gather(comm, rows):
    P, r = comm.size, comm.rank
    if r == 0:
        for i in range(1, P):
            comm.exchange(recvs=[(rows[i], i)]).wait()
    else:
        comm.exchange([(rows[r], 0)]).wait()
        comm.exchange(recvs=[(rows, r - 1)]).wait()
    if r + 1 < P:
        comm.exchange([(rows, r + 1)]).wait()


ALGORITHM = register(Algorithm(
    name="star_chain", summary="reduce to rank 0 with plain sends, chain broadcast back",
    citation="test plugin",
    reduce=reduce, gather=gather,
    coefficients=lambda P, m: (2.0 * (P - 1) + 0.5, 3.0 * (P - 1) * m),  # deliberately its own numbers
    total_bytes=lambda P, m: 2.0 * (P - 1) * m,
    codec_counts=lambda P, n: (2 * n, (P + 1) * n),
    gather_coefficients=lambda P, q: (2.0 * (P - 1), (P - 1) * (P + 1) * q),
    busbw=lambda P: (P - 1) / P))
'''


@pytest.fixture
def star_chain(tmp_path, monkeypatch):
    """The plugin as one module of a temporary package, registered; removed afterwards."""
    pkg = tmp_path / "paralab_test_plugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "star_chain.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    from lab.comm.algorithms import ENV, register_module, unregister

    monkeypatch.delenv(ENV, raising=False)
    algo = register_module("paralab_test_plugins.star_chain")
    yield algo
    unregister("star_chain")
    for m in [m for m in sys.modules if m.startswith("paralab_test_plugins")]:
        del sys.modules[m]


def test_registry_lists_it_with_its_fields(star_chain):
    from lab.comm import algorithm_names
    from lab import plugins
    from lab.comm.algorithms import ALGORITHMS, ENV, algorithm_infos, get_algorithm
    from lab.experiments import algorithm_catalog

    assert get_algorithm("star_chain") is star_chain
    assert [a.name for a in algorithm_infos()][-1] == "star_chain"  # after the built-ins
    assert "star_chain" in ALGORITHMS and "star_chain" in algorithm_names()
    assert star_chain.modes == ("requantize", "gather")
    assert star_chain.bytes_per_rank(4, 100.0) == 150.0 and star_chain.busbw_factor(4) == 0.75
    assert ENV not in os.environ  # registering writes nothing to the environment
    assert plugins.carried()["algorithms"] == ["paralab_test_plugins.star_chain"]  # rank processes import it too
    cat = algorithm_catalog(native=True)
    assert cat.name.iloc[0] == "native" and cat.name.iloc[-1] == "star_chain"
    assert cat.set_index("name").loc["star_chain", "modes"] == "requantize,gather"


def test_registry_rejects_bad_plugins(star_chain):
    from lab.comm.algorithms import Algorithm, get_algorithm, register, unregister

    with pytest.raises(ValueError, match="already registered"):
        register(Algorithm("star_chain", "", "", star_chain.reduce, star_chain.coefficients, star_chain.total_bytes))
    with pytest.raises(ValueError, match="lower-case identifiers"):
        Algorithm("native", "", "", star_chain.reduce, star_chain.coefficients, star_chain.total_bytes)
    with pytest.raises(ValueError, match="gather and gather_coefficients together"):
        Algorithm("x", "", "", star_chain.reduce, star_chain.coefficients, star_chain.total_bytes,
                  gather=star_chain.gather)
    with pytest.raises(ValueError, match="built-in"):
        unregister("ring")
    with pytest.raises(ValueError, match="unknown algorithm 'hypercube': known are tree, .*, star_chain"):
        get_algorithm("hypercube")


def _sum(comm, n, algorithm, codec, mode):
    from lab.comm import allreduce

    x = torch.arange(n, dtype=torch.float32) * 0.01 + comm.rank
    return allreduce(comm, x, algorithm=algorithm, codec=codec, mode=mode)


@pytest.mark.parametrize("P", [1, 2, 3, 5])
def test_allreduce_runs_it_raw_requantize_and_gather(star_chain, P):
    from lab.comm import simulate

    n = 37
    exact = sum(torch.arange(n, dtype=torch.float32) * 0.01 + r for r in range(P))
    for codec, mode, tol in ((None, "auto", 1e-6), ("fp16", "requantize", 1e-2), ("fp16", "gather", 1e-2)):
        out = simulate(_sum, P, n, "star_chain", codec, mode, strict=True)  # NCCL's point-to-point rules
        for y in out:
            torch.testing.assert_close(y, exact, rtol=tol, atol=tol)
            assert torch.equal(y, out[0])


def test_cost_model_uses_its_coefficients(star_chain):
    from lab.comm import cost

    assert "star_chain" in cost.ALGORITHMS
    lk = cost.get_link("ib_fdr")
    P, m = 4, 1e6
    assert cost.coefficients("star_chain", P, m) == (6.5, 9e6)
    assert cost.allreduce_time("star_chain", P, m, lk) == pytest.approx(6.5 * lk.L + 9e6 * lk.G, rel=1e-12)
    assert cost.allreduce_time("star_chain", 1, m, lk) == 0.0
    assert cost.total_bytes("star_chain", P, m) == 6e6
    assert cost.busbw_factor(P, "star_chain") == 0.75
    assert cost.codec_counts("star_chain", P, 100) == (200, 500)
    assert cost.allgather_coefficients("star_chain", P, 10.0) == (6.0, 150.0)
    assert cost.fit_link([{"kind": "allreduce", "algorithm": "star_chain", "P": P, "nbytes": b,
                           "seconds": cost.allreduce_time("star_chain", P, b, lk)} for b in (1e3, 1e6)]
                         ).median_rel_error < 1e-9


def test_cli_bench_collectives_measures_it(star_chain, tmp_path):
    """Rank processes are fresh interpreters: the launcher carries the plugin's module to them."""
    from typer.testing import CliRunner

    from lab.cli import app

    out = tmp_path / "c.json"
    res = CliRunner().invoke(app, ["bench", "collectives", "--procs", "2", "-b", "8", "-e", "64K",
                                   "--algorithms", "star_chain,ring", "--target-s", "0.01", "-w", "0",
                                   "--timeout", "120", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "# algorithm: star_chain" in res.output
    rows = [r for r in json.loads(out.read_text())["rows"] if r["algorithm"] == "star_chain"]
    assert rows and all(r["wrong"] == 0 for r in rows)
    # no --algorithms: native and every registered algorithm, the plugin included
    res = CliRunner().invoke(app, ["bench", "collectives", "--procs", "2", "-b", "8", "-e", "8", "--target-s",
                                   "0.01", "-w", "0", "--out", str(tmp_path / "d.json")])
    assert res.exit_code == 0, res.output
    algos = json.loads((tmp_path / "d.json").read_text())["config"]["algorithms"]
    assert [algos[0], algos[-1]] == ["native", "star_chain"]


def test_cli_scale_in_a_fresh_process(star_chain, tmp_path):
    """`paralab scale` in a new interpreter (not started by this one): the user names the plugin's
    module in $PARALAB_ALGORITHMS."""
    from lab.comm.algorithms import ENV

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path)]), "OMP_NUM_THREADS": "1",
           ENV: "paralab_test_plugins.star_chain"}
    res = subprocess.run([sys.executable, "-m", "lab", "scale", "--codec", "fp16", "--algorithm", "star_chain",
                          "--ranks", "2,3", "--values", "64", "--json"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["rows"]
    assert {(r["algorithm"], r["P"]) for r in rows} == {("star_chain", 2), ("star_chain", 3)}
    assert all(r["rel_error"] < 1e-2 for r in rows)


def test_collectives_page_offers_it(star_chain):
    from test_app import page

    at = page("collectives")
    assert not at.exception
    assert "star_chain" in at.selectbox(key="w_algorithm").options
    assert "star_chain" in at.multiselect(key="w_compare").options
    at.selectbox(key="w_algorithm").set_value("star_chain").run()
    assert not at.exception
    assert any(m.label.startswith("star_chain time") for m in at.metric)


def test_an_algorithm_without_gather_refuses_gather_mode(star_chain):
    from lab.comm.algorithms import Algorithm, register, unregister
    from lab.comm.allreduce import resolve_codec, resolve_mode
    from lab.comm import cost

    register(Algorithm("star_chain_nogather", "no gather form", "test", star_chain.reduce,
                       star_chain.coefficients, star_chain.total_bytes))
    try:
        assert resolve_mode(resolve_codec("fp16"), "auto", "star_chain_nogather") == "requantize"
        with pytest.raises(ValueError, match="'star_chain_nogather' has no gather form.*with one: tree"):
            resolve_mode(resolve_codec("topk"), "auto", "star_chain_nogather")
        with pytest.raises(ValueError, match="no gather form"):
            cost.allgather_coefficients("star_chain_nogather", 4, 10.0)
        with pytest.raises(ValueError, match="declares no codec counts"):
            cost.codec_counts("star_chain_nogather", 4, 10)
    finally:
        unregister("star_chain_nogather")
