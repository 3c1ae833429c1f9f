"""The dashboard in a real browser: `streamlit run app/Home.py` on a loopback port, driven by
Playwright on Debian's Chromium. Every page renders without an exception box and draws a plot;
one control changes a number; screenshots go to the test's temporary directory (and to
$PARALAB_SCREENSHOTS when set). Skipped when /usr/bin/chromium is absent (CI installs it)."""
import contextlib
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from app_browser import draw_all, serve, settle  # noqa: E402  (the browser benchmark's own helpers)
from browser_fixtures import RUN_FIRST, browser, needs_chromium, server, shot as _shot  # noqa: E402,F401  (shared fixtures)
from browser_fixtures import PAPER_CALLOUT, RUN_BUTTON, fresh_view, run_buttons  # noqa: E402
from browser_fixtures import no_exception as _no_exception  # noqa: E402

import page_list  # noqa: E402  app/ is on pytest's pythonpath

# URL path -> text of the page's h1 (Home's is the lab's name): every page of the one page list
PAGES = {p.url_path: p.title if p.url_path else "ParaLab" for p in page_list.PAGES}
# URL settings that size each page's Run buttons' work down to seconds: the same buttons, code paths, result views
# and takeaways as the default view's (a test checks the buttons are the same); the numbers of the default runs
# are asserted by the AppTest page tests (test_page_*.py), not here
SMALL_RUNS = {
    "codecs": "speed_n=65536",
    "transfer": "meas_max=4096",
    "collectives": "P=2&size=262144&err_maxP=8&split_values=16384&split_codecs=fp16",
    "training": "epochs=0.25&hidden=32&workers=2",
    "pipeline": "P=2&steps=3&hidden=64&batch=64",
    "dropout": "net_hidden=64&net_epochs=1&widths=128",
    "deep_image": "tp_batch=1",
    "fusion": "epochs=1&train_n=500&test_n=500",
}


# Pages whose Run buttons sit in tabs other than the one a default view opens: (URL key, those tabs)
RUN_TABS = {"collectives": ("part", ["Measured here", "Error as P grows", "Where the time goes"])}


def small(path: str, query: str = "") -> str:
    """The URL path and query of page `path` with its Run buttons sized down (SMALL_RUNS), plus `query`."""
    both = "&".join(q for q in (SMALL_RUNS.get(path, ""), query) if q)
    return f"{path}?{both}" if both else path

pytestmark = needs_chromium


_serve = serve


def _settle(page, timeout: float = 120_000) -> None:
    settle(page, timeout)


def _click_live(page, locate, timeout: float = 60.0) -> None:
    """Click what `locate()` finds once only its live copy is left: a rerun can leave the previous render's
    element on screen (hidden, soon detached) beside the new one, which fails Playwright's strict mode."""
    from playwright.sync_api import Error

    end = time.monotonic() + timeout
    while True:
        try:
            locate().click(timeout=5_000)
            return
        except Error:
            if time.monotonic() > end:
                raise
            page.wait_for_timeout(200)


