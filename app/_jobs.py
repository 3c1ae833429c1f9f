"""Background runs for a page's expensive section (issue 17: Run with progress and Stop).

Run starts the experiment in a thread of the server, so a click elsewhere on the page (which reruns
the script) neither restarts nor stops it. The experiment streams rows (its partial curve) and
progress into the job; Stop ends it at its next report and keeps those rows; a finished result stays
until the next Run, whatever else changes on the page. Finished jobs are kept per parameters across
sessions (a shared URL with the run's token shows it). No experiment logic here (DESIGN.md rule 3)."""
from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

from lab.experiments import USER_ERRORS

POLL_S = 1.0  # how often a running job's section redraws (each redraw takes the server's time from the run)


class Stopped(Exception):
    """Raised inside the experiment's callback when Stop was pressed."""


def token(params: Any) -> str:
    """A short hash of the parameters a run depends on (kept in the URL)."""
    return hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]


@dataclass
class Job:
    """One background run: its streamed rows, progress, state and result."""

    name: str
    token: str
    params: Any
    rows: list = field(default_factory=list)
    frac: float = 0.0
    msg: str = "starting…"
    state: str = "running"  # running | done | stopped | failed
    result: Any = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.state == "running"

    def progress(self, frac: float, msg: str) -> None:
        """The experiment's (fraction, message) callback; raises Stopped after Stop."""
        if self._stop.is_set():
            raise Stopped()
        self.frac, self.msg = min(max(float(frac), 0.0), 1.0), str(msg)

    def on_row(self, row: dict) -> None:
        """The experiment's row callback (partial results); raises Stopped after Stop."""
        if self._stop.is_set():
            raise Stopped()
        self.rows.append(dict(row))

    def stop(self, wait_s: float = 3.0) -> None:
        """Ask the run to end at its next report; wait a little for it so the page shows 'stopped'."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait_s)


@st.cache_resource
def _store() -> dict:
    """(section name, token) -> Job, shared by the server's sessions."""
    return {}


def _run(job: Job, fn: Callable[[Job], Any]) -> None:
    try:
        job.result = fn(job)
        job.state = "done"
    except Stopped:
        job.state = "stopped"
    except USER_ERRORS as e:
        job.error, job.state = str(e), "failed"
    except Exception as e:  # noqa: BLE001 - a page shows a message, never a traceback; the log keeps it
        traceback.print_exc()
        job.error, job.state = f"{type(e).__name__}: {e}", "failed"
    job.finished = time.time()
    if job.state == "stopped":
        job.msg = f"stopped after {len(job.rows)} result rows"


def _start(name: str, tok: str, params: Any, fn: Callable[[Job], Any], max_jobs: int = 32) -> Job:
    store = _store()
    while len(store) >= max_jobs:  # forget the oldest finished job
        old = next((k for k, j in store.items() if not j.running), None)
        if old is None:
            break
        store.pop(old)
    job = Job(name, tok, params)
    store[(name, tok)] = job
    job._thread = threading.Thread(target=_run, args=(job, fn), name=f"paralab-{name}-{tok}", daemon=True)
    job._thread.start()
    return job


def controls(name: str, params: Any, fn: Callable[[Job], Any], *, label: str = "Run", help: str | None = None,
             auto: bool = False, wait_s: float = 0.0) -> Job | None:
    """Run and Stop buttons for section `name` and the job to show: the one this session last ran
    (running, done, stopped or failed), else a finished job for `params` when the URL asks for it
    (`<name>=<token>`) or `auto`; None before any run. `fn(job)` computes the result, calling
    `job.progress(frac, msg)` and `job.on_row(row)` as it goes. With `auto`, a run for `params`
    starts without a click (for cheap defaults). A run that ends within `wait_s` seconds of its
    start is shown finished in the same pass."""
    store, tok = _store(), token(params)
    skey = f"job_{name}"
    mine = store.get(st.session_state.get(skey))
    c1, c2, c3 = st.columns([1, 1, 4])
    run = c1.button(label, type="primary", key=f"run_{name}", help=help or "start the run (it keeps going while "
                    "you change other settings; press Stop to end it early and keep what it has)")
    stop = c2.button("Stop", key=f"stop_{name}", help="end the run at its next progress report; its partial "
                     "curve stays on the page")
    if stop and mine is not None and mine.running:
        mine.stop()
        if name in st.query_params:
            del st.query_params[name]
    want = run or ((auto or st.query_params.get(name) == tok) and (mine is None or mine.token != tok)
                   and not stop)
    if want:
        job = store.get((name, tok))
        if job is None or (run and job.state in ("stopped", "failed")):
            if mine is not None and mine.running and mine.token != tok:
                mine.stop()
            job = _start(name, tok, params, fn)
            if wait_s > 0 and job._thread is not None:
                job._thread.join(wait_s)
        if job.state != "failed" or run:
            st.session_state[skey] = (name, tok)
            st.query_params[name] = tok
            mine = job
    if mine is not None and mine.state == "done":
        st.session_state[f"done_{name}"] = (name, mine.token)
    if mine is not None:
        when = {"running": "running…", "done": "finished", "stopped": "stopped (partial result)",
                "failed": "failed"}[mine.state]
        c3.caption(when + ("" if mine.token == tok else " · for earlier settings: press "
                           f"{label} to run these"))
    return mine


def last_done(name: str, other_than: Job | None = None) -> Job | None:
    """The last run of section `name` this session saw finish (kept when a later run is stopped), unless
    it is `other_than`."""
    job = _store().get(st.session_state.get(f"done_{name}"))
    return None if job is None or job is other_than or job.state != "done" else job


def poll(job: Job, draw: Callable[[Job], None]) -> None:
    """While `job` runs: a progress bar and `draw(job)` (its partial result), redrawn every POLL_S
    seconds in a fragment; when the job ends, the page reruns once to show the result."""
    def body() -> None:
        st.progress(job.frac, text=job.msg)
        draw(job)
        if not job.running:
            st.rerun()

    st.fragment(body, run_every=POLL_S)()
