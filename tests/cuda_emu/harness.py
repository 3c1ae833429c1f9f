"""Run kernels/*.cu unchanged on a CPU emulation of CUDA (test tooling; not part of the package).

`build(name)` compiles kernels/<name>.cu as C++17 with g++ against `cuda_emu.h` (fibers for CUDA
threads, real barriers and warp shuffles, poisoned shared memory, software PTX conversions,
IEEE binary32 without contraction or flush-to-zero, -fsanitize=alignment), caching the library
by a hash of everything that goes into it. `Launcher` has the call shape of
`lab.backend.launch_kernel`: the project's real launchers drive it on CPU tensors, with CuPy's
RawKernel argument rules (a Python int travels as int64, a numpy scalar as its own size, a
tensor as a pointer, None as a null pointer; each size is checked against the kernel's
parameter list). Every buffer a launch touches is copied into a guarded copy at the same
address alignment, with poisoned red zones before and after that are checked afterwards, so an
out-of-bounds write is an error rather than silent corruption.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lab import backend

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_emu.h"
KERNEL_DIR = HERE.parent.parent / "kernels"
FLAGS = ("-std=c++17", "-O1", "-g0", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math",
         "-fno-strict-aliasing", "-fsanitize=alignment",
         "-fno-sanitize-recover=alignment", "-Wno-attributes")
REDZONE = 4096  # bytes of poison before and after every buffer
REDZONE_BYTE = 0xA5
SHARED_POISON = 0xFF  # NaN as float, 0xffffffff as u32: a shared read before its write shows
ALIGN = 256  # guarded copies keep the address modulo this (CUDA allocations are 256-aligned)

_ASM = re.compile(r'asm(?:\s+volatile)?\s*\(\s*"(cvt(?:\.\w+)+)\s+%0,\s*%1;"\s*:\s*"=\w"\s*\(\s*(\w+)\s*\)\s*:'
                  r'\s*"\w"\s*\(\s*([^;]*?)\s*\)\s*\)\s*;')


_SHARED = re.compile(r"__shared__\s+(\w+)\s+(\w+)\s*\[([^\]]+)\]\s*;")


class EmuError(RuntimeError):
    """A launch failed under the emulator (misaligned access, barrier misuse, out of bounds, ...)."""


def compiler() -> str | None:
    """The g++ the emulator builds with, or None."""
    return shutil.which(os.environ.get("CXX", "g++"))


def preprocess(source: str) -> str:
    """Map the inline PTX the kernels use to the header's software conversions, line for line."""
    def sub(m: re.Match) -> str:
        op = m.group(1).replace(".", "_")
        return f"{m.group(2)} = emu_{op}({m.group(3)});"

    out = _ASM.sub(sub, source)
    out = _SHARED.sub(r"EMU_SHARED(\1, \2, \3);", out)
    left = re.findall(r"\basm\s*\(.*|__shared__.*", out)
    if left:
        raise EmuError(f"inline asm or shared memory the emulator does not map: {left[0][:80]}")
    assert out.count("\n") == source.count("\n")
    return out


def _cache_dir() -> Path:
    root = os.environ.get("PARALAB_EMU_CACHE") or Path.home() / ".cache" / "paralab" / "cuda-emu"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _extern_c(path: Path, cxx: str, include: Path | None = None) -> list[str]:
    """Names of the extern "C" functions of a preprocessed C++ file."""
    run = subprocess.run([cxx, "-std=c++17", "-E", "-P", *(["-include", str(include)] if include else []),
                          "-x", "c++", str(path)], capture_output=True, text=True)
    if run.returncode:
        raise EmuError(f"preprocessing {path.name} failed:\n{run.stderr[-4000:]}")
    return re.findall(r'extern\s+"C"\s+void\s+(\w+)\s*\(', run.stdout)


def _kernel_names(preprocessed: Path, include: Path, cxx: str) -> list[str]:
    """The kernels a .cu file defines: its extern "C" functions, less the header's own."""
    own = set(_extern_c(include, cxx))
    return [k for k in _extern_c(preprocessed, cxx, include) if k not in own]


