"""One collective system: the allreduce algorithms compose the registered collectives (lab/comm/collectives).
Gather mode runs the registered all-gather (ring, rabenseifner's recursive doubling, butterfly_sync's direct);
the ring, butterfly_sync and hierarchical's node level run the registered reduce-scatter and all-gather's
channel forms (`Collective.phase`; the ring's chained at the boundary, `Collective.handoff`), so a plugin put
under one of those names runs inside the allreduce."""
from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from lab.comm import collectives as C
from lab.comm.allreduce import allreduce
from lab.comm.sim import simulate


@pytest.fixture
def counted():
    """count(op, name, what): wrap that registered collective's `run` or `phase` with a call counter (SimComm's
    ranks run in threads); every wrapped collective is put back afterwards."""
    calls: dict = {}
    lock, saved = threading.Lock(), []

    def count(op: str, name: str, what: str) -> None:
        orig = C.get_collective(op, name)
        inner = getattr(orig, what)

        def counting(*args, **kwargs):
            with lock:
                calls[(op, name, what)] = calls.get((op, name, what), 0) + 1
            return inner(*args, **kwargs)

        C.register(dataclasses.replace(orig, **{what: counting}), replace=True)
        saved.append(orig)

    yield count, calls
    for orig in saved:
        C.register(orig, replace=True)


def _x(r: int, n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) * (r + 1) / 8 + r


@pytest.mark.parametrize("algorithm, gathers", [("ring", "ring"), ("rabenseifner", "recursive_doubling"),
                                                ("recursive_doubling", "recursive_doubling"),
                                                ("butterfly_sync", "direct")])
def test_gather_mode_runs_the_registered_all_gather(counted, algorithm, gathers):
    count, calls = counted
    count("all_gather", gathers, "run")
    P, n = 6, 40
    out = simulate(lambda comm: allreduce(comm, _x(comm.rank, n), algorithm=algorithm, codec="topk", mode="gather"), P)
    assert calls == {("all_gather", gathers, "run"): P}
    assert all(torch.equal(o, out[0]) for o in out)


@pytest.mark.parametrize("algorithm, options, halves, per_rank", [
    ("butterfly_sync", {}, ("direct", "direct"), 1),
    ("hierarchical", {"ranks_per_node": 4, "inner": "ring", "outer": "ring"}, ("ring", "ring"), 2),  # node level
    # and the ring allreduce across the nodes
    ("hierarchical", {"ranks_per_node": 4, "inner": "butterfly_sync"}, ("direct", "direct"), 1)])
def test_reduce_scatter_and_all_gather_halves_run_the_registered_channel_forms(counted, algorithm, options, halves,
                                                                             per_rank):
    count, calls = counted
    count("reduce_scatter", halves[0], "phase")
    count("all_gather", halves[1], "phase")
    P, n = 8, 1000
    for codec in (None, "dynamic_tree"):
        calls.clear()
        out = simulate(lambda comm: allreduce(comm, _x(comm.rank, n), algorithm=algorithm, codec=codec, **options), P)
        assert calls == {("reduce_scatter", halves[0], "phase"): per_rank * P,
                         ("all_gather", halves[1], "phase"): per_rank * P}
        assert all(torch.equal(o, out[0]) for o in out)  # every rank ends with the same numbers
        exact = sum(_x(r, n) for r in range(P))
        assert torch.allclose(out[0], exact, rtol=0 if codec is None else 0.05, atol=1e-4 if codec is None else 2.0)


def test_a_channel_form_is_only_for_an_allreduce_half():
    ring = C.get_collective("sendrecv", "ring")
    with pytest.raises(ValueError, match="phase must be callable, on an op of reduce_scatter, all_gather"):
        dataclasses.replace(ring, phase=lambda comm, shards, ch: None)


def _ring_events(monkeypatch, P: int, n: int, codec):
    """Run the ring allreduce (channel chunks of 64 values) and log rank 0's channel work in order: 'send' for a
    batch that sends, 'hop' for a reduction hop (decode-add-encode), 'add' for a decode-and-add into fp32."""
    from lab.comm import channel
    monkeypatch.setattr(channel, "CHUNK", 64)
    events: list[str] = []
    orig = {name: getattr(channel.Channel, name) for name in ("post", "reduce", "add_into")}

    def spy(name: str, what):
        def wrapped(self, *args, **kwargs):
            if self.comm.rank == 0 and (name != "post" or args and args[0] or kwargs.get("sends")):
                events.append(what)
            return orig[name](self, *args, **kwargs)
        monkeypatch.setattr(channel.Channel, name, wrapped)
    for name, what in (("post", "send"), ("reduce", "hop"), ("add_into", "add")):
        spy(name, what)
    out = simulate(lambda comm: allreduce(comm, _x(comm.rank, n), algorithm="ring", codec=codec), P)
    for name, f in orig.items():
        monkeypatch.setattr(channel.Channel, name, f)
    return out, events


