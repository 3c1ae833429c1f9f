"""Run kernels/*.cu unchanged on a CPU emulation of CUDA (test tooling; not part of the package).

`build(name)` compiles kernels/<name>.cu as C++17 with g++ against `cuda_emu.h` (fibers for CUDA
threads, CTAs that overlap in a seeded interleaving, a race detector between CTAs, real barriers,
warp shuffles and atomics, poisoned shared memory, software PTX conversions, IEEE binary32
without contraction or flush-to-zero, -fsanitize=alignment, counted grid-stride and block loops),
caching the library by a hash of everything that goes into it. `Launcher` has the call shape of
`lab.backend.launch_kernel`: the project's real launchers drive it on CPU tensors, with CuPy's
RawKernel argument rules (a Python int travels as int64, a numpy scalar as its own size, a
tensor as a pointer, None as a null pointer; each size is checked against the kernel's
parameter list). Every buffer a launch touches is copied into a guarded copy at the same
address alignment, with poisoned red zones before and after: a load or store that reaches one stops the launch
with its source line, and the zones are checked afterwards too, so an out-of-bounds read or write is an error
rather than silent corruption. Shared memory is checked for races between the threads of a CTA per barrier
interval and for reads of bytes the CTA never wrote. A library built with `branches=True` also counts, at every
`if`, the lanes of each warp that arrived and that took it (`Launcher.branch_counts`: warp divergence).

Launches run one at a time per process (`_LAUNCH_LOCK`: the static `__shared__` arrays are one per library), each
on fiber stacks its host thread owns (`_stacks`); libraries load under `_MODULE_LOCK`, so tests may launch from
several threads while other threads build.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

import numpy as np
import torch

from lab import backend

from . import RECORDS_ENV, compile_cache

HERE = Path(__file__).resolve().parent
HEADER = HERE / "cuda_emu.h"
KERNEL_DIR = HERE.parent.parent / "kernels"
# -fsanitize=thread only instruments: every load and store calls the header's __tsan_* hooks (the
# race detector and the switch points), and the library is linked without TSan's runtime. -O2 instead of
# -O1: 1.26x less CPU for the collective, block-scaled and table-codec kernel tests (test_kernels.py the
# same), with the same IEEE results (no contraction, no fast-math) and every planted bug still caught.
FLAGS = ("-std=c++17", "-O2", "-g1", "-fPIC", "-ffp-contract=off", "-fno-fast-math",
         "-fno-strict-aliasing", "-fno-threadsafe-statics", "-fsanitize=alignment", "-fsanitize=thread",
         "--param=tsan-instrument-func-entry-exit=0", "-fno-sanitize-recover=alignment", "-Wno-attributes")
LINK = ("-shared",)
REDZONE = 4096  # bytes of poison before and after every buffer
REDZONE_BYTE = 0xA5
SHARED_POISON = 0xFF  # NaN as float, 0xffffffff as u32: a shared read before its write shows
ALIGN = 256  # guarded copies keep the address modulo this (CUDA allocations are 256-aligned)

_ASM = re.compile(r'asm(?:\s+volatile)?\s*\(\s*"(cvt(?:\.\w+)+)\s+%0,\s*%1;"\s*:\s*"=\w"\s*\(\s*(\w+)\s*\)\s*:'
                  r'\s*"\w"\s*\(\s*([^;]*?)\s*\)\s*\)\s*;')


_SHARED = re.compile(r"__shared__\s+(\w+)\s+(\w+)\s*\[([^\]]+)\]\s*;")
# The step of a grid-stride or block loop: it advances by a team, a CTA or a grid.
_STRIDE = re.compile(r"\+=.*\b(t\.count|t\.size|blockDim|gridDim|step)\b")


class EmuError(RuntimeError):
    """A launch failed under the emulator (misaligned access, barrier misuse, out of bounds, ...)."""


def compiler() -> str | None:
    """The g++ the emulator builds with, or None."""
    return shutil.which(os.environ.get("CXX", "g++"))


def preprocess(source: str, *, branches: bool = False) -> str:
    """Map the inline PTX the kernels use to the header's software conversions, line for line (and with
    `branches`, count every `if`: `count_branches`)."""
    def sub(m: re.Match) -> str:
        op = m.group(1).replace(".", "_")
        return f"{m.group(2)} = emu_{op}({m.group(3)});"

    out = _ASM.sub(sub, source)
    out = _SHARED.sub(r"EMU_SHARED(\1, \2, \3);", out)
    out = count_loops(out)
    if branches:
        out = count_branches(out)
    left = re.findall(r"\basm\s*\(.*|__shared__.*", out)
    if left:
        raise EmuError(f"inline asm or shared memory the emulator does not map: {left[0][:80]}")
    assert out.count("\n") == source.count("\n")
    return out


def _for_header(text: str, open_paren: int) -> int:
    """Index of the parenthesis closing the one at open_paren."""
    depth = 0
    for i in range(open_paren, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise EmuError(f"unbalanced parentheses after: {text[open_paren:open_paren + 60]!r}")


def count_loops(source: str) -> str:
    """Wrap every grid-stride and block loop (`for (init; cond; i += <team, CTA or grid>)`) so the
    emulator counts, per kernel and line, the threads that entered it and those that went round
    again (`emu::loop_test`); line numbers are kept."""
    out, last = [], 0
    for m in re.finditer(r"\bfor\s*\(", source):
        if m.start() < last:
            continue
        close = _for_header(source, m.end() - 1)
        parts = source[m.end():close].split(";")
        if len(parts) != 3 or not _STRIDE.search(parts[2]):
            continue
        init, cond, step = parts
        out += [source[last:m.end()], f"{init}; emu::loop_test(__FILE__, __LINE__, ({cond.strip()})); "
                f"(void)emu::loop_step(__LINE__), {step.strip()})"]
        last = close + 1
    out.append(source[last:])
    return "".join(out)


def count_branches(source: str) -> str:
    """Wrap the condition of every `if` (not `#if`, not `if constexpr`) so the emulator counts, per warp, the
    lanes that arrived at it and those that took it (`emu::branch`); line numbers are kept."""
    out, last = [], 0
    for m in re.finditer(r"\bif\s*\(", source):
        line_start = source.rfind("\n", 0, m.start()) + 1
        if m.start() < last or source[line_start:m.start()].lstrip().startswith("#"):
            continue
        close = _for_header(source, m.end() - 1)
        out += [source[last:m.end()], f"emu::branch(__FILE__, __LINE__, (bool)({source[m.end():close]})))"]
        last = close + 1
    out.append(source[last:])
    return "".join(out)


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """subprocess.run, again on EFAULT: CPython starts the child with vfork, and a build thread's vfork can
    fail with "Bad address" while the test thread's emulated CTAs map and unmap their fiber stacks."""
    for attempt in range(3):
        try:
            return subprocess.run(cmd, **kw)
        except OSError as e:
            if e.errno != errno.EFAULT or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _extern_c(path: Path, cxx: str, include: Path | None = None) -> list[str]:
    """Names of the extern "C" functions of a preprocessed C++ file."""
    run = _run([cxx, "-std=c++17", "-E", "-P", *(["-include", str(include)] if include else []),
                          "-x", "c++", str(path)], capture_output=True, text=True)
    if run.returncode:
        raise EmuError(f"preprocessing {path.name} failed:\n{run.stderr[-4000:]}")
    return re.findall(r'extern\s+"C"\s+void\s+(\w+)\s*\(', run.stdout)


