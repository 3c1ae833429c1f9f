"""Rank functions for test_launch.py (module level, so that rank processes can import them)."""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import torch


def identity(comm) -> dict:
    """How this rank process was started: its parent, session, command line and random streams."""
    return {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": sys.argv[1:],
            "cmdline": Path("/proc/self/cmdline").read_bytes().split(b"\0")[-2].decode(),
            "randn": torch.randn(4), "omp": os.environ.get("OMP_NUM_THREADS"),
            "compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS"),
            "thp": os.environ.get("THP_MEM_ALLOC_ENABLE"), "probe": os.environ.get("PARALAB_LAUNCH_PROBE"),
            "test": os.environ.get("CALLER_NOTE"), "mpl": os.environ.get("MPLBACKEND"),
            "cwd": os.getcwd(), "umask": _umask(), "server": _parent_of(os.getppid()),
            "compile_ready": _compile_ready(), "loaded": {m: m in sys.modules for m in PRELOADS},
            "gc": (gc.isenabled(), gc.get_freeze_count()),
            "netns": os.readlink("/proc/self/ns/net"), "gloo_if": os.environ.get("GLOO_SOCKET_IFNAME")}


def dist_marker(comm) -> dict:
    """Which lab.comm.dist this rank runs (its file, and the EDITED_MARK an edit added), and its warm server."""
    from lab.comm import dist

    return {"file": dist.__file__, "mark": getattr(dist, "EDITED_MARK", None), "server": _parent_of(os.getppid())}


# modules a warm server imports ahead of its ranks: the allreduce algorithms (with the cost model's pandas) always,
# torch._dynamo once a rank of its own has imported it (test_launch)
PRELOADS = ("lab.comm.algorithms.ring", "pandas", "torch._dynamo")


def makes_an_optimizer(comm) -> None:
    """A rank that makes an optimizer: torch imports torch._dynamo at the first one."""
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def imports_inductor(comm) -> None:
    """A rank that uses torch.compile, as far as its warm server can tell: it imported inductor."""
    import torch._inductor  # noqa: F401


def runs_a_codec_pass(comm) -> dict:
    """An 8-bit encode of 2^16 values onto a wire buffer (the compiled CPU pass of lab.codecs.cpu); the graphs
    torch._dynamo had compiled in this process before it, and after."""
    from lab.codecs import get_codec
    from lab.codecs.wire import WireFormat

    fmt = WireFormat.of(get_codec("linear"), 1 << 16)
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(comm.rank))
    before = _graphs()
    fmt.encode_into(x, torch.zeros(fmt.nbytes, dtype=torch.uint8))
    return {"before": before, "after": _graphs()}


def _graphs() -> int:
    utils = sys.modules.get("torch._dynamo.utils")
    return utils.counters["stats"]["unique_graphs"] if utils else 0


def _compile_ready() -> bool:
    """torch.compile's CPU start-up already done before this rank ran: inductor imported and its vector-ISA
    probe's answer cached (by the warm server)."""
    isa = sys.modules.get("torch._inductor.cpu_vec_isa")
    return isa is not None and isa.valid_vec_isa_list.cache_info().currsize == 1


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def _parent_of(pid: int) -> int:
    from comm_ranks import proc_stat

    return int(proc_stat(pid)[1])
