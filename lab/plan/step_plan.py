"""What every strategy's plan of one step shares (`lab.plan.strategies` plans data, model, hybrid and
pipeline steps, `lab.plan.sharded` FSDP ones): the step's result, the infeasible-point error, the batch
checks, the GPUs of a plan on a two-level cluster and a codec's cost there."""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import pandas as pd

from lab.comm import cluster as cl

from .devices import Device
from .wire import WireCodec

BYTES_PER_PARAM = 12.0
BYTES_PER_ACTIVATION = 4.0


class Infeasible(ValueError):
    """The strategy cannot run this configuration (e.g. more pipeline stages than layers)."""


@dataclass
class StepPlan:
    """One predicted training step. Times in seconds; step = compute + exposed comm + idle."""

    model: str
    strategy: str
    P: int
    global_batch: float
    batch_per_gpu: float
    device: str
    link: str
    algorithm: str
    overlap: bool
    compute_s: float
    comm_s: float          # every transfer's duration, overlapped or not
    exposed_comm_s: float  # the part of the step spent waiting for the link
    idle_s: float          # pipeline bubble
    step_s: float
    images_per_s: float
    memory_GB: float
    fits: bool
    micro_batches: int | None
    layers: pd.DataFrame   # per layer: role, params, compute_ms, comm_ms, what is sent, codec, wire_MB

    def summary(self) -> dict:
        return {k: getattr(self, k) for k in ("model", "strategy", "P", "global_batch", "batch_per_gpu", "device",
                                              "link", "algorithm", "overlap", "compute_s", "comm_s",
                                              "exposed_comm_s", "idle_s", "step_s", "images_per_s", "memory_GB",
                                              "fits", "micro_batches")}


# -- input checks

def check_batches(batch_per_gpu, global_batch) -> tuple[float | None, float | None]:
    """(batch_per_gpu, global_batch) checked: one of them (default 128 per GPU), each an int >= 1."""
    if batch_per_gpu is not None and global_batch is not None:
        raise ValueError("give batch_per_gpu or global_batch, not both")
    if batch_per_gpu is None and global_batch is None:
        batch_per_gpu = 128
    for what, v in (("batch_per_gpu", batch_per_gpu), ("global_batch", global_batch)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, Integral) or v < 1):
            raise ValueError(f"{what} must be an int >= 1, got {v!r}")
    return batch_per_gpu, global_batch


# -- a two-level cluster

def sub_cluster(cluster: cl.Cluster, P: int) -> cl.Cluster:
    """The P GPUs of a plan on `cluster`: one node of P GPUs when P <= GPUs per node, else P / g whole nodes.
    Raises Infeasible for P that does not fill whole nodes or exceeds the cluster."""
    g = cluster.gpus_per_node
    if P > cluster.P:
        raise Infeasible(f"P={P} GPUs do not fit on {cluster.nodes}x{g} ({cluster.P} GPUs)")
    if P > g and P % g:
        raise Infeasible(f"P={P} on nodes of {g} GPUs: a two-level plan runs whole nodes; P must be <= {g} or a "
                         f"multiple of {g}")
    return cl.Cluster(P // g if P > g else 1, min(P, g), cluster.intra, cluster.inter, cluster.nics_per_node)


def cluster_codec(wc: WireCodec, dev: Device) -> cl.CodecCost:
    """A WireCodec as the two-level model's CodecCost: the same wire bytes, codec time as the planner's
    roofline of the device (`lab.plan.wire`); uncompressed gradients are raw fp32 (4 bytes per value)."""
    if wc.raw:
        return cl.CodecCost(wc.name, wc.bytes_per_value, source="uncompressed gradients, no codec work")
    bw = dev.memory_GBps * 1e9
    return cl.CodecCost(wc.name, wc.bytes_per_value, wc.side_bytes, wc.enc_traffic / bw, wc.dec_traffic / bw,
                        wc.enc_kernels, wc.dec_kernels, dev.launch_us * 1e-6, wc.mode,
                        f"roofline: {dev.name} {dev.memory_GBps:g} GB/s")
