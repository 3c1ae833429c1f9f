"""Every algorithm prices itself on the two-level machine (`Algorithm.cluster_time`),
so a plugin registered in a test is in `pays`, the cluster model and the planner with its own price; and the
flat ring's bytes leaving a node are what the ring really sends across a node boundary."""
from __future__ import annotations

import pytest
import torch

from lab.comm import cluster as cl
from lab.comm.algorithms import Algorithm, register, unregister
from lab.comm.algorithms.ring import reduce as ring_reduce
from lab.comm.cluster import BF16, Cluster
from lab.comm.cost import Link

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

PLUGIN_ENV = "PARALAB_ALGORITHMS"  # where register() records a plugin for rank processes: restored after a test

A = Link("a", 1e-6, 100e9, "test")
E = Link("e", 10e-6, 10e9, "test")
C = Cluster(2, 4, A, E)
OVERHEAD_S = 1e-3  # the plugin's own fixed cost: no built-in has it


def teleport_reduce(comm, buf, ch):
    """A plugin's reduce (the ring's, under another name)."""
    ring_reduce(comm, buf, ch)


def teleport_time(cluster, n_values, codec=BF16, *, intra_codec=None, raw=BF16, chunk_values=None):
    """The plugin's own price: 1 ms plus the vector once over the intra link; the vector leaves each node once."""
    m = codec.wire(n_values)
    return cl.CollectiveTime("teleport", OVERHEAD_S + m * cluster.intra.G, 0.0, 0.0, m if cluster.nodes > 1 else 0.0)


@pytest.fixture
def teleport(monkeypatch):
    monkeypatch.delenv(PLUGIN_ENV, raising=False)
    algo = register(Algorithm(
        name="teleport", summary="test plugin with its own two-level price", citation="test",
        reduce=teleport_reduce, coefficients=lambda P, m: (2.0 * (P - 1), 2.0 * m * (P - 1) / P),
        total_bytes=lambda P, m: 2.0 * (P - 1) * m, cluster_time=teleport_time))
    yield algo
    unregister("teleport")


def test_a_plugin_prices_itself_in_the_cluster_model(teleport):
    assert "teleport" in cl.algorithms() and "teleport" in cl.ALGORITHMS
    want = OVERHEAD_S + 2e6 * A.G
    for t in (cl.algorithm_time(C, "teleport", 1e6), cl.cluster_allreduce(C, 1e6, BF16, "teleport")):
        assert t.seconds == pytest.approx(want, rel=1e-12)
        assert t.node_egress_bytes == pytest.approx(2e6)


def test_a_plugin_without_a_price_runs_flat(monkeypatch):
    monkeypatch.delenv(PLUGIN_ENV, raising=False)
    register(Algorithm(name="plain_plugin", summary="no two-level price", citation="test", reduce=teleport_reduce,
                       coefficients=lambda P, m: (3.0 * (P - 1), 3.0 * m), total_bytes=lambda P, m: 3.0 * P * m))
    try:
        t = cl.cluster_allreduce(C, 1e6, BF16, "plain_plugin")
        # every hop on the slowest link (one GPU's share of the NIC: 10 GB/s here), every rank's sends leave
        assert t.seconds == pytest.approx(3 * 7 * E.L + 3 * 2e6 * C.slowest.G, rel=1e-12)
        assert t.node_egress_bytes == pytest.approx(3.0 * 2e6 * 4)
    finally:
        unregister("plain_plugin")


def test_a_plugin_is_in_pays_with_its_own_price(teleport):
    from lab.experiments import CLUSTER_ALGORITHMS, does_compression_pay
    from lab.plan import pays as pp

    assert "teleport" in CLUSTER_ALGORITHMS
    r = does_compression_pay("gpt2_small", "8x8", codecs=["dynamic_tree"], bandwidths=(1.0, 10.0))
    row = r.rows[(r.rows.algorithm == "teleport") & (r.rows.codec == "bf16")].iloc[0]
    s = pp.Setting(pp._model("gpt2_small"), cl.make_cluster("8x8", "nvlink4", "ib_ndr"), pp.get_device("h100"), 8,
                   False)
    comm = sum(teleport_time(s.cluster, n).seconds for n in s.params)
    assert row.comm_ms == pytest.approx(1e3 * comm, rel=1e-9)
    assert row.step_ms == pytest.approx(1e3 * (s.compute_s + comm), rel=1e-9)
    assert row.cross_node_MB == pytest.approx(sum(2.0 * n for n in s.params) / 1e6, rel=1e-9)


