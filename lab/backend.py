"""Device choice, timers and CUDA kernel loading (docs/design.md "Measuring").

One array type, `torch.Tensor`; CuPy is only the launcher for `kernels/*.cu`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from lab.packaged import shipped

# The progress callback every long experiment takes: (fraction done in [0, 1], message).
Progress = Callable[[float, str], None]
RowSink = Callable[[dict], None]  # a finished result row, handed on as soon as it is finished (a stop keeps it)

KERNEL_DIR = shipped("kernels")  # kernels/*.cu and their header: package data of `lab` (lab.packaged)


@functools.cache
def cupy_available() -> bool:
    """True when CuPy imports and sees a CUDA device."""
    try:
        import cupy  # noqa: F401
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


@functools.cache
def gpu_available() -> bool:
    """CUDA path usable: torch sees a GPU and CuPy can launch kernels on it."""
    return torch.cuda.is_available() and cupy_available()


def default_device() -> torch.device:
    """CUDA when torch sees a GPU and CuPy is importable, else CPU."""
    return torch.device("cuda") if gpu_available() else torch.device("cpu")


def device_name(device: torch.device | str | None = None) -> str:
    """Human-readable name: the GPU's marketing name or the CPU model."""
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    n = torch.get_num_threads()
    return f"CPU ({name}, {n} thread{'' if n == 1 else 's'})"


def device_slug(device: torch.device | str | None = None) -> str:
    """Short file-name-safe device tag, e.g. 'cpu' or 'nvidia-h100-80gb-hbm3'."""
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cpu":
        return "cpu"
    return "".join(c if c.isalnum() else "-" for c in device_name(device).lower()).strip("-")


# module -> the distributions that install it (CuPy's wheels are named per CUDA version)
_DISTRIBUTIONS = {"cupy": ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"), "bitsandbytes": ("bitsandbytes",),
                  "numpy": ("numpy",)}


def versions() -> dict[str, str | None]:
    """Versions of the libraries a measurement depends on (None: not installed). A module not imported yet is not
    imported for this: its distribution's metadata says the version (importing bitsandbytes to read it cost ~1
    core-second of every benchmark command)."""
    import importlib.metadata
    import sys

    out: dict[str, str | None] = {"torch": torch.__version__, "python": platform.python_version()}
    for mod, dists in _DISTRIBUTIONS.items():
        out[mod] = getattr(sys.modules.get(mod), "__version__", None)
        if out[mod] is not None:
            continue
        for dist in dists:
            try:
                out[mod] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                pass
    out["cuda"] = torch.version.cuda
    out.update(vector_isa())
    return out


def vector_isa() -> dict[str, str]:
    """The CPU vector instruction set a measurement ran with: `vector_isa`, what ATen's kernels dispatch to
    (torch.backends.cpu.get_cpu_capability(): 'AVX512', 'AVX2', 'DEFAULT' for NEON/SVE-less or scalar builds...),
    and `inductor_vec_isa`, what torch.compile's C++ passes were built for, where this process has loaded Inductor.
    Both honour the environment variable ATEN_CPU_CAPABILITY (set it to 'avx2' to measure AVX2 on an AVX-512
    machine); loading Inductor for this is avoided (it costs seconds)."""
    import sys

    out = {"vector_isa": torch.backends.cpu.get_cpu_capability()}
    if "torch._inductor.cpu_vec_isa" in sys.modules:
        try:
            isa = sys.modules["torch._inductor.cpu_vec_isa"].pick_vec_isa()
            out["inductor_vec_isa"] = str(isa) if isa else "none (scalar C++)"
        except Exception:  # noqa: BLE001  no C++ compiler: Inductor compiles nothing, so it used no ISA
            pass
    return out


@dataclass
class Timing:
    """Median and spread of repeated runs, seconds."""

    median: float
    min: float
    max: float
    repeats: int


