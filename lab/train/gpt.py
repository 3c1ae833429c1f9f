"""A small decoder-only transformer (nanoGPT-like: Radford et al. 2019's GPT-2 block, pre-norm,
causal self-attention, a 4x GELU MLP), the same family as the `gpt2-small` the pays page prices,
shrunk to train on a CPU in minutes. Its forward returns logits shaped (batch, vocab, time), so
`F.cross_entropy(model(x), y)` with token targets y of shape (batch, time) is the per-token loss."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x)); attention masked to earlier positions."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Token and position embeddings, `layers` blocks, a final LayerNorm and an untied output head."""

    def __init__(self, vocab: int, context: int = 32, dim: int = 64, layers: int = 2, heads: int = 4,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if vocab < 2 or context < 1 or layers < 1 or heads < 1 or dim % heads:
            raise ValueError(f"TinyGPT sizes: vocab >= 2, context >= 1, layers >= 1, dim divisible by heads; got "
                             f"vocab={vocab}, context={context}, dim={dim}, layers={layers}, heads={heads}")
        self.context = context
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, dropout) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        if T > self.context:
            raise ValueError(f"a sequence of {T} tokens is longer than the context of {self.context}")
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        return self.head(self.ln(self.blocks(x))).transpose(1, 2)


__all__ = ["TinyGPT", "Block"]
