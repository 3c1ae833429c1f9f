"""Long experiments behind Run / Stop (issue 17): Run starts the experiment in a thread of this browser
session, so a click elsewhere on the page neither restarts nor kills it; a fragment polls it and draws the
progress bar and the partial curve; Stop asks it to stop at its next progress report and keeps the partial
curve; the last finished result stays on the page, through unrelated widget changes, until a newer run
finishes. No experiment logic here (DESIGN.md rule 3): the page passes a function of a `Job`.

A finished result is also kept per parameter set across sessions (`_common.cached_run`'s store), and the
URL records `<key>=<hash of the parameters>`, so a shared link shows the same result (re-run on a fresh
server)."""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

import _common as ui


class Stopped(Exception):
    """Raised inside the experiment (from its progress or point callback) when Stop was pressed."""


@dataclass(eq=False)
class Job:
    """One run: its parameters, progress, streamed points, result or error message."""

    key: str
    token: str
    params: Any
    frac: float = 0.0
    msg: str = "starting…"
    points: list = field(default_factory=list)
    result: Any = None
    error: str | None = None
    bug: BaseException | None = None
    stopped: bool = False
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    stop_event: threading.Event = field(default_factory=threading.Event)
    go_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    @property
    def finished(self) -> bool:
        return self.result is not None and not self.running

    def progress(self, frac: float, msg: str) -> None:
        """The experiments' progress callback (fraction, message); raises Stopped after Stop."""
        if self.stop_event.is_set():
            raise Stopped()
        self.frac, self.msg = min(max(float(frac), 0.0), 1.0), str(msg)

    def curve(self) -> list:
        """A snapshot of the points streamed so far (the thread keeps appending to `points`)."""
        return list(self.points)

    def on_point(self, row: dict) -> None:
        """The experiments' curve-point callback: the partial curve the page draws while it runs."""
        if self.stop_event.is_set():
            raise Stopped()
        self.points.append(dict(row))


_LIVE: "weakref.WeakSet[Job]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop running jobs (a torch op killed mid-way aborts the process)."""
    for job in list(_LIVE):
        job.stop_event.set()
    for job in list(_LIVE):
        if job.thread is not None:
            job.thread.join(timeout=10)


def _state() -> dict:
    return st.session_state.setdefault("_runs", {})


def _run(job: Job, fn: Callable[[Job], Any], store: dict) -> None:
    # wait until the page that started the run has drawn (`release`): a run timed while the same process
    # renders the page would be slowed by it, and a speedup against it would be wrong
    job.go_event.wait(timeout=5.0)
    job.started = time.perf_counter()
    try:
        job.result = fn(job)
        while len(store) >= 32:
            store.pop(next(iter(store)))
        store[(job.key, job.token)] = job.result
    except Stopped:
        job.stopped = True
    except ui.USER_ERRORS as e:
        job.error = str(e)
    except Exception as e:  # a bug: re-raised on the page (rule: a TypeError is not a user's message)
        job.bug = e
    finally:
        job.seconds = time.perf_counter() - job.started


def start(key: str, params: Any, fn: Callable[[Job], Any]) -> Job:
    """Start `fn(job)` in a thread for `params` (a running job of the same key is asked to stop)."""
    slot = _state().setdefault(key, {})
    old = slot.get("job")
    if old is not None and old.running:
        old.stop_event.set()
    job = Job(key, ui._token(params), params)
    job.thread = threading.Thread(target=_run, args=(job, fn, ui._results()), daemon=True, name=f"paralab-{key}")
    slot["job"] = job
    _LIVE.add(job)
    job.thread.start()
    return job


def current(key: str) -> Job | None:
    """The latest job of `key` in this session (running, stopped, failed or finished)."""
    return _state().get(key, {}).get("job")


def last_result(key: str) -> Job | None:
    """The last job of `key` that finished with a result (kept until a newer one finishes)."""
    slot = _state().get(key, {})
    job = slot.get("job")
    if job is not None and job.finished:
        slot["last"] = job
    return slot.get("last")


def controls(label: str, key: str, params: Any, fn: Callable[[Job], Any], help: str | None = None) -> Job | None:
    """Run and Stop buttons for `fn(job)` at `params`. Returns the job to show: the running one, else the
    last finished one (its `.params` may differ from `params`: the page says so), else a stopped or
    failed one (partial curve / message), else None. A URL carrying this key's hash of `params` (a
    shared link) shows the stored result, or starts the run once."""
    token = ui._token(params)
    row = st.container(horizontal=True, vertical_alignment="center")  # buttons as wide as their labels
    run = row.button(label, type="primary", key=f"run_{key}", help=help)
    job = current(key)
    if run:
        st.query_params[key] = token
        job = start(key, params, fn)
    elif st.query_params.get(key) == token and (job is None or job.token != token):
        stored = ui._results().get((key, token))
        if stored is not None:  # a shared link on a warm server: the stored result, no re-run
            job = Job(key, token, params, frac=1.0, msg="done", result=stored)
            _state().setdefault(key, {})["job"] = job
        else:
            job = start(key, params, fn)
    # drawn after a Run of this rerun has started its job, so Stop is live while the job runs
    stop = row.button("Stop", key=f"stop_{key}", disabled=job is None or not job.running,
                      help="stop the run: the last finished result stays, and the partial curve")
    if stop and job is not None and job.running:
        job.stop_event.set()
        job.go_event.set()
        job.thread.join(timeout=5)
    c3 = row.empty()
    if job is not None and job.bug is not None:
        bug, job.bug = job.bug, None
        raise bug
    if job is not None and job.running:
        c3.caption(f"running… {time.perf_counter() - job.started:.0f} s")
    elif job is not None and job.stopped:
        c3.caption(f"stopped after {job.seconds:.1f} s")
    return job


def release(key: str | None = None) -> None:
    """Let this session's started runs (or the run of `key`) begin: call at the end of the page or fragment
    that starts them (a run otherwise begins 5 s after it was started)."""
    for k, slot in _state().items():
        job = slot.get("job")
        if job is not None and key in (None, k):
            job.go_event.set()


def watch(key: str, draw_live: Callable[[Job], None], every: float = 1.0) -> None:
    """While the job of `key` runs: a fragment that redraws its progress and partial curve every
    `every` seconds, and reruns the page once it ends (so the result and the takeaway appear)."""
    job = current(key)
    if job is None or not job.running:
        return

    @st.fragment(run_every=every)
    def _live() -> None:
        j = current(key)
        if j is None:
            return
        st.progress(j.frac, text=j.msg)
        if j.points:
            draw_live(j)
        if not j.running:
            st.rerun(scope="app")

    _live()
