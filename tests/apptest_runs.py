"""Driving a page's background run (app/_runs.py) from Streamlit's AppTest by its events, not by sleeps: wait
for the run's first streamed rows, press Stop, wait for the run to end (issue 27 item 11). AppTest runs the
page in this process, so the page's `Job` (in the session state) is the run itself."""
from __future__ import annotations

import time
from typing import Any, Callable

TIMEOUT_S = 300.0  # a loaded machine; every wait returns as soon as its event has happened


def job(at: Any, key: str) -> Any:
    """The page's latest background run of `key` (`_runs.Job`), or None before its first Run."""
    runs = at.session_state["_runs"] if "_runs" in at.session_state else {}
    return runs.get(key, {}).get("job")


def wait_for(event: Callable[[], Any], what: str, timeout: float = TIMEOUT_S, poll: float = 0.05) -> Any:
    """Wait until `event()` is truthy (checked every `poll` s without rerunning the page); its value. The
    timeout only turns a hang into a failure naming `what`."""
    end = time.monotonic() + timeout
    while not (got := event()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
    return got


def stop_after_rows(at: Any, key: str, rows: int = 1, timeout: float = TIMEOUT_S) -> Any:
    """Once the run of `key` has streamed `rows` rows (a partial result to keep), press its Stop button and
    wait until the run has ended; then rerun the page once, so it draws the stopped state. Returns the job."""
    run = wait_for(lambda: job(at, key), f"the run of {key!r} to start", timeout)
    wait_for(lambda: len(run.rows) >= rows or not run.running, f"{rows} streamed row(s) of {key!r}", timeout)
    assert run.running and len(run.rows) >= rows, f"{key!r} ended before its partial result: {run.state}, {run.msg}"
    at.run()  # Stop is drawn live by a rerun that sees the run going
    at.button(key=f"stop_{key}").click().run()
    wait_for(lambda: not run.running, f"the run of {key!r} to stop", timeout)
    at.run()
    assert run.state == "stopped", (run.state, run.msg, run.error)
    return run
