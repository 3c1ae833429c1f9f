"""The ring's pipelined chunks: overlapped and unpipelined runs give the same
numbers, codec payload buffers are reused (no allocation per hop), chunk counts, rank threads."""
from __future__ import annotations

import pytest
import torch


def _rank(comm, n: int, codec, on: bool) -> torch.Tensor:
    from lab.comm import allreduce, channel
    x = torch.randn(n, generator=torch.Generator().manual_seed(comm.rank))
    with channel.overlap(on):
        return allreduce(comm, x, algorithm="ring", codec=codec)


@pytest.mark.parametrize("P", [2, 3, 4])
def test_overlapped_ring_equals_the_unpipelined_one(P: int, monkeypatch) -> None:
    from lab.comm import channel
    from lab.comm.sim import simulate
    monkeypatch.setattr(channel, "CHUNK", 64)
    for codec in (None, "dynamic_tree", "dynamic_tree:block_size=16", "linear"):
        for n in (1, 100, 1001):
            a, b = simulate(_rank, P, n, codec, True), simulate(_rank, P, n, codec, False)
            assert all(torch.equal(x, y) for x, y in zip(a, b)), (P, codec, n)
            assert all(torch.equal(x, a[0]) for x in a)


def test_unpipelined_ring_waits_for_each_transfer(monkeypatch) -> None:
    """overlap(False) waits for every batch before the next codec work (the baseline really is one)."""
    from lab.comm import channel
    from lab.comm.algorithms import ring
    from lab.comm.sim import simulate
    monkeypatch.setattr(channel, "CHUNK", 64)
    waited: list[int] = []
    post = channel.Channel.post

    def spy(self, sends=(), recvs=()):
        batch = post(self, sends, recvs)
        wait = batch.wait

        def counted():
            waited.append(1)
            return wait()
        batch.wait = counted
        return batch
    monkeypatch.setattr(channel.Channel, "post", spy)
    simulate(_rank, 2, 1000, "linear", False)
    serial = len(waited)
    waited.clear()
    simulate(_rank, 2, 1000, "linear", True)
    assert serial > 0 and len(waited) == 0 and ring is not None


def test_chunk_counts() -> None:
    from lab.comm.channel import CHUNK, MIN_CHUNK, PIECES, chunk_count
    assert chunk_count(0) == chunk_count(1) == chunk_count(MIN_CHUNK) == 1
    assert chunk_count(PIECES * MIN_CHUNK) == PIECES
    assert chunk_count(8 * CHUNK + 1) == 9


@pytest.mark.parametrize("codec", ["dynamic_tree", "dynamic_tree:block_size=64"])
def test_codec_payload_buffers_are_reused_call_after_call(codec: str, monkeypatch) -> None:
    """Every buffer a codec payload lands in comes from the comm's pool; a second allreduce of the
    same length allocates none (the same tensors, the same memory)."""
    from lab.comm import allreduce, channel
    from lab.comm.sim import simulate
    monkeypatch.setattr(channel, "CHUNK", 64)

    def rank(comm):
        x = torch.randn(1000, generator=torch.Generator().manual_seed(comm.rank))
        allreduce(comm, x, algorithm="ring", codec=codec)
        first = {k: (v, v.data_ptr()) for k, v in channel.payload_pool(comm).items()}
        y = allreduce(comm, x, algorithm="ring", codec=codec)
        again = channel.payload_pool(comm)
        return first, {k: (v, v.data_ptr()) for k, v in again.items()}, y
    for first, again, _ in simulate(rank, 3):
        assert first and first.keys() == again.keys()
        assert all(first[k][0] is again[k][0] and first[k][1] == again[k][1] for k in first)


def test_rank_threads_share_the_cores(monkeypatch) -> None:
    """A rank process takes cores // ranks threads (at least 1); virtual ranks leave them alone."""
    from lab.comm import bench
    from lab.comm.sim import simulate

    class Rank:  # a process rank as rank_threads sees it: its size
        def __init__(self, size: int) -> None:
            self.size = size
    before = torch.get_num_threads()
    monkeypatch.setattr(bench.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    try:
        assert (bench.rank_threads(Rank(4)), torch.get_num_threads()) == (2, 2)
        assert bench.rank_threads(Rank(16)) == 1
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
        assert bench.rank_threads(Rank(16)) == 4
        torch.set_num_threads(before)
        assert simulate(lambda comm: bench.rank_threads(comm), 4)[0] == before
    finally:
        torch.set_num_threads(before)


def _hier(comm, n: int, codec, on: bool, k: int) -> torch.Tensor:
    from lab.comm import allreduce, channel
    x = torch.randn(n, generator=torch.Generator().manual_seed(comm.rank))
    with channel.overlap(on):
        return allreduce(comm, x, algorithm="hierarchical", codec=codec, ranks_per_node=k)


@pytest.mark.parametrize("P,k", [(4, 2), (6, 3)])
def test_hierarchical_node_rings_in_chunks(P: int, k: int, monkeypatch) -> None:
    """The node-level ring steps go in pipelined chunks too: under NCCL's rules (strict SimComm),
    overlapped = unpipelined = buffered sends, every rank the same, raw sums exact."""
    from lab.comm import channel
    from lab.comm.sim import simulate
    monkeypatch.setattr(channel, "CHUNK", 16)
    n = 1001
    exact = sum(torch.randn(n, generator=torch.Generator().manual_seed(r)).double() for r in range(P))
    for codec in (None, "linear"):
        strict = simulate(_hier, P, n, codec, True, k, strict=True)
        assert all(torch.equal(x, strict[0]) for x in strict)
        for other in (simulate(_hier, P, n, codec, False, k), simulate(_hier, P, n, codec, True, k)):
            assert all(torch.equal(x, y) for x, y in zip(strict, other)), codec
        if codec is None:
            assert torch.allclose(strict[0].double(), exact, rtol=0, atol=1e-4)