@pytest.mark.parametrize("P", [2, 3, 5])
def test_the_ring_allreduce_chains_the_registered_ring_phases(counted, monkeypatch, P):
    """reduce runs the registered ring reduce-scatter and all-gather (a plugin under those names runs there),
    handed over at the boundary: rank 0 sends its first all-gather chunk before it reduces its last
    reduce-scatter chunk (each chunk of its sum goes on as soon as it is complete)."""
    count, calls = counted
    count("reduce_scatter", "ring", "phase")
    count("all_gather", "ring", "phase")
    n = 64 * 3 * P  # 3 chunks per segment
    for codec in (None, "dynamic_tree"):
        calls.clear()
        out, events = _ring_events(monkeypatch, P, n, codec)
        assert calls == {("reduce_scatter", "ring", "phase"): P, ("all_gather", "ring", "phase"): P}
        assert all(torch.equal(o, out[0]) for o in out)
        exact = sum(_x(r, n) for r in range(P))
        assert torch.allclose(out[0], exact, rtol=0 if codec is None else 0.05, atol=1e-4 if codec is None else 2.0)
        sends = [j for j, e in enumerate(events) if e == "send"]
        assert len(sends) == 2 * (P - 1) * 3  # 2(P−1) steps of 3 chunks each
        first_gather_send, last_hop = sends[(P - 1) * 3], max(j for j, e in enumerate(events) if e == "hop")
        assert "add" not in events and first_gather_send < last_hop, events


def test_without_a_handoff_the_phases_run_one_after_the_other_with_the_same_numbers(counted, monkeypatch):
    """A ring all-gather plugin without `handoff`: the reduce-scatter completes (adds) every chunk of the sum
    before the all-gather encodes and sends it; the numbers are those of the chained halves, bit for bit
    (the fused hop at the boundary is decode, add, encode)."""
    P, n = 4, 64 * 3 * 4
    chained = {codec: _ring_events(monkeypatch, P, n, codec)[0] for codec in (None, "dynamic_tree")}
    orig = C.get_collective("all_gather", "ring")
    C.register(dataclasses.replace(orig, handoff=False), replace=True)
    try:
        for codec, want in chained.items():
            out, events = _ring_events(monkeypatch, P, n, codec)
            assert all(torch.equal(o, w) for o, w in zip(out, want)), codec
            sends = [j for j, e in enumerate(events) if e == "send"]
            assert max(j for j, e in enumerate(events) if e == "add") < sends[(P - 1) * 3]
    finally:
        C.register(orig, replace=True)


def test_a_handoff_needs_a_phase_and_phases_need_a_channel_form():
    ring = C.get_collective("all_gather", "ring")
    with pytest.raises(ValueError, match="handoff=True needs a phase"):
        dataclasses.replace(ring, phase=None)
    with pytest.raises(ValueError, match="all_gather algorithm 'bruck' has no channel form"):
        C.allreduce_phases(None, [torch.ones(3)] * 2, None, "ring", "bruck")


@pytest.mark.parametrize("P, core", [(4, 4), (6, 4), (8, 8)])
def test_rabenseifner_runs_the_registered_halving_and_doubling_on_its_core(counted, P, core):
    """Its core (P' ranks: the others are folded in first) runs the registered recursive-halving reduce-scatter
    and recursive-doubling all-gather in their channel forms, once per core rank."""
    count, calls = counted
    count("reduce_scatter", "recursive_halving", "phase")
    count("all_gather", "recursive_doubling", "phase")
    n = 1001
    for codec in (None, "dynamic_tree"):
        calls.clear()
        out = simulate(lambda comm: allreduce(comm, _x(comm.rank, n), algorithm="rabenseifner", codec=codec), P)
        assert calls == {("reduce_scatter", "recursive_halving", "phase"): core,
                         ("all_gather", "recursive_doubling", "phase"): core}
        assert all(torch.equal(o, out[0]) for o in out)
        exact = sum(_x(r, n) for r in range(P))
        assert torch.allclose(out[0], exact, rtol=0 if codec is None else 0.05, atol=1e-3 if codec is None else 4.0)


@pytest.mark.parametrize("codec", [None, "dynamic_tree"])
def test_halving_and_doubling_phases_on_scattered_shards_equal_those_on_one_vector(codec):
    """Shards that are pieces of one vector go as views; shards of separate tensors are copied together for each
    message and the sums copied back: the same numbers. A phase on a non-power-of-two group says why not."""
    from lab.codecs import get_codec
    from lab.comm.channel import Channel
    rs = C.get_collective("reduce_scatter", "recursive_halving")
    ag = C.get_collective("all_gather", "recursive_doubling")
    lengths = [5, 0, 7, 3]

    def rank(comm, split: bool):
        buf = _x(comm.rank, sum(lengths))
        shards = list(buf.split(lengths)) if not split else [s.clone() for s in buf.split(lengths)]
        ch = Channel(comm, None if codec is None else get_codec(codec))
        rs.phase(comm, shards, ch)
        ag.phase(comm, shards, ch)
        return torch.cat(shards)
    one, apart = simulate(rank, 4, False), simulate(rank, 4, True)
    assert all(torch.equal(a, b) and torch.equal(a, one[0]) for a, b in zip(one, apart))
    if codec is None:
        assert torch.allclose(one[0], sum(_x(r, sum(lengths)) for r in range(4)), rtol=0, atol=1e-5)
    with pytest.raises(Exception, match="runs on a power of two of ranks, not 3"):
        simulate(lambda comm: rs.phase(comm, [torch.ones(2)] * 3, Channel(comm)), 3)
