"""app/streamlit_private.py: the running server's event loop, the session a script run serves and whether that
session is connected, read from Streamlit's private runtime API."""
from __future__ import annotations

import dataclasses

import pytest
import streamlit
from streamlit.runtime import Runtime
from streamlit.runtime.runtime import AsyncObjects

import streamlit_private
from apptest_runs import shared_components


def test_the_runtime_keeps_its_event_loop_where_the_adapter_reads_it():
    where = f"streamlit {streamlit.__version__}: Runtime._get_async_objs().eventloop"
    assert callable(getattr(Runtime, "_get_async_objs", None)), f"{where}: no _get_async_objs"
    fields = [f.name for f in dataclasses.fields(AsyncObjects)] if dataclasses.is_dataclass(AsyncObjects) \
        else list(getattr(AsyncObjects, "__annotations__", {}))
    assert "eventloop" in fields, f"{where}: AsyncObjects has {fields}"


def test_a_runtime_not_started_raises_runtime_error(monkeypatch):
    """What the adapter catches: a Runtime created but not started says so with a RuntimeError."""
    runtime = object.__new__(Runtime)
    runtime._async_objs = None
    monkeypatch.setattr(Runtime, "_instance", runtime)
    with pytest.raises(RuntimeError):
        runtime._get_async_objs()
    assert streamlit_private.server_event_loop() is None


def test_without_a_server_there_is_no_loop():
    if Runtime.exists():
        pytest.skip("a Streamlit runtime exists in this process")
    assert streamlit_private.server_event_loop() is None


def test_a_script_run_names_its_session_and_the_runtime_says_whether_it_is_connected():
    import inspect

    from streamlit.runtime.scriptrunner import get_script_run_ctx  # noqa: F401  (where the adapter reads it)
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    where = f"streamlit {streamlit.__version__}"
    assert "session_id" in [f.name for f in dataclasses.fields(ScriptRunContext)], f"{where}: ScriptRunContext"
    assert "session_id" in inspect.signature(Runtime.is_active_session).parameters, f"{where}: is_active_session"


def test_a_real_runtime_answers_for_a_session_and_a_mock_one_does_not(monkeypatch):
    """Under a started server the adapter asks the runtime (a closed tab's session is no longer active); under
    AppTest's mock runtime, or none, it cannot say (None): a background run then never counts as left."""
    class Sessions:
        def is_active_session(self, session_id: str) -> bool:
            return session_id == "open"

    runtime = object.__new__(Runtime)
    runtime._session_mgr = Sessions()
    monkeypatch.setattr(Runtime, "_instance", runtime)
    assert streamlit_private.session_connected("open") is True
    assert streamlit_private.session_connected("closed") is False
    monkeypatch.setattr(Runtime, "_instance", None)
    assert streamlit_private.session_connected("open") is None
    assert streamlit_private.session_id() is None  # no script run here


def _seen() -> None:
    import streamlit as st

    import streamlit_private as sp

    st.session_state["seen"] = (sp.session_id(), sp.session_connected(sp.session_id() or ""))


def test_under_apptest_a_run_has_a_session_but_no_connection_to_ask():
    from streamlit.testing.v1 import AppTest

    at = shared_components(AppTest.from_function(_seen, default_timeout=60)).run()
    session, connected = at.session_state["seen"]
    assert isinstance(session, str) and session and connected is None
