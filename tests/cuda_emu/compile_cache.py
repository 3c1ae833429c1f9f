"""Compiler outputs kept between test runs on this machine, as ccache keeps objects: each under a hash of
everything that decides it (the source text, with the checkout's own folder left out, the compiler's version, the
flags), so a changed input compiles again and a clone elsewhere reuses what another compiled. The emulator's
libraries (harness.build), NVRTC's PTX (nvrtc.compile_ptx) and nvcc's cubins (test_kernels.py) live here.
$PARALAB_EMU_CACHE moves it (default ~/.cache/paralab/cuda-emu)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

from lab import backend


def cache_dir() -> Path:
    path = Path(os.environ.get("PARALAB_EMU_CACHE") or Path.home() / ".cache" / "paralab" / "cuda-emu")
    path.mkdir(parents=True, exist_ok=True)
    return path


def key(*parts: str) -> str:
    """A hash of `parts`, the checkout's kernels folder written as <kernels> (kernel_source's #line directives
    name the real files; reports name a source by its file name only)."""
    text = "\0".join(parts).replace(str(backend.KERNEL_DIR), "<kernels>")
    return hashlib.sha256(text.encode()).hexdigest()


def cached(name: str, make: Callable[[Path], None], *parts: str) -> Path:
    """The file `name` made by `make(path)` from inputs `parts`: made once, then found (the name's suffix is
    kept; `make` writes a temporary path, moved into place whole)."""
    stem, dot, suffix = name.partition(".")
    out = cache_dir() / f"{stem}-{key(*parts)[:20]}{dot}{suffix}"
    if not out.exists():
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        make(tmp)
        os.replace(tmp, out)
    return out
