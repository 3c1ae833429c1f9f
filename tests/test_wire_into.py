"""Codec payloads written into reused wire buffers ("no per-hop allocation"):
`WireFormat.encode_into` / `hop_into` equal `pack(encode)` / `pack(hop_mixed)` byte for byte, and
repeated compressed allreduces allocate nothing per hop after the first call."""
from __future__ import annotations

import pytest
import torch

N = 1 << 16  # enough values for the compiled CPU passes (lab.codecs.cpu.MIN_COMPILED)


@pytest.mark.parametrize("spec", ["dynamic_tree", "dynamic_tree:block_size=4096", "linear:block_size=4096"])
def test_encode_and_hop_into_equal_pack(spec: str) -> None:
    from lab.codecs import get_codec
    from lab.codecs.hop import hop_mixed
    from lab.codecs.wire import WireFormat
    codec = get_codec(spec)
    fmt = WireFormat.of(codec, N)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(N, generator=g), torch.randn(N, generator=g) * 3
    x[:4096] *= 1e-30  # a block of tiny values
    buf = torch.full((fmt.nbytes,), 7, dtype=torch.uint8)
    assert fmt.encode_into(x, buf) is buf
    assert torch.equal(buf, fmt.pack(codec.encode(x)))
    out = torch.empty_like(buf)
    assert fmt.hop_into(buf, y, out) is out
    assert torch.equal(out, fmt.pack(hop_mixed(codec, fmt.unpack(buf), y)))
    with pytest.raises(ValueError, match="own"):
        fmt.hop_into(buf, y, buf)


