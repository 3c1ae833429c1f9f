"""nbclient's NotebookClient with the kernel's shell and IOPub channels polled in short slices.

nbclient waits for a cell's reply in one `get_msg(timeout=<the cell's whole timeout>)`, a zmq.asyncio poll. When
that poll misses the socket's wake-up, it sleeps the whole timeout, then pyzmq polls once more, finds the reply
waiting and the cell "succeeds": a silent stall of exactly the timeout (in full runs of the suite, one notebook in
about fifteen took 180 s instead of 10-20 s, its kernel idle). Polling in slices of SLICE_S bounds a missed
wake-up to one slice and changes nothing else: a message is taken as soon as a slice sees it, and the timeout
still ends the wait."""
from __future__ import annotations

import time
from queue import Empty
from typing import Any

SLICE_S = 0.5


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

    return NotebookClient(nb, kernel_manager_class=SlicedManager, **kwargs)

