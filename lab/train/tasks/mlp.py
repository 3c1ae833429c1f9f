"""The paper's MLP on the image data (Dettmers 2016 §3.4: ReLU, dropout 0.2/0.3), trained with plain SGD."""
from __future__ import annotations

from typing import Any

from torch import nn

from ..models import build_model
from .base import Task


def build(cfg: Any, data: Any) -> nn.Module:
    """The MLP over the data set's features, cfg.hidden widths and cfg.dropout rates."""
    ds = data.dataset
    return build_model("mlp", ds.features, ds.classes, ds.image_shape, hidden=tuple(cfg.hidden or ()),
                       dropout=tuple(cfg.dropout))


TASK = Task("mlp", "the paper's MLP (Dettmers 2016 §3.4: ReLU, dropout 0.2/0.3) on digits / Fashion-MNIST",
            "classify", "alexnet", "test error %",
            dict(dataset="auto", hidden=(256, 256), dropout=(0.2, 0.3, 0.3), optimizer="sgd", lr=0.2, momentum=0.0,
                 batch=64, steps=300, eval_every=10),
            build, smoke=dict(hidden=(64,), dropout=(0.0, 0.0), batch=32, lr=0.3, momentum=0.0),
            train_model="mlp", order=10)
