"""Byte counts and times as the labels of the dashboard and the plots: '16 MB', '1 ms'."""
from __future__ import annotations


def bytes_label(b: float) -> str:
    """8 B, 4 kB, 16 MB, 1 GB in binary multiples (1 kB = 1024 B), as the size controls count them."""
    for unit, f in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:g} B"


def si_bytes_label(b: float) -> str:
    """Bytes sent as B / kB / MB / GB in powers of 1000, as nccl-tests prints them; 3 significant digits."""
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def seconds_label(us: float) -> str:
    """A time given in µs as '10 µs', '1 ms', '2 s'."""
    for unit, f in (("s", 1e6), ("ms", 1e3)):
        if us >= f:
            return f"{us / f:g} {unit}"
    return f"{us:g} µs"
