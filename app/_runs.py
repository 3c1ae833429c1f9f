"""Long experiments behind Run / Stop, the one place for background runs (docs/design.md rule 6).

Run starts the experiment in a thread of the server, so a click elsewhere on the page neither restarts nor
kills it; a fragment polls it and draws the progress bar and the partial result (the rows it streams);
Stop asks it to stop at its next progress report or row and keeps those rows; the last finished result
stays on the page, through unrelated widget changes, until a newer run finishes. A run whose browser tab is
closed (its session no longer connected for `LEFT_AFTER_S`) stops the same way: nobody is left to see it. The
progress bar estimates the time left from the progress so far (`time_left`). With `auto`, a cheap
default starts without a click. No experiment logic here (docs/design.md rule 3): the page passes a function
of a `Job`.

A run begins only once the page that started it has drawn (`release`), so a run timed while the same
process renders the page is not slowed by it. A finished result is kept per parameter set across sessions
(`_common.cached_run`'s store), and the URL records `<key>=<hash of the parameters>`, so a shared link shows
the same result (re-run on a fresh server). A user's error is a message; a bug is re-raised on the page."""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

import _common as ui
import streamlit_private

#: a run stops when its browser session has been disconnected this long (seconds): a closed tab, not a reconnect
LEFT_AFTER_S = 10.0


class Stopped(Exception):
    """Raised inside the experiment (from its progress or row callback) when Stop was pressed."""


def token(params: Any) -> str:
    """A short hash of the parameters a run depends on (kept in the URL as `<key>=<token>`)."""
    return ui.params_token(params)


@dataclass(eq=False)
class Job:
    """One run: its parameters, progress, streamed rows, result or error message."""

    key: str
    token: str
    params: Any
    frac: float = 0.0
    msg: str = "starting…"
    rows: list = field(default_factory=list)
    result: Any = None
    error: str | None = None
    bug: BaseException | None = None
    stopped: bool = False
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    stop_event: threading.Event = field(default_factory=threading.Event)
    go_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    session: str | None = None  # the browser session that started it (None: no server to ask, as under AppTest)
    gone_since: float | None = None  # when its session was first seen disconnected (time.monotonic())
    left: bool = False  # stopped because its browser tab closed

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    @property
    def finished(self) -> bool:
        return self.result is not None and not self.running

    @property
    def state(self) -> str:
        """running | done | stopped | failed."""
        if self.running:
            return "running"
        if self.error is not None or self.bug is not None:
            return "failed"
        return "stopped" if self.stopped else "done"

    def _check(self) -> None:
        """Raise Stopped after Stop, or once the session that started the run has been gone `LEFT_AFTER_S`."""
        if self.session is not None and not self.stop_event.is_set():
            if streamlit_private.session_connected(self.session) is False:
                now = time.monotonic()
                self.gone_since = self.gone_since or now
                if now - self.gone_since >= LEFT_AFTER_S:
                    self.left = True
                    self.stop_event.set()
            else:
                self.gone_since = None
        if self.stop_event.is_set():
            raise Stopped()

    def progress(self, frac: float, msg: str) -> None:
        """The experiments' progress callback (fraction, message); raises Stopped after Stop or when the run's
        browser tab has closed."""
        self._check()
        self.frac, self.msg = min(max(float(frac), 0.0), 1.0), str(msg)

    def on_row(self, row: dict) -> None:
        """The experiments' row / curve-point callback (`on_row=`, `on_point=`): the partial result the page
        draws while it runs and keeps after Stop; raises Stopped after Stop or when the run's browser tab has
        closed."""
        self._check()
        self.rows.append(dict(row))

    def curve(self) -> list:
        """A snapshot of the rows streamed so far (the thread keeps appending to `rows`)."""
        return list(self.rows)

    def stop(self, wait_s: float = 5.0) -> None:
        """Ask the run to end at its next report; wait a little for it so the page shows 'stopped'."""
        self.stop_event.set()
        self.go_event.set()
        if self.thread is not None:
            self.thread.join(timeout=wait_s)


_LIVE: "weakref.WeakSet[Job]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop running jobs (a torch op killed mid-way aborts the process)."""
    for job in list(_LIVE):
        job.stop_event.set()
        job.go_event.set()
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
        if job.stop_event.is_set():
            raise Stopped()
        job.result = fn(job)
        while len(store) >= 32:
            store.pop(next(iter(store)))
        store[(job.key, job.token)] = job.result
        job.frac, job.msg = 1.0, "done"
    except Stopped:
        job.stopped = True
        job.msg = f"stopped after {len(job.rows)} result rows" + (": its browser tab closed" if job.left else "")
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
        old.go_event.set()
    job = Job(key, token(params), params, session=streamlit_private.session_id())
    job.thread = threading.Thread(target=_run, args=(job, fn, ui.results_store()), daemon=True, name=f"paralab-{key}")
    slot["job"] = job
    _LIVE.add(job)
    job.thread.start()
    return job


