"""Every codec declares its payload layout: `Codec.layout(n)` fields match what encode
produces, the wire format is derived from the declaration alone, and payloads round-trip through it."""
from __future__ import annotations

import ast
import inspect

import pytest
import torch

from lab.codecs import codec_names, get_codec
from lab.codecs import wire
from lab.codecs.base import Encoded, Field
from lab.codecs.wire import WireFormat

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

SPECS = sorted(codec_names()) + ["ef:onebit", "ef:dynamic_tree", "ef:nvfp4"]
LENGTHS = (0, 1, 33, 4097)


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a,
                                                                      b.view(-1).view(torch.uint8) if b.numel() else b)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layout_matches_encode_and_wire_roundtrips(spec: str, n: int, dtype: torch.dtype) -> None:
    codec = get_codec(spec)
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(dtype)
    enc = codec.encode(x)
    declared = codec.layout(n)
    assert enc.layout == declared, f"{spec}: encode did not attach its declared layout"
    assert [f.name for f in declared] and {f.name for f in declared} == set(enc.tensors)
    for f in declared:
        t = enc.tensors[f.name]
        assert (t.dtype, tuple(t.shape)) == (f.dtype, f.shape), f"{spec} field {f.name}"
    fmt = WireFormat.of(codec, n, dtype)
    assert fmt.fields == tuple(declared)
    buf = fmt.pack(enc)
    assert buf.dtype == torch.uint8 and buf.numel() == fmt.nbytes
    # the wire carries what the codec counts, up to the bit-plane padding of codes (< 8 bytes a
    # field) and the side fields of an empty payload (which the codec counts as 0 bytes)
    assert enc.wire_bytes <= fmt.nbytes <= enc.wire_bytes + 8 * len(declared) + \
        sum(f.nbytes for f in declared if n == 0)
    back = fmt.unpack(buf.clone())
    for f in declared:
        if f.wire:
            assert _bitwise(back.tensors[f.name], enc.tensors[f.name]), f"{spec} field {f.name}"
    payload = codec.payload_codec
    assert torch.equal(payload.decode(back), payload.decode(enc))


def test_a_payload_off_its_layout_is_a_clear_error() -> None:
    codec = get_codec("dynamic_tree")
    enc = codec.encode(torch.randn(40))
    with pytest.raises(ValueError, match="'scales'.*declares torch.float32 of shape \\(1,\\)"):
        Encoded(enc.codec, enc.shape, enc.dtype, {"codes": enc.tensors["codes"], "scales": torch.ones(2)},
                enc.wire_bytes, enc.meta, codec.layout(40))
    with pytest.raises(ValueError, match="'codes'.*torch.int8"):
        Encoded(enc.codec, enc.shape, enc.dtype, {"codes": enc.tensors["codes"].view(torch.int8),
                                                  "scales": enc.tensors["scales"]}, enc.wire_bytes, {}, enc.layout)
    with pytest.raises(ValueError, match="declares"):
        Encoded(enc.codec, enc.shape, enc.dtype, {"codes": enc.tensors["codes"]}, enc.wire_bytes, {}, enc.layout)
    with pytest.raises(ValueError, match="'codes'"):
        WireFormat.of(codec, 40).pack(Encoded(enc.codec, enc.shape, enc.dtype,
                                              {"codes": enc.tensors["codes"][:39], "scales": enc.tensors["scales"]}, 0))


def test_field_bytes() -> None:
    assert Field("c", torch.uint8, (33,), packed_bits=3).nbytes == 3 * 5
    assert Field("s", torch.float32, (2,)).nbytes == 8
    assert Field("s", torch.float32, (2,), wire=False).nbytes == 0


def test_wire_module_knows_no_field_names() -> None:
    """The byte layout comes from the declaration alone: no string constants, no getattr."""
    tree = ast.parse(inspect.getsource(wire))
    body = [node for node in ast.walk(tree) if not isinstance(node, ast.Expr)]  # docstrings aside
    names = {"codes", "scales", "values", "seed", "tensor_scale", "signs", "means", "norm", "scale", "indices"}
    consts = {n.value for node in body for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not consts & names
    assert not any(isinstance(n, ast.Name) and n.id in ("getattr", "hasattr") for n in ast.walk(tree))
