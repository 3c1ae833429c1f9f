"""Theoretical occupancy of a kernel launch, computed as CUDA's occupancy calculator does (CUDA C++ Programming
Guide, "Compute Capabilities", Table of technical specifications per compute capability; the calculator's
allocation rules): the CTAs that fit on one SM by threads, CTAs, registers and shared memory, as a fraction of
the SM's warps."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one compute capability. smem_bytes: the largest shared-memory carveout (the driver
    picks it for a kernel that needs it; a kernel using little gets the largest when it runs alone)."""

    arch: str
    max_warps: int
    max_ctas: int
    registers: int
    max_regs_per_thread: int
    reg_unit: int  # registers are allocated per warp in units of this many
    warp_unit: int  # warps are allocated register files in groups of this many
    smem_bytes: int
    smem_unit: int
    smem_reserved: int  # shared memory the system reserves per CTA (compute capability 8.0 and later)


# CUDA C++ Programming Guide, Table "Technical Specifications per Compute Capability" (8.0, 9.0, 10.0)
LIMITS = {s.arch: s for s in (
    SmLimits("sm_80", 64, 32, 65536, 255, 256, 4, 164 * 1024, 128, 1024),
    SmLimits("sm_90", 64, 32, 65536, 255, 256, 4, 228 * 1024, 128, 1024),
    SmLimits("sm_100", 64, 32, 65536, 255, 256, 4, 228 * 1024, 128, 1024),
)}


def _up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str, threads: int, registers: int, shared_bytes: int) -> dict[str, object]:
    """CTAs per SM, active warps, occupancy (active / max warps) and the limiting resource of a launch of
    `threads` per CTA using `registers` per thread and `shared_bytes` of static shared memory per CTA."""
    if arch not in LIMITS:
        raise ValueError(f"arch={arch!r}; allowed: {', '.join(LIMITS)}")
    lim = LIMITS[arch]
    if not 1 <= threads <= 1024 or not 0 <= registers <= lim.max_regs_per_thread or shared_bytes < 0:
        raise ValueError(f"threads={threads} (1..1024), registers={registers} (0..{lim.max_regs_per_thread}), "
                         f"shared_bytes={shared_bytes} (>= 0)")
    warps = -(-threads // 32)
    by = {"warps": lim.max_warps // warps, "ctas": lim.max_ctas}
    if registers:
        per_warp = _up(registers * 32, lim.reg_unit)
        by["registers"] = (lim.registers // per_warp) // lim.warp_unit * lim.warp_unit // warps
    by["shared memory"] = lim.smem_bytes // _up(shared_bytes + lim.smem_reserved, lim.smem_unit)
    ctas = min(by.values())
    limit = min(by, key=lambda k: (by[k], k != "warps"))
    return {"ctas_per_sm": ctas, "active_warps": ctas * warps, "occupancy": ctas * warps / lim.max_warps,
            "limited_by": limit}


__all__ = ["SmLimits", "LIMITS", "occupancy"]
