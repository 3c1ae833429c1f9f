"""Pages as lessons in a real browser (Playwright + Debian's Chromium, as tests/test_browser.py): each page owns its
settings (a page reached by the sidebar, after another page's controls were touched, shows exactly what a
fresh visit shows; a tour step carries only what it says), and every page opens with its lesson and takeaway
and is usable at 800 px (no horizontal overflow of the page, no control squeezed to a sliver)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import nav_link, page_controls, settle  # noqa: E402
from browser_fixtures import MIN_CONTROL_PX, RUN_FIRST, fresh_view, view  # noqa: E402
from browser_fixtures import browser, needs_chromium, server  # noqa: E402,F401  (shared fixtures)

import page_list  # noqa: E402
import tour  # noqa: E402

pytestmark = needs_chromium


def fresh(browser, server: str, target: str) -> dict:
    """The view of `target` (a path with its query) opened in a new tab, no session before it."""
    return fresh_view(browser, server, target).view


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
    i, step = next((i, s) for i, s in enumerate(tour.steps(), 1) if s.page == "pays")
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


@pytest.mark.parametrize("info", page_list.PAGES, ids=[p.url_path or "home" for p in page_list.PAGES])
def test_every_page_opens_with_its_lesson_and_takeaway_and_is_usable_at_800_px(server, browser, info):
    """A page's default view, fresh, in an 800 px window: its one lesson at the top and (but on Home, and on the
    pages whose result waits for a button: test_browser's every-page test checks theirs after the run) its
    takeaway, no exception box; and the layout checks below."""
    fresh = fresh_view(browser, server, info.url_path)  # shared with the tests that compare with a fresh view
    assert not fresh.exception, f"exception on {info.title}: {fresh.exception}"
    assert fresh.lessons == 1, f"{info.title}: no lesson (ui.lesson) at the top"
    if info is not page_list.HOME and info.url_path not in RUN_FIRST:
        assert "Takeaway." in fresh.takeaway, f"{info.title}: no takeaway (ui.takeaway)"
    got = fresh.layout
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
    board = page.locator(".st-key-scorecard")
    assert "0 right of 1 answered" in board.inner_text() and "Review what I missed" in board.inner_text()
    # the review link opens the page at the missed question: its answer and explanation, scrolled into view
    page.set_viewport_size({"width": 1400, "height": 700})
    board.get_by_role("link", name="you said yes, faster than bf16").click()
    page.wait_for_function("() => location.pathname.endsWith('/pays')")
    settle(page)
    box = page.locator(".st-key-predict-guess")
    assert "Not quite" in box.inner_text() and "guess=yes" in page.url and "review=" not in page.url
    page.wait_for_function("""() => { const r = document.querySelector('.st-key-predict-guess').getBoundingClientRect();
                                      return r.top >= 0 && r.bottom <= innerHeight; }""", timeout=10_000)
    # change the answer there: the score follows it, and nothing is left to review
    box.get_by_text("no, slower than bf16", exact=True).click()
    page.wait_for_function("() => document.querySelector('.st-key-predict-guess').innerText.includes('Right')")
    settle(page)
    _go(page, "")
    board = page.locator(".st-key-scorecard")
    assert "1 right of 1 answered" in board.inner_text() and "Review what I missed" not in board.inner_text()
    page.close()
