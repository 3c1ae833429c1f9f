"""The table codecs' compiled CPU passes: the packed one-load search, the absmax
pass, and the codec's encode/decode bit for bit equal to the plain-torch reference."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

TABLES = ("dynamic_tree", "linear", "bnb_dynamic")


def _prepared(name: str):
    from lab.codecs import tables
    from lab.codecs.table_codec import _prepared
    return _prepared(getattr(tables, name)(), "nearest", "absmax")


@pytest.mark.parametrize("name", TABLES)
def test_packed_table_puts_each_threshold_where_it_falls(name: str) -> None:
    """For every finite bucket: below t the one threshold is not reached, from t on it is."""
    from lab.codecs import cpu
    p = _prepared(name)
    assert p.K == 1 and p.packed is not None and p.packed.dtype == torch.int32
    e = p.packed.long() & 0xFFFFFFFF
    c, t, neg = e & 0xFF, (e >> 8) & 0x1FFFF, (e >> 31) & 1
    assert torch.equal(c, p.lut.long())
    b = p.bpad[c]
    idx = torch.arange(65536)
    finite = (idx & 0x7F80) != 0x7F80
    flip = torch.where(neg.bool(), 0xFFFF, 0)
    at = lambda q: cpu._as_f32((idx << 16) | (q.clamp(0, 0xFFFF) ^ flip))  # noqa: E731
    reached = at(t) >= b
    below = at(t - 1) < b
    assert bool((reached | (t == 65536))[finite].all())
    assert bool((below | (t == 0))[finite].all())


@pytest.mark.parametrize("name", TABLES)
def test_packed_search_equals_the_reference_in_every_bucket(name: str) -> None:
    """Eager run of the compiled passes' search: every bucket, its ends and random patterns."""
    from lab.codecs import cpu
    p = _prepared(name)
    hi = torch.arange(65536, dtype=torch.int64) << 16
    low = torch.cat([torch.tensor([0, 0xFFFF, 0x8000]), torch.randint(0, 0x10000, (5,))])
    bits = (hi[:, None] | low[None, :]).reshape(-1)
    a = cpu._as_f32(bits)
    a = a[torch.isfinite(a)]
    ref = cpu.encode_reference(a, p.bounds)
    assert torch.equal(cpu._search(a, p.packed, p.bpad, 0), ref)
    assert torch.equal(cpu._search(a, p.lut, p.bpad, p.K), ref)


def test_absmax_is_the_inf_norm_bit_for_bit() -> None:
    from lab.codecs import cpu
    cases = [torch.tensor([0.0, -0.0]), torch.tensor([-0.0]), torch.tensor([-3.0, 2.0]),
             torch.tensor([1.0, float("nan")]), torch.tensor([float("-inf"), 1.0]),
             torch.tensor([-5.0, 4.0]).half(), torch.tensor([1e-40, -3e-41])]
    for x in cases:
        a, b = cpu.absmax(x), torch.linalg.vector_norm(x, float("inf")).float()
        assert a.dtype == torch.float32
        assert (a.isnan() and b.isnan()) or torch.equal(a.view(torch.int32), b.view(torch.int32)), x


def test_kernel_status_names_the_eager_path(monkeypatch) -> None:
    from lab.codecs import cpu
    monkeypatch.setenv("PARALAB_COMPILE", "0")
    assert cpu.kernel_status() == "eager (PARALAB_COMPILE=0)"


def _reference(codec, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes, scales) by the plain-torch definition (`cpu.*_reference`), any length."""
    from lab.codecs import cpu
    p = _prepared("dynamic_tree")
    if codec.block_size is None:
        s = torch.linalg.vector_norm(x, float("inf")).float().reshape(1)
        return cpu.encode_scaled_reference(x, s[0], p.bounds), s
    B, n = codec.block_size, x.numel()
    full = n // B * B
    parts = [cpu.encode_blocks_reference(x[:full].view(-1, B), p.bounds)] if full else []
    if full < n:
        parts.append(cpu.encode_blocks_reference(x[full:].view(1, -1), p.bounds))
    return torch.cat([c.reshape(-1) for c, _ in parts]), torch.cat([s for _, s in parts])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=st.integers(0, 3 * 4096 + 5), block=st.sampled_from([None, 4096, 1000]),
       exp=st.integers(-45, 30), zeros=st.booleans(), seed=st.integers(0, 2**16))
def test_encode_and_decode_equal_the_reference(extra: int, block: int | None, exp: int, zeros: bool,
                                               seed: int) -> None:
    """Lengths past the compiled threshold, whole blocks or not, magnitudes down to subnormals,
    zero blocks and -0.0: codes, scales and decode_into bit for bit the reference."""
    from lab.codecs import cpu, get_codec
    codec = get_codec("dynamic_tree", **({} if block is None else {"block_size": block}))
    n = cpu.MIN_COMPILED + extra
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed)) * (10.0 ** exp)
    if zeros:
        x[: min(n, 4096)] = 0.0
        x[-1] = -0.0
    enc = codec.encode(x)
    codes, scales = _reference(codec, x)
    assert torch.equal(enc.tensors["codes"].reshape(-1), codes)
    assert torch.equal(enc.tensors["scales"].view(torch.int32), scales.view(torch.int32))
    p = _prepared("dynamic_tree")
    out = torch.empty(n)
    codec.decode_into(enc, out)
    B = block or n
    want = cpu.decode_reference(codes, p.values256, scales.repeat_interleave(B)[:n], torch.float32)
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))


def test_decode_and_hop_take_the_reference_for_a_table_the_unchecked_pass_cannot_read() -> None:
    """The compiled decode and hop passes read the value table without bounds checks, so they run for uint8 codes
    into 256 entries only; another table (here 200 entries) is decoded by the reference, bit for bit, and the hop
    says it did not run (its caller composes the reference)."""
    from lab.codecs import cpu
    p = _prepared("dynamic_tree")
    n = cpu.MIN_COMPILED * 2
    g = torch.Generator().manual_seed(3)
    codes = torch.randint(0, 200, (n,), generator=g, dtype=torch.uint8)
    values, scale = torch.randn(200, generator=g), torch.tensor(0.5)
    out = torch.full((n,), float("nan"))
    cpu.decode_into(codes, values, scale, out)
    assert torch.equal(out, cpu.decode_reference(codes, values, scale, torch.float32))
    x, rows = torch.randn(n, generator=g).view(-1, 4096), (-1, 4096)
    assert cpu.hop_blocks(codes.view(rows), torch.ones(n // 4096, 1), values, x, p.lut, p.bpad, p.K,
                          p.packed) is None
    full = cpu.hop_blocks(codes.view(rows), torch.ones(n // 4096, 1), p.values256, x, p.lut, p.bpad, p.K, p.packed)
    want = cpu.encode_blocks_reference(p.values256[codes.long()].view(rows) + x, p.bounds)
    assert full is not None and torch.equal(full[0], want[0]) and torch.equal(full[1], want[1])
