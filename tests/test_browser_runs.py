"""Long runs in a real browser (Playwright on Debian's Chromium, as tests/test_browser.py): a run's progress bar
estimates the time left, and a run stops once the tab that started it has closed (nobody is left to see it; the
server's CPU goes quiet). Skipped without /usr/bin/chromium."""
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import settle  # noqa: E402
from browser_fixtures import browser, needs_chromium, server, shot  # noqa: E402,F401  (shared fixtures)
from browser_fixtures import no_exception  # noqa: E402

pytestmark = [needs_chromium,
              pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the server's CPU time in /proc")]

# A Dropout run of minutes here: three 2048-unit MLPs for 50 epochs, taking turns
LONG_RUN = "dropout?net_hidden=2048&net_epochs=50&guess=skip"
# CPU seconds of the server in a window of WINDOW_S: idle below IDLE_CPU_S; a run uses a core, or a share of one on a
# loaded machine (0.2-0.9 s per 2 s window seen beside other work), so BUSY_CPU_S is asked over two windows
IDLE_CPU_S, BUSY_CPU_S, WINDOW_S = 0.1, 0.3, 2.0


def _server_pid(url: str) -> int:
    """The process serving `url` (its command line names the port)."""
    port = url.rsplit(":", 1)[1].encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--server.port" in args and args[args.index(b"--server.port") + 1: args.index(b"--server.port") + 2] \
                == [port]:
            return int(proc.name)
    raise AssertionError(f"no server process for {url}")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` and all its threads so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _used(pid: int, window: float = WINDOW_S) -> float:
    """CPU seconds the server spent over the next `window` seconds."""
    before = _cpu_s(pid)
    time.sleep(window)
    return _cpu_s(pid) - before


def _quiet_within(pid: int, seconds: float) -> list[float]:
    """The server's CPU per window until a window is idle (or `seconds` have passed): the windows measured."""
    end, seen = time.monotonic() + seconds, []
    while time.monotonic() < end:
        seen.append(round(_used(pid), 2))
        if seen[-1] < IDLE_CPU_S:
            break
    return seen


def test_a_run_says_its_time_left_and_stops_when_its_tab_closes(server, browser, tmp_path):
    """Regression: a run went on after its tab was closed (minutes of a core for nobody), and no progress bar said
    how long was left. The server is quiet, a Dropout run of minutes starts, its bar says "about … left" and the
    server works; the tab closes; the server is quiet again within the run's grace for a reconnect plus a report."""
    import _runs

    pid = _server_pid(server)
    waited = _quiet_within(pid, 240)  # a server still warming up its pages settles first
    assert waited[-1] < IDLE_CPU_S, f"the server never went quiet before the run: {waited}"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/{LONG_RUN}")
    settle(page)
    no_exception(page, LONG_RUN)
    page.get_by_role("button", name="Train", exact=True).click()
    bar = page.locator("[data-testid='stProgress']", has_text="left").first
    bar.wait_for(timeout=120_000)
    assert " · about " in bar.inner_text() and bar.inner_text().rstrip().endswith("left"), bar.inner_text()
    shot(page, tmp_path, "dropout-running")
    busy = _used(pid, 2 * WINDOW_S)
    assert busy >= BUSY_CPU_S, f"the run is not using the server's CPU: {busy:.2f} s in {2 * WINDOW_S} s"
    page.close()
    after = _quiet_within(pid, _runs.LEFT_AFTER_S + 40)
    assert after[-1] < IDLE_CPU_S, f"the run went on after its tab closed: CPU s per {WINDOW_S} s window {after}"
