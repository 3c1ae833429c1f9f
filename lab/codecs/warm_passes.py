"""The compiled CPU passes a process ran, recorded so that another process compiles them ahead of time.

A rank forked by lab.comm.launch's warm server compiles each codec pass it runs (torch.compile: torch._dynamo's
import, its trace, Inductor's cached kernel loaded): ~3-4.5 core-seconds here for a ring with one 8-bit codec,
against 0.08 s for the allreduces themselves. Each rank `record`s the passes it ran (which function, its key, and
each argument's shape, strides, storage offset and dtype, what dynamo's guards look at); the server `replay`s them
once on zero tensors of the same layout when it is idle (after its caller's second job: a one-shot CLI run's server
compiles nothing), and every rank it forks after that inherits them compiled
(a pass compiled before a fork runs at once in the child, at any row count). A pass whose guards the replay does not
meet (arguments that share memory in the rank, say) is simply compiled by the rank again, as before.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import torch

from . import cpu
from .torch_compile_private import one_compile_thread

Record = tuple  # (module, qualname, key, argument layouts, rows, returns)


def _layout(a: Any) -> tuple:
    if isinstance(a, torch.Tensor):
        return ("tensor", tuple(a.shape), tuple(a.stride()), a.storage_offset(), a.dtype)
    return ("value", a)


def _dummy(layout: tuple) -> Any:
    """A zero tensor with `layout`'s shape, strides, storage offset and dtype (a plain value as it was)."""
    if layout[0] != "tensor":
        return layout[1]
    shape, stride, offset, dtype = layout[1:]
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
    return torch.zeros(offset + extent, dtype=dtype).as_strided(shape, stride, offset)


def record(sink: Callable[[Record], None]) -> None:
    """From now on, hand `sink` each compiled pass this process runs with a layout it has not run before."""
    seen: set = set()

    def note(make, key, args, rows, returns) -> None:
        rec = (make.__module__, make.__qualname__, key, tuple(_layout(a) for a in args), tuple(rows), returns)
        try:
            new = rec not in seen
        except TypeError:  # an unhashable key or value: not replayed
            return
        if new:
            seen.add(rec)
            sink(rec)

    cpu.on_compiled_call = note


def replay(rec: Record) -> bool:
    """Compile and run `rec`'s pass once on zero tensors of its layout; False (nothing raised, and this process's
    compiled passes stay on: cpu.kernel_status) where that fails."""
    module, qualname, key, layouts, rows, _ = rec
    try:
        make = getattr(importlib.import_module(module), qualname)
        args = [_dummy(lay) for lay in layouts]
        with one_compile_thread():  # no compile worker, no thread: the process must stay forkable
            cpu.call_compiled(make, key, *args, rows=rows)
        return True
    except Exception:  # noqa: BLE001  the rank that runs it compiles it itself, and reports what fails
        return False
