"""Collectives: the Comm interface, real (torch.distributed) and simulated ranks, allreduce
algorithms with codecs on the wire, their cost models, and benchmarks (docs/design.md, Layout)."""
from .allreduce import MODES, NATIVE, algorithm_names, allreduce
from .base import Comm, CommError
from .sim import SimComm, simulate

__all__ = ["Comm", "CommError", "SimComm", "simulate", "allreduce", "algorithm_names", "MODES", "NATIVE"]
