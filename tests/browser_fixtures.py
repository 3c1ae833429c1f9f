"""What the real-browser tests share (Playwright + Debian's Chromium): the skip when Chromium is absent, and one
Streamlit server and one browser per test module. Import the fixtures into a module:
`from browser_fixtures import browser, needs_chromium, server`; `shot` saves a screenshot."""
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from app_browser import CHROMIUM, launch, serve  # noqa: E402  (the browser benchmark's own helpers)

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def server():
    """`streamlit run app/Home.py` on a loopback port for the module's tests; its URL."""
    try:
        with serve() as url:
            yield url
    except RuntimeError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium under Playwright for the module's tests."""
    pytest.importorskip("playwright.sync_api")
    with launch() as b:
        yield b


def shot(page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot into the test's tmp_path (and $PARALAB_SCREENSHOTS when set)."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    extra = os.environ.get("PARALAB_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
