"""A small CNN (two 3x3 conv + max-pool stages, 16 and 32 channels) on the image data, trained with SGD."""
from __future__ import annotations

from typing import Any

from torch import nn

from ..models import build_model
from .base import Task


def build(cfg: Any, data: Any) -> nn.Module:
    """SmallCNN over the data set's image shape, cfg.dropout's last rate before its dense layer."""
    ds = data.dataset
    return build_model("cnn", ds.features, ds.classes, ds.image_shape, dropout=tuple(cfg.dropout))


TASK = Task("cnn", "a small CNN (two 3x3 conv + max-pool stages, 16 and 32 channels) on the image data",
            "classify", "resnet50", "test error %",
            dict(dataset="auto", dropout=(0.3,), optimizer="sgd", lr=0.1, momentum=0.0, batch=64, steps=300,
                 eval_every=10),
            build, smoke=dict(dropout=(0.0,), batch=32, lr=0.3, momentum=0.0), train_model="cnn", order=20)
