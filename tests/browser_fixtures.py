"""What the real-browser tests share (Playwright + Debian's Chromium): the skip when Chromium is absent, and one
Streamlit server and one browser for all the browser tests of a run. Import the fixtures into a module:
`from browser_fixtures import browser, needs_chromium, server`; `shot` saves a screenshot."""
import os
import re
import shutil
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from app_browser import CHROMIUM, launch, serve  # noqa: E402  (the browser benchmark's own helpers)

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium")


class _Shared:
    """One Streamlit server and one Chromium for every browser test of a run: started by the first test that
    asks, stopped after the last test that uses one (`release_unless_needed`, called by conftest after each
    test). One start per run where a module scope made one per module (each fresh server also redoes its
    background warm-up of every page). The server is `python app/serve.py`, what `paralab dashboard` runs: its
    warm-up starts with it, and test_warmup checks that warm-up in its log."""

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
            self._url = self._open().enter_context(serve(warm_from_start=True))
        return self._url

    def browser(self) -> "Tabs":
        if self._browser is None:
            self._browser = Tabs(self._open().enter_context(launch(TEST_ARGS)), anchor=f"{self.url()}/_stcore/health")
        return self._browser

    def close(self) -> None:
        stack, self._stack, self._url, self._browser = self._stack, None, None, None
        if stack is not None:
            stack.close()


class Tabs:
    """The run's Chromium as a returning visitor's browser: every page a new tab of one browser context, so
    Streamlit's and plotly.js's scripts come from its cache, compiled once (a tab in a context of its own fetched
    and compiled them again: 0.65 of ~3.7 core-seconds per page load here). Each tab is still a new Streamlit
    session: its state is what its URL says.

    With TEST_ARGS' `--process-per-site`, a tab of 127.0.0.1 (any port: one site) that stays open, `anchor` (the
    server's health check, a plain "ok"), keeps the one renderer process of the dashboard's tabs alive between tests,
    which close their tabs: Chromium's CPU for five page visits, each tab closed after its visit, 0.78x the
    default's (median of 3 rounds, alternated; the flag alone, without the anchor, saves nothing: the process
    leaves with its last tab)."""

    def __init__(self, browser, anchor: str) -> None:
        self.context = browser.new_context()
        self.anchor = self.context.new_page()
        self.anchor.goto(anchor)

    def new_page(self, viewport: dict | None = None):
        page = self.context.new_page()
        if viewport:
            page.set_viewport_size(viewport)
        return page


#: The tests' Chromium: one renderer process for all the dashboard's tabs (one site) instead of one per tab (kept
#: alive by `Tabs.anchor`), so tabs after the first skip a renderer's start and find Streamlit's and plotly.js's
#: compiled scripts in its memory. The benchmark (bench/app_browser.py) keeps a person's default, a process per tab.
TEST_ARGS = ("--process-per-site",)

SHARED = _Shared()

#: a paper callout (ui.paper_callout: the paper's numbers beside ours)
PAPER_CALLOUT = "[class*='st-key-paper-']"

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
def browser() -> Tabs:
    """The run's one Debian Chromium under Playwright, a tab per page (a test opens its own pages and closes
    them)."""
    pytest.importorskip("playwright.sync_api")
    return SHARED.browser()