@pytest.mark.parametrize("spec", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4", "fp16"])
def test_hop_into_composes_in_a_scratch_buffer(spec: str) -> None:
    """Codecs without a fused CPU hop: decode into the reused float32 scratch, add, encode into the
    wire buffer: the bytes of pack(hop_mixed), the scratch holding decode(a) + x."""
    from lab.codecs import get_codec
    from lab.codecs.hop import hop_mixed
    from lab.codecs.wire import WireFormat
    codec = get_codec(spec)
    n = 4096
    fmt = WireFormat.of(codec, n)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    a = fmt.encode_into(x, torch.empty(fmt.nbytes, dtype=torch.uint8))
    assert torch.equal(a, fmt.pack(codec.encode(x)))
    scratch, out = torch.empty(n), torch.empty(fmt.nbytes, dtype=torch.uint8)
    assert torch.equal(fmt.hop_into(a, y, out, scratch), fmt.pack(hop_mixed(codec, fmt.unpack(a), y)))
    assert torch.equal(scratch, codec.decode(fmt.unpack(a)).float() + y)
    with pytest.raises(ValueError, match="scratch"):
        fmt.hop_into(a, y, out, torch.empty(n - 1))


def test_encode_into_falls_back_where_the_fast_path_does_not_apply() -> None:
    """A ragged last block, too few values, bit-packed codes, NaN: the same bytes as pack(encode),
    or encode's own error."""
    from lab.codecs import get_codec
    from lab.codecs.wire import WireFormat
    x = torch.randn(N + 100, generator=torch.Generator().manual_seed(1))
    for spec, n in (("dynamic_tree:block_size=4096", N + 100), ("dynamic_tree", 100),
                    ("layout:total_bits=4", 1000)):
        codec = get_codec(spec)
        fmt = WireFormat.of(codec, n)
        buf = torch.zeros(fmt.nbytes, dtype=torch.uint8)
        assert torch.equal(fmt.encode_into(x[:n], buf), fmt.pack(codec.encode(x[:n]))), spec
    bad = x[:N].clone()
    bad[5] = float("nan")
    fmt = WireFormat.of(get_codec("dynamic_tree"), N)
    with pytest.raises(ValueError, match="non-finite"):
        fmt.encode_into(bad, torch.zeros(fmt.nbytes, dtype=torch.uint8))
    with pytest.raises(ValueError, match="contiguous uint8"):
        fmt.encode_into(x[:N], torch.zeros(fmt.nbytes - 1, dtype=torch.uint8))


def _allocations(comm, x: torch.Tensor, spec: str, algorithm: str, kw: dict) -> list[list[int]]:
    """Sizes of the allocations of 4 KiB or more in two allreduces after a first one (rank 0
    profiles; SimComm's ranks share its thread, so every rank's allocations are counted)."""
    from torch.profiler import ProfilerActivity, profile

    from lab.comm import allreduce
    allreduce(comm, x, algorithm=algorithm, codec=spec, **kw)
    comm.allgather_object(None)  # every rank has finished its first call
    sizes = []
    for _ in range(2):
        if comm.rank == 0:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                allreduce(comm, x, algorithm=algorithm, codec=spec, **kw)
                comm.allgather_object(None)
            sizes.append(sorted(e.cpu_memory_usage for e in prof.events()
                                if e.name in ("aten::empty", "aten::empty_strided") and e.cpu_memory_usage >= 4096))
        else:
            allreduce(comm, x, algorithm=algorithm, codec=spec, **kw)
            comm.allgather_object(None)
    return sizes


@pytest.fixture(scope="module")
def fresh_compiles():
    """The allocation tests start from torch.compile's state of a fresh process (torch.compiler.reset): in a worker
    that ran other modules first, a pass's earlier compiled variants can leave the one these calls need running
    eagerly, which allocates, and the test would measure the worker's history instead of the hops."""
    torch.compiler.reset()
    yield


@pytest.mark.usefixtures("fresh_compiles")
@pytest.mark.parametrize("spec", ["dynamic_tree", "dynamic_tree:block_size=4096", "mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_repeated_allreduces_allocate_nothing_per_hop(spec: str, monkeypatch) -> None:
    """After the first call, a ring (P = 4) or hierarchical 2x2 allreduce in pipelined chunks
    allocates only its result, one fp32 vector per rank: every payload, sent or received, and
    every decoded chunk lands in a buffer kept on the comm (the block-scaled codecs: only their
    per-block scale bytes, under 4 KiB a chunk, come back from the compiled pass and are copied in)."""
    from lab.comm import channel
    from lab.comm.sim import simulate
    monkeypatch.setattr(channel, "MIN_CHUNK", 1 << 15)
    n = 1 << 18  # ring: 2 chunks of 2^15 values per segment, each through the compiled passes
    for algorithm, P, kw in (("ring", 4, {}), ("hierarchical", 4, {"ranks_per_node": 2})):
        def rank(comm):
            x = torch.randn(n, generator=torch.Generator().manual_seed(comm.rank))
            return _allocations(comm, x, spec, algorithm, kw)
        sizes = simulate(rank, P, strict=True)[0]
        assert sizes == [[4 * n] * P] * 2, (algorithm, P, [s[:8] for s in sizes])


@pytest.mark.parametrize("algorithm", ["tree", "recursive_doubling", "rabenseifner"])
def test_tree_and_butterflies_allocate_nothing_per_hop(algorithm: str) -> None:
    """The same for the binomial tree, recursive doubling and Rabenseifner, with the fold of P = 3 and
    without it (P = 4): every payload, sent, received or concatenated, lands in a buffer kept on the comm."""
    from lab.comm.sim import simulate
    n = 1 << 18  # Rabenseifner's quarters at P = 4 are 2^16 values: the compiled passes (lab.codecs.cpu.MIN_COMPILED)
    for P in (3, 4):
        def rank(comm):
            x = torch.randn(n, generator=torch.Generator().manual_seed(comm.rank))
            return _allocations(comm, x, "dynamic_tree:block_size=4096", algorithm, {})
        sizes = simulate(rank, P, strict=True)[0]
        assert sizes == [[4 * n] * P] * 2, (algorithm, P, [s[:8] for s in sizes])


@pytest.mark.parametrize("spec", ["mxfp8_e5m2", "mxfp6_e3m2", "mxint8", "mxfp4_e2m1:scale_rule=rceil",
                                  "nvfp4", "nvfp4:rounding=stochastic"])
def test_block_scaled_into_paths_equal_encode_and_decode(spec: str) -> None:
    """MX and NVFP4 encode_into / decode_into on the CPU: the bytes of pack(encode) and the bits of
    decode, with a ragged tail block, tiny, zero and huge blocks, and NaN / extreme scales."""
    from lab.codecs import get_codec
    from lab.codecs.wire import WireFormat
    n = (1 << 15) + 100
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-120, 120, (n,), generator=g).float())
    x[:64] *= 1e-38
    x[64:96] = 0
    fmt = WireFormat.of(get_codec(spec), n)
    buf = torch.full((fmt.nbytes,), 7, dtype=torch.uint8)
    assert torch.equal(fmt.encode_into(x, buf), fmt.pack(get_codec(spec).encode(x)))
    codec = get_codec(spec)
    enc = fmt.unpack(buf)
    scales = enc.tensors["scales"].view(torch.uint8)
    scales[3], scales[5] = 0xFF if codec.name.startswith("mx") else 0x7F, 0xFE if codec.name.startswith("mx") else 0x7E
    scales[6] = 0
    out = torch.full((n,), 5.0)
    assert codec.decode_into(enc, out) is out
    ref = codec.decode(enc)
    assert torch.equal(out.isnan(), ref.isnan())
    assert torch.equal(out.nan_to_num().view(torch.int32), ref.nan_to_num().view(torch.int32))
