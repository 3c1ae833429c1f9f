"""The dashboard's speed as a person sees it: each page of app/page_list.py opened in Debian's Chromium
(Playwright) on a warm `streamlit run app/Home.py`, timed to a finished render (the script done, every
plotly chart drawn but those app/chart.js leaves for later, away from the window), and one control change per
page timed the same way. Median of 3 visits after one warm-up visit. Writes
bench/results/app-browser-<device>.json with the machine's load at the time.

    python bench/app_browser.py [--pages codecs,transfer] [--visits 3] [--out PATH]
    python bench/app_browser.py --shots docs/screenshots      # each page at 1400 px, small PNGs
    python bench/app_browser.py --pages home,codecs --merge   # re-measure some pages, keep the file's other rows

The targets: a default view <= 2 s, a control change <= 1 s on this 2-core machine. A view
is timed three ways: in a new tab at the page's URL in a browser that has shown the dashboard before (a
shared link opened by a returning user: the browser's caches warm), the same in a fresh browser profile (a
first visit: Streamlit's and plotly.js's JavaScript fetched and compiled), and by a click on the sidebar in
a tab already showing the dashboard.
tests/test_browser.py uses `serve`, `launch` and `settle` from here.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))  # as `streamlit run app/Home.py` has it
import page_list  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TARGET_VIEW_S, TARGET_CHANGE_S = 2.0, 1.0
TARGET_AFTER_START_S = 5.0  # a first visit while the server's warm-up (app/warmup.py) is still running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(threads: int = 1, env: dict[str, str] | None = None, warm_from_start: bool = False) -> Iterator[str]:
    """`streamlit run app/Home.py` on a free loopback port (app/.streamlit/config.toml
    applies), its environment this one's plus `env`; yields its URL and stops it after. Its warm-up of every
    page starts with it (app/warmup.py). warm_from_start: `python app/serve.py` instead (README's other way, the
    same server). Raises RuntimeError if it does not come up."""
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), **(env or {}))
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"paralab-streamlit-{port}.log", "w")
    start = ([str(ROOT / "app" / "serve.py")] if warm_from_start else
             ["-m", "streamlit", "run", str(ROOT / "app" / "Home.py")])
    proc = subprocess.Popen([sys.executable, *start,
                             "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(f"streamlit did not start: see {log.name}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def launch(extra_args: tuple[str, ...] = ()):
    """Debian's Chromium driven by Playwright (never `playwright install`), with ARGS plus `extra_args`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[*ARGS, *extra_args])
        try:
            yield b
        finally:
            b.close()


# How near the window app/chart.js draws a chart (its NEAR_PX): one further down is left for later.
NEAR_PX = int(re.search(r"const NEAR_PX = (\d+);", (ROOT / "app" / "chart.js").read_text()).group(1))
# True once the script has finished and every plotly chart in (or near) the window is drawn.
_DONE = """() => {
  const app = document.querySelector("[data-test-script-state]");
  if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
  if (!document.querySelector("[data-testid='stMain'] h1")) return false;
  if (document.querySelector("[data-testid='stSpinner']")) return false;
  // a widget whose code is still being fetched (lazy-loaded on a tab's first use) is a grey skeleton
  if (document.querySelector("[data-testid='stMain'] [data-testid='stSkeleton']")) return false;
  // every chart drawn, but those app/chart.js keeps for later: more than NEAR_PX above or below the window, or
  // not shown at all (a closed expander: drawn when opened)
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart'], .paralab-chart")];
  const away = (c) => { const r = c.getBoundingClientRect();
                        return r.top > window.innerHeight + NEAR_PX || r.bottom < -NEAR_PX; };
  return charts.every(c => c.querySelector(".main-svg") || !c.checkVisibility() || away(c));
}""".replace("NEAR_PX", str(NEAR_PX))
# Records each change of the script state after a control is touched.
_WATCH = """() => {
  window.__states = [];
  const app = document.querySelector("[data-test-script-state]");
  new MutationObserver(() => window.__states.push([performance.now(), app.getAttribute("data-test-script-state")]))
    .observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
  return performance.now();
}"""
_RERAN = """() => {
  const s = window.__states || [];
  const app = document.querySelector("[data-test-script-state]");
  return s.some(e => e[1] === "running") && app.getAttribute("data-test-script-state") === "notRunning";
}"""


