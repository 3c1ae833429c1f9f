"""The private part of Streamlit's runtime the dashboard relies on, in one place: the event loop the server
serves its connections on (`Runtime._get_async_objs().eventloop`; Streamlit exports no public way to it), the
session a script run belongs to (`get_script_run_ctx().session_id`) and whether that session's browser tab is
still connected (`Runtime.is_active_session`). tests/test_streamlit_private.py pins them, so a Streamlit that
moves one fails there by name."""
from __future__ import annotations

import asyncio

from streamlit.runtime import Runtime


def server_event_loop() -> asyncio.AbstractEventLoop | None:
    """The running Streamlit server's event loop; None without a started server (AppTest, bare mode)."""
    if not Runtime.exists():
        return None
    try:
        loop = Runtime.instance()._get_async_objs().eventloop
    except RuntimeError:  # created, not started yet
        return None
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None  # AppTest's mock runtime has none


def session_id() -> str | None:
    """The id of the browser session the calling script run serves; None outside a script run."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def session_connected(session: str) -> bool | None:
    """Whether the browser session `session` is connected to the running server (its tab open); None where no
    real server runs (AppTest's mock runtime, bare mode), so nothing can be said. Safe on any thread."""
    if not Runtime.exists():
        return None
    runtime = Runtime.instance()
    if type(runtime) is not Runtime:  # AppTest's mock runtime
        return None
    return bool(runtime.is_active_session(session))


__all__ = ["server_event_loop", "session_connected", "session_id"]