def _kernel_names(preprocessed: Path, include: Path, cxx: str) -> list[str]:
    """The kernels a .cu file defines: its extern "C" functions, less the header's own."""
    own = set(_extern_c(include, cxx))
    return [k for k in _extern_c(preprocessed, cxx, include) if k not in own]


def build(name: str, source: str | None = None, *, label: str | None = None, branches: bool = False) -> Path:
    """Compile kernels/<name>.cu (or `source`, its text with the shared header expanded, as
    `lab.backend.kernel_source` gives it) for the emulator, with every `if` counted when `branches`; path of the
    library."""
    cxx = compiler()
    if cxx is None:
        raise EmuError("the CUDA emulator needs g++ on the PATH")
    path = KERNEL_DIR / f"{name}.cu"
    text = backend.kernel_source(name) if source is None else source  # the shared header expanded
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    # the key leaves out where the checkout is: a clone elsewhere on this machine reuses the libraries
    key = compile_cache.key(text, HEADER.read_text(), Path(__file__).read_text(), " ".join(FLAGS + LINK), version, name,
                            "branches" if branches else "")
    lib = compile_cache.cache_dir() / f"{label or name}{'-branches' if branches else ''}-{key[:20]}.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    # One compile per library across processes (pytest-xdist workers prebuild the same set): the
    # second waits for the first's g++ and then finds the library.
    with open(lib.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists():
            return lib
        return _compile(name, text, cxx, lib, branches)


def _compile(name: str, text: str, cxx: str, lib: Path, branches: bool = False) -> Path:
    path = KERNEL_DIR / f"{name}.cu"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cu = tmp / f"{name}.cu"
        cu.write_text(preprocess(text, branches=branches))  # kernel_source's #line directives name the real files
        names = _kernel_names(cu, HEADER, cxx)
        if not names:
            raise EmuError(f"no extern \"C\" kernels found in {path.name}")
        main = tmp / f"{name}_emu.cpp"
        table = ",\n    ".join(f"EMU_KERNEL({k})" for k in names)
        main.write_text(f'#include "{HEADER}"\n#include "{cu}"\n'
                        f"std::vector<emu::Kernel>& emu::kernels() {{\n"
                        f"  static std::vector<emu::Kernel> k = {{\n    {table}}};\n  return k;\n}}\n")
        out = tmp / lib.name
        obj = tmp / f"{name}.o"
        run = _run([cxx, *FLAGS, "-c", "-o", str(obj), str(main)], capture_output=True, text=True)
        if run.returncode == 0:
            run = _run([cxx, *LINK, "-o", str(out), str(obj), "-ldl"], capture_output=True, text=True)
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
        self.path = lib
        self.lib = ctypes.CDLL(str(lib))
        L = self.lib
        L.emu_kernel_name.restype = ctypes.c_char_p
        L.emu_launch.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_int, ctypes.c_ubyte, ctypes.c_ulonglong, ctypes.c_uint, ctypes.c_uint,
                                 ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p,
                                 ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
        L.emu_loops_take.argtypes = [ctypes.POINTER(ctypes.c_long), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        L.emu_branches_take.argtypes = [ctypes.POINTER(ctypes.c_long), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.kernels: dict[str, Kernel] = {}
        for k in range(L.emu_kernel_count()):
            n = L.emu_kernel_params(k)
            self.kernels[L.emu_kernel_name(k).decode()] = Kernel(
                L.emu_kernel_name(k).decode(), k, [L.emu_kernel_param_size(k, j) for j in range(n)],
                [bool(L.emu_kernel_param_is_ptr(k, j)) for j in range(n)])

    def take_loops(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        """Counted loops since the last call: (kernel, file, line) -> (threads that entered, that went round again)."""
        cap = 4096
        if not hasattr(self, "_take"):  # reused: a fresh 1 MiB name buffer per launch showed in profiles
            self._take = ((ctypes.c_long * (3 * cap))(), ctypes.create_string_buffer(1 << 20))
        out, files = self._take
        k = self.lib.emu_loops_take(out, cap, files, len(files))
        names = files.value.decode().split("\n")
        got = {}
        for i in range(k):
            kernel, file = names[i].split("@", 1)
            got[(kernel, Path(file).name, int(out[3 * i]))] = (int(out[3 * i + 1]), int(out[3 * i + 2]))
        return got

    def take_branches(self) -> dict[tuple[str, str, int], tuple[int, int, int, int]]:
        """Counted branches since the last call: (kernel, file, line) -> (warp passes, passes where a lane took it,
        lanes that arrived, lanes that took it)."""
        cap = 1024
        out, names = (ctypes.c_long * (5 * cap))(), ctypes.create_string_buffer(1 << 18)
        k = self.lib.emu_branches_take(out, cap, names, len(names))
        keys = names.value.decode().split("\n")
        got = {}
        for i in range(k):
            kernel, file = keys[i].split("@", 1)
            got[(kernel, Path(file).name, int(out[5 * i]))] = tuple(int(v) for v in out[5 * i + 1:5 * i + 5])
        return got

    def source_line(self, offset: int) -> str:
        """file:line of a code offset in the library (addr2line), or the offset."""
        run = subprocess.run(["addr2line", "-e", str(self.path), hex(offset)], capture_output=True, text=True)
        where = run.stdout.strip()
        if run.returncode or not where or where.startswith("??"):
            return f"code offset {offset:#x}"
        file, _, line = where.partition(":")
        return f"{Path(file).name}:{line.split()[0]}"

    def explain(self, message: str) -> str:
        """An emulator message with its {pc:...} code offsets turned into source lines."""
        return re.sub(r"\{pc:([0-9a-f]+)\}", lambda m: f"at {self.source_line(int(m.group(1), 16))}", message)


_MODULES: dict[tuple[str, str | None, bool], Module] = {}
_MODULE_LOCK = threading.Lock()  # one load per library, whichever thread asks first
_LAUNCH_LOCK = threading.Lock()  # one launch at a time per process (the static __shared__ arrays)
_stacks = threading.local()  # per host thread: the fiber stacks its launches run on (an mmap'd arena, grown)
STACK = 256 * 1024  # bytes of stack per fiber (cuda_emu.h's emu::STACK)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _stack_arena(nbytes: int) -> tuple[int, int]:
    """This host thread's fiber stacks, at least nbytes (address, size): mapped without reserving swap, so only
    the pages the fibers touch cost memory, and kept for the thread's later launches."""
    have = getattr(_stacks, "arena", None)
    if have is None or have[1] < nbytes:
        if have is not None:
            _libc.munmap(have[0], have[1])
        prot, flags = 0x1 | 0x2, 0x02 | 0x20 | 0x4000  # read, write; private, anonymous, no swap reserved
        addr = _libc.mmap(None, nbytes, prot, flags, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise EmuError(f"cannot map {nbytes} bytes of fiber stacks: {os.strerror(ctypes.get_errno())}")
        _stacks.arena = have = (addr, nbytes)
    return have
LAUNCHED: set[str] = set()  # kernels of the unchanged sources launched in this process
# Counted loops of the unchanged sources over this process: (kernel, file, line) -> [entered, again].
LOOPS: dict[tuple[str, str, int], list[int]] = {}


def module(name: str, source: str | None = None, *, label: str | None = None, branches: bool = False) -> Module:
    """The emulated kernels/<name>.cu (or a variant source; with every `if` counted when `branches`), built and
    loaded once per process."""
    key = (name, source, branches)
    with _MODULE_LOCK:
        if key not in _MODULES:
            pending = None if branches else _PENDING.pop((name, source), None)
            _MODULES[key] = Module(pending.result() if pending is not None
                                   else build(name, source, label=label, branches=branches))
        return _MODULES[key]


# test name (a parametrized one's with its parameters) -> a function giving the (name, source, label)
# variants it builds, registered by its module at import: `prebuild_for` starts them when the test is selected
VARIANTS: dict[str, Callable[[], list[tuple[str, str | None, str | None]]]] = {}
_PENDING: dict[tuple[str, str | None], Future] = {}
_POOL: ThreadPoolExecutor | None = None


def prebuild(items: list[tuple[str, str | None, str | None]]) -> None:
    """Start building (name, source, label) libraries in the background, one g++ per CPU core, so a cold
    cache's compiles overlap each other and the emulation the tests run meanwhile; `module` waits for
    its own. Already cached libraries cost a hash each."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(1, len(os.sched_getaffinity(0))), thread_name_prefix="emu-build")
    for name, source, label in items:
        key = (name, source)
        if (*key, False) not in _MODULES and key not in _PENDING:
            _PENDING[key] = _POOL.submit(build, name, source, label=label)


def prebuild_for(selected: set[str]) -> None:
    """Prebuild every kernels/*.cu and the variants of the `selected` tests that registered some (a variant
    that cannot be made is left to its test, which reports it)."""
    items: list[tuple[str, str | None, str | None]] = [(p.stem, None, None) for p in sorted(KERNEL_DIR.glob("*.cu"))]
    for test, variants in VARIANTS.items():
        if test in selected:
            try:
                items += variants()
            except AssertionError:
                pass
    prebuild(items)


TEST_MAX_GRID = 3  # the emulated suite's cap on every launch plan's grid
TEST_MAX_CTA = 64  # and on the CTA of a team that is a whole CTA: a 4096-value block takes two passes

# Counted loops that go round once by construction, by their source text (and the kernels they
# apply to): the tails after the whole groups of a block (fewer than a group of elements, a team
# at least a group wide), the fills of shared tables whose size is the CTA's (256 entries, or 260
# with 4 padding), and the per-tensor decode's pass over its chunk (the plan makes the chunk
# exactly one pass of the CTA: lab/codecs/cuda.py _plan).
SINGLE_PASS_LOOPS = {
    (r"= rest \+ t\.lane; i < len;", r""): "the tail after the whole groups: fewer elements than the team",
    (r"= ngroups \* G \+ t\.lane; i < len;", r""): "the tail after the whole groups: fewer elements than the team",
    (r"int i = threadIdx\.x; i < (256|NBPAD); i \+= blockDim\.x", r""): "a shared table as large as the CTA",
    (r"g0 \+= DECODE_ITEMS \* t\.size", r"^decode_scale_"): "the per-tensor chunk is one pass of the CTA",
}


def single_pass(kernel: str, file: str, line: int) -> bool:
    """The counted loop of `kernel` at kernels/<file>:line is one of SINGLE_PASS_LOOPS."""
    text = (KERNEL_DIR / file).read_text().splitlines()[line - 1]
    return any(re.search(p, text) and re.search(k, kernel) for p, k in SINGLE_PASS_LOOPS)


def cap_grids(monkeypatch, cap: int = TEST_MAX_GRID, cta: int = TEST_MAX_CTA) -> None:
    """Cap the launch plans' grids, and whole-CTA teams at `cta` threads (test only), so the
    emulated tests' grid-stride and block loops go round more than once at the sizes they use."""
    from lab.codecs import cuda, cuda_block, cuda_hop

    for mod, name in ((cuda, "MAX_GRID"), (cuda_hop, "MAX_GRID"), (cuda_hop, "REDUCE_GRID"), (cuda_block, "MAX_GRID")):
        monkeypatch.setattr(mod, name, min(cap, getattr(mod, name)))
    monkeypatch.setattr(cuda, "MAX_CTA", min(cta, cuda.MAX_CTA))


def loops_once(before: dict[tuple[str, str, int], list[int]] | None = None,
               loops: dict[tuple[str, str, int], list[int]] | None = None) -> list[str]:
    """Counted loops of `loops` (default: this process's LOOPS) entered since `before` (a copy of LOOPS)
    that never went round twice and are not SINGLE_PASS_LOOPS, as 'kernel file:line'."""
    before = before or {}
    out = []
    for key, (entered, again) in sorted((LOOPS if loops is None else loops).items()):
        e0, a0 = before.get(key, (0, 0))
        if entered > e0 and again == a0 and not single_pass(*key):
            out.append(f"{key[0]} {key[1]}:{key[2]}")
    return out


# ------------------------------------------------------------------ records across test processes

_DONE: list[str] = []  # the emulated tests this process has finished


def report(nodeid: str) -> None:
    """After emulated test `nodeid`: write this process's LAUNCHED, LOOPS and finished tests to
    $PARALAB_EMU_RECORDS/<pid>.json (whole, replaced atomically), so a check in another pytest-xdist
    worker sees what every worker launched."""
    root = os.environ.get(RECORDS_ENV)
    _DONE.append(nodeid)
    if not root:
        return
    out = Path(root) / f"{os.getpid()}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"launched": sorted(LAUNCHED), "done": _DONE,
                               "loops": [[*k, *v] for k, v in LOOPS.items()]}))
    tmp.replace(out)


def gathered(expected: set[str], timeout: float = 1200.0) -> tuple[set[str], dict[tuple[str, str, int], list[int]]]:
    """Every process's LAUNCHED and LOOPS, merged, once the emulated tests `expected` (node ids) have all
    reported; this process's own when no records directory is set. Fails naming the tests that never did."""
    root = os.environ.get(RECORDS_ENV)
    if not root:
        return set(LAUNCHED), {k: list(v) for k, v in LOOPS.items()}
    end = time.monotonic() + timeout
    while True:
        launched: set[str] = set()
        loops: dict[tuple[str, str, int], list[int]] = {}
        done: set[str] = set()
        for f in Path(root).glob("*.json"):
            try:
                rec = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            launched |= set(rec["launched"])
            done |= set(rec["done"])
            for kernel, file, line, entered, again in rec["loops"]:
                tally = loops.setdefault((kernel, file, line), [0, 0])
                tally[0] += entered
                tally[1] += again
        missing = expected - done
        if not missing:
            return launched, loops
        if time.monotonic() > end:
            raise AssertionError(f"{len(missing)} emulated tests never reported to {root} in {timeout:.0f} s, "
                                 f"e.g. {sorted(missing)[:3]} (a crashed worker?)")
        time.sleep(0.5)


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
    order, 2 = blocks in reverse order, 8 = a CTA always runs its first runnable thread in that order (lowest
    first, with 1 highest first) instead of round robin, 4 = threads as ucontext fibers (what non-x86-64 machines use);
    `branches` builds the modules with every `if` counted and sums the counts in `branch_counts`. Up to
    `window` CTAs run at once; `seed` fixes the interleaving (which resident CTA runs next; a global access switches CTA with probability
    1/switch_every, an atomic with 1/2). `sources` replaces a module's text (mutation tests).
    `launches` lists every launch (module, kernel, grid, threads)."""

    flags: int = 0
    expect_launches: bool = True
    seed: int = 0
    window: int = 4
    switch_every: int = 32
    sources: dict[str, str] = field(default_factory=dict)
    launches: list[tuple[str, str, int, int]] = field(default_factory=list)
    branches: bool = False
    # (kernel, file, line) -> [warp passes, passes where a lane took the branch, lanes arrived, lanes that took it]
    branch_counts: dict[tuple[str, str, int], list[int]] = field(default_factory=dict)

    def __call__(self, module_name: str, kernel: str, grid: int, threads: int, args: tuple,
                 device: torch.device | None = None) -> None:
        src = self.sources.get(module_name)
        mod = module(module_name, src, label=None if src is None else f"{module_name}-variant", branches=self.branches)
        if kernel not in mod.kernels:
            raise EmuError(f"kernels/{module_name}.cu has no kernel {kernel!r}")
        k = mod.kernels[kernel]
        if len(args) != len(k.sizes):
            raise TypeError(f"{kernel} takes {len(k.sizes)} arguments, got {len(args)}")
        if not (isinstance(grid, int) and isinstance(threads, int) and grid >= 1 and 1 <= threads <= 1024):
            raise EmuError(f"{kernel}: launch of grid {grid!r} x {threads!r} threads; allowed: grid >= 1, "
                           "1..1024 threads")
        guarded: dict[int, _Guarded] = {}
        params: dict[int, int] = {}
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
                        params[s.data_ptr()] = j
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
        spans = []
        for base, g in guarded.items():
            lo = g.address(base)
            spans += [lo, lo + g.nbytes, params[base]]
        table = (ctypes.c_ulonglong * max(1, len(spans)))(*spans)
        if self.switch_every < 1 or self.switch_every & (self.switch_every - 1):
            raise ValueError(f"switch_every={self.switch_every!r}; allowed: a power of two (1 << 32: never)")
        mask = min(self.switch_every - 1, 0xFFFFFFFF)
        flags = self.flags | (16 if self.branches else 0)
        stacks, stack_bytes = _stack_arena(min(self.window, grid) * threads * STACK)
        with _LAUNCH_LOCK:
            rc = mod.lib.emu_launch(k.index, grid, threads, argv, flags, SHARED_POISON, self.seed, self.window,
                                    mask, table, len(spans) // 3, REDZONE, stacks, stack_bytes, err, len(err))
            loops = mod.take_loops()
            branches = mod.take_branches() if self.branches else {}
            self.launches.append((module_name, kernel, grid, threads))
            if src is None:
                LAUNCHED.add(kernel)
                for key, (entered, again) in loops.items():
                    tally = LOOPS.setdefault(key, [0, 0])
                    tally[0] += entered
                    tally[1] += again
        for key, counts in branches.items():
            tally = self.branch_counts.setdefault(key, [0, 0, 0, 0])
            for i, c in enumerate(counts):
                tally[i] += c
        what = dict(names)
        for base, g in guarded.items():
            g.check_and_copy_back(f"the buffer of {what[base]}")
        if rc:
            raise EmuError(mod.explain(err.value.decode()))
