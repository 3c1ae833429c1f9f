"""The race to the target in a real browser (Playwright on Debian's Chromium, as tests/test_browser.py), at 800 px:
its charts readable (the legend below the plot, not beside it; no title, axis title or label cut off by the chart's
box; the plot keeping most of the width), its takeaway naming no single winner where the intervals overlap, and its
arrivals table in words. Screenshots go to $PARALAB_SCREENSHOTS when set. Skipped without /usr/bin/chromium."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import settle  # noqa: E402
from browser_fixtures import browser, needs_chromium, server, shot  # noqa: E402,F401  (shared fixtures)
from browser_fixtures import no_exception  # noqa: E402

pytestmark = needs_chromium

# Each drawn chart's boxes, relative to its own box: the plot areas (plotly's drag rectangles of the x-y subplots),
# the legend, and every text of the figure (titles, axis titles, tick labels, annotations, legend entries).
_BOXES = """(chart) => {
  const cb = chart.getBoundingClientRect();
  const rel = (b) => ({x: b.x - cb.x, y: b.y - cb.y, w: b.width, h: b.height});
  const plots = [...chart.querySelectorAll('.draglayer .nsewdrag')].map(e => rel(e.getBoundingClientRect()));
  const legend = chart.querySelector('.legend');
  const texts = [...chart.querySelectorAll('.main-svg text, .infolayer text')]
    .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
    .map(t => ({text: t.textContent.trim().slice(0, 40), ...rel(t.getBoundingClientRect())}));
  return {w: cb.width, h: cb.height, plots, legend: legend && rel(legend.getBoundingClientRect()), texts};
}"""


def test_race_charts_are_readable_at_800px(server, browser, tmp_path):
    """Regression: at 800 px the two race charts drew their 13-entry legend to the right of a 64 px wide plot, and
    the time axis's title began 23 px left of its chart's box."""
    page = browser.new_page(viewport={"width": 800, "height": 1200})
    page.goto(f"{server}/training?view=Race+to+the+target")
    settle(page)
    no_exception(page, "the race view")
    charts = page.locator(".paralab-chart")
    charts.first.wait_for(state="attached")
    assert charts.count() >= 1
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        chart.locator(".main-svg").first.wait_for(timeout=30_000)
        b = chart.evaluate(_BOXES)
        assert b["plots"] and b["legend"], b
        cut = [t for t in b["texts"] if t["x"] < -1 or t["y"] < -1 or t["x"] + t["w"] > b["w"] + 1
               or t["y"] + t["h"] > b["h"] + 1]
        assert not cut, f"text cut off by the chart's {b['w']:.0f} x {b['h']:.0f} box: {cut}"
        bottom = max(p["y"] + p["h"] for p in b["plots"])
        assert b["legend"]["y"] >= bottom, ("the legend is not below the plot", b["legend"], b["plots"])
        axis_titles = [t for t in b["texts"] if t["text"] in ("training steps", "modelled time (s)")]
        assert all(b["legend"]["y"] >= t["y"] + t["h"] - 1 for t in axis_titles), (b["legend"], axis_titles)
        width = max(p["x"] + p["w"] for p in b["plots"]) - min(p["x"] for p in b["plots"])
        assert width >= 0.6 * b["w"], f"the plot keeps {width:.0f} of {b['w']:.0f} px"
    # the takeaway and the table say what the intervals support, in words
    takeaway = page.locator(".st-key-race_takeaway").inner_text()
    assert "reaches the target first" in takeaway and ("95% CI" in takeaway or "the same in every seed" in takeaway)
    heads = page.locator("table.paralab-table").first.locator("th").all_inner_texts()
    assert "Verdict" in heads and not [h for h in heads if "_" in h] and len(heads) <= 10, heads
    shot(page, tmp_path, "race_800")
    page.close()