def test_every_page_in_a_browser(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    for path, title in PAGES.items():
        page.goto(f"{server}/{path}" + ("?guess=skip" if path else ""))  # predictions skipped: the answers' charts show
        _settle(page)
        page.wait_for_selector(f"h1:has-text('{title}')", timeout=60_000)
        assert page.locator("[data-testid='stException']").count() == 0, f"exception on {path or 'home'}"
        if path in RUN_FIRST:  # nothing is trained before the button: press it (on a run sized down)
            page.goto(f"{server}/{small(path, 'guess=skip')}")
            _settle(page)
            _no_exception(page, path)
            page.get_by_role("button", name=RUN_FIRST[path], exact=True).click()
            page.wait_for_timeout(300)
            page.wait_for_function(_RUN_DONE, timeout=240_000, polling=250)  # its result drawn, not the run's start
            _settle(page)
            # its lesson with the run's settings, and the takeaway the run's result teaches (test_browser_nav checks
            # every other page's lesson and takeaway on its default view)
            assert page.locator(".st-key-lesson").count() == 1, f"{title}: no lesson with the run's settings"
            assert "Takeaway." in page.locator(".st-key-takeaway").first.inner_text(), f"{title}: no takeaway"
        if path:
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            assert page.locator("[data-testid='stException']").count() == 0, f"exception on {path}"
            # every chart is drawn by the bundled plotly.js (app/chart.py), none left empty or failed: each shown one
            # is scrolled to (charts are drawn as they come into view) and waited for
            assert draw_all(page) >= 1, path
            assert page.get_by_text("This chart could not be drawn").count() == 0, path
        _shot(page, tmp_path, path or "home")
    assert len(list(tmp_path.glob("*.png"))) == len(PAGES)
    page.close()


def test_a_control_changes_a_number_and_the_url(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    page.goto(f"{server}/codecs?guess=skip")  # the prediction skipped: the ranking's metrics show
    _settle(page)
    value = page.locator("[data-testid='stMetricValue']").first
    value.wait_for()
    before = value.inner_text()
    page.get_by_text("paper", exact=True).first.click()
    page.wait_for_function("(b) => { const e = document.querySelector(\"[data-testid='stMetricValue']\");"
                           " return e && e.innerText !== b; }", arg=before, timeout=60_000)
    _settle(page)
    assert page.locator("[data-testid='stException']").count() == 0
    assert "rounding=paper" in page.url
    _shot(page, tmp_path, "codecs-paper")
    # the URL reproduces the view in a fresh page
    again = browser.new_page(viewport={"width": 1400, "height": 2400})
    again.goto(page.url)
    _settle(again)
    want = value.inner_text()
    try:  # a rerun from the URL's state may still be drawing: wait for it, then compare
        again.wait_for_function("(w) => { const e = document.querySelector(\"[data-testid='stMetricValue']\");"
                                " return e && e.innerText === w; }", arg=want, timeout=60_000)
    except Exception:
        pass
    _settle(again)
    assert again.locator("[data-testid='stMetricValue']").first.inner_text() == want
    again.close()
    page.close()


def test_a_shared_page_link_opens_in_the_app_on_a_fresh_server(browser, tmp_path):
    """A page URL opened first (before anyone loaded the home page) gets the app's own navigation and
    wide layout, not Streamlit's folder listing of the page files. (Its server's warm-up of every page is off:
    the warm-up is no part of this, and on 2 cores it took the cores from the test's page and the other tests.)"""
    with _serve(env={"PARALAB_WARMUP": "0"}) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(f"{url}/dropout?p=0.5")
        _settle(page)
        page.wait_for_selector("h1:has-text('Dropout')", timeout=60_000)
        nav = page.locator("[data-testid='stSidebarNav'] a").all_inner_texts()
        titles = {t.strip().splitlines()[-1] for t in nav}  # each link: its icon (a ligature name), its title
        assert {p.title for p in page_list.PAGES} == titles, nav
        assert page.locator("[data-testid='stException']").count() == 0
        _shot(page, tmp_path, "deep-link-dropout")
        page.close()


# -- every page teaches one lesson (docs/design.md rule 7), every paper-named view has its callout, no Run flow breaks

PAPER_AFTER_RUN = {"dropout": "Train"}
PAPER_VIEWS = [(p, q) for p in page_list.PAGES for q in p.paper_views]


@pytest.mark.parametrize("info,query", PAPER_VIEWS, ids=[f"{p.url_path}?{q}" for p, q in PAPER_VIEWS])
def test_every_paper_named_view_shows_the_paper_beside_ours(server, browser, info, query):
    """The view as a first visit shows it (its fresh view, shared with the other tests that open it) has no
    exception and, but where the paper's numbers sit beside a run's (PAPER_AFTER_RUN: pressed here, sized down),
    its paper callout."""
    fresh = fresh_view(browser, server, info.url_path + (f"?{query}" if query else ""))
    assert not fresh.exception, f"exception on {info.title}?{query}: {fresh.exception}"
    papers = fresh.papers
    if info.url_path in PAPER_AFTER_RUN:  # the paper's numbers sit beside a run's (sized down)
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.goto(f"{server}/{small(info.url_path, query)}")
        _settle(page)
        _no_exception(page, f"{info.title}?{query} sized down")
        page.get_by_role("button", name=PAPER_AFTER_RUN[info.url_path], exact=True).click()
        page.wait_for_selector(PAPER_CALLOUT, timeout=240_000)
        _settle(page, 240_000)
        _no_exception(page, info.title)
        papers = page.locator(PAPER_CALLOUT).all_inner_texts()
        page.close()
    assert papers, f"{info.title}?{query}: no paper callout (ui.paper_callout)"
    assert "Paper vs here." in papers[0]


def test_the_paper_named_views_are_declared():
    """The pages that reproduce a paper's table or figure list those views (page_list.PageInfo.paper_views)."""
    named = {p.url_path for p in page_list.PAGES if p.paper_views}
    assert {"codecs", "transfer", "training", "dropout", "deep_image", "planner"} <= named, named


# A run is over when the script is idle, no progress bar is short of 100 % and no background run is live
# (a live one keeps its Stop button enabled).
_RUN_DONE = """() => {
  const app = document.querySelector("[data-test-script-state]");
  if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
  const bars = [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stProgress'] [role='progressbar']")];
  if (bars.some(b => Number(b.getAttribute("aria-valuenow") || 100) < 100)) return false;
  const stops = [...document.querySelectorAll("[data-testid='stMain'] button")].filter(b => b.innerText.trim() === "Stop");
  return !stops.some(b => !b.disabled && b.closest("[data-testid='stMain']") && b.dataset.testid !== undefined
                      && document.body.innerText.includes("running…"));
}"""


@pytest.mark.parametrize("info", [p for p in page_list.PAGES if p is not page_list.HOME],
                         ids=[p.url_path for p in page_list.PAGES if p is not page_list.HOME])
def test_every_run_button_reaches_a_result(server, browser, info):
    """Press each Run button the default view shows (in turn, on the page with its runs sized down by
    SMALL_RUNS: the same buttons) and wait for its result: no exception box. A page whose runs sit in tabs
    (RUN_TABS) is pressed through in each of those tabs."""
    key, tabs = RUN_TABS.get(info.url_path, ("", [""]))
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    for tab in tabs:
        query = f"{key}={urllib.parse.quote(tab)}" if tab else ""
        target = info.url_path + (f"?{query}" if query else "")
        if info.url_path in SMALL_RUNS:  # the default view's buttons (its fresh visit, shared with test_browser_nav)
            labels = fresh_view(browser, server, target).buttons
            page.goto(f"{server}/{small(info.url_path, query)}")
            _settle(page)
            _no_exception(page, small(info.url_path, query))
            assert run_buttons(page) == labels, small(info.url_path)
        else:
            labels = fresh_view(browser, server, target).buttons
            if labels:  # a view with no Run button has nothing to press: its fresh view said so
                page.goto(f"{server}/{target}")
                _settle(page)
                assert run_buttons(page) == labels, target
        assert labels or not tab, f"no Run button in {info.title}'s tab {tab!r}"
        # a label found twice would press its first button twice and the other never
        assert len(set(labels)) == len(labels), f"{info.title}: Run buttons {labels}"
        for label in labels:
            button = page.locator(RUN_BUTTON, has_text=label).first
            if not button.count() or button.is_disabled():
                continue
            button.click()
            page.wait_for_timeout(300)
            page.wait_for_function(_RUN_DONE, timeout=240_000, polling=250)
            _settle(page, 240_000)
            _no_exception(page, f"{info.title}{' ' + tab if tab else ''} after '{label}'")
    page.close()


# -- bad inputs, as a person gives them in the browser: each is a message on the page, never a
# traceback, and the rest of the page still draws

BAD_URLS = {
    "student_t keeps its own df": ("codecs?dist=student_t", None),
    "a number out of range": ("codecs?normal.sigma=-1", "must be > 0"),
    "one rank": ("collectives?P=1", "P"),
    "an LSTM corpus that is not installed": ("dropout?net=LSTM&corpus=ptb", None),
}


@pytest.mark.parametrize("what", list(BAD_URLS))
def test_bad_input_in_the_browser_is_a_message(server, browser, what):
    url, word = BAD_URLS[what]
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/{url}")
    _settle(page)
    _no_exception(page, url)
    if word is not None:
        alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
        assert word in alerts, (url, alerts)
    assert "nan GB/s" not in page.locator("[data-testid='stMain']").inner_text()
    if what.startswith("student_t"):  # df starts at 3, not at normal's mu = 0 carried over
        df = page.locator("[data-testid='stNumberInput']", has_text="df").locator("input").first
        # its shown value once the page has stopped changing it (a clean-clone CI run read 0 once; not seen
        # again in 7 runs here, loaded or not): wait up to 10 s for 3, then assert what is shown
        from playwright.sync_api import TimeoutError as PlaywrightTimeout  # here: not loaded at collection

        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function("(el) => parseFloat(el.value) === 3", arg=df.element_handle(), timeout=10_000)
        assert float(df.input_value()) == 3.0, page.url
    if what.startswith("an LSTM"):  # the run button is there; pressing it says which corpus ran, or why none
        page.get_by_role("button", name="Train", exact=True).click()
        page.wait_for_function(_RUN_DONE, timeout=240_000, polling=250)
        _settle(page, 240_000)
        _no_exception(page, url + " after Train")
    page.close()


def test_a_non_tensor_upload_is_a_message_in_the_browser(server, browser, tmp_path):
    import pickle

    bad = tmp_path / "not_a_tensor.pt"
    bad.write_bytes(pickle.dumps({"weights": [1, 2, 3], "note": "a list, not a tensor"}))
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(f"{server}/codecs?source=upload")
    _settle(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(bad))
    page.wait_for_selector("[data-testid='stAlert']", timeout=60_000)
    _settle(page)
    _no_exception(page, "codecs upload")
    alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert ".pt" in alerts and "allow_pickle" not in alerts and "weights_only=False" not in alerts, alerts
    page.close()


def test_dropout_stop_is_live_while_training_and_keeps_the_last_result(server, browser):
    """AppTest reruns the whole page; a browser only reruns the polling fragment, so Stop must be drawn live by
    the rerun that started the run (it once stayed disabled there). A click elsewhere does not restart the run.
    (Here, not in test_page_dropout.py: it shares this module's server and browser instead of starting its own.)"""
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    page.goto(f"{server}/dropout?net_hidden=512&net_epochs=2&guess=skip")
    _settle(page)
    page.get_by_role("button", name="Train", exact=True).click()
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stMetricLabel]')]"
                           ".some(e => e.innerText.includes('RDP (row)'))", timeout=120_000)
    _settle(page)
    epochs = page.get_by_role("spinbutton", name="Epochs")
    epochs.fill("50")
    epochs.press("Enter")
    _settle(page)
    page.get_by_role("button", name="Train", exact=True).click()
    page.get_by_text("running…").wait_for(timeout=120_000)  # the run has started (not a fixed wait)
    _click_live(page, lambda: page.locator("[data-testid='stRadio']").get_by_text("Search trace", exact=True))
    _settle(page)
    assert page.get_by_text("running…").count() == 1  # not restarted, not killed
    # Stop once the first epoch's points are in (its progress says epoch 2): a Stop before the first point keeps
    # no partial curve, rightly
    page.wait_for_function(r"() => /epoch ([2-9]|\d\d)\/50/.test(document.body.innerText)", timeout=120_000,
                           polling=100)
    page.get_by_role("button", name="Stop", exact=True).first.click(timeout=10_000)
    page.get_by_text("stopped after").wait_for(timeout=120_000)  # the run ends at its next report
    assert page.get_by_text("stopped after").count() == 1
    partial = page.get_by_text("Partial curves of the stopped run")  # the patterns take turns: each one kept
    assert partial.count() == 1 and all(f"{k} to epoch" in partial.inner_text()
                                        for k in ("conventional", "RDP (row)", "TDP (tile)")), partial.inner_text()
    assert page.get_by_text("These results are from the last run").count() == 1
    _no_exception(page, page.url)
    page.close()
