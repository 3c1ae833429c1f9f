"""Warm the dashboard when its server starts (issue 28: the first visit after `streamlit run` took 6.3 s on Codecs,
later ones ~1.2 s). Home starts this once per server process: a background thread opens one session of its own
over the server's websocket and runs every page's default view, as a first visitor would, so the imports, the
first torch calls and the caches those views need are paid before a learner arrives. Each page it warmed, and
the seconds it took, is printed to the server's log ("paralab warm-up: <page> <s> s"). PARALAB_WARMUP=0 switches
it off (to time a cold server)."""
from __future__ import annotations

import importlib
import os
import threading
import time
from typing import Sequence

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


def start(pages: Sequence[str], hooks: Sequence[str] = (), delay_s: float = 0.5) -> bool:
    """Start the warm-up once per process (later calls do nothing; nothing under AppTest): each page of
    `pages` (URL paths) visited, then `warm()` of each module in `hooks`. True if this call started it."""
    from streamlit.runtime import Runtime

    if _started.is_set() or type(Runtime._instance) is not Runtime:  # not under AppTest's mock runtime
        return False
    if os.environ.get("PARALAB_WARMUP", "1") == "0":  # switched off (e.g. to time a cold server)
        _started.set()
        return False
    _started.set()
    port = st.get_option("server.port")
    host = st.get_option("server.address") or "127.0.0.1"
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    url = f"ws://{host}:{port}" + (f"/{base}" if base else "")

    def run() -> None:
        time.sleep(delay_s)  # let the session that started it draw first
        try:
            _visit(url, pages)
            for module in hooks:  # what a default view needs only after a click (e.g. a prediction's answer)
                t0 = time.perf_counter()
                importlib.import_module(module).warm()
                print(f"paralab warm-up: {module}.warm() {time.perf_counter() - t0:.2f} s", flush=True)
            print(f"paralab warm-up: done, {len(done)} pages in {sum(done.values()):.1f} s", flush=True)
        except Exception as e:  # a warm-up must never take the server down: say why and stop
            print(f"paralab warm-up: stopped ({type(e).__name__}: {e})", flush=True)
    threading.Thread(target=run, name="paralab-warmup", daemon=True).start()
    return True
