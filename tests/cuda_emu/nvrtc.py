"""Compile kernels/*.cu with NVRTC as CuPy does (no CUDA headers on the include path), to PTX.

NVRTC comes from PyPI's `nvidia-cuda-nvrtc-cu12` (a dev dependency); no GPU or driver is needed.
"""
from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

from . import compile_cache


def library_path() -> Path | None:
    """libnvrtc.so.12 of the installed nvidia-cuda-nvrtc-cu12 wheel, or None."""
    spec = importlib.util.find_spec("nvidia.cuda_nvrtc")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        lib = Path(root) / "lib" / "libnvrtc.so.12"
        if lib.exists():
            return lib
    return None


class NvrtcError(RuntimeError):
    """NVRTC refused the source; the message holds its log."""


def compile_ptx(source: str, name: str, arch: str, options: tuple[str, ...] = ("--std=c++17",)) -> str:
    """PTX of `source` for `arch` (e.g. 'compute_90'), compiled with NVRTC's defaults plus `options` (kept in
    compile_cache: compiled again when the source, options or the NVRTC library change)."""
    path = library_path()
    if path is None:
        raise NvrtcError("NVRTC is not installed: pip install nvidia-cuda-nvrtc-cu12")
    made = compile_cache.cached(f"{name}-{arch}.ptx",
                                lambda out: out.write_text(_compile(path, source, name, arch, options)),
                                source, name, arch, " ".join(options), str(path.resolve()), str(path.stat().st_size))
    return made.read_text()


def _compile(path: Path, source: str, name: str, arch: str, options: tuple[str, ...]) -> str:
    lib = ctypes.CDLL(str(path))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    prog = ctypes.c_void_p()

    def check(rc: int, what: str) -> None:
        if rc:
            raise NvrtcError(f"{what}: {lib.nvrtcGetErrorString(rc).decode()}")

    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None),
          "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        argv = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc:
            raise NvrtcError(f"NVRTC could not compile {name}.cu for {arch}:\n{log.value.decode(errors='replace')}")
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