# Installed in every document before its scripts: the time of the last change to the page's DOM.
_MUTATIONS = """
window.__lastMut = performance.now();
new MutationObserver(() => { window.__lastMut = performance.now(); })
  .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""
QUIET_MS = 600  # a render is finished when nothing has changed for this long (and _DONE holds)


def settle(page, timeout_ms: float = 120_000) -> float:
    """Wait until the page's script has finished, its charts are drawn and its DOM has been quiet for
    QUIET_MS; returns the page's clock (ms since navigation) at its last change."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_function(_DONE, timeout=timeout_ms, polling=50)
    page.wait_for_function(f"() => ({_DONE})() && performance.now() - (window.__lastMut || 0) > {QUIET_MS}",
                           timeout=timeout_ms, polling=100)
    return page.evaluate("() => window.__lastMut || performance.now()")


def draw_all(page, timeout_ms: float = 60_000) -> int:
    """Scroll to each chart in turn (app/chart.js draws a chart only as it comes near the window), wait for it to
    be drawn, then scroll back to the top; the number of charts drawn (a TimeoutError names one that is not)."""
    charts = page.locator(".paralab-chart")
    drawn = 0
    for i in range(charts.count()):
        if not charts.nth(i).evaluate("c => c.checkVisibility()"):
            continue  # not shown (a closed expander): drawn once it is
        charts.nth(i).scroll_into_view_if_needed()
        charts.nth(i).locator(".main-svg").first.wait_for(timeout=timeout_ms)
        drawn += 1
    page.evaluate("() => document.querySelector(\"[data-testid='stMain']\")?.scrollTo(0, 0)")
    return drawn


def open_page(browser, url: str, width: int = 1400, context=None):
    """A new tab at `url`, timed from navigation to its last DOM change once the render is finished:
    (page, seconds). In `context` (a browser profile that keeps its HTTP and code caches between tabs),
    else in a fresh profile of its own (a first visit: nothing cached)."""
    page = context.new_page() if context else browser.new_page()
    page.set_viewport_size({"width": width, "height": 1400})
    page.add_init_script(_MUTATIONS)
    page.goto(url)
    last = settle(page)
    return page, last / 1000


# The control a person is most likely to touch first on each page, as (text of the option or checkbox label to
# click, text of the one that undoes it); pages not named here use their first radio (another option, then the first
# one back), else their first selectbox, else their first number input (step up, then step down), else their
# first preset button (twice).
CONTROL = {"codecs": ("paper", "nearest"), "pays": ("Overlap", "Overlap")}


