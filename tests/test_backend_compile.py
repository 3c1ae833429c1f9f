"""How kernels/*.cu are compiled for a real GPU: IEEE float32 (no flush to zero), checked without one."""
import sys
import types

import pytest

from lab import backend


@pytest.fixture
def fake_cupy(monkeypatch, tmp_path):
    """A stand-in for CuPy that records what `load_kernels` asks of it."""
    calls: dict = {}

    def compile_using_nvrtc(source, options=(), arch=None, filename="kern.cu", **kw):
        calls["options"], calls["filename"], calls["source"] = options, filename, source
        return b"\x7fELF fake cubin of " + filename.encode(), {}

    class RawModule:
        def __init__(self, code=None, options=(), path=None, **kw):
            if code is not None:  # CuPy would append -ftz=true to `options` here
                raise AssertionError("kernels must not be compiled through RawModule(code=...)")
            calls["path"] = path

    cupy = types.ModuleType("cupy")
    cupy.RawModule = RawModule
    cupy.cuda = types.ModuleType("cupy.cuda")
    cupy.cuda.compiler = types.SimpleNamespace(compile_using_nvrtc=compile_using_nvrtc)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
    monkeypatch.setattr(backend, "cupy_available", lambda: True)
    monkeypatch.setattr(backend.tempfile, "gettempdir", lambda: str(tmp_path))
    return calls


@pytest.mark.parametrize("name", ["codec", "block_scaled", "collective"])
def test_kernels_compile_with_ieee_float32(fake_cupy, name) -> None:
    """Subnormals kept, no contraction, exact division: the options reach NVRTC as given (CuPy's
    RawModule appends -ftz=true, which a real H100 showed flushes a 2^-127 E8M0 scale to 0)."""
    backend.load_kernels.__wrapped__(name)
    opts = fake_cupy["options"]
    assert {"--ftz=false", "--fmad=false", "--prec-div=true", "--prec-sqrt=true"} <= set(opts)
    assert not any(o.startswith(("-ftz=true", "--ftz=true", "--use_fast_math", "-use_fast_math")) for o in opts)
    assert fake_cupy["filename"] == f"{name}.cu" and "__global__" in fake_cupy["source"]
    with open(fake_cupy["path"], "rb") as f:
        assert f.read() == b"\x7fELF fake cubin of " + f"{name}.cu".encode()
    assert fake_cupy["path"].endswith(".cubin")
