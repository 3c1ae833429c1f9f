"""asyncio's private parts the dashboard relies on, in one place: `base_events._set_nodelay` (replaced) and an event
loop's open transports (`loop._transports`), for TCP_NODELAY on the dashboard server's connections.

Streamlit (1.67) binds its listening socket itself with `socket.socket(family)`, whose `proto` is 0; asyncio turns
Nagle's algorithm off only for sockets that report IPPROTO_TCP, and accepted sockets inherit the listener's 0. With
Nagle on, every response after the first on a keep-alive connection (each of the ~100 scripts a first visit loads
over the browser's 6 connections, each websocket message of a rerun) waits for the browser's delayed ACK: ~40 ms on
Linux. encode/uvicorn#3149 is the same bug in its own `bind_socket`. `install()` gives every TCP connection of this
process TCP_NODELAY: those accepted from now on and those already open. tests/test_asyncio_private.py pins what is
used, so a Python whose asyncio moves it fails there by name."""
from __future__ import annotations

import socket
from asyncio import base_events
from typing import Any

from streamlit_private import server_event_loop

ASYNCIO_SET_NODELAY = base_events._set_nodelay  # asyncio's own, before install()


def _set_nodelay(sock: Any) -> None:
    """asyncio's own `_set_nodelay` without its `proto == IPPROTO_TCP` condition."""
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # a connection that closed meanwhile
            pass


def open_connections(loop: Any) -> None:
    """TCP_NODELAY on the connections `loop` already serves (run on the loop's own thread)."""
    for transport in list(getattr(loop, "_transports", {}).values()):
        sock = transport.get_extra_info("socket")
        if sock is not None:
            _set_nodelay(sock)


def install() -> bool:
    """Once per process (the dashboard's entry calls it on every run): connections accepted from now on get
    TCP_NODELAY, and those already open get it on the server's event loop. False when already installed."""
    if base_events._set_nodelay is _set_nodelay:
        return False
    base_events._set_nodelay = _set_nodelay
    loop = server_event_loop()
    if loop is None:  # no running server (AppTest, bare mode): nothing open to fix
        return True
    loop.call_soon_threadsafe(open_connections, loop)
    return True
