"""Parallelisms run on real ranks beyond data parallelism (`paralab train --mode NAME`), one module each
defining `STRATEGY` (see `base.py`): pipeline, tensor, hybrid and expert parallelism."""
from .base import (ENV, REGISTRY, ParallelResult, Settings, Strategy, assemble, get_strategy, register,
                   strategy_infos, strategy_names, train_parallel)

__all__ = ["Strategy", "Settings", "ParallelResult", "REGISTRY", "ENV", "assemble", "get_strategy", "register",
           "strategy_infos", "strategy_names", "train_parallel"]
