"""Headless entry point: reproduce the lab's tables and run its benchmarks (`paralab --help`).
One module per capability registers its commands on the shared typer apps of `base`."""
from __future__ import annotations

from . import quiet  # noqa: F401  first: filters known third-party import-time messages

from .base import STOPPED, TORCHRUN_COMMANDS, app, bench_app  # noqa: E402

# each module registers its commands on import, in the order `paralab --help` lists them
from . import codecs, comm, train, dropout, deep_image, pays  # noqa: E402,I001
from . import trace  # noqa: E402,I001
from . import converge, race  # noqa: E402,I001
from . import kernels  # noqa: E402,I001
from . import operators  # noqa: E402,I001
from . import dashboard  # noqa: E402,I001

CAPABILITIES = (codecs, comm, train, dropout, deep_image, pays, trace, converge, race, kernels, operators, dashboard)

__all__ = ["app", "bench_app", "main", "CAPABILITIES", "TORCHRUN_COMMANDS"]


def main() -> None:
    """Run the CLI. A failed run of ranks (a rank died or hung) is a one-line error naming the
    rank, exit code 1. Under torchrun, end like a launched rank (lab.comm.launch): destroy the
    process group and skip interpreter teardown, where DDP's reducer threads met std::terminate
    (SIGABRT) after the work was done and torchrun then reported the run as failed."""
    import os
    import sys

    if "TORCHELASTIC_RUN_ID" not in os.environ:
        code = _run()
        if code == STOPPED:
            # What finished is written and the ranks are gone; the interpreter's shutdown (torch.compile's
            # worker threads, atexit hooks) once turned the stop into a death by SIGINT (exit -2) in CI.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        raise SystemExit(code)
    code = 1
    try:
        code = _run()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import torch.distributed as dist

        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _run() -> int:
    """The typer app; its exit code."""
    from lab.experiments import CommError

    from .base import say_error

    try:
        app(prog_name="paralab")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except CommError as e:
        say_error(str(e))
        return 1
    return 0
