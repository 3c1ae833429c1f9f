"""No list of codecs or algorithms frozen at import time. A codec or algorithm registered
after `lab.experiments` (and the Planner page) were imported and read is in `lab.experiments.ALGORITHMS`,
the two-level lists, `plan --advice`'s default candidates and the Planner page's codec choices."""
from __future__ import annotations

import pytest
import torch

from lab.codecs import Codec, CodecInfo, Encoded, register as register_codec, unregister as unregister_codec
from lab.comm.algorithms import Algorithm, register, unregister
from lab.comm.algorithms.ring import reduce as ring_reduce

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

PLUGIN_ENV = "PARALAB_ALGORITHMS"  # where register() records a plugin for rank processes: restored after a test


class HalfSign(Codec):
    """A test plugin codec: sign times half the mean magnitude, one byte per value."""

    name = "halfsign"
    requantize = True

    def encode(self, x):
        flat = x.reshape(-1).float()
        mean = flat.abs().mean().reshape(1) if flat.numel() else flat.new_zeros(1)
        return Encoded(self.name, x.shape, x.dtype, {"signs": (flat >= 0).to(torch.uint8), "mean": mean / 2},
                       flat.numel() + 4)

    def decode(self, enc):
        s = enc.tensors["signs"].float() * 2 - 1
        return (s * enc.tensors["mean"]).to(enc.dtype).view(enc.shape)


def plugin_reduce(comm, buf, ch):
    ring_reduce(comm, buf, ch)


@pytest.fixture
def halfsign():
    register_codec(CodecInfo("halfsign", "sign times half the mean magnitude (test plugin)", lambda: HalfSign()))
    yield "halfsign"
    unregister_codec("halfsign")


@pytest.fixture
def late_algorithm(monkeypatch):
    monkeypatch.delenv(PLUGIN_ENV, raising=False)
    register(Algorithm(name="late_ring", summary="registered after import (test plugin)", citation="test",
                       reduce=plugin_reduce, coefficients=lambda P, m: (2.0 * (P - 1), 2.0 * m * (P - 1) / P),
                       total_bytes=lambda P, m: 2.0 * (P - 1) * m))
    yield "late_ring"
    unregister("late_ring")


def test_algorithm_lists_are_read_when_asked():
    import lab.experiments as ex
    from lab.experiments import choices, pays, plan

    before = (ex.ALGORITHMS, ex.CLUSTER_ALGORITHMS, choices.ALGORITHMS, pays.CLUSTER_ALGORITHMS,
              plan.CLUSTER_ALGORITHMS)  # read once first: a cache would keep these
    assert "late_ring" not in before[0]
    reg = pytest.MonkeyPatch()
    reg.delenv(PLUGIN_ENV, raising=False)
    register(Algorithm(name="late_ring", summary="registered after import (test plugin)", citation="test",
                       reduce=plugin_reduce, coefficients=lambda P, m: (2.0 * (P - 1), 2.0 * m * (P - 1) / P),
                       total_bytes=lambda P, m: 2.0 * (P - 1) * m, options=("ranks_per_node",),
                       configure=lambda P, codec, how, ranks_per_node=1: {"ranks_per_node": ranks_per_node}))
    try:
        assert "late_ring" in ex.ALGORITHMS and "late_ring" in choices.ALGORITHMS
        assert "late_ring" in ex.CLUSTER_ALGORITHMS and "late_ring" in pays.CLUSTER_ALGORITHMS  # pays prices it
        assert "late_ring" in plan.CLUSTER_ALGORITHMS  # laid out by nodes: planned on a cluster only
    finally:
        unregister("late_ring")
        reg.undo()
    assert "late_ring" not in ex.ALGORITHMS and "late_ring" not in pays.CLUSTER_ALGORITHMS


def test_plan_advice_candidates_include_a_codec_registered_later(halfsign):
    from lab.experiments import planner_advice

    adv = planner_advice("alexnet", 8)
    assert "halfsign_ms" in adv.columns and "dynamic_tree_ms" in adv.columns
    assert "none_ms" in adv.columns


def test_planner_page_offers_a_codec_and_an_algorithm_registered_later(late_algorithm):
    from test_app import page

    at = page("planner", more="true")
    assert not at.exception
    assert "late_ring" in at.selectbox(key="w_algorithm").options
    register_codec(CodecInfo("halfsign", "sign times half the mean magnitude (test plugin)", lambda: HalfSign()))
    try:
        at.run()
        assert not at.exception
        assert "halfsign" in at.selectbox(key="w_grad_codec").options
        assert "halfsign" in at.selectbox(key="w_act_codec").options
    finally:
        unregister_codec("halfsign")