def build(name: str, source: str | None = None, *, label: str | None = None) -> Path:
    """Compile kernels/<name>.cu (or `source`, its text with the shared header expanded, as
    `lab.backend.kernel_source` gives it) for the emulator; path of the library."""
    cxx = compiler()
    if cxx is None:
        raise EmuError("the CUDA emulator needs g++ on the PATH")
    path = KERNEL_DIR / f"{name}.cu"
    text = backend.kernel_source(name) if source is None else source  # the shared header expanded
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([text, HEADER.read_text(), " ".join(FLAGS), version, name]).encode()).hexdigest()
    lib = _cache_dir() / f"{label or name}-{key[:20]}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cu = tmp / f"{name}.cu"
        cu.write_text(preprocess(text))  # kernel_source's #line directives name the real files
        names = _kernel_names(cu, HEADER, cxx)
        if not names:
            raise EmuError(f"no extern \"C\" kernels found in {path.name}")
        main = tmp / f"{name}_emu.cpp"
        table = ",\n    ".join(f"EMU_KERNEL({k})" for k in names)
        main.write_text(f'#include "{HEADER}"\n#include "{cu}"\n'
                        f"std::vector<emu::Kernel>& emu::kernels() {{\n"
                        f"  static std::vector<emu::Kernel> k = {{\n    {table}}};\n  return k;\n}}\n")
        out = tmp / lib.name
        run = subprocess.run([cxx, *FLAGS, "-o", str(out), str(main)], capture_output=True, text=True)
        if run.returncode:
            raise EmuError(f"g++ could not build {path.name} for the emulator:\n{run.stderr[-6000:]}")
        os.replace(out, lib)  # atomic: a concurrent build never sees half a library
    return lib


@dataclass
class Kernel:
    name: str
    index: int
    sizes: list[int]
    is_ptr: list[bool]


class Module:
    """A compiled kernels/<name>.cu: its kernels and their parameter lists."""

    def __init__(self, lib: Path) -> None:
        self.lib = ctypes.CDLL(str(lib))
        L = self.lib
        L.emu_kernel_name.restype = ctypes.c_char_p
        L.emu_shared_bytes.restype = ctypes.c_long
        L.emu_launch.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_int, ctypes.c_ubyte, ctypes.c_char_p, ctypes.c_int]
        self.kernels: dict[str, Kernel] = {}
        for k in range(L.emu_kernel_count()):
            n = L.emu_kernel_params(k)
            self.kernels[L.emu_kernel_name(k).decode()] = Kernel(
                L.emu_kernel_name(k).decode(), k, [L.emu_kernel_param_size(k, j) for j in range(n)],
                [bool(L.emu_kernel_param_is_ptr(k, j)) for j in range(n)])


_MODULES: dict[tuple[str, str | None], Module] = {}
LAUNCHED: set[str] = set()  # kernels of the unchanged sources launched in this process


def module(name: str, source: str | None = None, *, label: str | None = None) -> Module:
    """The emulated kernels/<name>.cu (or a variant source), built and loaded once per process."""
    key = (name, source)
    if key not in _MODULES:
        _MODULES[key] = Module(build(name, source, label=label))
    return _MODULES[key]


# ------------------------------------------------------------------ arguments (CuPy's rules)

def _scalar_bytes(value) -> bytes:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"a bool kernel argument is ambiguous: {value!r}")
    if isinstance(value, np.generic):
        return value.tobytes()
    if isinstance(value, int):
        return np.int64(value).tobytes()  # CuPy passes a Python int as int64
    if isinstance(value, float):
        return np.float64(value).tobytes()
    raise TypeError(f"kernel argument of type {type(value).__name__}; allowed: torch.Tensor, None, "
                    "numpy scalars, int, float")


