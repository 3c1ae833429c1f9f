"""The private part of Streamlit's runtime the dashboard relies on, in one place: the event loop the server
serves its connections on (`Runtime._get_async_objs().eventloop`; Streamlit exports no public way to it).
tests/test_streamlit_private.py pins it, so a Streamlit that moves it fails there by name."""
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


__all__ = ["server_event_loop"]
