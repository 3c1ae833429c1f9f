"""app/asyncio_private.py: the dashboard server's connections without Nagle's algorithm, through asyncio's private
`_set_nodelay` and `loop._transports` (pinned first, by name). A listener bound the way
Streamlit 1.67 binds it (`socket.socket(family)`, proto 0) hands asyncio sockets it leaves Nagle on for, so each
keep-alive response waits ~40 ms for the browser's delayed ACK."""
import asyncio
import socket
from asyncio import base_events

import pytest

import asyncio_private
import fresh_loop


def _listener() -> socket.socket:
    s = socket.socket(family=socket.AF_INET)  # as streamlit's starlette_server._bind_socket: proto 0
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    return s


async def _accepted_nodelay(fix_open: bool = False) -> int:
    """TCP_NODELAY of the server side of one connection to a proto-0 listener (after `open_connections` on
    the loop when `fix_open`)."""
    loop = asyncio.get_running_loop()
    made = asyncio.Event()
    seen = {}

    class Proto(asyncio.Protocol):
        def connection_made(self, transport):
            seen["transport"] = transport
            made.set()

    server = await loop.create_server(Proto, sock=_listener())
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.wait_for(made.wait(), 5)
    if fix_open:
        asyncio_private.open_connections(loop)
    sock = seen["transport"].get_extra_info("socket")
    value = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    writer.close()
    server.close()
    await server.wait_closed()
    return value


def test_asyncio_still_has_what_the_adapter_replaces_and_reads():
    import inspect
    import sys

    own = asyncio_private.ASYNCIO_SET_NODELAY
    assert callable(own) and list(inspect.signature(own).parameters) == ["sock"], \
        f"Python {sys.version.split()[0]}: asyncio.base_events._set_nodelay(sock) is gone or changed"

    async def transports() -> object:
        return getattr(asyncio.get_running_loop(), "_transports", None)
    assert hasattr(fresh_loop.run(transports()), "values"), \
        f"Python {sys.version.split()[0]}: an asyncio event loop no longer keeps its open transports in _transports"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(base_events, "_set_nodelay", asyncio_private.ASYNCIO_SET_NODELAY)  # as if never installed


def test_a_proto_0_listener_leaves_nagle_on_without_it_and_off_with_it(fresh):
    if fresh_loop.run(_accepted_nodelay()):
        pytest.skip("this Python's asyncio already sets TCP_NODELAY on proto-0 sockets: nothing to mend")
    assert asyncio_private.install() is True and asyncio_private.install() is False  # once per process
    assert fresh_loop.run(_accepted_nodelay()) == 1


def test_connections_already_open_are_mended_on_their_loop(fresh):
    if fresh_loop.run(_accepted_nodelay()):
        pytest.skip("this Python's asyncio already sets TCP_NODELAY on proto-0 sockets: nothing to mend")
    assert fresh_loop.run(_accepted_nodelay(fix_open=True)) == 1


def test_install_without_a_server_only_patches(fresh):
    """Under AppTest or bare mode there is no runtime: install still patches and raises nothing."""
    assert asyncio_private.install() is True
    assert base_events._set_nodelay is asyncio_private._set_nodelay