def page_controls(page, url_path: str):
    """(forward, back, description): two actions on the page's control to touch in the main area, the
    second undoing the first; (None, None, None) when it has none. Run buttons are not counted: they start
    work on purpose, behind progress and Stop."""
    main = page.locator("[data-testid='stMain']")
    if url_path in CONTROL:
        fwd, back = CONTROL[url_path]
        return (main.get_by_text(fwd, exact=True).first.click, main.get_by_text(back, exact=True).first.click,
                f"'{fwd}' and back")
    # the first radio with a choice made (a prediction's radio starts with none: there is nothing to go back to)
    radio = main.locator("[data-testid='stRadio']:visible").filter(
        has=page.locator("[data-testid='stRadioOption'][data-selected='true']")).first
    if radio.count():
        # the two options by their text, read now: a locator by selection state would find the option just
        # chosen when asked to go back, and its click would change nothing
        other = radio.locator("[data-testid='stRadioOption']:not([data-selected='true'])").first.inner_text().strip()
        chosen = radio.locator("[data-testid='stRadioOption'][data-selected='true']").first.inner_text().strip()
        option = lambda text: radio.get_by_text(text, exact=True).first  # noqa: E731
        return (lambda: option(other).click()), (lambda: option(chosen).click()), f"radio '{other}' and back"
    box = main.locator("[data-testid='stSelectbox']:visible").first
    if box.count() and box.locator("[data-baseweb='select']").count():
        label = box.locator("[data-testid='stWidgetLabel']").inner_text().strip()
        was: list[str] = []

        def choose(forward: bool):
            def act() -> None:
                box.locator("[data-baseweb='select']").click()
                opts = page.locator("[role='option']")
                opts.first.wait_for()
                if forward:
                    sel = page.locator("[role='option'][aria-selected='true']")
                    was[:] = [sel.first.inner_text().strip()] if sel.count() else [opts.first.inner_text().strip()]
                    texts = [t.strip() for t in opts.all_inner_texts()]
                    opts.nth(next((i for i, t in enumerate(texts) if t != was[0]), 0)).click()
                else:
                    page.locator("[role='option']", has_text=was[0]).first.click()
            return act
        return choose(True), choose(False), f"selectbox '{label}' and back"
    up = main.locator("[data-testid='stNumberInputStepUp']:visible").first
    if up.count():
        return (up.click, main.locator("[data-testid='stNumberInputStepDown']:visible").first.click,
                "a number input, up and down")
    slider = main.locator("[role='slider']:visible").first
    if slider.count():  # a slider or select_slider: one step right, then back
        def key(k: str):
            def act() -> None:
                slider.focus()
                page.keyboard.press(k)
            return act
        return key("ArrowRight"), key("ArrowLeft"), "a slider, one step right and back"
    preset = main.locator("[data-testid='stBaseButton-secondary']:visible", has_not_text="Stop").first
    if preset.count():  # a preset button (clicked twice: the second click reruns with nothing new)
        return preset.click, preset.click, f"button '{preset.inner_text().strip()}', twice"
    return None, None, None


def _time_click(page, action) -> float:
    """Seconds from `action` (a click) to the last DOM change of the finished rerun (0 when it starts no
    rerun)."""
    t0 = page.evaluate(_WATCH)
    action()
    try:  # a rerun starts within milliseconds of a click; none within 20 s means the control changed nothing
        page.wait_for_function(_RERAN, timeout=20_000, polling=20)
    except Exception:  # no rerun at all (a widget that changes nothing): zero work
        return 0.0
    last = settle(page)
    return max(last - t0, 0.0) / 1000


def time_changes(page, url_path: str, rounds: int, think_ms: int = 1500) -> tuple[list[float], str | None]:
    """`rounds` times: touch the page's control and undo it, each timed from the click to the finished
    render, after `think_ms` of idle time (a person reads before the next click; without it the
    browser's teardown of the previous tab on 2 cores lands in the first click)."""
    fwd, back, what = page_controls(page, url_path)
    if fwd is None:
        return [], None
    times = []
    try:
        for _ in range(rounds):
            for action in (fwd, back):
                page.wait_for_timeout(think_ms)
                times.append(_time_click(page, action))
    except Exception as e:  # a control this script cannot operate: say so in the result, keep the rest
        return times, f"{what} (not operated: {type(e).__name__})"
    return times, what


def nav_link(page, url_path: str):
    """The sidebar's link to a page (Home is the link to the app's root)."""
    links = page.locator("[data-testid='stSidebarNav'] a")
    for i in range(links.count()):
        href = (links.nth(i).get_attribute("href") or "").rstrip("/")
        if href.rsplit("/", 1)[-1] == url_path or (not url_path and href.count("/") <= 3):
            return links.nth(i)
    raise LookupError(f"no sidebar link to {url_path!r}")


