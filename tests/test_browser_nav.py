"""Issue 28 in a real browser (Playwright + Debian's Chromium, as tests/test_browser.py): each page owns its
settings (a page reached by the sidebar, after another page's controls were touched, shows exactly what a
fresh visit shows; a tour step carries only what it says), and every page opens with its lesson and takeaway
and is usable at 800 px (no horizontal overflow of the page, no control squeezed to a sliver)."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import nav_link, page_controls, settle  # noqa: E402
from browser_fixtures import RUN_FIRST, browser, needs_chromium, no_exception, server  # noqa: E402,F401  (shared fixtures)

import page_list  # noqa: E402

pytestmark = needs_chromium


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


def view(page) -> dict:
    return page.evaluate(_VIEW)


_fresh: dict[str, dict] = {}


def fresh(browser, server: str, target: str) -> dict:
    """The view of `target` (a path with its query) opened in a new tab, no session before it."""
    if target not in _fresh:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(f"{server}/{target}")
        settle(page)
        _fresh[target] = view(page)
        page.close()
    return _fresh[target]


def _touch(page, url_path: str) -> None:
    """Change the page's first control (the one bench/app_browser.py times), so it has state to leak."""
    fwd, _, _ = page_controls(page, url_path)
    if fwd is not None:
        fwd()
        page.wait_for_timeout(300)
        settle(page)


TITLES = {p.url_path: p.title for p in page_list.PAGES}


def _go(page, url_path: str) -> None:
    """Click the sidebar's link and wait for the new page's own render (its h1), not the last page's quiet DOM."""
    nav_link(page, url_path).click()
    page.wait_for_function("(p) => location.pathname.replace(/^\\/+|\\/+$/g, '') === p", arg=url_path)
    title = "ParaLab" if not url_path else TITLES[url_path]
    page.wait_for_function("(t) => [...document.querySelectorAll(\"[data-testid='stMain'] h1\")]"
                           ".some(h => h.innerText.toLowerCase().includes(t))", arg=title.lower(),
                           timeout=120_000)
    settle(page)


REPORTED = [("codecs", "transfer"), ("collectives", "step_through"), ("codecs", "training"), ("pays", "training")]


@pytest.mark.parametrize("src,dst", REPORTED, ids=[f"{a}->{b}" for a, b in REPORTED])
def test_a_page_reached_by_the_sidebar_shows_its_fresh_view(server, browser, src, dst):
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/{src}")
    settle(page)
    _go(page, dst)
    assert view(page) == fresh(browser, server, dst), f"{src} -> {dst} (defaults on {src})"
    page.close()


def test_every_page_reached_after_touching_the_previous_one_shows_its_fresh_view(server, browser):
    """One session through every page by the sidebar, touching each page's first control before leaving,
    then back round to the first: each arrival equals that page's fresh view."""
    order = [p.url_path for p in page_list.PAGES][1:] + [""]
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/")
    settle(page)
    prev = "home"
    for path in order:
        _go(page, path)
        assert view(page) == fresh(browser, server, path), f"{prev} (touched) -> {path or 'home'}"
        _touch(page, path)
        prev = path or "home"
    page.close()


def test_a_tour_step_carries_only_what_it_says(server, browser):
    """Training's batch (64) once reached 'Does compression pay?' through Home's tour (its batch is 8)."""
    i, step = next((i, s) for i, s in enumerate(page_list.TOUR, 1) if s.page == "pays")
    query = "&".join(f"{k}={v}" for k, v in step.params.items())
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/training")
    settle(page)
    _go(page, "")
    box = page.locator(f".st-key-tour-{i}")
    assert "Opens with" in box.inner_text() and all(str(v) in box.inner_text() for v in step.params.values())
    box.get_by_role("link").first.click()
    page.wait_for_timeout(300)
    settle(page)
    assert view(page) == fresh(browser, server, f"{step.page}?{query}")
    page.close()


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


@pytest.mark.parametrize("info", page_list.PAGES, ids=[p.url_path or "home" for p in page_list.PAGES])
def test_every_page_opens_with_its_lesson_and_takeaway_and_is_usable_at_800_px(server, browser, info):
    """A page's default view, fresh, in an 800 px window: its one lesson at the top and (but on Home, and on the
    pages whose result waits for a button: test_browser's every-page test checks theirs after the run) its
    takeaway, no exception box; and the layout checks below."""
    page = browser.new_page(viewport={"width": 800, "height": 1200})
    page.goto(f"{server}/{info.url_path}")
    settle(page)
    no_exception(page, info.title)
    assert page.locator(".st-key-lesson").count() == 1, f"{info.title}: no lesson (ui.lesson) at the top"
    if info is not page_list.HOME and info.url_path not in RUN_FIRST:
        takeaways = page.locator(".st-key-takeaway")
        assert takeaways.count() >= 1, f"{info.title}: no takeaway (ui.takeaway)"
        assert "Takeaway." in takeaways.first.inner_text()
    got = page.evaluate(_LAYOUT, MIN_CONTROL_PX)
    shots = os.environ.get("PARALAB_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{info.url_path or 'home'}-800.png"), full_page=True)
    page.close()
    assert got["page"] <= 0 and got["main"] <= 0, f"{info.title} scrolls sideways at 800 px: {got}"
    assert not got["slivers"], f"{info.title}: controls narrower than {MIN_CONTROL_PX} px at 800 px: {got['slivers']}"
    assert not got["cut"], f"{info.title}: labels cut short with '…' at 800 px: {got['cut']}"


def test_a_prediction_is_revealed_kept_in_the_url_and_scored_on_home(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/pays")
    settle(page)
    box = page.locator(".st-key-predict-guess")
    assert "Predict first" in box.inner_text() and "Not quite" not in box.inner_text()
    box.get_by_text("yes, faster than bf16").click()
    page.wait_for_function("() => document.querySelector('.st-key-predict-guess').innerText.includes('Not quite')")
    settle(page)
    assert "guess=yes" in page.url
    again = browser.new_page(viewport={"width": 1400, "height": 1400})  # the URL reproduces the reveal
    again.goto(page.url)
    settle(again)
    assert "Not quite" in again.locator(".st-key-predict-guess").inner_text()
    again.close()
    _go(page, "")
    assert "0 right of 1 answered" in page.locator(".st-key-scorecard").inner_text()
    page.close()
