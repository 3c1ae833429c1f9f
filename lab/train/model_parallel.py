"""Simulated model parallelism of the MLP's dense layers (Dettmers 2016 §2.2, §3.4).

Every Linear layer is split by output dimension over K workers: worker k owns rows k of W
(`tensor_split`) and computes its slice of the layer's output from its own view of the layer's
input. Forward, each worker sends its activation slice to the K-1 others (encoded once, the
same bytes to all); backward, each receiver sends the delta for that slice back to its owner,
who sums them. Both directions pass through the codec, as in the paper's model-parallel MNIST
experiment. The logits are gathered on worker 0, which computes the loss.

Schemes as in data parallelism: 'all' compresses a worker's own slice too (the paper's
simulation, "no 32-bit activations"); 'paper' keeps a worker's own slice in 32-bit. Dropout is
applied by each slice's owner, with the same random stream as the unsplit network, so with an
identity codec a step equals the single-worker step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from lab.codecs.base import Codec
from lab.codecs.registry import get_codec
from lab.comm import cost

from .data_parallel import IDENTITY, SCHEMES, roundtrip
from .models import MLP


@dataclass
class Traffic:
    """Messages one step sent: their wire bytes, by direction."""

    forward: list[int] = field(default_factory=list)
    backward: list[int] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(self.forward) + sum(self.backward)

    def time_s(self, link: cost.Link | str, K: int) -> float:
        """Modelled seconds: the K workers send their messages in parallel, each one after another."""
        return sum(cost.transfer_time(b, link) for b in self.forward + self.backward) / max(K, 1)


class _Received(torch.autograd.Function):
    """Forward: the sender's decoded slice (computed once per sender). Backward: the receiver's
    delta for that slice through the codec, on its way back to the owner."""

    @staticmethod
    def forward(ctx, a, decoded, codec, traffic, key, sent):  # type: ignore[override]
        ctx.codec, ctx.traffic, ctx.key, ctx.sent = codec, traffic, key, sent
        return decoded.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        q, nbytes = roundtrip(ctx.codec, grad.contiguous(), ctx.key)
        if ctx.sent:
            ctx.traffic.backward.append(nbytes)
        return q, None, None, None, None, None


class ModelParallelMLP(nn.Module):
    """An `MLP` run as K model-parallel workers; parameters are the MLP's own (one optimizer
    over them equals K workers each updating their rows)."""

    def __init__(self, mlp: MLP, K: int, codec: str | None = None, scheme: str = "all") -> None:
        super().__init__()
        if not isinstance(mlp, MLP):
            raise ValueError("model parallelism splits the MLP's dense layers; the cnn is data-parallel only")
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"workers={K!r}; it must be an int >= 1")
        narrowest = min(mlp.sizes[1:])
        if K > narrowest:
            raise ValueError(f"{K} workers cannot split a layer of {narrowest} outputs; use at most {narrowest}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme={scheme!r}; allowed: {', '.join(SCHEMES)}")
        self.mlp, self.K, self.scheme = mlp, K, scheme
        self.compressed = codec is not None and codec not in IDENTITY
        if scheme == "paper" and not self.compressed:
            raise ValueError("scheme='paper' (own slice exact, incoming compressed) needs a codec")
        self.codecs: list[Codec | None] = [get_codec(codec) if self.compressed else None for _ in range(K)]
        self.traffic = Traffic()

    def _exchange(self, slices: list[torch.Tensor], receivers: list[int], tag: str) -> list[torch.Tensor]:
        """Each receiver's view of the concatenated slices: own slice exact under 'paper'."""
        t = self.traffic
        if not self.compressed:
            for k, s in enumerate(slices):
                t.forward += [4 * s.numel()] * sum(1 for j in receivers if j != k)
                for j in receivers:
                    if j != k and s.requires_grad:
                        s.register_hook(lambda g, n=4 * s.numel(): t.backward.append(n))
            return [torch.cat(slices, dim=1)] * len(receivers)
        decoded = []
        for k, s in enumerate(slices):
            q, nbytes = roundtrip(self.codecs[k], s.detach(), f"{tag}.{k}")
            decoded.append(q)
            t.forward += [nbytes] * sum(1 for j in receivers if j != k)
        views = []
        for j in receivers:
            parts = [s if (k == j and self.scheme == "paper") else
                     _Received.apply(s, decoded[k], self.codecs[j], t, f"{tag}.{k}", k != j)
                     for k, s in enumerate(slices)]
            views.append(torch.cat(parts, dim=1))
        return views

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        modules = list(self.mlp)
        dense = [i for i, m in enumerate(modules) if isinstance(m, nn.Linear)]
        K = self.K
        h = modules[0](x)  # input dropout: every worker holds the same input batch
        views = [h] * K
        for li, i in enumerate(dense):
            lin = modules[i]
            Ws, bs = lin.weight.tensor_split(K, dim=0), lin.bias.tensor_split(K)
            z = [F.linear(views[j], Ws[j], bs[j]) for j in range(K)]
            if li == len(dense) - 1:
                return self._exchange(z, [0], f"logits{li}")[0]
            a = torch.cat(z, dim=1)
            for m in modules[i + 1:dense[li + 1]]:  # activation, then the next layer's dropout
                a = m(a)
            views = self._exchange(list(a.tensor_split(K, dim=1)), list(range(K)), f"act{li}")
        raise AssertionError("an MLP ends with a Linear layer")


__all__ = ["ModelParallelMLP", "Traffic"]
