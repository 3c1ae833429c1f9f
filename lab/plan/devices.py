"""GPU presets for the planner: peak arithmetic throughput, memory, memory bandwidth, and the
fraction of peak a training step reaches.

A step's compute time is FLOPs / (peak × efficiency). `efficiency` is a modelling assumption, not
a measurement: 0.4 is typical of well-tuned convolutional and transformer training (model-FLOPs
utilisation of 30-50%); give your own with `custom_device` or `dataclasses.replace`. Codec work is
memory-bound: (bytes read + written) / memory bandwidth per value, plus `launch_us` per kernel.
Peaks are the vendors' data-sheet numbers in the precision a job of that generation trains in.

One preset is a paper's assumption, not a card: `dettmers2016` is the GPU of Dettmers 2016
§2.3.2, whose AlexNet forward+backward pass of a 128-image mini-batch takes the paper's 100 ms
("< 100 ms"). On the planner's AlexNet (1.45 GFLOP forward per image, x3 with the backward
pass) that is 5.56 TFLOP/s achieved, 1.24x the GTX Titan's 4.5 TFLOP/s peak, so no physical
preset reaches it: the physical `gtx_titan` (peak x 0.4) predicts 309 ms for the same pass, and
with it 4 GPUs on 7 GB/s come out 1.4x faster than one instead of slower. Use `dettmers2016` to
reproduce the paper's argument, `gtx_titan` to predict the real card.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

from .layers import get_model

# Dettmers 2016 §2.3.2: one GPU's forward+backward pass of 128 AlexNet images in 100 ms
DETTMERS_PASS_MS, DETTMERS_BATCH = 100.0, 128


@dataclass(frozen=True)
class Device:
    """One GPU: peak TFLOP/s in `precision`, memory GB, memory bandwidth GB/s, achieved fraction of
    peak, kernel launch overhead (µs), and where the numbers come from."""

    name: str
    peak_tflops: float
    precision: str
    memory_GB: float
    memory_GBps: float
    efficiency: float
    launch_us: float
    source: str

    def __post_init__(self) -> None:
        for what, v, ok, allowed in (("peak_tflops", self.peak_tflops, lambda x: x > 0, "> 0"),
                                     ("memory_GB", self.memory_GB, lambda x: x > 0, "> 0"),
                                     ("memory_GBps", self.memory_GBps, lambda x: x > 0, "> 0"),
                                     ("efficiency", self.efficiency, lambda x: 0 < x <= 1, "in (0, 1]"),
                                     ("launch_us", self.launch_us, lambda x: x >= 0, ">= 0")):
            if isinstance(v, bool) or not isinstance(v, Real) or math.isnan(v) or not ok(v) or (
                    what != "memory_GB" and not math.isfinite(v)):
                raise ValueError(f"device {self.name!r}: {what} must be a number {allowed}, got {v!r}")

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s: peak × efficiency."""
        return self.peak_tflops * 1e12 * self.efficiency


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("gtx_titan", 4.5, "fp32", 6.0, 288.4, 0.4, 7.0,
           "NVIDIA GeForce GTX Titan (2013): 2688 cores x 837 MHz x 2 = 4.5 TFLOP/s fp32, 6 GB, 288.4 GB/s; "
           "Dettmers 2016 §3.3 measured on two of them"),
    Device("dettmers2016", 3.0 * get_model("alexnet").flops * DETTMERS_BATCH / (DETTMERS_PASS_MS / 1e3) / 1e12,
           "fp32", 6.0, 288.4, 1.0, 7.0,
           "Dettmers 2016 §2.3.2's assumption, not a measured card: AlexNet forward+backward of 128 images in "
           "100 ms ('< 100 ms') = 5.56 TFLOP/s achieved, 1.24x the GTX Titan's peak; gtx_titan (peak x 0.4) "
           "predicts 309 ms, and with it 4 GPUs come out faster than one instead of slower"),
    Device("k40m", 4.29, "fp32", 12.0, 288.0, 0.4, 7.0,
           "NVIDIA Tesla K40m: 4.29 TFLOP/s fp32 and 12 GB (Wu et al. 2015 §2, Minwa's GPU), 288 GB/s"),
    Device("v100", 125.0, "fp16 tensor", 32.0, 900.0, 0.4, 4.0,
           "NVIDIA V100 SXM2 data sheet: 125 TFLOP/s fp16 tensor core (15.7 fp32), 32 GB HBM2, 900 GB/s"),
    Device("a100", 312.0, "bf16 tensor", 80.0, 2039.0, 0.4, 4.0,
           "NVIDIA A100 80GB SXM data sheet: 312 TFLOP/s bf16 dense (19.5 fp32), 80 GB HBM2e, 2039 GB/s"),
    Device("h100", 989.0, "bf16 tensor", 80.0, 3350.0, 0.4, 4.0,
           "NVIDIA H100 SXM5 data sheet: 989 TFLOP/s bf16 dense (67 fp32), 80 GB HBM3, 3.35 TB/s"),
)}


def get_device(name_or_device: str | Device) -> Device:
    """A preset by name (gtx_titan, dettmers2016, k40m, v100, a100, h100) or the given Device."""
    if isinstance(name_or_device, Device):
        return name_or_device
    if isinstance(name_or_device, str) and name_or_device in DEVICES:
        return DEVICES[name_or_device]
    raise ValueError(f"unknown device {name_or_device!r}; presets: {', '.join(DEVICES)}")


def custom_device(tflops: float, *, efficiency: float = 1.0, memory_GB: float = math.inf,
                  memory_GBps: float = 1000.0, launch_us: float = 5.0, name: str = "custom") -> Device:
    """A Device from achieved-or-peak TFLOP/s (efficiency 1 means `tflops` is what a step gets)."""
    return Device(name, tflops, "user", memory_GB, memory_GBps, efficiency, launch_us,
                  f"user-supplied: {tflops:g} TFLOP/s x {efficiency:g}")


__all__ = ["Device", "DEVICES", "get_device", "custom_device"]
