"""Rank functions for test_parallel_hybrid.py: module level, so that rank processes can import them."""
from __future__ import annotations

from lab.train.parallelism.hybrid import HybridCNN, HybridSettings
from lab.train.run import TrainConfig, load_data


def steps(comm, cfg: dict, settings: dict, batches: list) -> dict:
    """One rank of the hybrid CNN after the given global batches: its losses, its conv parameters and the
    whole dense layer (gathered), and its traffic per kind."""
    c = TrainConfig(**cfg)
    net = HybridCNN(comm, c, load_data(c), HybridSettings(**settings))
    losses = [net.step(x, y) for x, y in batches]
    weight, bias = net.head()
    return dict(losses=losses, conv={n: p.detach().clone() for n, p in net.conv.named_parameters()},
                weight=weight, bias=bias, traffic=net.traffic(), bytes_sent=comm.bytes_sent)
