"""Warm the dashboard when its server starts (measured: the first visit after `streamlit run` took 6.3 s on Codecs,
later ones ~1.2 s). A background thread opens one session of its own over the server's websocket and runs every
page's default view, as a first visitor would, then each page's `warm()` hook, so the imports, the first torch
calls and the caches those views need are paid before a learner arrives. Once per server process, started with
the server, before anyone connects, however it is started: `streamlit run app/Home.py` finds the st.App that
Home.py defines when imported and serves it, and that app's `lifespan` starts the warm-up (as do
`python app/serve.py` and `paralab dashboard`, which run the same). Under a Streamlit without st.App, which only
runs Home.py as each session's script, the first session starts it instead (`start`).
How it started, each page it warmed and the seconds it took are printed to the server's log ("paralab warm-up:
started with the server", "paralab warm-up: <page> <s> s").
PARALAB_WARMUP=0 switches it off (to time a cold server)."""
from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Sequence

import streamlit as st

_started = threading.Event()  # once per server process
done: dict[str, float] = {}   # URL path -> seconds its default view took in the warm-up


def _visit(url: str, pages: Sequence[str], timeout_s: float = 300.0) -> None:
    """Run each page's default view in one websocket session of the server at `url` (ws://host:port)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    with connect(f"{url}/_stcore/stream", subprotocols=["streamlit"], open_timeout=30,
                 max_size=None) as ws:
        for page in pages:
            msg = BackMsg()
            msg.rerun_script.query_string = ""
            msg.rerun_script.page_name = page
            t0 = time.perf_counter()
            ws.send(msg.SerializeToString())
            deadline = t0 + timeout_s
            while time.perf_counter() < deadline:
                fwd = ForwardMsg()
                fwd.ParseFromString(ws.recv(timeout=deadline - time.perf_counter()))
                if fwd.WhichOneof("type") == "script_finished":
                    break
            done[page] = time.perf_counter() - t0
            print(f"paralab warm-up: {page or 'home'} {done[page]:.2f} s", flush=True)


def _warm(url: str, pages: Sequence[str] | None, hooks: Sequence[str] | None) -> None:
    """Visit `pages` (None: every page of page_list but Home) at `url`, then run the `warm()` of each module in
    `hooks` (None: every page module that has one); logged, never raising."""
    try:
        if pages is None or hooks is None:
            import page_list
            pages = [p.url_path for p in page_list.PAGES if p is not page_list.HOME] if pages is None else pages
            hooks = [p.module for p in page_list.PAGES
                     if hasattr(importlib.import_module(p.module), "warm")] if hooks is None else hooks
        _visit(url, pages)
        for module in hooks:  # what a default view needs only after a click (e.g. a prediction's answer)
            t0 = time.perf_counter()
            importlib.import_module(module).warm()
            print(f"paralab warm-up: {module}.warm() {time.perf_counter() - t0:.2f} s", flush=True)
        # Every page's modules and caches now live as long as the server: frozen, the garbage collector's full
        # collections (~12 % of the server's CPU) skip them from here on
        gc.collect()
        gc.freeze()
        print(f"paralab warm-up: done, {len(done)} pages in {sum(done.values()):.1f} s; "
              f"{gc.get_freeze_count()} objects frozen", flush=True)
    except Exception as e:  # a warm-up must never take the server down: say why and stop
        print(f"paralab warm-up: stopped ({type(e).__name__}: {e})", flush=True)


def _server_url(scheme: str = "ws") -> str:
    """The running server's address from Streamlit's options (host, port, base path)."""
    port = st.get_option("server.port")
    host = st.get_option("server.address") or "127.0.0.1"
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"{scheme}://{host}:{port}" + (f"/{base}" if base else "")


def _claim() -> bool:
    """True for the one caller per process that may start the warm-up (and not when it is switched off)."""
    if _started.is_set():
        return False
    _started.set()
    return os.environ.get("PARALAB_WARMUP", "1") != "0"


def start(pages: Sequence[str] | None = None, hooks: Sequence[str] | None = None, delay_s: float = 0.5) -> bool:
    """From a session of a running server whose start did not begin the warm-up (`lifespan`; Home calls it on every
    run): start it once per process (later calls, and a server whose start began it, do nothing; nothing under
    AppTest).
    `pages`: URL paths to visit, `hooks`: modules whose `warm()` to run (None: all). True if this call started it."""
    from streamlit.runtime import Runtime

    real = Runtime.exists() and type(Runtime.instance()) is Runtime  # not under AppTest's mock runtime
    if not real or not _claim():
        return False
    url = _server_url()

    def run() -> None:
        time.sleep(delay_s)  # let the session that started it draw first
        print("paralab warm-up: started by the first session", flush=True)
        _warm(url, pages, hooks)
    threading.Thread(target=run, name="paralab-warmup", daemon=True).start()
    return True


@asynccontextmanager
async def lifespan(_app: Any) -> AsyncIterator[None]:
    """The st.App's startup and shutdown (Home.py's `app`): the warm-up starts with the server, in a thread that
    waits for the server to answer and then warms it (`_when_up`), before any session opens."""
    if _claim():
        threading.Thread(target=_when_up, name="paralab-warmup", daemon=True).start()
    yield


def _when_up(timeout_s: float = 120.0) -> None:
    """In a thread of the launching process: wait for the Streamlit server to answer, then warm it."""
    import urllib.request

    from streamlit.runtime import Runtime

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if Runtime.exists():  # the options are loaded once the runtime exists
            try:
                with urllib.request.urlopen(f"{_server_url('http')}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        print("paralab warm-up: started with the server", flush=True)
                        _warm(_server_url(), None, None)
                        return
            except OSError:
                pass
        time.sleep(0.2)
    print("paralab warm-up: stopped (the server did not answer)", flush=True)


def serve(script: str, args: Sequence[str] = ()) -> None:
    """`streamlit run <script> <args>` in this process (app/serve.py, `paralab dashboard`): Home.py's st.App starts
    the warm-up with the server (`lifespan`). Blocks until the server stops."""
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", script, *args]
    cli.main()
