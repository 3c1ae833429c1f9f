"""Does compression pay? Every registered codec × allreduce algorithm on a two-level cluster
against a bf16 baseline, codec time counted, optional overlap with the backward pass; the break-even
NIC bandwidth per codec; time to accuracy from the steps penalties `paralab converge` measured
(`lab.plan.accuracy`, "not measured" where it has none), each verdict as its interval supports it
(`ranked_summary`, `measured_words`); and why NVLS busbw exceeds the ring's.
Step times are predictions of `lab.plan.pays` and `lab.comm.cluster`; docs/pays.md compares them with
the papers."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from lab.backend import Progress
from lab.comm import cluster as _cluster
from lab.plan import pays as _pays
from lab.plan.accuracy import NEVER, NOT_MEASURED
from lab.plan.pays import PaysResult, best_words, lesson_sentence, measured_words, ranked_summary

INTRA_LINKS = tuple(_cluster.INTRA)
INTER_LINKS = tuple(_cluster.INTER)
LINK_ALIASES = dict(_cluster.ALIASES)
PAYS_BANDWIDTHS = _pays.DEFAULT_BANDWIDTHS


def __getattr__(name: str):
    if name == "CLUSTER_ALGORITHMS":  # live: every algorithm a cluster prices now (`lab.comm.cluster.algorithms`)
        return _cluster.algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# published results the model is held against (docs/pays.md)
PAPER_PAYS = {
    "zeropp_volume_reduction": 4.0,      # ZeRO++ (arXiv 2306.10209) qgZ: INT4 instead of FP16 gradients, 4x less
    "zeropp_cross_node_before_M": 3.0,   # ZeRO-3's cross-node volume per step, in model sizes M ...
    "zeropp_cross_node_after_M": 0.75,   # ... and ZeRO++'s (qwZ + hpZ + qgZ)
    "zeropp_max_speedup": 2.16,          # up to 2.16x throughput at 384 GPUs (low-bandwidth clusters)
    "agarwal_winning_settings": 6,       # Agarwal et al. MLSys 2022: compression won in ~6 of 200+ settings
    "nvls_busbw_GBps": 480.0,            # nccl-tests on 8x H100: NVLS allreduce busbw ...
    "ring_busbw_GBps": 370.0,            # ... against the ring's (NVIDIA/nccl#1374, #1455)
}


def does_compression_pay(model: str = "gpt2_small", cluster: str = "8x8", *, gpu: str = "h100",
                         intra: str = "nvlink4", inter: str = "ib_ndr", nics_per_node: int | None = None,
                         batch_per_gpu: int = 8, overlap: bool = False, codecs: Sequence[str] | None = None,
                         algorithms: Sequence[str] | None = None,
                         bandwidths: Sequence[float] = PAYS_BANDWIDTHS, progress: Progress | None = None,
                         converge_task: str | None = None, results: Sequence[str] | None = None,
                         strategy: str = "ddp", zero_pp: str | Sequence[str] | None = "qwz,qgz,hpz",
                         weights_codec: str | None = None, collectives=None) -> PaysResult:
    """Does compression pay? (the function is not called `pays`: that is this module's name, and the
    package's lazy names would return the module once it is imported.) Per codec × algorithm: step time,
    speedup against the best bf16 step, break-even NIC bandwidth
    (`lab.plan.pays.pays`; algorithms None: every one a cluster prices, read now); per codec also its
    measured steps penalty and time-to-accuracy speedup (converge_task None: the task closest to the
    model; results: folders to look in, None: $PARALAB_RESULTS or ./bench/results, then the shipped reference results);
    `lesson`: how many codecs pay inside one node, here and on 10 Gb/s Ethernet, ranked by time to
    accuracy where measured. strategy 'fsdp': ZeRO-3 / FSDP with ZeRO++ switches `zero_pp` against the
    best bf16 FSDP step (`lab.plan.sharded_pays`; algorithms: ring, hierarchical; weights_codec: one codec for
    the weights with qwZ; model may be 'gpt-7b' style; each level of each collective runs the fastest registered
    collective plugin, `collectives` {op: [names]} narrowing them). zero_pp, weights_codec and collectives are
    for fsdp only."""
    from lab.plan.sharded import check_strategy
    if check_strategy(strategy) == "fsdp":
        from lab.plan.sharded_pays import fsdp_pays
        return fsdp_pays(model, cluster, gpu=gpu, intra=intra, inter=inter, nics_per_node=nics_per_node,
                         batch_per_gpu=batch_per_gpu, overlap=overlap, codecs=codecs, zero_pp=zero_pp,
                         algorithms=algorithms, bandwidths=bandwidths, progress=progress,
                         converge_task=converge_task, results=results, weights_codec=weights_codec,
                         collectives=collectives)
    if collectives is not None:
        raise ValueError("collectives (all-gather / reduce-scatter plugins) are for strategy fsdp; DDP's allreduce "
                         "algorithms are chosen with algorithms=")
    if weights_codec is not None:
        raise ValueError("a weights codec is for strategy fsdp (DDP sends no weights)")
    from lab.plan.sharded import parse_zero_pp

    parse_zero_pp(zero_pp)  # fsdp's switches, checked anyway: a bad one is never silently kept
    return _pays.pays(model, cluster, gpu=gpu, intra=intra, inter=inter, nics_per_node=nics_per_node,
                      batch_per_gpu=batch_per_gpu, overlap=overlap, codecs=codecs, algorithms=algorithms,
                      bandwidths=bandwidths, progress=progress, converge_task=converge_task, results=results)


def pays_takeaway(result: PaysResult) -> str:
    """The computed one-sentence lesson of a `pays` result."""
    return lesson_sentence(result.lesson)


def nvls_table(P: int = 8, line_GBps: float = 450.0, ring_busbw_GBps: float = 370.0,
               nvls_busbw_GBps: float = 480.0) -> pd.DataFrame:
    """Why NVLS busbw exceeds the ring's: bytes per rank, the busbw convention, and the wire bandwidth the
    measured busbw imply (`lab.comm.cluster.nvls_explained`), as rows quantity / ring / nvls."""
    d = _cluster.nvls_explained(P, line_GBps, ring_busbw_GBps, nvls_busbw_GBps)
    return pd.DataFrame([
        {"quantity": "bytes each rank sends, per byte of the vector", "ring": d["ring_bytes_per_m"],
         "nvls": d["nvls_bytes_per_m"], "how": f"ring 2(P−1)/P; NVLS (P+1)/P (P = {P})"},
        {"quantity": "nccl-tests busbw / algbw", "ring": 2 * (P - 1) / P, "nvls": 2 * (P - 1) / P,
         "how": "the same convention for both: 2(P−1)/P"},
        {"quantity": "busbw / wire bandwidth", "ring": 1.0, "nvls": d["nvls_busbw_per_wire"],
         "how": "NVLS: 2(P−1)/(P+1) (NVIDIA/nccl-tests#212, #272, #239)"},
        {"quantity": "busbw measured, GB/s", "ring": ring_busbw_GBps, "nvls": nvls_busbw_GBps,
         "how": "8x H100 SXM (NVIDIA/nccl#1374, #1455)"},
        {"quantity": "wire bandwidth implied, GB/s", "ring": d["ring_wire_GBps"], "nvls": d["nvls_wire_GBps"],
         "how": "busbw / (busbw / wire)"},
        {"quantity": "fraction of the NVLink line rate", "ring": d["ring_line_fraction"],
         "nvls": d["nvls_line_fraction"], "how": f"of {line_GBps:g} GB/s per direction"},
    ])


__all__ = ["CLUSTER_ALGORITHMS", "INTRA_LINKS", "INTER_LINKS", "LINK_ALIASES", "PAYS_BANDWIDTHS", "PAPER_PAYS",
           "PaysResult", "does_compression_pay", "pays_takeaway", "nvls_table", "ranked_summary", "measured_words", "best_words",
           "NEVER", "NOT_MEASURED"]
