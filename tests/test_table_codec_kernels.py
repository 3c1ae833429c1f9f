"""The table codecs (every registered TableCodec: dynamic_tree, linear, the bit layouts, ...) choose
their kernel path by `backend.KERNEL_DEVICE_TYPE` as the MX and NVFP4 codecs do, so their public
encode / decode / decode_into / hop run kernels/codec.cu and collective.cu under the emulator:
bit for bit the CPU path, for every table codec, dtype and block size, and a kernel ran each time."""
from __future__ import annotations

import pytest
import torch

from lab.codecs import get_codec, hop
from lab.codecs.registry import codec_names
from lab.codecs.table_codec import TableCodec
from test_block_scaled_kernels import cpu_path

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
BLOCKS = (None, 64, 100, 4096)


def _table_codecs() -> list[str]:
    """Every registered codec whose instances are table codecs (derived from the registry)."""
    return [n for n in codec_names() if isinstance(get_codec(n), TableCodec)]


def _launched(cuda_emu, before: int, prefix: str) -> None:
    ran = [k for _, k, _, _ in cuda_emu.launches[before:]]
    assert any(k.startswith(prefix) for k in ran), f"no {prefix}* kernel ran ({ran}): the CPU path ran instead"


def test_there_are_table_codecs() -> None:
    assert {"dynamic_tree", "linear"} <= set(_table_codecs())


@pytest.mark.emu
@pytest.mark.parametrize("block_size", BLOCKS, ids=str)
@pytest.mark.parametrize("name", _table_codecs())
def test_public_api_runs_the_kernels(name: str, block_size: int | None, cuda_emu, monkeypatch) -> None:
    try:
        codec = get_codec(name, block_size=block_size) if block_size else get_codec(name)
    except (TypeError, ValueError) as e:
        cuda_emu.expect_launches = False
        pytest.skip(f"{name} takes no block_size={block_size}: {e}")
    for dtype in DTYPES:
        x = (torch.randn(4096 + 37, generator=torch.Generator().manual_seed(7)) * 3).to(dtype)
        if codec.scale == "none":
            x = x.clamp(-1, 1)
        with cpu_path(monkeypatch):
            want = codec.encode(x)
            want_y = codec.decode(want)
        n = len(cuda_emu.launches)
        got = codec.encode(x)
        _launched(cuda_emu, n, "encode_")
        for k, w in want.tensors.items():
            assert torch.equal(got.tensors[k], w), f"{name} {dtype}: {k} differ"
        n = len(cuda_emu.launches)
        y = codec.decode(got)
        _launched(cuda_emu, n, "decode_")
        assert torch.equal(y.view(torch.int16 if dtype != torch.float32 else torch.int32),
                           want_y.view(torch.int16 if dtype != torch.float32 else torch.int32))
    if codec.summable or getattr(codec, "requantize", False):
        x = torch.randn(4096 + 37, generator=torch.Generator().manual_seed(8))
        if codec.scale == "none":
            x = x.clamp(-0.4, 0.4)
        a = codec.encode(x * 0.5)
        with cpu_path(monkeypatch):
            want = hop.hop_mixed(codec, a, x)
        n = len(cuda_emu.launches)
        got = hop.hop_mixed(codec, a, x)
        if hop._fused(codec, a):
            _launched(cuda_emu, n, "hop_mixed_")
        for k, w in want.tensors.items():
            assert torch.equal(got.tensors[k], w), f"{name} hop: {k} differ"
