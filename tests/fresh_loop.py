"""`run(coro)`: asyncio.run in a thread of its own, so a test can run a coroutine even where its worker's main
thread already has a running event loop (Playwright's sync API, kept alive between the browser tests, leaves one
there)."""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Coroutine


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """The coroutine's result, run to completion on a new event loop in a new thread."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
