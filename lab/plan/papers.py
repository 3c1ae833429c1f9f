"""The papers' arithmetic, reproduced with the planner and `lab.comm.cost`.

Dettmers 2016 §2.3.2: AlexNet's ~60 M 32-bit parameters are 0.223 GB; at 7 GB/s one transfer
takes 32 ms and a full synchronisation on 4 GPUs (as long as 4 messages between two GPUs, because
of the PCIe switches) 128 ms; with 1–2 ms of latency per layer about 150 ms, so naive data
parallelism on four GPUs is slower than one GPU's sub-100-ms pass. Readings: the paper's "GB" is
GiB (60e6 × 4 B / 2^30 = 0.2235) and it divides by 7 in the same unit, so its link is 7 GiB/s
(with SI units the same steps give 0.240 GB, 34.3 ms and 137 ms, the conclusion unchanged); the
"4 messages" are the binomial tree's 2·log2(4) full-message steps, `cost.allreduce_time("tree", 4, ...)`;
"1–2 ms latency per layer" is taken as 2 ms per layer synchronisation (4 messages of 0.5 ms) over
AlexNet's 8 weight layers; "naive data parallelism" splits the same mini-batch over the GPUs
(strong scaling, §2.1) with the update after the backward pass (no overlap).

Wu et al. 2015 §3.3, Figures 2-3: with 64 images per GPU data parallelism's communication does
not grow with P (butterfly synchronisation: 2m(P−1)/P) while the hybrid's model-parallel
activations grow with P, so data parallelism overtakes the hybrid beyond a crossover; and the
speedup of going through images is larger with a larger mini-batch (47x on 64 GPUs at 1024).
Setting: the Table 2 network, K40m, FDR InfiniBand (7 GB/s), butterfly synchronisation.
"""
from __future__ import annotations



import pandas as pd

from lab.comm import cost
from lab.comm.cost import Link

from .devices import custom_device
from .layers import get_model
from .strategies import crossover, plan_sweep
from lab.backend import Progress


GIB = 2.0 ** 30
DETTMERS_PAPER = {"parameters": 60e6, "memory_GB": 0.223, "transfer_ms": 32.0, "sync_ms": 128.0,
                  "sync_with_latency_ms": 150.0, "one_gpu_pass_ms": 100.0}
DEEP_IMAGE_PAPER = {"crossover_gpus": 16, "speedup_64_gpus_batch_1024": 47.0}


def dettmers_link(latency_ms: float = 0.5, GiBps: float = 7.0) -> Link:
    """Dettmers' link: 7 GiB/s (his "7 GB/s" in the unit of his 0.223 GB), 0.5 ms per message."""
    return Link("dettmers_pcie", latency_ms * 1e-3, GiBps * GIB,
                "Dettmers 2016 §2.3.2: 7 GB/s read in GiB/s; 1-2 ms per layer = 4 tree messages of 0.5 ms")


def dettmers_alexnet(*, parameters: float = 60e6, P: int = 4, pass_ms: float = 100.0, layers: int = 8,
                     latency_ms_per_layer: float = 2.0) -> pd.DataFrame:
    """Dettmers 2016 §2.3.2's AlexNet example, step by step: quantity, paper, model, unit, how."""
    m = 4.0 * parameters
    bw = dettmers_link(0.0)
    transfer = cost.transfer_time(m, bw)
    sync = cost.allreduce_time("tree", P, m, bw)
    a, _ = cost.coefficients("tree", P, m)  # messages per layer synchronisation
    lat = dettmers_link(latency_ms_per_layer / a)
    with_latency = sync + layers * a * lat.L
    four = pass_ms / 1e3 / P + with_latency
    rows = [
        ("parameters", DETTMERS_PAPER["parameters"], parameters, "values", "about 60 million 32-bit parameters"),
        ("memory", DETTMERS_PAPER["memory_GB"], m / GIB, "GB (GiB)", "4 bytes each"),
        ("one transfer", DETTMERS_PAPER["transfer_ms"], 1e3 * transfer, "ms", "cost.transfer_time at 7 GiB/s"),
        ("full synchronisation", DETTMERS_PAPER["sync_ms"], 1e3 * sync, "ms",
         f"cost.allreduce_time('tree', {P}): {a:g} full-message steps"),
        ("with latency per layer", DETTMERS_PAPER["sync_with_latency_ms"], 1e3 * with_latency, "ms",
         f"+ {layers} layers x {latency_ms_per_layer:g} ms"),
        ("one GPU pass", DETTMERS_PAPER["one_gpu_pass_ms"], pass_ms, "ms", "the paper's assumption (< 100 ms)"),
        (f"{P} GPUs, naive data parallelism", None, 1e3 * four, "ms",
         f"a 1/{P} share of the pass + the synchronisation"),
        (f"{P} GPUs slower than one", True, bool(four > pass_ms / 1e3), "", "the paper's conclusion"),
    ]
    return pd.DataFrame(rows, columns=["quantity", "paper", "model", "unit", "how"])


def dettmers_planner(*, P: int = 4, batch: int = 128, pass_ms: float = 100.0) -> pd.DataFrame:
    """The same example through the planner: the AlexNet preset (60.97 M), a device whose one-GPU
    pass of `batch` images takes pass_ms, Dettmers' link, tree allreduce, no overlap, the batch split
    over the GPUs. Rows P = 1 and P: step, compute, communication, speedup."""
    spec = get_model("alexnet")
    tflops = 3.0 * spec.flops * batch / (pass_ms / 1e3) / 1e12
    dev = custom_device(tflops, name=f"{pass_ms:g} ms AlexNet pass")
    return plan_sweep(spec, [1, P], device=dev, link=dettmers_link(), global_batch=batch, algorithm="tree",
                      overlap=False)


def deep_image_scaling(gpus=(1, 2, 4, 8, 16, 32, 64, 128), *, batch_per_gpu: int = 64, device="k40m",
                       link="ib_fdr", algorithm: str = "butterfly_sync", overlap: bool = False,
                       progress: Progress | None = None) -> tuple[pd.DataFrame, int | None]:
    """Wu et al. 2015 Figure 2: data vs hybrid parallelism of the Table 2 network, 64 images per GPU.
    Returns (sweep, the P from which data parallelism stays faster)."""
    df = plan_sweep("deep_image", list(gpus), strategies=("data", "hybrid"), device=device, link=link,
                    batch_per_gpu=batch_per_gpu, algorithm=algorithm, overlap=overlap, progress=progress)
    return df, crossover(df, "data", "hybrid")


def deep_image_speedup(batches=(256, 512, 1024), gpus=(1, 2, 4, 8, 16, 32, 64), *, device="k40m", link="ib_fdr",
                       algorithm: str = "butterfly_sync", overlap: bool = False,
                       progress: Progress | None = None) -> pd.DataFrame:
    """Wu et al. 2015 Figure 3: speedup of going through images against P for several mini-batch
    sizes (the mini-batch split over the GPUs), data parallelism. Adds a `batch` column."""
    out = []
    for i, B in enumerate(batches):
        df = plan_sweep("deep_image", list(gpus), device=device, link=link, global_batch=B, algorithm=algorithm,
                        overlap=overlap)
        out.append(df.assign(batch=B))
        if progress:
            progress((i + 1) / len(batches), f"mini-batch {B}")
    return pd.concat(out, ignore_index=True)


__all__ = ["DETTMERS_PAPER", "DEEP_IMAGE_PAPER", "dettmers_link", "dettmers_alexnet", "dettmers_planner",
           "deep_image_scaling", "deep_image_speedup"]
