"""Headless entry point: reproduce the lab's tables and run its benchmarks (`paralab --help`).
One module per capability registers its commands on the shared typer apps of `base`."""
from __future__ import annotations

from .base import app, bench_app

# each module registers its commands on import, in the order `paralab --help` lists them
from . import codecs, comm, train, dropout, deep_image  # noqa: E402,I001

CAPABILITIES = (codecs, comm, train, dropout, deep_image)

__all__ = ["app", "bench_app", "main", "CAPABILITIES"]


def main() -> None:
    """Run the CLI. Under torchrun, end like a launched rank (lab.comm.launch): destroy the process
    group and skip interpreter teardown, where DDP's reducer threads met std::terminate (SIGABRT)
    after the work was done and torchrun then reported the run as failed."""
    import os

    if "TORCHELASTIC_RUN_ID" not in os.environ:
        app()
        return
    code = 1
    try:
        app()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import sys

        import torch.distributed as dist

        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
