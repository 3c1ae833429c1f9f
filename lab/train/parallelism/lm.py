"""The language-model task on real ranks: the tiny GPT (`lab.train.gpt`) on a word corpus, fed and scored as
`paralab converge --task gpt` feeds and scores it, in the shape the strategies' rank functions take.

`GPTConfig` is a `TrainConfig` whose model is 'gpt' (TinyGPT, built by the converge task's `build`) with the
task's corpus, vocabulary, context and sizes; a strategy whose `Strategy.lm` is set trains it. `rank_data`
gives `RankLoop` its data: an image `Dataset`, or `LMData` (the seeded global batches of windows of `context`
tokens and their next tokens, `LMStream`; the validation windows; scores as (perplexity, loss per token)).
The loss everywhere is `F.cross_entropy(logits, targets)` over TinyGPT's (batch, vocab, time) logits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..run import TrainConfig, load_data

#: the model name of the language-model tasks (TinyGPT) in a rank's config
LM_MODEL = "gpt"
#: the validation tokens scored (the first ones of the corpus' validation split)
VALID_TOKENS = 20_000
OPTIMIZERS = ("sgd", "rmsprop", "adamw")


@dataclass(frozen=True)
class GPTConfig(TrainConfig):
    """A rank's config for a language-model task: `task` (a converge task of kind 'lm' whose build makes a
    TinyGPT) on `corpus` (lab.data's corpora; its `vocab` most frequent words) with `context` tokens per
    window and TinyGPT's `dim`, `layers`, `heads`; batch: windows per step; optimizer: adamw (weight decay 0,
    as converge's), sgd or rmsprop. dataset, hidden, dropout and activation are the image models' (unused)."""

    dataset: str = ""
    model: str = LM_MODEL
    hidden: tuple[int, ...] = ()
    dropout: tuple[float, ...] = ()
    optimizer: str = "adamw"
    lr: float = 0.003
    momentum: float = 0.0
    batch: int = 32
    task: str = "gpt"
    corpus: str = "pydoc"
    vocab: int = 2000
    context: int = 32
    dim: int = 64
    layers: int = 2
    heads: int = 4

    def check(self) -> None:
        """Raise ValueError (one line) naming the first bad setting and what is allowed."""
        from lab.data.text import CORPORA

        from ..tasks import get_task

        if self.model != LM_MODEL:
            raise ValueError(f"model {self.model!r}: a language-model config trains {LM_MODEL!r}")
        task = get_task(self.task)
        if task.kind != "lm":
            raise ValueError(f"task {self.task!r} is not a language-model task (kind {task.kind!r})")
        if self.corpus not in CORPORA:
            raise ValueError(f"corpus {self.corpus!r}; allowed: {', '.join(CORPORA)}")
        for name, lo in (("vocab", 3), ("context", 1), ("dim", 1), ("layers", 1), ("heads", 1), ("workers", 1),
                         ("evals_per_epoch", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}={v!r}; it must be an int >= {lo}")
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < self.workers:
            raise ValueError(f"batch={self.batch!r}: a batch must hold at least one window per worker "
                             f"(>= {self.workers})")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"learning rate {self.lr}; it must be > 0")
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise ValueError(f"epochs={self.epochs}; it must be > 0")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
        if not (isinstance(self.momentum, (int, float)) and 0 <= self.momentum < 1):
            raise ValueError(f"momentum={self.momentum}; allowed 0 <= momentum < 1")
        small_model(self)


def is_lm(cfg: Any) -> bool:
    """Whether cfg is a language-model task's config."""
    return isinstance(cfg, GPTConfig)


def config_of(cfg: dict[str, Any]) -> TrainConfig:
    """A rank's config from its fields (the rank functions' `cfg`): a GPTConfig for model 'gpt', else a
    TrainConfig."""
    return GPTConfig(**cfg) if cfg.get("model") == LM_MODEL else TrainConfig(**cfg)


def build(cfg: GPTConfig, vocab: int) -> nn.Module:
    """The task's model over a vocabulary of `vocab` words (its `build`, initialised from torch's global RNG);
    ValueError unless it is a TinyGPT (what the strategies split)."""
    from ..gpt import TinyGPT
    from ..tasks import get_task

    model = get_task(cfg.task).build(cfg, SimpleNamespace(vocab=vocab))
    if not isinstance(model, TinyGPT):
        raise ValueError(f"task {cfg.task!r} builds a {type(model).__name__}; the parallelisms train the tiny GPT "
                         "(lab.train.gpt.TinyGPT) of the language-model tasks")
    return model


def small_model(cfg: GPTConfig) -> nn.Module:
    """The task's model over a 3-word vocabulary, the random stream left as it was: its sizes checked and its
    layers counted before any rank starts."""
    with torch.random.fork_rng(devices=[]):
        return build(cfg, 3)


def optimizer(cfg: TrainConfig, params: Any) -> torch.optim.Optimizer:
    """cfg's optimizer over params: AdamW (weight decay 0, as converge trains the language model), or
    `lab.train.models.make_optimizer`'s SGD / RMSProp."""
    from ..models import make_optimizer

    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    return make_optimizer(cfg.optimizer, params, cfg.lr, cfg.momentum)


# -- the data (converge's TaskData uses the same functions)

def windows(tokens: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The consecutive windows of `context` tokens of `tokens` and their next tokens, (n, context) each."""
    n = (tokens.numel() - 1) // context
    return tokens[:n * context].view(n, context), tokens[1:n * context + 1].view(n, context)


def epoch_samples(tokens: torch.Tensor, context: int) -> int:
    """An epoch of a language model, in windows: as many windows of `context` tokens as the split holds."""
    return max(1, (tokens.numel() - 1) // context)


def perplexity(loss: float) -> float:
    """exp(loss per token), capped at exp(50) (NaN stays NaN)."""
    return math.exp(min(loss, 50.0))


class LMStream:
    """Seeded global batches: `batch` windows of `context` tokens at uniformly drawn starts, and their next
    tokens. `samples` counts the windows drawn (ShardStream's interface)."""

    def __init__(self, tokens: torch.Tensor, batch: int, context: int, seed: int) -> None:
        if tokens.numel() < context + 2:
            raise ValueError(f"{tokens.numel()} training tokens are too few for a context of {context}")
        self.tokens, self.size, self.context = tokens, batch, context
        self.gen = torch.Generator().manual_seed(seed)
        self.samples = 0

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        data, T = self.tokens, self.context
        starts = torch.randint(0, data.numel() - T - 1, (self.size,), generator=self.gen).tolist()
        self.samples += self.size
        return torch.stack([data[s:s + T] for s in starts]), torch.stack([data[s + 1:s + T + 1] for s in starts])


class LMData:
    """A language-model task's data on a rank: the corpus' training tokens (`stream`), the validation windows
    (`test_x`, `test_y`), `vocab` (the words kept), `samples_per_epoch` (`epoch_samples`)."""

    def __init__(self, cfg: GPTConfig) -> None:
        from lab.data import load_corpus

        corpus = load_corpus(cfg.corpus, cfg.data_path, vocab_size=cfg.vocab, seed=0)
        if corpus.valid.numel() < cfg.context + 1 or corpus.train.numel() < cfg.context + 2:
            raise ValueError(f"corpus {corpus.name!r} is too short for a context of {cfg.context} tokens")
        self.name, self.source, self.vocab, self.context = corpus.name, corpus.source, corpus.vocab_size, cfg.context
        self.train_tokens, self.valid_tokens = corpus.train, corpus.valid[:VALID_TOKENS]
        self.test_x, self.test_y = windows(self.valid_tokens, cfg.context)
        self.samples_per_epoch = epoch_samples(self.train_tokens, cfg.context)

    def stream(self, batch: int, seed: int) -> LMStream:
        return LMStream(self.train_tokens, batch, self.context, seed)

    def build(self, cfg: GPTConfig) -> nn.Module:
        """The task's TinyGPT over this corpus' vocabulary (from torch's global RNG, seeded by the caller)."""
        return build(cfg, self.vocab)

    @staticmethod
    def scored(error: float, loss: float) -> tuple[float, float]:
        """(perplexity, loss per token) from an evaluation's (token error %, loss per token)."""
        return perplexity(loss), loss

    def evaluate(self, model: nn.Module, chunk: int = 256) -> tuple[float, float]:
        """(perplexity, cross-entropy per token) of `model` on the validation windows, in eval mode without
        gradients (RankLoop's order: the quality first)."""
        was = model.training
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, len(self.test_y), chunk):
                total += float(F.cross_entropy(model(self.test_x[i:i + chunk]), self.test_y[i:i + chunk],
                                               reduction="sum"))
        model.train(was)
        loss = total / self.test_y.numel()
        return perplexity(loss), loss


def rank_data(cfg: TrainConfig) -> Any:
    """A rank's data: LMData for a language-model config, else the image Dataset (`lab.train.run.load_data`)."""
    return LMData(cfg) if is_lm(cfg) else load_data(cfg)


__all__ = ["GPTConfig", "LMData", "LMStream", "LM_MODEL", "VALID_TOKENS", "is_lm", "config_of", "build", "small_model",
           "optimizer", "windows", "epoch_samples", "perplexity", "rank_data"]
