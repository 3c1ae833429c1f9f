"""What the real-browser tests share (Playwright + Debian's Chromium): the skip when Chromium is absent, and one
Streamlit server and one browser for all the browser tests of a run. Import the fixtures into a module:
`from browser_fixtures import browser, needs_chromium, server`; `shot` saves a screenshot."""
import os
import shutil
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from app_browser import CHROMIUM, launch, serve  # noqa: E402  (the browser benchmark's own helpers)

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium")


class _Shared:
    """One Streamlit server and one Chromium for every browser test of a run: started by the first test that
    asks, stopped after the last test that uses one (`release_unless_needed`, called by conftest after each
    test). One start per run where a module scope made one per module (each fresh server also redoes its
    background warm-up of every page)."""

    def __init__(self) -> None:
        self._stack: ExitStack | None = None
        self._url: str | None = None
        self._browser = None

    def _open(self) -> ExitStack:
        if self._stack is None:
            self._stack = ExitStack()
        return self._stack

    def url(self) -> str:
        if self._url is None:
            self._url = self._open().enter_context(serve())
        return self._url

    def browser(self):
        if self._browser is None:
            self._browser = self._open().enter_context(launch())
        return self._browser

    def close(self) -> None:
        stack, self._stack, self._url, self._browser = self._stack, None, None, None
        if stack is not None:
            stack.close()


SHARED = _Shared()

#: the pages whose result waits for a button (nothing is drawn before it): the button, by its label
RUN_FIRST = {"training": "Train", "fusion": "Train and fuse"}

NEEDS = {"server", "browser"}


_LAST_USER: dict[int, object] = {}  # id(session) -> its last test that uses the server or the browser


def release_unless_needed(item, nextitem) -> None:
    """After `item`: stop the shared server and browser unless a later test of the run uses one (a test in
    between that needs neither keeps them up)."""
    session = item.session
    if id(session) not in _LAST_USER:
        users = [i for i in session.items if NEEDS & set(getattr(i, "fixturenames", ()))]
        _LAST_USER[id(session)] = users[-1] if users else None
    if nextitem is None or item is _LAST_USER[id(session)]:
        SHARED.close()


@pytest.fixture
def server() -> str:
    """The URL of the run's one `streamlit run app/Home.py` on a loopback port (its log:
    `log_of(url)`)."""
    try:
        return SHARED.url()
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture
def browser():
    """The run's one Debian Chromium under Playwright (a test opens its own pages and closes them)."""
    pytest.importorskip("playwright.sync_api")
    return SHARED.browser()


def log_of(url: str) -> Path:
    """The server log `serve()` writes for the server at `url`."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"paralab-streamlit-{url.rsplit(':', 1)[1]}.log"


def shot(page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot into the test's tmp_path (and $PARALAB_SCREENSHOTS when set)."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    extra = os.environ.get("PARALAB_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)


def no_exception(page, where: str) -> None:
    """No exception box on the page (`where` names it in the failure, with the box's first 500 characters)."""
    boxes = page.locator("[data-testid='stException']")
    assert boxes.count() == 0, f"exception on {where}: {boxes.first.inner_text()[:500] if boxes.count() else ''}"
