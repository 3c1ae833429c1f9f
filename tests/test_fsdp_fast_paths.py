"""The codec passes FSDP's hooks run on a CPU (lab/train/fsdp_comm.py): every all-gather decodes P rows
and every reduce-scatter P payloads per parameter group, so the decode is on the step's critical path.
MX 8-bit decodes into float32 through one fused compiled pass (no float64 temporaries), equal to the
reference decode bit for bit, for encoder output and for any bytes a peer could send."""
import pytest
import torch

from lab.backend import compile_enabled


@pytest.mark.skipif(not compile_enabled(), reason="PARALAB_COMPILE=0")
@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxint8"])
def test_mx_8_bit_decode_into_is_fused_and_equals_the_reference(name):
    from lab.codecs import cpu, parse_spec

    codec = parse_spec(name)
    g = torch.Generator().manual_seed(1)
    n = cpu.MIN_COMPILED + 32 * 3 + 5  # a tail block decoded by the reference
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-60, 60, (n,), generator=g).float() / 4)
    enc = codec.encode(x)
    hostile = codec.encode(x)  # any byte a peer could send: NaN codes, scales 0, 254 and 255 (NaN)
    hostile.tensors["codes"] = torch.randint(0, 256, enc.tensors["codes"].shape, dtype=torch.uint8, generator=g)
    hostile.tensors["scales"] = torch.randint(0, 256, enc.tensors["scales"].shape, dtype=torch.uint8, generator=g)
    hostile.tensors["scales"][:3] = torch.tensor([0, 254, 255], dtype=torch.uint8)
    for e in (enc, hostile):
        out = torch.full((n,), 7.0)
        assert codec._decode_flat(e, out)  # the fused pass ran (the old CPU path had none)
        ref = codec.decode(e)
        same = (out == ref) | (out.isnan() & ref.isnan())
        assert bool(same.all()), (name, int((~same).sum()))
