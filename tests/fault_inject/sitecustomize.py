"""Test-only fault injection for rank processes started by the real CLI (tests/test_faults.py).

On PYTHONPATH, Python imports this module at start-up in every process. It acts only in a rank
process (`python -m lab.comm.launch JOBDIR RANK`, or a rank forked by a zygote, `python -m lab.comm.launch
JOBDIR zygote P` or one forked by the warm `python -m lab.comm.launch - serve`, which sets argv to JOBDIR RANK before it
forks) whose RANK matches PARALAB_FAULT_RANK: that
rank SIGKILLs itself on its PARALAB_FAULT_AT-th call of PARALAB_FAULT_IN, one of
  isend     TorchComm's point-to-point sends of encoded (uint8) payloads, counted in its batched
            exchanges: inside a compressed ring allreduce
  ddp_hook  the codec communication hook of lab.train.ddp (inside a DDP backward pass)
and records its pid in PARALAB_FAULT_PIDS (a directory), as does every other rank.
Nothing in `lab` knows about it.
"""
import os
import sys


_installed = []  # a rank's own forks (data loader workers) inherit it: they are not ranks


def _install() -> None:
    if _installed:
        return
    argv = getattr(sys, "argv", [])
    pids = os.environ.get("PARALAB_FAULT_PIDS")
    if not pids or len(argv) < 3 or not os.path.isdir(argv[-2]) or not argv[-1].isdigit():
        return  # not a rank process of lab.comm.launch (argv: ['-m', JOBDIR, RANK])
    _installed.append(True)
    rank = int(argv[-1])
    with open(os.path.join(pids, f"rank{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
    if rank != int(os.environ["PARALAB_FAULT_RANK"]):
        return
    import functools
    import signal

    at, where = int(os.environ["PARALAB_FAULT_AT"]), os.environ["PARALAB_FAULT_IN"]
    calls = [0]

    def dying(real, counts=lambda *a: 1):
        @functools.wraps(real)  # DDP checks a comm hook's signature
        def wrapper(*a, **kw):
            calls[0] += counts(*a)
            if calls[0] >= at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **kw)
        return wrapper

    if where == "isend":
        from lab.comm.dist import TorchComm
        import torch
        # every point-to-point operation goes through one batch (Comm.exchange): count its uint8 sends
        TorchComm._exchange = dying(TorchComm._exchange,
                                    lambda comm, sends, recvs: sum(t.dtype == torch.uint8 for t, _ in sends))
    elif where == "ddp_hook":
        import lab.train.ddp as ddp
        ddp.codec_hook = dying(ddp.codec_hook)
    else:
        raise ValueError(f"PARALAB_FAULT_IN={where!r}; allowed: isend, ddp_hook")


def _start() -> None:
    argv = getattr(sys, "argv", [])
    zygote = len(argv) >= 4 and argv[-2] == "zygote" and os.path.isdir(argv[-3])
    if os.environ.get("PARALAB_FAULT_PIDS") and (zygote or argv[-2:] == ["-", "serve"]):
        os.register_at_fork(after_in_child=_install)  # the forked ranks (a server's zygotes are not ranks)
    else:
        _install()


_start()