def test_a_plugin_is_priced_by_the_planner_on_a_cluster(teleport):
    from lab.experiments import planner_breakdown
    from lab.plan.layers import get_model

    b = planner_breakdown("gpt2_small", 16, device="h100", batch_per_gpu=8, algorithm="teleport", cluster="2x8")
    c = cl.make_cluster("2x8", "nvlink4", "ib_ndr")
    want = sum(teleport_time(c, lay.params, cl.FP32).seconds for lay in get_model("gpt2_small").layers)
    assert b.summary.comm_s[0] == pytest.approx(want, rel=1e-9)


# -- the flat ring's bytes leaving a node

def _count_cross_node(monkeypatch, g: int) -> dict[int, int]:
    """Patch SimComm so every send records its bytes when it leaves the sender's node of g ranks."""
    from lab.comm.sim import SimComm

    sent: dict[int, int] = {}
    real = SimComm.isend_unchecked

    def isend(self, t, dst):
        if self.rank // g != dst // g:
            sent[self.rank // g] = sent.get(self.rank // g, 0) + t.numel() * t.element_size()
        return real(self, t, dst)

    monkeypatch.setattr(SimComm, "isend_unchecked", isend)
    return sent


@pytest.mark.parametrize("nodes, g", [(2, 4), (4, 2), (3, 4)])
def test_flat_ring_node_egress_is_what_the_ring_sends_across(monkeypatch, nodes, g):
    """Run the ring on SimComm, count the bytes each node's ranks send to other nodes, and compare with the
    model: 2(P−1)/P·m per node (one flow per node boundary), not g times that (the old 8x at g = 8)."""
    from lab.comm import allreduce, simulate

    P, n = nodes * g, 240 * nodes * g
    sent = _count_cross_node(monkeypatch, g)
    simulate(lambda comm: allreduce(comm, torch.ones(n), algorithm="ring", check=False), P)
    model = cl.algorithm_time(Cluster(nodes, g, A, E), "ring", n, cl.FP32).node_egress_bytes
    assert set(sent) == set(range(nodes))
    for node, b in sent.items():
        assert b == pytest.approx(model, rel=1e-12), node
    assert model == pytest.approx(2 * (P - 1) / P * 4 * n)


def test_pays_flat_ring_cross_node_bytes_match_its_own_time():
    """`pays`: the ring's cross_node_MB is the bytes its transfer time moves through the NIC (bandwidth term ×
    NIC bandwidth): one flow per node boundary (the issue's 3919.85 MB was 8x the 489.98 its time implies)."""
    from lab.plan import pays as pp

    r = pp.pays("gpt2_small", "8x8", codecs=["dynamic_tree"], algorithms=["ring"], bandwidths=(1.0, 10.0))
    c = cl.make_cluster("8x8", "nvlink4", "ib_ndr")
    s = pp.Setting(pp._model("gpt2_small"), c, pp.get_device("h100"), 8, False)
    row = r.rows[r.rows.codec == "bf16"].iloc[0]
    link, P = c.ring_link, c.P
    latency_ms = 1e3 * len(s.params) * 2 * (P - 1) * link.L
    implied_MB = (row.transfer_ms - latency_ms) / 1e3 * link.bandwidth_Bps / 1e6
    assert row.cross_node_MB == pytest.approx(implied_MB, rel=1e-9)
    assert row.cross_node_MB == pytest.approx(sum(2 * (P - 1) / P * 2 * n for n in s.params) / 1e6, rel=1e-12)
    assert row.cross_node_MB == pytest.approx(489.98, abs=0.01)


def test_pays_json_flat_ring_cross_node_mb():
    """`paralab pays --json` (the issue's command): the ring row's cross_node_MB is 2(P−1)/P·m per node, summed
    over GPT-2 small's layers, in bf16 (489.98 MB, not 8x that)."""
    import json

    from typer.testing import CliRunner

    from lab.cli import app
    from lab.plan.layers import get_model

    r = CliRunner().invoke(app, ["pays", "--codecs", "dynamic_tree", "--json"])
    assert r.exit_code == 0, r.output
    ring = next(x for x in json.loads(r.stdout)["algorithms"] if x["algorithm"] == "ring" and x["codec"] == "bf16")
    P = 64
    want = sum(2 * (P - 1) / P * 2 * lay.params for lay in get_model("gpt2_small").layers) / 1e6
    assert ring["cross_node_MB"] == pytest.approx(want, rel=1e-12)
