"""The index-width check of the emulated build: kernels/<name>.cu compiled by g++ with `-Wconversion -Werror`
against the emulator's header (taken as a system header, so only the kernels' own lines count). An index
computed in 64 bits and kept in an `int` (`const int i = g * N`) wraps past 2^31 values on a GPU, a size no CPU
test reaches; this check sees it at any size."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from . import harness

FLAGS = ("-std=c++17", "-fsyntax-only", "-Wconversion", "-Werror", "-Wno-attributes")


def conversion_errors(name: str, source: str) -> list[str]:
    """The -Wconversion diagnostics (one line each, file:line: message) of `source`, the text of
    kernels/<name>.cu with its shared header expanded; [] when it builds clean."""
    cxx = harness.compiler()
    if cxx is None:
        raise harness.EmuError("the index-width check needs g++ on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / f"{name}.cu"
        cu.write_text(harness.preprocess(source))
        main = Path(tmp) / f"{name}_widths.cpp"
        main.write_text(f'#include <{harness.HEADER.name}>\n#include "{cu}"\n')
        run = subprocess.run([cxx, *FLAGS, "-isystem", str(harness.HERE), str(main)], capture_output=True, text=True)
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    if run.returncode and not errors:
        raise harness.EmuError(f"g++ could not check {name}.cu:\n{run.stderr[-3000:]}")
    return errors
