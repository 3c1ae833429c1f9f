"""What a test run's first process starts in the background (tests/conftest.py), so that it overlaps the workers'
start instead of delaying it: `python tests/run_caches.py RESULT [INDEX MODULE...]`.

1. The bytecode (__pycache__) of the lab, the dashboard, the benchmarks and the test helpers that rank and CLI
   processes import, written as Python writes it by default. This project's machines set PYTHONDONTWRITEBYTECODE,
   and a fresh clone has none: every fresh process of the run (CLI runs, launch servers, torchrun ranks, notebook
   kernels, the Streamlit server) compiled the lab's sources it imported, again.
2. torch.compile's CPU vector-ISA probe, once for the run instead of in each of its ~25 compiling processes:
   inductor builds a test library per ISA the CPU's flags name and dlopens it in a child Python, ~1.3 core-seconds
   a process here. RESULT gets "1" when every named ISA passed (the run's processes then get
   TORCHINDUCTOR_VEC_ISA_OK=1, which gives them the same ISA list without probing: `take_isa_probe`), else "0"
   (each process probes as before). RESULT is written last, whatever happened.
3. First of all, its share of pytest's assertion rewriting of the run's test modules (tests/rewrite_share.py):
   the last of the collectors' shares, INDEX, of the MODULEs.
"""
from __future__ import annotations

import compileall
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the test helpers other processes import (test modules themselves are pytest's, rewritten: conftest)
_HELPER = re.compile(r"(?!test_|conftest).*\.py")

ISA_FILE_ENV = "PARALAB_TEST_VEC_ISA_FILE"


def bytecode_sources() -> list[Path]:
    """What the run's processes import from the checkout: the lab, the dashboard, the benchmarks, the emulator and the
    test helpers."""
    sources = [p for folder in ("lab", "app", "bench", "tests/cuda_emu") for p in sorted((ROOT / folder).rglob("*.py"))]
    return sources + [p for p in sorted((ROOT / "tests").glob("*.py")) if _HELPER.fullmatch(p.name)]


def write_bytecode() -> None:
    """Compile `bytecode_sources` (an up-to-date .pyc is left as it is)."""
    for path in bytecode_sources():
        compileall.compile_file(path, quiet=1)


def every_named_isa_passes() -> bool:
    """Whether every vector ISA the CPU's flags name passes inductor's probe (only then may the probe be skipped:
    a process without the shortcut, probing, finds the same list; tests/test_launch.py checks it)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    from torch._inductor import cpu_vec_isa

    flags = cpu_vec_isa.x86_isa_checker()
    named = [str(isa) for isa in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(isa).split())]
    return bool(named) and [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()] == named


def take_isa_probe(timeout_s: float = 60.0) -> None:
    """In a process of the run, before its first test: wait for the background probe's answer (it is started
    with the run and is usually done by then) and, if every ISA passed, give this process and the ones it starts
    TORCHINDUCTOR_VEC_ISA_OK=1."""
    path = os.environ.get(ISA_FILE_ENV)
    if not path or "TORCHINDUCTOR_VEC_ISA_OK" in os.environ:
        return
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        passed = Path(path).read_text().strip() == "1"
    except OSError:
        return
    if passed:
        os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
        config = sys.modules.get("torch._inductor.config")  # read the variable when it was imported
        if config is not None:
            config.cpp.vec_isa_ok = True


def main(result: str, share: list[str]) -> None:
    passed = False
    try:
        if share:  # (3) first: the collections need it at once
            from rewrite_share import rewrite_share

            rewrite_share([Path(p) for p in share[1:]], int(share[0]), int(share[0]) + 1)
        write_bytecode()
        passed = "TORCHINDUCTOR_VEC_ISA_OK" not in os.environ and every_named_isa_passes()
    finally:
        tmp = f"{result}.tmp"
        Path(tmp).write_text("1" if passed else "0")
        os.replace(tmp, result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