def time_fn(fn: Callable[[], Any], device: torch.device | str = "cpu", *, warmup: int = 2,
            repeats: int = 7) -> Timing:
    """Time `fn` after `warmup` calls: CUDA events on GPU, perf_counter on CPU; median of `repeats`."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    times: list[float] = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return Timing(statistics.median(times), min(times), max(times), repeats)


_INCLUDE = re.compile(r'^#include "([\w.]+)"[ \t]*$', re.M)


def kernel_source(name: str) -> str:
    """Text of `kernels/<name>.cu` with its `#include "x.cuh"` of kernels/ expanded in place.

    NVRTC is handed one string, so it would need an include path for the shared header, and
    CuPy's compile cache keys on that string alone: expanding here keeps both right. `#line`
    directives keep compiler messages pointing at the real files and lines.
    """
    path = KERNEL_DIR / f"{name}.cu"
    if not path.exists():
        known = sorted(p.stem for p in KERNEL_DIR.glob("*.cu"))
        raise FileNotFoundError(f"no kernel source {path}; known kernels: {known}")
    text = path.read_text()
    out, last = [f'#line 1 "{path}"\n'], 0
    for m in _INCLUDE.finditer(text):
        header = KERNEL_DIR / m.group(1)
        if not header.exists():
            raise FileNotFoundError(f"{path.name} includes {m.group(1)}, which is not in {KERNEL_DIR}")
        line = text.count("\n", 0, m.end()) + 2
        out += [text[last:m.start()], f'#line 1 "{header}"\n', header.read_text(), f'\n#line {line} "{path}"']
        last = m.end()
    out.append(text[last:])
    return "".join(out)


# IEEE float32 as the CPU reference computes it: subnormals kept (not flushed), no a*b+c contracted
# into one rounding, correctly rounded division and square root. The kernels are bit-exact against
# the CPU path only under these; the emulator (g++, x86-64 SSE) behaves this way too.
NVRTC_OPTIONS = ("--std=c++17", "--ftz=false", "--fmad=false", "--prec-div=true", "--prec-sqrt=true")


@functools.cache
def load_kernels(name: str, options: tuple[str, ...] = NVRTC_OPTIONS) -> Any:
    """Compile `kernels/<name>.cu` with NVRTC (NVRTC_OPTIONS) and load it through CuPy, cached per process.

    Not `cupy.RawModule(code=...)`: CuPy appends `-ftz=true` to every program it compiles, NVRTC
    honours the last occurrence, and flushed subnormals break the codecs' small scales (an E8M0
    scale of 2^-127, absmax below 2^-126). CuPy's `compile_using_nvrtc` passes the options as given.
    """
    if not cupy_available():
        raise RuntimeError("CUDA kernels need CuPy and a GPU; install paralab[cuda12] or paralab[cuda13]")
    import cupy
    from cupy.cuda import compiler

    compiled = compiler.compile_using_nvrtc(kernel_source(name), options, filename=f"{name}.cu")
    image = compiled[0] if isinstance(compiled, tuple) else compiled  # (image, name map) in CuPy >= 13
    if isinstance(image, str):
        image = image.encode()
    kind = "cubin" if image[:4] == b"\x7fELF" else "ptx"
    folder = Path(tempfile.gettempdir()) / f"paralab-kernels-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{hashlib.sha256(image).hexdigest()[:20]}.{kind}"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(image)
        tmp.replace(path)
    return cupy.RawModule(path=str(path))


# Where kernels/*.cu run: "cuda". The tests' CUDA emulator (tests/cuda_emu) sets "cpu" and swaps
# `launch_kernel` for its own launcher, so the real launchers drive it on CPU tensors.
KERNEL_DEVICE_TYPE = "cuda"


def kernels_available() -> bool:
    """The kernels can run: a GPU with CuPy, or the tests' emulator."""
    return KERNEL_DEVICE_TYPE != "cuda" or gpu_available()


def launch_kernel(module: str, kernel: str, grid: int, threads: int, args: tuple,
                  device: torch.device) -> None:
    """Launch `kernel` of kernels/<module>.cu on torch's current stream of `device` (CuPy).

    args: tensors (passed as their device pointers), None (a null pointer) and numpy scalars
    (passed at their own size, as CuPy's RawKernel does).
    """
    import cupy

    index = device.index if device.index is not None else torch.cuda.current_device()
    fn = _kernel_function(module, kernel, index)
    packed = tuple(np_pointer(a) if a is None or isinstance(a, torch.Tensor) else a for a in args)
    with torch.cuda.device(index), cupy.cuda.Device(index):
        with launch_stream():
            fn((grid,), (threads,), packed)


@functools.cache
def _kernel_function(module: str, kernel: str, device_index: int) -> Any:
    import cupy

    with cupy.cuda.Device(device_index):
        return load_kernels(module).get_function(kernel)


def np_pointer(t: torch.Tensor | None) -> Any:
    """A tensor's device address as the uint64 a kernel's pointer parameter takes (0 for None)."""
    import numpy as np

    return np.uint64(0 if t is None else t.data_ptr())


def cupy_view(t: torch.Tensor) -> Any:
    """Zero-copy CuPy view of a CUDA tensor (DLPack)."""
    import cupy

    return cupy.from_dlpack(t)


class _StreamHandle:
    """A raw CUDA stream handle in the CUDA stream protocol (`__cuda_stream__` -> (version, handle))."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def launch_stream() -> Any:
    """The CuPy stream matching torch's current CUDA stream (`Stream.from_external` from CuPy 14,
    where `ExternalStream` is deprecated)."""
    import cupy

    handle = torch.cuda.current_stream().cuda_stream
    if hasattr(cupy.cuda.Stream, "from_external"):
        return cupy.cuda.Stream.from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


def compile_enabled() -> bool:
    """Whether the CPU fast paths may use torch.compile (set PARALAB_COMPILE=0 to turn off)."""
    return os.environ.get("PARALAB_COMPILE", "1") != "0"
