"""The MX CPU encode's torch.compile plumbing: one compiled graph per (format, scale
rule, input dtype) with dynamic shapes, so fp32, bf16 and fp16 inputs of several sizes alternating
never reach torch._dynamo's recompile limit (past it dynamo silently runs the function eagerly and
logs a warning into the user's output); the compiled results equal the plain-torch reference."""
import logging
import warnings

import pytest
import torch

from lab.backend import compile_enabled
from lab.codecs import cpu, mx

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SIZES = (cpu.MIN_COMPILED, cpu.MIN_COMPILED + 32 * 5 + 7, 2 * cpu.MIN_COMPILED)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.skipif(not compile_enabled(), reason="PARALAB_COMPILE=0")
def test_mx_encode_compiles_once_per_dtype_and_never_hits_the_recompile_limit():
    import torch._dynamo
    from torch._dynamo.utils import counters

    # more (dtype x size) inputs than the limit allows compiles of one code object: with the limit at
    # 2 instead of 8, three dtypes of one format are enough to show it (each compile costs seconds)
    assert len(DTYPES) * len(SIZES) > 2
    codec = mx.MXCodec("e4m3")
    torch._dynamo.reset()
    mx._encode_mx_fn.cache_clear()
    counters.clear()
    seen = _Records()
    dynamo_log = logging.getLogger("torch._dynamo")
    dynamo_log.addHandler(seen)
    try:
        with torch._dynamo.config.patch(recompile_limit=2), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            for n in SIZES:  # sizes outer, dtypes inner: every call switches dtype
                for dt in DTYPES:
                    x = (torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3).to(dt)
                    enc = codec.encode(x)
                    codes, scales, _ = codec._encode_reference(x.reshape(-1))
                    assert torch.equal(enc.tensors["codes"], codes) and torch.equal(enc.tensors["scales"], scales)
                    assert torch.equal(codec.decode(enc), codec.decode(codec.encode(x.float())).to(dt))
    finally:
        dynamo_log.removeHandler(seen)
    said = seen.messages + [str(w.message) for w in warned]
    assert not [m for m in said if "recompile_limit" in m or "cache_size_limit" in m], said
    # compiled, once per dtype: the fp32 decode check adds no graph (fp32 is one of the three)
    assert counters["frames"]["ok"] == len(DTYPES), dict(counters["frames"])
    assert counters["stats"]["unique_graphs"] == len(DTYPES), dict(counters["stats"])
    assert mx._encode_mx_fn.cache_info().currsize == len(DTYPES)
