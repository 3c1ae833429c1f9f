"""Hardware formats: fp16/bf16 casts saturate, fp8 scaled to the format's max, int8 absmax."""
import pytest
import torch

from lab.codecs import get_codec


def test_casts_are_summable_and_saturate():
    x = torch.tensor([1.0, 1e6, -1e6, 3.14159])
    c = get_codec("fp16")
    assert c.summable
    y = c.roundtrip(x)
    assert torch.equal(y, torch.tensor([1.0, 65504.0, -65504.0, 3.140625]))
    assert c.encode(x).wire_bytes == 8
    assert c.encode(x).meta["saturated"] == 2
    assert get_codec("bf16").roundtrip(x)[3].item() == pytest.approx(3.140625)
    assert torch.equal(get_codec("fp32").roundtrip(x), x)


@pytest.mark.parametrize("fmt, rel", [("fp8_e4m3", 2 ** -4), ("fp8_e5m2", 2 ** -3)])
def test_fp8_error_within_half_ulp_and_saturates(fmt, rel):
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(0))
    c = get_codec(fmt)
    enc = c.encode(x)
    assert enc.wire_bytes == 100_000 + 4
    y = c.decode(enc)
    big = x.abs() > x.abs().max() / 64  # normal range of the scaled format
    assert ((y - x).abs()[big] <= rel * x.abs()[big] * 1.0001).all()
    assert y.abs().max() == pytest.approx(x.abs().max().item(), rel=rel)
    assert not torch.isnan(y).any()


def test_int8_matches_linear_grid():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0))
    y = get_codec("int8").roundtrip(x)
    step = x.abs().max() / 127
    assert (y - x).abs().max() <= step / 2 * 1.0001
    assert torch.allclose(y, get_codec("linear").roundtrip(x), atol=1e-6)


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8"])
def test_native_bad_and_edge_input(name):
    c = get_codec(name)
    assert torch.equal(c.roundtrip(torch.zeros(7)), torch.zeros(7))
    assert c.roundtrip(torch.empty(0)).numel() == 0
    x = torch.randn(6, 4).to(torch.bfloat16)
    assert c.roundtrip(x).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="1 non-finite"):
        c.encode(torch.tensor([1.0, float("nan")]))
    base = torch.randn(30, 20)
    assert torch.equal(c.roundtrip(base.t()), c.roundtrip(base.t().contiguous()))


@pytest.mark.parametrize("name, x, out, count", [
    ("fp16", torch.tensor([1e30, -1e30, 2.0]), [65504.0, -65504.0, 2.0], 2),
    ("bf16", torch.tensor([3.4e38, 1.0]), [torch.finfo(torch.bfloat16).max, 1.0], 1),
    ("fp32", torch.tensor([3.4e38, 1.0]), [3.4e38, 1.0], 0),
    ("mantissa", torch.tensor([1e30, -200.0, 150.0, 0.0]), [150.0, -150.0, 150.0, 0.0], 2),
    ("static_tree", torch.tensor([1e30, 5.0]), [9.65625, 4.84375], 1),
])
def test_out_of_range_saturates_and_is_counted(name, x, out, count):
    """One rule for the unscaled codecs: a finite value beyond the format's largest finite value
    saturates to it, and meta['saturated'] counts them (they saturated without a word)."""
    c = get_codec(name)
    enc = c.encode(x)
    assert enc.meta["saturated"] == count
    assert torch.equal(c.decode(enc), torch.tensor(out))


@pytest.mark.parametrize("name", ["bf16", "fp32"])
def test_wider_wire_decodes_into_fp16_without_inf(name):
    """bf16 rounds fp16's 65504 up to 65536, which decoded to inf in fp16: decode saturates to the
    output dtype's range, as encode does to the wire format's."""
    x = torch.tensor([65504.0, -65504.0, 65000.0, 1.0], dtype=torch.float16)
    enc = get_codec(name).encode(x)
    y = get_codec(name).decode(enc)
    assert torch.equal(y[:2], x[:2]) and bool(torch.isfinite(y).all())
    assert enc.meta["saturated"] == 0
