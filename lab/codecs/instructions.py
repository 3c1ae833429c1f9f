"""How many instructions each kernel is, without a GPU and without a disassembler: the SASS count from the cubin
nvcc builds (an ELF file; each kernel's code is the section `.text.<kernel>`, and every SASS instruction of
Volta and later is 128 bits, so its size / 16 is the count), and the PTX count by class from the PTX nvcc keeps
(PTX ISA 8.x, "Instruction Set": memory, control flow, everything else arithmetic).

The counts are static: every instruction of the kernel once, every path (vector and scalar, the tail loops)
and each loop body once. The padding after a kernel (NOPs to the section's alignment, after the self-branch
that closes it) is not counted."""
from __future__ import annotations

import re
import struct

SASS_BYTES = 16  # one SASS instruction on sm_70 and later
_NOP, _BRA = 0x918, 0x947  # the low 12 bits of the first word: the opcodes of NOP and BRA on sm_80, sm_90, sm_100

_MEMORY = ("ld", "ldu", "st", "atom", "red", "prefetch", "cp", "tex", "suld", "sust")
_CONTROL = ("bra", "brx", "bar", "barrier", "ret", "exit", "call", "trap")


def _sections(elf: bytes) -> dict[str, bytes]:
    """{section name: contents} of a 64-bit little-endian ELF file (ELF-64 Object File Format, section headers)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file (a cubin is one)")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize) for i in range(count)]
    strtab = heads[names][4]

    def name(off: int) -> str:
        return elf[strtab + off:elf.index(b"\0", strtab + off)].decode()

    return {name(h[0]): elf[h[4]:h[4] + h[5]] for h in heads}


def sass_counts(cubin: bytes) -> dict[str, int]:
    """{kernel: SASS instructions} of a cubin: its .text.<kernel> section in 16-byte instructions, less the
    trailing NOP padding and the closing self-branch."""
    out = {}
    for name, code in _sections(cubin).items():
        if not name.startswith(".text."):
            continue
        ops = [struct.unpack_from("<Q", code, i)[0] & 0xFFF for i in range(0, len(code), SASS_BYTES)]
        while ops and ops[-1] == _NOP:
            ops.pop()
        if ops and ops[-1] == _BRA:
            ops.pop()
        out[name[len(".text."):]] = len(ops)
    return out


_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)\(", re.M)
_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w]*)[.\s;]")


def ptx_classes(ptx: str) -> dict[str, dict[str, int]]:
    """{kernel: {total, memory, control, arithmetic}} PTX instructions of each .entry in `ptx` (memory: loads,
    stores, atomics and reductions of any state space; control: branches, barriers, returns, calls)."""
    starts = [(m.group(1), m.end()) for m in _ENTRY.finditer(ptx)]
    out = {}
    for i, (kernel, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(ptx)
        body = ptx[ptx.index("{", start):end]
        counts = {"total": 0, "memory": 0, "control": 0, "arithmetic": 0}
        for line in body.splitlines():
            line = line.strip()
            if not line or line.startswith((".", "//", "$", "{", "}", ")")):
                continue
            m = _INSTR.match(line)
            if not m:
                continue
            op = m.group(1)
            cls = "memory" if op in _MEMORY else "control" if op in _CONTROL else "arithmetic"
            counts["total"] += 1
            counts[cls] += 1
        out[kernel] = counts
    return out


__all__ = ["SASS_BYTES", "sass_counts", "ptx_classes"]
