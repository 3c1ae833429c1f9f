"""The codec passes FSDP's hooks run on a CPU (lab/train/fsdp_comm.py): every all-gather decodes P rows
and every reduce-scatter P payloads per parameter group, so the decode is on the step's critical path.
MX decodes into float32 through one fused pass (`mx.decode_mx_into`, compiled; no float64
temporaries), equal to the reference decode bit for bit, for encoder output and for any bytes a peer
could send."""
import pytest
import torch


def _payloads(codec, n):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-60, 60, (n,), generator=g).float() / 4)
    codes, scales, _ = codec._encode_reference(x)  # the encoder's bytes, without compiling the encoder
    # and any bytes a peer could send: NaN codes, scales 0, 254 and 255 (a NaN block)
    bad_codes = torch.randint(0, 256, codes.shape, dtype=torch.uint8, generator=g)
    bad_scales = torch.randint(0, 256, scales.shape, dtype=torch.uint8, generator=g)
    bad_scales[:3] = torch.tensor([0, 254, 255], dtype=torch.uint8)
    return [codec.payload(x, {"codes": c, "scales": s}, n + s.numel(), {"block_size": 32})
            for c, s in ((codes, scales), (bad_codes, bad_scales))]


def _check(codec, n):
    for enc in _payloads(codec, n):
        out = torch.full((n,), 7.0)
        assert codec._decode_flat(enc, out)  # the fused pass ran (the old CPU path had none)
        ref = codec.decode(enc)
        same = (out == ref) | (out.isnan() & ref.isnan())
        assert bool(same.all()), int((~same).sum())


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "mxfp4_e2m1", "mxfp6_e3m2"])
def test_mx_decode_into_takes_the_fused_pass_and_equals_the_reference(monkeypatch, name):
    from lab.codecs import cpu, mx, parse_spec

    ran = []

    def eager(make, key, *args, returns=False, rows=()):  # the pass's own body, without compiling it (seconds)
        assert make is mx._decode_mx_into_fn and returns
        ran.append(key)
        mx.decode_mx_into(*args, mx.FORMATS[key].bits)
        return True

    monkeypatch.setattr(cpu, "try_compiled", eager)
    codec = parse_spec(name)
    _check(codec, cpu.MIN_COMPILED + 32 * 3 + 5)  # a tail block: decoded by the reference
    assert ran == [codec.fmt.name] * 2


@pytest.mark.slow
def test_mx_8_bit_decode_compiled_equals_the_reference():
    from lab.backend import compile_enabled
    from lab.codecs import cpu, parse_spec

    if not compile_enabled():
        pytest.skip("PARALAB_COMPILE=0")
    _check(parse_spec("mxfp8_e4m3"), cpu.MIN_COMPILED + 32 * 3 + 5)