def current(key: str) -> Job | None:
    """The latest job of `key` in this session (running, stopped, failed or finished)."""
    return _state().get(key, {}).get("job")


def last_result(key: str, other_than: Job | None = None) -> Job | None:
    """The last job of `key` this session saw finish with a result (kept until a newer one finishes, and
    when a later run is stopped or fails), unless it is `other_than`."""
    slot = _state().get(key, {})
    job = slot.get("job")
    if job is not None and job.finished:
        slot["last"] = job
    last = slot.get("last")
    return None if last is other_than else last


def controls(label: str, key: str, params: Any, fn: Callable[[Job], Any], help: str | None = None, *,
             auto: bool = False, wait_s: float = 0.0) -> Job | None:
    """Run and Stop buttons for `fn(job)` at `params` (`fn` calls `job.progress(frac, msg)` and
    `job.on_row(row)` as it goes). Returns this session's latest job of `key` (running, finished - its
    `.token` may differ from `token(params)`: the caption says so - stopped or failed), else None. A URL
    carrying this key's hash of `params` (a shared link), or `auto` (for cheap defaults), shows the stored
    result for `params` or starts the run once. A run that ends within `wait_s` seconds of its start is
    shown finished in the same pass."""
    tok = token(params)
    row = st.container(horizontal=True, vertical_alignment="center")  # buttons as wide as their labels
    run = row.button(label, type="primary", key=f"run_{key}", help=help or (
        "start the run (it keeps going while you change other settings; press Stop to end it early and keep "
        "what it has)"))
    job = current(key)
    started = False
    if run:
        st.query_params[key] = tok
        job, started = start(key, params, fn), True
    elif (auto or st.query_params.get(key) == tok) and (job is None or job.token != tok):
        stored = ui.results_store().get((key, tok))
        if stored is not None:  # a shared link on a warm server: the stored result, no re-run
            job = Job(key, tok, params, frac=1.0, msg="done", result=stored)
            _state().setdefault(key, {})["job"] = job
        else:
            job, started = start(key, params, fn), True
        st.query_params[key] = tok
    if started and wait_s > 0:  # nothing else is drawn meanwhile: the run may begin at once
        job.go_event.set()
        job.thread.join(wait_s)
    # drawn after a Run of this rerun has started its job, so Stop is live while the job runs
    stop = row.button("Stop", key=f"stop_{key}", disabled=job is None or not job.running,
                      help="end the run at its next progress report: the last finished result stays, and the "
                           "partial result")
    if stop and job is not None and job.running:
        job.stop()
    c3 = row.empty()
    if job is not None and job.bug is not None:
        bug, job.bug = job.bug, None
        raise bug
    last_result(key)  # remember a finished job, so a later stopped run can still show it
    if job is not None:
        later = "" if job.token == tok or job.running else f" · for earlier settings: press {label} to run these"
        c3.caption({"running": "running… (the seconds count on its progress bar)",
                    "done": f"finished in {job.seconds:.1f} s" if job.seconds else "finished (stored result)",
                    "stopped": f"stopped after {job.seconds:.1f} s (partial result)",
                    "failed": "failed"}[job.state] + later)
    return job


def _duration(seconds: float) -> str:
    """'45 s', '3 min 20 s', '1 h 05 min': a time left, rounded as a person says it."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, s = divmod(s, 60)
        return f"{m} min {s // 10 * 10} s" if m < 10 and s >= 10 else f"{m} min"
    h, m = divmod(s // 60, 60)
    return f"{h} h {m:02d} min"


def time_left(frac: float, elapsed_s: float) -> str:
    """An estimate of a run's time left from its progress so far, at the rate it has gone ('about 3 min 20 s
    left'); '' before 2 s and 1 % of it (too little to go by) and once it is done."""
    if not 0.01 <= frac < 1 or elapsed_s < 2:
        return ""
    return f"about {_duration(elapsed_s * (1 - frac) / frac)} left"


def release(key: str | None = None) -> None:
    """Let this session's started runs (or the run of `key`) begin: call at the end of the page or fragment
    that starts them (a run otherwise begins 5 s after it was started)."""
    for k, slot in _state().items():
        job = slot.get("job")
        if job is not None and key in (None, k):
            job.go_event.set()


def watch(key: str, draw_live: Callable[[Job], None], every: float = 1.0) -> None:
    """While the job of `key` runs: a fragment that redraws its progress and partial result (`draw_live`,
    once rows have come) every `every` seconds, and reruns the page once it ends (so the result and the
    takeaway appear)."""
    job = current(key)
    if job is None or not job.running:
        return

    @st.fragment(run_every=every)
    def _live() -> None:
        j = current(key)
        if j is None:
            return
        elapsed = time.perf_counter() - j.started
        left = time_left(j.frac, elapsed)
        st.progress(j.frac, text=f"{j.msg} · {elapsed:.0f} s" + (f" · {left}" if left else ""))  # every redraw
        if j.rows:
            draw_live(j)
        if not j.running:
            st.rerun(scope="app")

    _live()