def time_navigation(url: str, browser, pages: list[page_list.PageInfo], visits: int,
                    think_ms: int = 1500) -> dict[str, list[float]]:
    """In one tab, as a person moves through the dashboard: from Home, a click on each page's sidebar link,
    timed from the click to the page's finished render, `visits` rounds after one untimed round (which
    loads the chart library, plotly.js, once per tab)."""
    page, _ = open_page(browser, url)
    times: dict[str, list[float]] = {p.url_path: [] for p in pages}
    try:
        for rnd in range(visits + 1):
            for p in pages:
                if not p.url_path:
                    continue
                page.wait_for_timeout(think_ms)
                t = _time_click(page, nav_link(page, p.url_path).click)
                if rnd:
                    times[p.url_path].append(t)
                page.wait_for_timeout(think_ms)
                _time_click(page, nav_link(page, "").click)
    finally:
        page.close()
    return times


def after_start(url: str, browser, pages: list[page_list.PageInfo]) -> list[dict]:
    """Right after `streamlit run` answers (its warm-up of every page still running): each of `pages` opened once,
    one after the other, in a fresh browser profile, timed as `open_page` does, with the seconds since the server
    came up."""
    up, rows = time.perf_counter(), []
    for p in pages:
        since = time.perf_counter() - up
        page, s = open_page(browser, f"{url}/{p.url_path}")
        page.close()
        rows.append({"page": p.title, "url_path": p.url_path, "seconds": s, "since_start_s": since,
                     "ok": s <= TARGET_AFTER_START_S})
        print(f"{p.title:12s} right after start ({since:.1f} s after it came up): {s:.2f} s", flush=True)
    return rows


def measure(url: str, browser, pages: list[page_list.PageInfo], visits: int = 3, on_row=None) -> list[dict]:
    """Per page: median default-view seconds over `visits` (after a warm-up visit) in a new tab of a browser
    that has shown the dashboard before (its caches warm), the same in a fresh browser profile (a first
    visit), the median over as many visits by the sidebar in one tab, and the median of the same number
    of control changes. on_row: called with the rows so far after each page (a run cut short keeps them)."""
    rows = []
    navigated = time_navigation(url, browser, pages, visits)
    ctx = browser.new_context()
    for p in pages:
        path = f"{url}/{p.url_path}"
        times = {}
        for how, context in (("view", ctx), ("first", None)):
            warm, _ = open_page(browser, path, context=context)
            warm.close()
            times[how] = []
            for _ in range(visits):
                page, s = open_page(browser, path, context=context)
                times[how].append(s)
                page.close()
        views, firsts = times["view"], times["first"]
        page, _ = open_page(browser, path)
        changes, what = time_changes(page, p.url_path, visits)
        page.close()
        nav = navigated.get(p.url_path) or []
        row = {"page": p.title, "url_path": p.url_path, "view_s": statistics.median(views), "view_runs_s": views,
               "first_visit_s": statistics.median(firsts), "first_visit_runs_s": firsts,
               "navigate_s": statistics.median(nav) if nav else None, "navigate_runs_s": nav,
               "control": what, "change_s": statistics.median(changes) if changes else None, "change_runs_s": changes}
        row["view_ok"] = row["view_s"] <= TARGET_VIEW_S
        row["first_visit_ok"] = row["first_visit_s"] <= TARGET_VIEW_S
        row["navigate_ok"] = row["navigate_s"] is None or row["navigate_s"] <= TARGET_VIEW_S
        row["change_ok"] = row["change_s"] is None or row["change_s"] <= TARGET_CHANGE_S
        rows.append(row)
        fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"{p.title:12s} new tab {fmt(row['view_s'])} s  first visit {fmt(row['first_visit_s'])} s  "
              f"by sidebar {fmt(row['navigate_s'])} s  "
              f"change {fmt(row['change_s'])} s ({what})", flush=True)
        if on_row:
            on_row(rows)
    ctx.close()
    return rows


