"""app/streamlit_private.py: the running server's event loop, read from Streamlit's private runtime API."""
from __future__ import annotations

import dataclasses

import pytest
import streamlit
from streamlit.runtime import Runtime
from streamlit.runtime.runtime import AsyncObjects

import streamlit_private


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