@dataclass
class _Guarded:
    """A copy of one storage inside poisoned red zones, at the original address modulo ALIGN."""

    storage: torch.UntypedStorage
    base: int
    nbytes: int
    buf: np.ndarray = field(init=False)
    start: int = field(init=False)

    def __post_init__(self) -> None:
        self.buf = np.full(self.nbytes + 2 * REDZONE + 2 * ALIGN, REDZONE_BYTE, dtype=np.uint8)
        addr = self.buf.ctypes.data
        start = REDZONE + (-(addr + REDZONE) % ALIGN) + self.base % ALIGN
        self.start = start
        if self.nbytes:
            src = np.ctypeslib.as_array((ctypes.c_uint8 * self.nbytes).from_address(self.base))
            self.buf[start:start + self.nbytes] = src

    def address(self, ptr: int) -> int:
        return self.buf.ctypes.data + self.start + (ptr - self.base)

    def check_and_copy_back(self, what: str) -> None:
        lo = self.buf[:self.start]
        hi = self.buf[self.start + self.nbytes:]
        for zone, side in ((lo, "before"), (hi, "after")):
            bad = np.nonzero(zone != REDZONE_BYTE)[0]
            if bad.size:
                off = (bad[-1] - zone.size) if side == "before" else bad[0]
                raise EmuError(f"out-of-bounds write {side} {what} ({self.nbytes} bytes): "
                               f"{bad.size} red-zone bytes changed, nearest at offset {int(off):+d} from its "
                               f"{'start' if side == 'before' else 'end'}")
        if self.nbytes:
            dst = np.ctypeslib.as_array((ctypes.c_uint8 * self.nbytes).from_address(self.base))
            dst[:] = self.buf[self.start:self.start + self.nbytes]


@dataclass
class Launcher:
    """`lab.backend.launch_kernel` on the emulator. flags: 1 = threads of a block in reverse
    order, 2 = blocks in reverse order. `sources` replaces a module's text (mutation tests)."""

    flags: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    launches: list[tuple[str, str, int, int]] = field(default_factory=list)

    def __call__(self, module_name: str, kernel: str, grid: int, threads: int, args: tuple,
                 device: torch.device | None = None) -> None:
        src = self.sources.get(module_name)
        mod = module(module_name, src, label=None if src is None else f"{module_name}-variant")
        if kernel not in mod.kernels:
            raise EmuError(f"kernels/{module_name}.cu has no kernel {kernel!r}")
        k = mod.kernels[kernel]
        if len(args) != len(k.sizes):
            raise TypeError(f"{kernel} takes {len(k.sizes)} arguments, got {len(args)}")
        if not (isinstance(grid, int) and isinstance(threads, int) and grid >= 1 and 1 <= threads <= 1024):
            raise EmuError(f"{kernel}: launch of grid {grid!r} x {threads!r} threads; allowed: grid >= 1, "
                           "1..1024 threads")
        guarded: dict[int, _Guarded] = {}
        holders, names = [], []
        for j, (a, size, is_ptr) in enumerate(zip(args, k.sizes, k.is_ptr)):
            if isinstance(a, torch.Tensor) or a is None:
                if not is_ptr:
                    raise TypeError(f"{kernel} parameter {j} is a {size}-byte value, got a pointer")
                if a is None:
                    value = 0
                else:
                    if a.device.type != "cpu":
                        raise EmuError(f"{kernel} parameter {j}: the emulator runs on CPU tensors, got {a.device}")
                    s = a.untyped_storage()
                    if s.data_ptr() not in guarded:
                        guarded[s.data_ptr()] = _Guarded(s, s.data_ptr(), s.nbytes())
                        names.append((s.data_ptr(), f"parameter {j} of {kernel}"))
                    value = guarded[s.data_ptr()].address(a.data_ptr())
                raw = np.uint64(value).tobytes()
            else:
                if is_ptr:
                    raise TypeError(f"{kernel} parameter {j} is a pointer, got {type(a).__name__} {a!r}")
                raw = _scalar_bytes(a)
            if len(raw) != size:
                raise TypeError(f"{kernel} parameter {j} has {size} bytes, the argument {type(a).__name__} "
                                f"{a!r} {len(raw)} (CuPy passes a Python int as int64)")
            holders.append(ctypes.create_string_buffer(raw, len(raw)))
        argv = (ctypes.c_void_p * len(holders))(*[ctypes.cast(h, ctypes.c_void_p) for h in holders])
        err = ctypes.create_string_buffer(1024)
        rc = mod.lib.emu_launch(k.index, grid, threads, argv, self.flags, SHARED_POISON, err, len(err))
        self.launches.append((module_name, kernel, grid, threads))
        if src is None:
            LAUNCHED.add(kernel)
        what = dict(names)
        for base, g in guarded.items():
            g.check_and_copy_back(f"the buffer of {what[base]}")
        if rc:
            raise EmuError(err.value.decode())
