"""The page tests' hold on a background run (apptest_runs.held): a Stop pressed once the run has streamed its rows
finds it going, however fast the rest of the run is; the run's own callbacks are unchanged."""
import threading

import pytest

from apptest_runs import held, stop_after_rows, wait_for

_runs = pytest.importorskip("_runs", reason="the dashboard's modules need streamlit")


def _start(key: str, rows: int) -> "_runs.Job":
    """A run of `key` that streams `rows` rows as fast as it can, then finishes."""
    def fn(job):
        for i in range(rows):
            job.progress(i / rows, f"row {i}")
            job.on_row({"i": i})
        return "finished"

    job = _runs.Job(key, "t", None)
    job.go_event.set()
    job.thread = threading.Thread(target=_runs._run, args=(job, fn, {}), daemon=True)
    job.thread.start()
    return job


def test_a_held_run_waits_at_its_rows_for_stop_and_keeps_them():
    with held("k", 2):
        job = _start("k", 3)
        wait_for(lambda: len(job.curve()) >= 2, "two rows", timeout=30)
        assert job.running and len(job.rows) == 2  # it holds at its second row: the third never comes
        job.stop()
    assert job.state == "stopped" and [r["i"] for r in job.rows] == [0, 1]
    assert job.result is None


def test_without_a_hold_the_same_run_is_done_first_and_the_hold_ends_with_its_block():
    original = _runs.Job.on_row
    unheld = _start("k", 3)
    unheld.thread.join(30)
    assert unheld.state == "done" and unheld.result == "finished" and len(unheld.rows) == 3
    with held("other", 1):  # another key's hold leaves this run alone
        job = _start("k", 3)
        job.thread.join(30)
        assert job.state == "done"
    with held("k", lambda rows: rows and rows[-1]["i"] == 1):
        job = _start("k", 3)
        wait_for(lambda: len(job.curve()) >= 2, "two rows", timeout=30)
        assert job.running
    job.thread.join(30)  # the block's end lets it go on
    assert job.state == "done" and len(job.rows) == 3
    assert _runs.Job.on_row is original


def test_stop_after_rows_outside_a_hold_is_refused():
    with pytest.raises(AssertionError, match="outside `with held"):
        stop_after_rows(None, "k")
