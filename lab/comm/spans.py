"""Named time ranges in the comm code paths, for the per-rank traces (docs/design.md "Measuring": where the time goes).

`with span("encode"): ...` marks a range that torch.profiler records (`record_function`) while a trace
is being taken (`lab.comm.timesplit.Tracer`), and is a shared no-op object otherwise: one global read
and one call (~0.1 µs), so the ranges stay in the hot paths. The kinds:
  encode     a codec payload made from fp32 values (Channel.encode; gather mode's encode)
  decode     a payload decoded into fp32 (Channel.decode_into / decoded)
  hop        one fused decode-add-encode reduction hop (Channel.reduce)
  add        decoded payloads added into an accumulator (Channel.add_into / decode_sum)
  send       posting a batch of transfers, and waiting for a send to complete
  recv-wait  waiting for a receive to complete (the peer's data on the wire, or the peer still busy)
`OUTER` ("allreduce …") marks one measured call; its time outside every range above is "python"
(the algorithms' own control flow, buffers, the interpreter), which the trace writer adds as ranges.
"""
from __future__ import annotations

from typing import Any

#: the ranges the comm code marks (module docstring); "python" is derived, not marked
KINDS = ("encode", "decode", "hop", "add", "send", "recv-wait")
#: the ranges a training step marks around its compute (`Tracer.step`): DDP's wait for its bucket
#: allreduces happens inside backward (its reducer's), so it counts there
STEP_KINDS = ("forward", "backward", "optimizer")
#: prefix of the range around one measured call (`Tracer.call`)
OUTER = "allreduce"
#: the derived range: a measured call's time outside every marked range
PYTHON = "python"


class _Off:
    """The shared no-op context of a span while no trace is taken."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


_OFF = _Off()
_on = False


def span(name: str) -> Any:
    """A context manager marking the range `name` in the trace being taken; a no-op when none is."""
    if not _on:
        return _OFF
    from torch.autograd.profiler import record_function

    return record_function(name)


def set_enabled(on: bool) -> bool:
    """Turn the ranges on or off (the Tracer does, around the calls it records); the previous state."""
    global _on
    was, _on = _on, bool(on)
    return was


def enabled() -> bool:
    """Whether spans are recorded now."""
    return _on


__all__ = ["KINDS", "STEP_KINDS", "OUTER", "PYTHON", "enabled", "set_enabled", "span"]
