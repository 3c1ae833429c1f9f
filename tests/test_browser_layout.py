"""The dashboard on a narrow window, in a real browser (Playwright on Debian's Chromium, as tests/test_browser.py):
at 800 px the sidebar starts folded and no chart of any page has its title, legend, plot, axis title or annotation
cut, nor its legend beside the plot; at 1400 px the sidebar starts open. Screenshots go to $PARALAB_SCREENSHOTS
when set. Skipped without /usr/bin/chromium."""
import re
import sys
from pathlib import Path

import pytest

import page_list

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import draw_all, settle  # noqa: E402
from browser_fixtures import browser, needs_chromium, no_exception, server, shot  # noqa: E402,F401  (fixtures)

pytestmark = needs_chromium

#: every prediction skipped, so each page draws its charts
SKIPPED = "guess=skip&split_guess=skip&fsdp_guess=skip&par_guess=skip&guess_warps=skip&guess_models=skip"
#: the views kept in the URL beyond each page's first (ui.tabs), each drawing charts of its own
VIEWS = ["collectives?part=Measured%20here", "collectives?part=Error%20as%20P%20grows",
         "collectives?part=Where%20the%20time%20goes", "training?view=Race%20to%20the%20target",
         "planner?check=Deep%20Image%20Figure%203%20(speedup%20per%20mini-batch)"]
TARGETS = [f"{p.url_path}?{SKIPPED}" for p in page_list.PAGES] + [f"{v}&{SKIPPED}" for v in VIEWS]

# Every drawn chart, as the layout draws it: what of its title, legend, axis titles, tick labels and annotations
# reaches out of its element, its plot's SVG or the window (px; the SVG's edge cuts what goes past it), and each
# legend drawn beside the plot area (level with it and left or right of it: on an 800 px window that squeezes the
# plot to a sliver) rather than under or over it.
_FIT = """() => {
  const r = (e) => e.getBoundingClientRect();
  const width = document.documentElement.clientWidth;
  const out = {charts: 0, cut: [], beside: []};
  for (const c of document.querySelectorAll('.paralab-chart')) {
    const svg = c.querySelector('.main-svg');
    if (!svg || !c.checkVisibility()) continue;
    out.charts++;
    const box = r(c), s = r(svg);
    const left = Math.max(box.left, s.left), right = Math.min(box.right, s.right, width);
    const top = Math.max(box.top, s.top), bottom = Math.min(box.bottom, s.bottom);
    const texts = '.legend, .gtitle, .g-xtitle, .g-ytitle, .annotation, .xtick text, .ytick text';
    for (const e of c.querySelectorAll(texts)) {
      const b = r(e);
      if (!b.width || !b.height) continue;
      const cut = Math.max(left - b.left, b.right - right, top - b.top, b.bottom - bottom, 0);
      if (cut > 1) out.cut.push([(e.textContent || e.getAttribute('class')).slice(0, 50), Math.round(cut)]);
    }
    const plots = [...c.querySelectorAll('.draglayer .nsewdrag')].map(r).filter((b) => b.width && b.height);
    const legend = c.querySelector('.legend');
    if (legend && plots.length) {
      const l = r(legend);
      const p = {left: Math.min(...plots.map((b) => b.left)), right: Math.max(...plots.map((b) => b.right)),
                 top: Math.min(...plots.map((b) => b.top)), bottom: Math.max(...plots.map((b) => b.bottom))};
      const level = l.top < p.bottom - 2 && l.bottom > p.top + 2;
      const apart = l.left >= p.right - 2 || l.right <= p.left + 2;
      if (level && apart) out.beside.push([legend.textContent.slice(0, 50), Math.round(l.width)]);
    }
  }
  return out;
}"""

_SIDEBAR = """() => { const s = document.querySelector("[data-testid='stSidebar']");
  return s ? [s.getAttribute('data-collapsed'), Math.round(s.getBoundingClientRect().width)] : null; }"""
_FOLDED = """() => new Promise((done) => { const end = Date.now() + 10000; const check = () => {
  const s = document.querySelector("[data-testid='stSidebar']");
  const folded = s && s.getAttribute('data-collapsed') === 'true' && s.getBoundingClientRect().width < 1;
  if (folded || Date.now() > end) done(); else setTimeout(check, 50); };  // folded, its slide over
  check(); })"""


def _fits(page) -> dict:
    """Draw every chart (each as it comes near the window), then measure them all (_FIT)."""
    draw_all(page)
    return page.evaluate(_FIT)


def test_at_800_px_the_sidebar_starts_folded_and_no_chart_is_cut_on_any_page_and_at_1400_it_starts_open(
        server, browser, tmp_path):  # noqa: F811
    """Regression: at 800 px the sidebar stayed open (~300 of 800 px: Streamlit folds it below 768 px only), legends
    stood beside their plots, and "Where the time goes"'s timeline title was cut by 241 px (at 1400 px too). Every
    page (its predictions skipped, so it draws its charts) and every view kept in the URL, at 800×1000: the
    sidebar folded, and no chart's text or legend cut by its element, its SVG or the window, no legend beside its
    plot. Then at 1400 px, in the same browser (a fold done for a narrow window is not kept as the learner's
    choice), the sidebar open and the timeline whole."""
    page = browser.new_page(viewport={"width": 800, "height": 1000})
    bad, charts = {}, 0
    for target in TARGETS:
        page.goto(f"{server}/{target}")
        settle(page)
        page.evaluate(_FOLDED)  # the fold is a click once the page's first run has drawn: wait for it (10 s at most)
        settle(page)
        no_exception(page, target)
        sidebar = page.evaluate(_SIDEBAR)
        fit = _fits(page)
        charts += fit["charts"]
        if fit["cut"] or fit["beside"] or sidebar != ["true", 0]:
            bad[target] = {**fit, "sidebar": sidebar}
        if target.startswith(("collectives?part=Where", "pays?", "training?view")):
            shot(page, tmp_path, re.sub(r"\W+", "_", target.split("&")[0]) + "_800")
    page.close()
    assert charts >= 20, charts  # the pages drew their charts (a page that drew none would measure nothing)
    assert not bad, bad  # target -> cut: (what, px); beside: legends level with their plot; sidebar: (folded, px)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/{VIEWS[2]}&{SKIPPED}")
    settle(page)
    state, width = page.evaluate(_SIDEBAR)
    fit = _fits(page)
    shot(page, tmp_path, "collectives_time_split_1400")
    page.close()
    assert state == "false" and width >= 200, (state, width)
    assert fit["charts"] == 3 and not fit["cut"] and not fit["beside"], fit
