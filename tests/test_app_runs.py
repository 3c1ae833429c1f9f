"""Background runs (app/_runs.py) beyond Run and Stop: the progress bar's estimate of the time left, from the
progress so far, and a run that stops once the browser tab that started it has closed (its session gone; the
browser test, test_browser_runs.py, closes a real tab)."""
import threading

import pytest

from apptest_runs import wait_for

_runs = pytest.importorskip("_runs", reason="the dashboard's modules need streamlit")


@pytest.mark.parametrize("frac,elapsed,said", [
    (0.25, 60.0, "about 3 min left"),          # 60 s for a quarter: three quarters to go at that rate
    (0.4, 20.0, "about 30 s left"),
    (0.3, 30.0, "about 1 min 10 s left"),      # 70 s
    (0.1, 100.0, "about 15 min left"),         # 900 s
    (0.01, 100.0, "about 2 h 45 min left"),    # 9,900 s
    (0.005, 100.0, ""),                        # under 1 % done: too little to go by
    (0.5, 1.0, ""),                            # under 2 s: too little to go by
    (1.0, 50.0, ""),                           # done
])
def test_the_time_left_is_the_rate_so_far_applied_to_what_is_left(frac, elapsed, said):
    assert _runs.time_left(frac, elapsed) == said


def _going(session: str | None) -> "_runs.Job":
    """A run of session `session` that reports progress until it is stopped."""
    def fn(job):
        while True:
            job.progress(0.5, "going")
            job.stop_event.wait(0.01)

    job = _runs.Job("k", "t", None, session=session)
    job.go_event.set()
    job.thread = threading.Thread(target=_runs._run, args=(job, fn, {}), daemon=True)
    job.thread.start()
    return job


def test_a_run_stops_once_its_browser_session_has_been_gone_a_while(monkeypatch):
    """A run whose session is no longer connected stops at its next report once it has been gone LEFT_AFTER_S (a
    closed tab; a reconnect within that time keeps it); a run with no session to ask (AppTest) never does."""
    import streamlit_private

    connected = {"s1": True}
    monkeypatch.setattr(streamlit_private, "session_connected", lambda s: connected.get(s))
    monkeypatch.setattr(_runs, "LEFT_AFTER_S", 0.3)
    job, alone = _going("s1"), _going(None)
    try:
        wait_for(lambda: job.msg == "going", "the run to report", timeout=30)
        connected["s1"] = False  # the tab reconnects before LEFT_AFTER_S: the run goes on
        wait_for(lambda: job.gone_since is not None, "the run to see its session gone", timeout=30)
        connected["s1"] = True
        wait_for(lambda: job.gone_since is None, "the run to see its session back", timeout=30)
        assert job.running
        connected["s1"] = False  # the tab closes
        wait_for(lambda: not job.running, "the run to stop", timeout=30)
        assert job.state == "stopped" and job.left and job.msg.endswith("its browser tab closed")
        assert alone.running and not alone.left
    finally:
        for j in (job, alone):
            j.stop()
