"""Models of the training experiments: the paper's MLP and a small CNN.

Dettmers 2016 §3.4: a 784-1024-1024-10 network of rectified linear (or logistic) units with
dropout (0.2, 0.3, 0.3) on the input and the two hidden layers, trained with RMSProp, lr 0.003.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "logistic": nn.Sigmoid}
MODELS = ("mlp", "cnn")
PAPER_HIDDEN = (1024, 1024)
PAPER_DROPOUT = (0.2, 0.3, 0.3)


def check_rates(dropout: Sequence[float], n: int) -> tuple[float, ...]:
    """The `n` dropout rates as floats; ValueError unless there are n, each 0 <= p < 1 (NaN is not)."""
    rates = tuple(float(p) for p in dropout)
    if len(rates) != n:
        raise ValueError(f"dropout needs {n} rates (input and each hidden layer), got {len(rates)}: {rates}")
    for p in rates:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout rate {p}; allowed: 0 <= p < 1")
    return rates


class MLP(nn.Sequential):
    """Dropout -> Linear -> activation per hidden layer, then dropout -> Linear to the classes.

    `dense` lists the Linear layers in order (model parallelism splits them)."""

    def __init__(self, features: int, classes: int, hidden: Sequence[int] = PAPER_HIDDEN,
                 dropout: Sequence[float] = PAPER_DROPOUT, activation: str = "relu") -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r}; allowed: {', '.join(ACTIVATIONS)}")
        hidden = tuple(int(h) for h in hidden)
        if features < 1 or classes < 2 or any(h < 1 for h in hidden):
            raise ValueError(f"MLP sizes must be positive with >= 2 classes: {features}-{hidden}-{classes}")
        rates = check_rates(dropout, len(hidden) + 1)
        sizes = (features, *hidden, classes)
        layers: list[nn.Module] = []
        for i in range(len(sizes) - 1):
            layers += [nn.Dropout(rates[i]), nn.Linear(sizes[i], sizes[i + 1])]
            if i < len(sizes) - 2:
                layers.append(ACTIVATIONS[activation]())
        super().__init__(*layers)
        self.sizes, self.rates, self.activation = sizes, rates, activation

    @property
    def dense(self) -> list[nn.Linear]:
        return [m for m in self if isinstance(m, nn.Linear)]


class SmallCNN(nn.Module):
    """Two 3x3 conv + max-pool stages (16, 32 channels), then dropout and one dense layer."""

    def __init__(self, image_shape: tuple[int, int], classes: int, dropout: float = 0.3) -> None:
        super().__init__()
        h, w = image_shape
        if h < 4 or w < 4:
            raise ValueError(f"SmallCNN needs images of at least 4x4 pixels, got {h}x{w}")
        check_rates([dropout], 1)
        self.image_shape = (h, w)
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(32 * (h // 4) * (w // 4), classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.view(-1, 1, *self.image_shape)))


def build_model(name: str, features: int, classes: int, image_shape: tuple[int, int] | None = None, *,
                hidden: Sequence[int] = PAPER_HIDDEN, dropout: Sequence[float] = PAPER_DROPOUT,
                activation: str = "relu") -> nn.Module:
    """'mlp' (the paper's, sizes adjustable) or 'cnn' (SmallCNN over image_shape)."""
    if name == "mlp":
        return MLP(features, classes, hidden, dropout, activation)
    if name == "cnn":
        if image_shape is None or image_shape[0] * image_shape[1] != features:
            raise ValueError(f"the cnn needs an image shape whose pixels match the {features} features")
        return SmallCNN(image_shape, classes, dropout[-1] if len(dropout) else 0.0)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


OPTIMIZERS = ("rmsprop", "sgd")


def make_optimizer(name: str, params, lr: float, momentum: float = 0.9) -> torch.optim.Optimizer:
    """RMSProp (the paper's; Tieleman & Hinton 2012, smoothing 0.9) or SGD with momentum."""
    if not lr > 0:
        raise ValueError(f"learning rate {lr}; it must be > 0")
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=0.9)
    if name == "sgd":
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum {momentum}; allowed: 0 <= momentum < 1")
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    raise ValueError(f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}")


__all__ = ["MLP", "SmallCNN", "build_model", "make_optimizer", "MODELS", "OPTIMIZERS", "ACTIVATIONS"]
