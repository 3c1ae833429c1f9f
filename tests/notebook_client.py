"""nbclient's NotebookClient with the kernel's shell and IOPub channels polled in short slices.

nbclient waits for a cell's reply in one `get_msg(timeout=<the cell's whole timeout>)`, a zmq.asyncio poll. When
that poll misses the socket's wake-up, it sleeps the whole timeout, then pyzmq polls once more, finds the reply
waiting and the cell "succeeds": a silent stall of exactly the timeout (in full runs of the suite, one notebook in
about fifteen took 180 s instead of 10-20 s, its kernel idle). Polling in slices of SLICE_S bounds a missed
wake-up to one slice and changes nothing else: a message is taken as soon as a slice sees it, and the timeout
still ends the wait.

Its kernels are forked from one warm process per test process (tests/kernel_zygote.py): a notebook's kernel started
Python, ipykernel, torch and plotly afresh, ~7 of its 9-14 core-seconds."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty
from typing import Any

SLICE_S = 0.5
ZYGOTE = Path(__file__).resolve().parent / "kernel_zygote.py"
_zygote: subprocess.Popen | None = None


def kernel_zygote() -> subprocess.Popen | None:
    """This process's kernel zygote (started on first use, stopped with this process; its socket is its `args[-1]`),
    or None if it could not start (kernels then start afresh)."""
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        close_kernel_zygote()
        path = os.path.join(tempfile.mkdtemp(prefix="paralab-kernels-"), "zygote")
        _zygote = subprocess.Popen([sys.executable, str(ZYGOTE), "serve", path], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        if _zygote.stdout.readline().strip() != "ready":
            close_kernel_zygote()
    return _zygote


def close_kernel_zygote() -> None:
    """Stop this process's kernel zygote, if there is one: its stdin closed, it kills any kernel it still runs and
    leaves (killed if it has not within 10 s); its socket's folder is removed."""
    global _zygote
    if _zygote is None:
        return
    zygote, _zygote = _zygote, None
    zygote.stdin.close()
    try:
        zygote.wait(10)
    except subprocess.TimeoutExpired:
        zygote.kill()
        zygote.wait()
    zygote.stdout.close()
    shutil.rmtree(os.path.dirname(zygote.args[-1]), ignore_errors=True)


atexit.register(close_kernel_zygote)


def notebook_client(nb: Any, **kwargs: Any):
    """A NotebookClient for `nb` (kwargs as NotebookClient's) whose kernel client polls in SLICE_S slices."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from nbclient import NotebookClient
    from traitlets import Type, default

    class SlicedChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
            end = None if timeout is None else time.monotonic() + timeout
            while True:
                left = SLICE_S if end is None else max(0.0, min(SLICE_S, end - time.monotonic()))
                try:
                    return await super().get_msg(timeout=left)
                except Empty:
                    if end is not None and time.monotonic() >= end:
                        raise

    class SlicedClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedChannel)
        iopub_channel_class = Type(SlicedChannel)

    class SlicedManager(AsyncKernelManager):
        @default("client_factory")
        def _sliced(self) -> type:
            return SlicedClient

        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            cmd = super().format_kernel_cmd(extra_arguments)
            zygote = kernel_zygote() if cmd[1:2] == ["-m"] else None
            return cmd if zygote is None else [sys.executable, str(ZYGOTE), zygote.args[-1], *cmd[1:]]

    return NotebookClient(nb, kernel_manager_class=SlicedManager, **kwargs)

