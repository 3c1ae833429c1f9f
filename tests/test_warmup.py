"""app/warmup.py: the dashboard warms every page's default view when its server starts, before any
session opens, once per server process."""
import re
import sys
import time
import urllib.request
from pathlib import Path

import page_list
from browser_fixtures import log_of, server  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parent.parent


def test_the_server_warms_every_page_when_it_starts(server):  # noqa: F811
    """`python app/serve.py` (the run's one dashboard server, what `paralab dashboard` runs): its warm-up starts
    with the server, not at a first session, the server's log names every page warmed and the warm() hooks run, and
    the sessions opened since (this run's browser tests, and one here) start no second warm-up."""
    log_path = log_of(server)
    deadline = time.monotonic() + 600  # a loaded 2-core machine; returns as soon as the log says done
    while True:
        assert urllib.request.urlopen(f"{server}/_stcore/health", timeout=5).read() == b"ok"  # the server is up
        if "paralab warm-up: done" in (text := log_path.read_text()):
            break
        assert "warm-up: stopped" not in text, text[-2000:]
        assert time.monotonic() < deadline, text[-2000:]
        time.sleep(0.5)
    sys.path.insert(0, str(ROOT / "app"))
    import warmup

    warmup._visit(server.replace("http://", "ws://"), [""])  # a session: Home runs warmup.start() again
    text = log_path.read_text()
    assert "paralab warm-up: started with the server" in text and "started by the first session" not in text
    for p in page_list.PAGES[1:]:
        assert f"paralab warm-up: {p.url_path} " in text, (p.url_path, text[-2000:])
    assert "views.collectives.warm()" in text
    assert text.count("paralab warm-up: done") == 1 and text.count("paralab warm-up: codecs ") == 1
    # what the pages imported and cached is frozen for the garbage collector once they are warm
    assert int(re.search(r"warm-up: done, .*; (\d+) objects frozen", text).group(1)) > 100_000, text[-2000:]


def test_streamlit_run_starts_the_warm_up_with_the_server_before_any_page_is_requested():
    """Regression: under a plain `streamlit run app/Home.py` (README's command) the warm-up began only when the
    first visitor's session opened, so the first page waited for it (117 s on a loaded machine). Here nothing asks
    the server for a page, only its health check: its log says the warm-up started with the server, and it warms
    the first page in the list all the same (the server is stopped then: the rest is test_the_server_warms...)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from app_browser import serve

    first = page_list.PAGES[1].url_path
    with serve() as url:  # `python -m streamlit run app/Home.py`
        text, deadline = "", time.monotonic() + 300  # a loaded 2-core machine; returns once the page is warm
        while f"paralab warm-up: {first} " not in text:
            assert time.monotonic() < deadline and "warm-up: stopped" not in text, text[-2000:]
            time.sleep(0.3)
            text = log_of(url).read_text()
    assert "paralab warm-up: started with the server" in text and "started by the first session" not in text, text


def test_one_warm_up_per_process(monkeypatch):
    """Only the first caller starts it; PARALAB_WARMUP=0 switches it off; nothing under AppTest's runtime."""
    import threading

    import warmup

    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setenv("PARALAB_WARMUP", "1")
    assert warmup._claim() and not warmup._claim()
    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setenv("PARALAB_WARMUP", "0")
    assert not warmup._claim() and not warmup._claim()
    monkeypatch.setattr(warmup, "_started", threading.Event())
    assert warmup.start() is False and not warmup._started.is_set()  # no Streamlit server in this process


def test_the_dashboard_s_config_names_streamlit_options_and_skips_the_collection_after_every_run():
    """app/.streamlit/config.toml (what Streamlit reads beside the entry point app/Home.py): each key is one of
    Streamlit's options (a misspelt one would be ignored), and runner.postScriptGC is off: a full garbage
    collection after every script run took ~0.16 s of CPU with torch, pandas and plotly loaded."""
    import tomllib

    from streamlit import config

    cfg = tomllib.loads((ROOT / "app" / ".streamlit" / "config.toml").read_text())
    names = {f"{section}.{key}" for section, options in cfg.items() for key in options}
    assert names <= set(config.get_config_options()), names - set(config.get_config_options())
    assert cfg["runner"]["postScriptGC"] is False