# What a person sees of a page's state: every control's value, every metric, every message, the URL's query.
_VIEW = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const q = (s) => [...main.querySelectorAll(s)];
  return {
    inputs: q("input, textarea").filter(e => e.type !== "file")
              .map(e => (e.type === "checkbox" || e.type === "radio") ? String(e.checked) : e.value),
    selects: q("[data-baseweb='select']").map(e => e.innerText.trim()),
    sliders: q("[role='slider']").map(e => e.getAttribute("aria-valuetext") || e.getAttribute("aria-valuenow")),
    metrics: q("[data-testid='stMetric']").map(e => e.innerText.trim()),
    alerts: q("[data-testid='stAlert']").map(e => e.innerText.trim()),
    query: [...new URLSearchParams(location.search).entries()].sort().map(kv => kv.join("=")),
  };
}"""

# At 800 px: the page never scrolls sideways (tables scroll inside their own box), no control is squeezed
# narrower than MIN_CONTROL_PX (columns wrap instead), and no metric or button label is cut short with "…".
MIN_CONTROL_PX = 120
_LAYOUT = """(minPx) => {
  const doc = document.scrollingElement;
  const main = document.querySelector("[data-testid='stMain']");
  const label = (e) => (e.closest("[data-testid='stElementContainer']") || e).innerText.trim().split("\\n")[0]
    .slice(0, 40);
  const inputs = [...main.querySelectorAll("[data-testid='stNumberInput'], [data-testid='stSelectbox'],"
    + "[data-testid='stMultiSelect'], [data-testid='stSlider'], [data-testid='stTextInput']")]
    .filter(e => e.offsetParent !== null)
    .map(e => [e.dataset.testid, Math.round(e.getBoundingClientRect().width), label(e)]);
  // a button is as wide as its label: it is a sliver when the label does not fit in it
  const buttons = [...main.querySelectorAll("[data-testid='stButton'] button")].filter(e => e.offsetParent !== null)
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => ["button", e.clientWidth, e.innerText.trim()]);
  // a metric's label or value, or a button's label, cut short with "…" (its text wider than its box)
  const boxes = "[data-testid='stMetricLabel'], [data-testid='stMetricValue'], [data-testid='stButton'] button";
  const cut = [...main.querySelectorAll(boxes)].filter(e => e.offsetParent !== null)
    .filter(e => [e, ...e.querySelectorAll("*")].some(c => c.scrollWidth > c.clientWidth + 1))
    .map(e => e.innerText.trim().slice(0, 40));
  return {page: doc.scrollWidth - doc.clientWidth, main: main.scrollWidth - main.clientWidth,
          slivers: [...inputs.filter(c => c[1] < minPx), ...buttons], cut};
}"""


def view(page) -> dict:
    """What a person sees of `page`'s state (_VIEW): control values, metrics, messages, the URL's query."""
    return page.evaluate(_VIEW)


@dataclass
class FreshView:
    """A page as a first visit shows it (its URL opened in a new tab, no session before it), at 800 px."""
    view: dict  # view(): its state, as a person sees it
    buttons: list[str]  # the labels of its primary (Run) buttons
    layout: dict  # _LAYOUT at 800 px: sideways overflow, squeezed controls, cut labels
    lessons: int  # its ui.lesson boxes
    takeaway: str  # its first ui.takeaway's text ("" when none)
    exception: str  # its first exception box's text ("" when none)
    papers: list[str]  # the text of each of its paper callouts (ui.paper_callout)


_FRESH: dict[tuple[str, str], FreshView] = {}


def fresh_view(browser, server: str, target: str) -> FreshView:
    """The fresh view of `target` (a URL path with its query) at 800 px wide, opened once a run: the tests that
    compare with a fresh view (test_browser_nav), check its lesson and layout (test_browser_nav), press its Run
    buttons and read its paper callout (test_browser) share the one visit. (A page's state is the same at any width;
    the URL fixes it.)"""
    from app_browser import settle

    key = (server, target)
    if key not in _FRESH:
        page = browser.new_page(viewport={"width": 800, "height": 1200})
        page.goto(f"{server}/{target}")
        settle(page)
        takeaways = page.locator(".st-key-takeaway")
        _FRESH[key] = FreshView(
            view=view(page), buttons=run_buttons(page), layout=page.evaluate(_LAYOUT, MIN_CONTROL_PX),
            lessons=page.locator(".st-key-lesson").count(),
            takeaway=takeaways.first.inner_text() if takeaways.count() else "", exception=exception_text(page),
            papers=page.locator(PAPER_CALLOUT).all_inner_texts())
        shots = os.environ.get("PARALAB_SCREENSHOTS")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^\w=-]+", "_", target) or "home"
            page.screenshot(path=str(Path(shots) / f"{name}-800.png"), full_page=True)
        page.close()
    return _FRESH[key]


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


def exception_text(page) -> str:
    """The first 500 characters of the page's first exception box ("" when there is none)."""
    boxes = page.locator("[data-testid='stException']")
    return boxes.first.inner_text()[:500] if boxes.count() else ""


#: the primary (Run) buttons a person sees in the page's main area: a button with a help tooltip is drawn twice by
#: Streamlit, the second copy hidden (display: none) beside the one in its tooltip target
RUN_BUTTON = "[data-testid='stMain'] [data-testid='stBaseButton-primary']:visible"


def run_buttons(page) -> list[str]:
    """The labels of the primary (Run) buttons a person sees in the page's main area, each once."""
    buttons = page.locator(RUN_BUTTON)
    return [b.inner_text().strip() for b in buttons.all()]


def no_exception(page, where: str) -> None:
    """No exception box on the page (`where` names it in the failure, with the box's first 500 characters)."""
    text = exception_text(page)
    assert not text and page.locator("[data-testid='stException']").count() == 0, f"exception on {where}: {text}"
