"""Page-content regressions in a real browser (Playwright on Debian's Chromium, as
tests/test_browser.py): Step through's Play drives the page's one Step slider and metrics; screenshots
of the changed pages at 1400 and 800 px go to $PARALAB_SCREENSHOTS when set. Skipped without
/usr/bin/chromium."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import settle  # noqa: E402
from browser_fixtures import browser, needs_chromium, server, shot as _shot  # noqa: E402,F401  (shared fixtures)

pytestmark = needs_chromium


def _metric(page, label: str) -> str:
    box = page.locator("[data-testid='stMetric']", has_text=label).first
    return box.locator("[data-testid='stMetricValue']").inner_text()


def _slider_value(page, label: str) -> str:
    return _slider(page, label).locator("[data-testid='stSliderThumbValue']").first.inner_text().strip()


def _slider(page, label: str):
    return page.locator("[data-testid='stSlider']", has_text=label).first


def test_step_through_play_moves_the_one_step(server, browser, tmp_path):
    """Regression: Play ran the figure to step 6 of 6 while the Step slider and metrics stayed at 3 of 6."""
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.goto(f"{server}/step_through?algorithm=ring&P=4&step=3")
    settle(page)
    assert _metric(page, "Step") == "3 of 6" and _slider_value(page, "Step") == "3"
    page.get_by_role("button", name="▶ Play").click()
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stMetricValue]')]"
                           ".some(e => e.innerText.trim() === '6 of 6')", timeout=60_000, polling=100)
    settle(page)
    assert _slider_value(page, "Step") == "6"  # the slider moved with the metric
    assert page.get_by_role("button", name="▶ Play").count() == 1  # stopped at the last step
    _shot(page, tmp_path, "step_through")
    page.close()


@pytest.mark.parametrize("width", [800])
def test_step_through_controls_are_usable_at_800px(server, browser, tmp_path, width):
    """Regression on Step through: ◀ ▶ were slivers and Pause covered the slider at 800 px."""
    page = browser.new_page(viewport={"width": width, "height": 1800})
    page.goto(f"{server}/step_through?algorithm=hierarchical&P=8")
    settle(page)
    for name in ("◀", "▶ Play", "▶"):
        box = page.get_by_role("button", name=name, exact=True).first.bounding_box()
        assert box["width"] >= 32 and box["height"] >= 28, (name, box)
    slider = _slider(page, "Step").bounding_box()
    play = page.get_by_role("button", name="▶ Play").first.bounding_box()
    assert play["y"] + play["height"] <= slider["y"] or play["x"] >= slider["x"] + slider["width"]  # not on it
    _shot(page, tmp_path, f"step_through_{width}")
    page.close()


def test_a_chart_far_below_the_window_is_drawn_as_it_comes_near(server, browser):
    """A page's charts far below the window cost a first visit nothing (app/chart.js draws each as
    it comes within NEAR_PX of the window), and scrolling to one draws it. Fails where every chart is drawn at once."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/collectives?part=Where%20the%20time%20goes")
    settle(page)
    charts = page.locator(".paralab-chart")
    charts.nth(2).wait_for(state="attached")  # the model's chart, the split's timeline and its bars
    # the first, in the window, is drawn (a CI run found the page settled with its charts not yet mounted)
    charts.first.locator(".main-svg").first.wait_for(timeout=30_000)
    drawn = lambda: [c.locator(".main-svg").count() > 0 for c in charts.all()]  # noqa: E731
    assert drawn()[0] and not drawn()[-1], drawn()  # the first in view, the last far below: not yet
    charts.last.scroll_into_view_if_needed()
    charts.last.locator(".main-svg").first.wait_for(timeout=30_000)
    assert all(drawn())
    page.close()
