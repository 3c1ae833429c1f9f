"""Sharded training for the UIs: PyTorch FSDP2 with codecs on its all-gather and reduce-scatter,
beside fp32 FSDP2 and DDP on the same data and seeds (lab/train/fsdp.py), on local processes, a
shaped two-level link (`link_rate`, `ranks_per_node`) or torchrun's ranks."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

from lab.backend import Progress, RowSink
from lab.train.fsdp import COLLECTIVES, FSDPResult, FSDPSettings
from lab.train.fsdp_comm import NATIVE, algorithm_names, allowed_codecs
from lab.train.run import TrainConfig

FSDP_RUN_COLLECTIVES = COLLECTIVES


def fsdp_run_codecs(op: str) -> list[str]:
    """The registered codecs that can ride FSDP's 'all_gather' (weights) or 'reduce_scatter' (gradients)."""
    return allowed_codecs(op)


def fsdp_run_algorithms(op: str) -> list[str]:
    """The algorithms FSDP's 'all_gather' or 'reduce_scatter' may run: 'native', then the registered ones."""
    return algorithm_names(op)


def fsdp_settings(*, weights_codec: str | None = None, grads_codec: str | None = None, hpz: int | None = None,
                  baselines: bool = True, procs: int = 2, ranks_per_node: int | None = None,
                  overlap: bool = True, all_gather: str | None = None,
                  reduce_scatter: str | None = None) -> FSDPSettings:
    """The FSDP settings, checked against `procs` (ValueError naming what is allowed)."""
    s = FSDPSettings(weights_codec=weights_codec, grads_codec=grads_codec, hpz=hpz, baselines=baselines,
                     ranks_per_node=ranks_per_node, overlap=overlap,
                     all_gather=NATIVE if all_gather is None else all_gather,
                     reduce_scatter=NATIVE if reduce_scatter is None else reduce_scatter)
    s.check(procs)
    return s


def _link(procs: int, rate: str | None, ranks_per_node: int) -> Any:
    if rate is None:
        return nullcontext(None)
    from lab.comm.shaped import ShapedLink, available

    ok, why = available()
    if not ok:
        raise ValueError(f"--link-rate needs network namespaces: {why}")
    return ShapedLink(procs, rate=rate, ranks_per_node=ranks_per_node)


def fsdp_training(cfg: TrainConfig, procs: int, *, weights_codec: str | None = None, grads_codec: str | None = None,
                  hpz: int | None = None, baselines: bool = True, backend: str = "gloo", timeout: float = 600.0,
                  link_rate: str | None = None, ranks_per_node: int | None = None,
                  progress: Progress | None = None, on_point: RowSink | None = None,
                  trace: str | None = None, overlap: bool = True, all_gather: str | None = None,
                  reduce_scatter: str | None = None) -> FSDPResult | None:
    """FSDP2 on `procs` local processes (or torchrun's ranks when started by torchrun: then None on every
    rank but 0) with the codecs on its collectives; baselines: fp32 FSDP2 and DDP in the same processes.
    ranks_per_node: contiguous ranks a node (default hpz, else 1, or under torchrun its local world size), for the
    cross-node byte counts and, with link_rate, the shaped link's layout (nodes talk over it, ranks of a
    node over their namespace's loopback). trace: a directory for each run's per-rank traces (steps 3..5).
    overlap: async prefetched all-gathers in every FSDP2 run (False: FSDP2's blocking defaults).
    all_gather, reduce_scatter: the algorithm each op runs ('native', the default: the process group's own;
    else a registered `lab.comm.collectives` algorithm, `fsdp_run_algorithms`)."""
    from lab.comm.dist import TorchComm, in_torchrun
    from lab.train.fsdp import assemble, fsdp_rank, train_fsdp

    if in_torchrun():
        import os

        comm = TorchComm.from_env(backend, timeout)
        settings = fsdp_settings(weights_codec=weights_codec, grads_codec=grads_codec, hpz=hpz, baselines=baselines,
                                 procs=comm.size, overlap=overlap, all_gather=all_gather,
                                 reduce_scatter=reduce_scatter,
                                 ranks_per_node=ranks_per_node or (None if hpz else
                                                                   int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        cfg.check()
        every = comm.allgather_object(fsdp_rank(comm, asdict(cfg), asdict(settings), trace=trace))
        return assemble(cfg, settings, every, backend) if comm.rank == 0 else None
    settings = fsdp_settings(weights_codec=weights_codec, grads_codec=grads_codec, hpz=hpz, baselines=baselines,
                             procs=procs, ranks_per_node=ranks_per_node, overlap=overlap, all_gather=all_gather,
                             reduce_scatter=reduce_scatter)
    with _link(procs, link_rate, ranks_per_node or hpz or 1) as net:
        return train_fsdp(cfg, procs, settings, backend=backend, timeout=timeout, net=net, progress=progress,
                          on_point=on_point, trace=trace)


__all__ = ["fsdp_training", "fsdp_settings", "fsdp_run_codecs", "fsdp_run_algorithms", "FSDP_RUN_COLLECTIVES", "FSDPResult"]
