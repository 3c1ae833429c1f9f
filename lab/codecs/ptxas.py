"""What ptxas gives each kernel of kernels/*.cu without a GPU: registers per thread, spill stores and loads,
static shared memory, local memory (the stack frame) and constant memory, from `nvcc --resource-usage`.

The source is compiled as the lab loads it on a GPU (lab.backend.kernel_source with NVRTC's options: no FMA
contraction, no flush-to-zero, IEEE division and square root), for one real architecture (sm_80, sm_90, ...)."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import backend

# nvcc spellings of lab.backend.NVRTC_OPTIONS
NVCC_OPTIONS = ("-std=c++17", "-ftz=false", "-fmad=false", "-prec-div=true", "-prec-sqrt=true")
ARCHS = ("sm_80", "sm_90", "sm_100")  # A100, H100/H200, B200

_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")


def nvcc() -> str | None:
    """The nvcc on the PATH, or None."""
    return shutil.which("nvcc")


def nvcc_version() -> str:
    """nvcc's release line, e.g. 'Cuda compilation tools, release 13.0, V13.0.88'."""
    out = subprocess.run([nvcc() or "nvcc", "--version"], capture_output=True, text=True).stdout
    return next((line for line in out.splitlines() if "release" in line), out.strip())


def archs() -> tuple[str, ...]:
    """The architectures of ARCHS that the installed nvcc builds."""
    out = subprocess.run([nvcc() or "nvcc", "--list-gpu-code"], capture_output=True, text=True).stdout.split()
    return tuple(a for a in ARCHS if a in out)


def build(name: str, arch: str) -> tuple[str, bytes, str]:
    """(ptxas's report, the cubin, the PTX) of kernels/<name>.cu built for `arch` (`nvcc --resource-usage
    --keep`: the report is nvcc's stdout and stderr, the PTX the intermediate file nvcc keeps)."""
    if nvcc() is None:
        raise RuntimeError("nvcc is not on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / f"{name}.cu"
        cu.write_text(backend.kernel_source(name))
        cubin = cu.with_suffix(".cubin")
        cmd = [nvcc(), *NVCC_OPTIONS, "-cubin", f"-arch={arch}", "--resource-usage", "--keep", "--keep-dir", tmp,
               "-o", str(cubin), str(cu)]
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if run.returncode:
            raise RuntimeError(f"nvcc could not build {name}.cu for {arch}:\n{run.stderr[-3000:]}")
        ptx = next(Path(tmp).glob("*.ptx")).read_text()
        return run.stdout + run.stderr, cubin.read_bytes(), ptx


def ptxas_text(name: str, arch: str) -> str:
    """ptxas's report (stderr of `nvcc --resource-usage`) for kernels/<name>.cu on `arch`."""
    return build(name, arch)[0]


def parse(text: str) -> dict[str, dict[str, int]]:
    """ptxas's report as {kernel: {registers, spill_stores, spill_loads, shared_bytes, local_bytes,
    constant_bytes, barriers}} (bytes per thread for local, per CTA for shared)."""
    out: dict[str, dict[str, int]] = {}
    kernel = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            kernel = m.group(1)
            out[kernel] = {}
        elif kernel and (m := _FRAME.search(line)):
            out[kernel].update(local_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif kernel and (m := _USED.search(line)):
            rest = m.group(2)
            smem = re.search(r"(\d+) bytes smem", rest)
            cmem = sum(int(v) for v in re.findall(r"(\d+) bytes cmem\[\d+\]", rest))
            bars = re.search(r"used (\d+) barriers", rest)
            out[kernel].update(registers=int(m.group(1)), shared_bytes=int(smem.group(1)) if smem else 0,
                               constant_bytes=cmem, barriers=int(bars.group(1)) if bars else 0)
    return out


__all__ = ["ARCHS", "NVCC_OPTIONS", "nvcc", "nvcc_version", "archs", "build", "ptxas_text", "parse"]
