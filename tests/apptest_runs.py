"""Driving a page's background run (app/_runs.py) from Streamlit's AppTest by its events, not by sleeps: hold the
run at its Nth streamed row, press Stop, wait for the run to end, so a test never races the run's speed. AppTest runs the page in this
process, so the page's `Job` (in the session state) is the run itself."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_COMPONENTS: Any = None  # Streamlit's registry of installed v2 components, scanned once per test process

TIMEOUT_S = 300.0  # a loaded machine; every wait returns as soon as its event has happened


def shared_components(at: Any) -> Any:
    """`at` (a new AppTest) with the process's one registry of installed Streamlit components: each AppTest
    otherwise scans the metadata of every installed distribution on its first run (0.3-2 s each, ~200 AppTests in
    the suite); the installed packages do not change during a test run. Returns `at`."""
    global _COMPONENTS
    if getattr(at, "_bidi_component_manager", 0) is None:  # Streamlit's own slot (left alone should it go)
        if _COMPONENTS is None:
            from streamlit.components.v2.component_manager import BidiComponentManager

            _COMPONENTS = BidiComponentManager()
            _COMPONENTS.discover_and_register_components(start_file_watching=False)
        at._bidi_component_manager = _COMPONENTS
    return at


def runs_of(at: Any) -> dict:
    """The page's background runs: key -> its slot (`{"job": _runs.Job, ...}`), empty before the first Run."""
    return at.session_state["_runs"] if "_runs" in at.session_state else {}


def job(at: Any, key: str) -> Any:
    """The page's latest background run of `key` (`_runs.Job`), or None before its first Run."""
    return runs_of(at).get(key, {}).get("job")


def wait_for(event: Callable[[], Any], what: str, timeout: float = TIMEOUT_S, poll: float = 0.05) -> Any:
    """Wait until `event()` is truthy (checked every `poll` s without rerunning the page); its value. The
    timeout only turns a hang into a failure naming `what`."""
    end = time.monotonic() + timeout
    while not (got := event()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
    return got


_HELD: dict[str, Callable[[list], bool]] = {}  # key -> when its run holds (the rows it has streamed)


@contextmanager
def held(key: str, rows: int | Callable[[list], bool] = 1, timeout: float = TIMEOUT_S) -> Iterator[None]:
    """Within the block, a run of `key` that has streamed `rows` rows (or whose rows satisfy `rows(rows)`) waits
    there until Stop is pressed (at most `timeout` s, or until the block ends), then goes on to its next progress
    report or row, where Stop ends it: a test's Stop always finds the run going, however fast this machine runs
    the rest of it. The run's own code is unchanged (the hold wraps `Job.on_row`); enter the block before Run."""
    import _runs

    enough = rows if callable(rows) else (lambda got, n=rows: len(got) >= n)
    original = _runs.Job.on_row
    done = threading.Event()

    def on_row(run: Any, row: dict) -> None:
        original(run, row)
        if run.key == key and enough(run.rows):
            end = time.monotonic() + timeout
            while not (run.stop_event.wait(0.05) or done.is_set() or time.monotonic() > end):
                pass

    _runs.Job.on_row, _HELD[key] = on_row, enough
    try:
        yield
    finally:
        _runs.Job.on_row = original
        del _HELD[key]
        done.set()


def stop_after_rows(at: Any, key: str, timeout: float = TIMEOUT_S) -> Any:
    """Within `held(key, ...)`: once the run of `key` holds at its rows (a partial result to keep), press its Stop
    button and wait until the run has ended; then rerun the page once, so it draws the stopped state. Returns the
    job."""
    assert key in _HELD, f"stop_after_rows({key!r}) outside `with held({key!r}):` would race the run"
    run = wait_for(lambda: job(at, key), f"the run of {key!r} to start", timeout)
    wait_for(lambda: _HELD[key](run.curve()) or not run.running, f"the held rows of {key!r}", timeout)
    assert run.running, f"{key!r} ended before its partial result: {run.state}, {run.msg}"
    at.run()  # Stop is drawn live by a rerun that sees the run going
    at.button(key=f"stop_{key}").click().run()
    wait_for(lambda: not run.running, f"the run of {key!r} to stop", timeout)
    at.run()
    assert run.state == "stopped", (run.state, run.msg, run.error)
    return run


def running(at: Any) -> list:
    """The page's background runs (`_runs.Job`) that are going now."""
    return [s["job"] for s in runs_of(at).values() if s.get("job") is not None and s["job"].running]


def rerun_until(at: Any, done: Callable[[Any], Any], what: str = "the page's background run",
                timeout: float = TIMEOUT_S, rows: bool = False, poll: float = 0.3, most: float = 5.0) -> Any:
    """Rerun the page until `done(at)`, as the browser's polling fragment would, but only when one of its
    background runs has ended (or, with `rows`, streamed a row; at most every `poll` s), not on a clock: a
    rerun of a page takes the cores its run needs. With no run going, or after `most` s without an event, it
    reruns anyway. Returns `at`; a timeout fails naming `what` and the runs' states."""
    end = time.monotonic() + timeout
    last = time.monotonic()
    # id of each run going when the last rerun began -> its rows then (the caller's last rerun saw the runs going
    # now; it may not have seen their latest rows)
    seen: dict[int, int] = {} if rows else {id(j): len(j.rows) for j in running(at)}
    while not done(at):
        now = time.monotonic()
        if now > end:
            states = {k: (s["job"].state, s["job"].msg, s["job"].error) for k, s in runs_of(at).items() if s.get("job")}
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; runs: {states}")
        live = running(at)
        if live:  # an event the last rerun did not see: a run ended, or (with `rows`) streamed a row since
            until = min(end, now + most)
            while time.monotonic() < until and not any(
                    not j.running or id(j) not in seen
                    or (rows and len(j.rows) != seen[id(j)] and time.monotonic() - last >= poll) for j in live):
                time.sleep(0.02)
        else:
            time.sleep(poll)
        seen = {id(j): len(j.rows) for j in running(at)}
        at.run()
        last = time.monotonic()
    return at
