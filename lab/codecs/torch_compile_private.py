"""The private settings of torch.compile (torch._dynamo, torch._inductor) the codecs' fused CPU passes rely on,
in one place. Each imports torch.compile's machinery only when called (a process that never compiles, as with
PARALAB_COMPILE=0, never loads it). tests/test_torch_compile_private.py pins what is used, so a torch that moves
one fails there by name."""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


def raise_recompile_limit(limit: int) -> None:
    """At least `limit` compiled variants per code object before dynamo runs a function eagerly, silently
    (torch._dynamo.config.recompile_limit); a limit at or above it already stands."""
    import torch._dynamo

    if torch._dynamo.config.recompile_limit < limit:
        torch._dynamo.config.recompile_limit = limit


def mark_rows_dynamic(t: torch.Tensor) -> None:
    """Compile for any length of `t`'s first dimension instead of specialising on this one, where the function
    allows it (torch._dynamo.maybe_mark_dynamic)."""
    import torch._dynamo

    torch._dynamo.maybe_mark_dynamic(t, 0)


@contextlib.contextmanager
def one_compile_thread() -> Iterator[None]:
    """Inductor compiles in this process only, no pool of compile workers, for the duration
    (torch._inductor.config.compile_threads)."""
    from torch._inductor import config

    before = config.compile_threads
    config.compile_threads = 1
    try:
        yield
    finally:
        config.compile_threads = before


def key_compiled_code_by_vector_isa() -> None:
    """Inductor's caches of compiled code keyed by the vector ISA its C++ is generated for: the width Inductor picks
    (which honours ATEN_CPU_CAPABILITY) is set as torch._inductor.config.cpp.simdlen, a setting its cache keys
    include; a width already set stands. Without it a pass cached by a process that picked AVX-512 is reused, as
    generated, by one that picks AVX2 (ATEN_CPU_CAPABILITY=avx2 on the same machine) and compiled for AVX2: its
    vectorised loops then step over 16 floats and read 8, and the codes come out wrong. Nothing is set where
    Inductor finds no vector ISA (it then builds scalar C++, the same for every ISA)."""
    from torch._inductor import config, cpu_vec_isa

    if config.cpp.simdlen is None:
        isa = cpu_vec_isa.pick_vec_isa()
        if isa:
            config.cpp.simdlen = isa.bit_width()


def compiled_vector_width() -> int | None:
    """The vector width in bits (256: AVX2, 512: AVX-512) Inductor generates the codecs' C++ for, as
    `key_compiled_code_by_vector_isa` set it (torch._inductor.config.cpp.simdlen); None where it set none (no vector
    ISA: scalar C++)."""
    from torch._inductor import config

    return config.cpp.simdlen


def probe_vector_isa() -> None:
    """Inductor's probe of the CPU's vector instruction sets (a test library built and loaded per set), done
    ahead of a first compile (torch._inductor.cpu_vec_isa.valid_vec_isa_list)."""
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.valid_vec_isa_list()


__all__ = ["raise_recompile_limit", "mark_rows_dynamic", "one_compile_thread", "key_compiled_code_by_vector_isa",
           "compiled_vector_width", "probe_vector_isa"]