def screenshots(url: str, browser, pages: list[page_list.PageInfo], folder: Path, width: int = 1400,
                max_height: int = 2600) -> list[Path]:
    """Each page's default view at `width` px (top `max_height` px), saved as a small palette PNG
    (docs/screenshots/<page>.png)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    for p in pages:
        page, _ = open_page(browser, f"{url}/{p.url_path}", width)
        draw_all(page)
        page.wait_for_timeout(500)  # fonts and the last chart transitions
        tmp = folder / f".{p.url_path or 'home'}.raw.png"
        page.screenshot(path=str(tmp), full_page=True)
        page.close()
        img = Image.open(tmp).convert("RGB")
        img = img.crop((0, 0, img.width, min(img.height, max_height)))
        img = img.resize((img.width * 2 // 3, img.height * 2 // 3), Image.LANCZOS)
        path = folder / f"{p.url_path or 'home'}.png"
        img.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        tmp.unlink()
        saved.append(path)
    return saved


TIMING = ("median of visits after one warm-up visit on a warm server; a view is finished at its last "
          "DOM change once the script has stopped, every plotly chart in the window is drawn (app/chart.js "
          "draws the others as they scroll into view) and nothing changed for "
          f"{QUIET_MS} ms. view_s: a new tab at the page's URL in a browser that has shown the dashboard "
          "before (one profile: its HTTP and code caches warm), timed from navigation; first_visit_s: the "
          "same in a fresh browser profile each time (nothing cached: Streamlit's JavaScript and the "
          "bundled plotly.js, app/static, fetched, compiled and run); navigate_s: a click on the "
          "page's sidebar link from Home in one tab that has shown every page once (timed from the "
          "click); a change is a click on the page's control (CONTROL, else its first radio with a "
          "choice made, else its first selectbox, number input, slider or preset button) and the click "
          "that undoes it, each timed to the rerun's finished render after 1.5 s idle, in one tab; "
          "after_start: the first two pages opened one after the other in fresh profiles as soon as the "
          "server answers, its warm-up still running (once each, before everything else)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", default="", help="comma-separated URL paths (home = ''), default: every page")
    ap.add_argument("--visits", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "app-browser-cpu.json"))
    ap.add_argument("--shots", default="", help="only save each page's screenshot to this folder (docs/screenshots)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of --out's pages not measured now (each row says when it was measured: its "
                         "'run'; compare pages of one run, with that run's Home row as their baseline)")
    a = ap.parse_args()
    want = [w.strip() for w in a.pages.split(",")] if a.pages else None
    pages = [p for p in page_list.PAGES if want is None or (p.url_path or "home") in want]
    if a.shots:
        with serve() as url, launch() as browser:
            for path in screenshots(url, browser, pages, Path(a.shots)):
                print(f"wrote {path} ({path.stat().st_size // 1024} KB)")
        return
    load_before = os.getloadavg()
    sys.path.insert(0, str(ROOT))
    from lab import backend

    started: list[dict] = []
    run = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kept = {}  # --merge: the earlier rows of pages not measured now
    if a.merge and Path(a.out).exists():
        measured = {p.url_path for p in pages}
        kept = {r["url_path"]: r for r in json.loads(Path(a.out).read_text())["rows"] if r["url_path"] not in measured}

    def write(rows: list[dict]) -> None:  # after every page: a run stopped by its time limit keeps what it measured
        for r in rows:
            r.setdefault("run", run)
        done = {r["url_path"]: r for r in [*kept.values(), *rows]}
        every = page_list.PAGES if a.merge else pages
        out = {"benchmark": "app-browser", "device": backend.device_name("cpu"), "cores": os.cpu_count(),
               **backend.vector_isa(),
               "browser": "Debian chromium, headless, 1400 px", "visits": a.visits,
               "load_avg_1_5_15_before": load_before, "load_avg_1_5_15_after": os.getloadavg(),
               "targets_s": {"view": TARGET_VIEW_S, "change": TARGET_CHANGE_S, "after_start": TARGET_AFTER_START_S},
               "after_start": started,
               "pages_not_measured": [p.url_path or "home" for p in every if p.url_path not in done],
               "timing": TIMING, "rows": [done[p.url_path] for p in every if p.url_path in done]}
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")

    with serve() as url, launch() as browser:
        started += after_start(url, browser, pages[:2])  # Home, then the first lesson, as a first visitor would
        measure(url, browser, pages, a.visits, on_row=write)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
