"""Seeded mini-batches of a training set, as whole batches or as one worker's shard of one."""
from __future__ import annotations

import torch


class ShardStream:
    """Samples in a fresh seeded permutation every epoch (the tail that does not fill a request
    is skipped). `batch()` hands out `batch_size` samples; `shard(k)` hands out worker k's share
    of a batch (sizes as `torch.tensor_split` gives them), for workers that run at their own pace."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, workers: int, seed: int) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch size {batch_size!r}; it must be an int >= 1")
        if batch_size > len(y):
            raise ValueError(f"batch size {batch_size} is larger than the {len(y)} training samples")
        if batch_size < workers:
            raise ValueError(f"a batch of {batch_size} samples cannot feed {workers} workers; "
                             f"use a batch of at least {workers}")
        self.x, self.y, self.batch_size = x, y, batch_size
        self.sizes = [len(t) for t in torch.arange(batch_size).tensor_split(workers)]
        self.gen = torch.Generator().manual_seed(seed)
        self.order = torch.randperm(len(y), generator=self.gen)
        self.pos = 0
        self.samples = 0

    @property
    def epochs(self) -> float:
        """Epochs consumed so far (samples / training-set size)."""
        return self.samples / len(self.y)

    def take(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pos + n > len(self.y):
            self.order = torch.randperm(len(self.y), generator=self.gen)
            self.pos = 0
        idx = self.order[self.pos:self.pos + n]
        self.pos += n
        self.samples += n
        return self.x[idx], self.y[idx]

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.take(self.batch_size)

    def shard(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.take(self.sizes[k])
