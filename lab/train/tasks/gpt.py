"""A small decoder-only transformer (lab.train.gpt's TinyGPT) on a word corpus, trained with AdamW."""
from __future__ import annotations

from typing import Any

from torch import nn

from ..gpt import TinyGPT
from .base import Task


def build(cfg: Any, data: Any) -> nn.Module:
    """TinyGPT over the corpus' vocabulary with cfg's context, width, layers and heads."""
    return TinyGPT(data.vocab, cfg.context, cfg.dim, cfg.layers, cfg.heads)


# --smoke keeps AdamW's own learning rate, and a tolerance that puts the target well below an untrained
# model's loss (ln of the vocabulary): 1.5 x fp32's loss after 60 steps would sit above it
TASK = Task("gpt", "a small decoder-only transformer (nanoGPT-like: 2 layers, 4 heads, causal attention) "
            "on a word corpus (Python's own documentation at least)",
            "lm", "gpt2-small", "validation perplexity",
            dict(corpus="pydoc", vocab=2000, context=32, dim=64, layers=2, heads=4, optimizer="adamw", lr=0.003,
                 momentum=0.0, batch=32, steps=300, eval_every=10),
            build, smoke=dict(tolerance=0.05), order=30)
