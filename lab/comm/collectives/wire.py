"""The wire of a reduction (reduce-scatter, reduce): raw values of the accumulation dtype, or codec
payloads decoded, added and re-encoded at every hop (requantize).

Raw: a payload is the accumulator itself, in the accumulation dtype (fp32, bf16 or fp16): NCCL sums
in the input's dtype, so an fp16/bf16 sum rounds at every addition. With a codec a partial sum is
encoded before each send; the receiver decodes it and adds it to its accumulator (in the
accumulation dtype). Gather-type ops need no wire: they move rows of any dtype (a codec's bytes).
"""
from __future__ import annotations

from typing import Sequence

import torch

from lab.codecs.base import Codec
from lab.codecs.wire import WireFormat

from ..base import Comm

#: accumulate= names and their dtypes
ACCUMULATE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class Wire:
    """Payloads of accumulators (any number of rows of k values) over `comm`, through `codec`."""

    def __init__(self, comm: Comm, codec: Codec | None, dtype: torch.dtype = torch.float32) -> None:
        self.comm, self.codec, self.dtype = comm, codec, dtype

    def _fmt(self, n: int) -> WireFormat:
        assert self.codec is not None
        return WireFormat.of(self.codec, n, torch.float32)

    def payload(self, acc: torch.Tensor) -> torch.Tensor:
        """What crosses the link for the values of `acc` (raw: `acc` itself, contiguous; do not
        modify it before the send completes)."""
        flat = acc.reshape(-1)
        if self.codec is None or flat.numel() == 0:
            return flat.contiguous()
        return self._fmt(flat.numel()).encode(flat.float())

    def buffer(self, n: int) -> torch.Tensor:
        """A receive buffer for the payload of n values."""
        if self.codec is None:
            return torch.empty(n, dtype=self.dtype, device=self.comm.device)
        return torch.empty(self._fmt(n).nbytes, dtype=torch.uint8, device=self.comm.device)

    def values(self, payload: torch.Tensor, n: int) -> torch.Tensor:
        """The n values a payload carries."""
        if self.codec is None or n == 0:
            return payload
        return self._fmt(n).decode(payload).reshape(-1)

    def add_rows(self, payload: torch.Tensor, blocks: torch.Tensor, idx: Sequence[int]) -> None:
        """blocks[idx[i]] += row i of the payload's values (rows of blocks.shape[1])."""
        k = blocks.shape[1]
        vals = self.values(payload, k * len(idx)).reshape(len(idx), k)
        if len(idx) == 1:
            blocks[idx[0]].add_(vals[0])
        else:  # distinct rows: one addition per value, as a loop would do it
            blocks.index_add_(0, torch.tensor(idx, device=blocks.device), vals.to(blocks.dtype))

    def add(self, payload: torch.Tensor, acc: torch.Tensor) -> None:
        """acc += the payload's values (acc flat or any shape of as many values)."""
        flat = acc.view(-1)
        flat.add_(self.values(payload, flat.numel()))
