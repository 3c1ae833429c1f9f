"""ParaLab dashboard entry: `streamlit run app/Home.py`. The navigation is built from the one page list
(`page_list.PAGES`); each page is a module in views/ with a `render()` function (not a pages/ folder:
Streamlit would also auto-list that). Each session's run runs this file as a script (`__main__`); before that,
`streamlit run` imports it once as a module, finds `app` (an st.App of this same script) and serves it, so the
warm-up of every page starts with the server, not at the first visit (app/warmup.py)."""
import gc
import importlib

import streamlit as st

import _common as ui
import asyncio_private
import narrow
import page_list
import warmup


def navigation(pages: list[page_list.PageInfo]) -> list:
    """One st.Page per entry of the page list, Home first and default, each at its URL path (also kept in
    page_list.NAV by URL path, for the tour's deep links)."""
    nav = [st.Page(importlib.import_module(p.module).render, title=p.title, icon=p.icon,
                   url_path=p.url_path or None, default=p is page_list.HOME) for p in pages]
    page_list.NAV.clear()
    page_list.NAV.update({p.url_path: n for p, n in zip(pages, nav)})
    return nav


# Narrow windows (800 px): a row of controls wraps instead of squeezing each to a sliver, and nothing
# makes the page scroll sideways (wide tables scroll in their own box, app/static_table.py); metric labels and
# button and page-link labels wrap rather than end in "…" (a cut label such as "Preset: Deep Imag…" no longer says
# which; a scorecard's review link names its whole question).
NARROW_CSS = """<style>
[data-testid="stMain"] [data-testid="stHorizontalBlock"] { flex-wrap: wrap; }
[data-testid="stMain"] [data-testid="stColumn"] { min-width: min(8rem, 100%); }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] table { display: block; overflow-x: auto; max-width: 100%; }
[data-testid="stMain"] [data-testid="stMetricLabel"] *,
[data-testid="stMain"] [data-testid="stMetricValue"] *,
[data-testid="stMain"] [data-testid="stButton"] button *,
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] * {
  white-space: normal; overflow: visible; text-overflow: clip; }
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] { height: auto; }
</style>"""


if __name__ == "__main__":  # a session's run of the dashboard
    asyncio_private.install()  # the server's responses without Nagle's 40 ms waits
    # the sidebar folds on a narrow window (app/narrow.py; Streamlit's "auto" folds it below 768 px only)
    st.set_page_config(page_title="ParaLab", layout="wide", initial_sidebar_state="auto")
    narrow.fold_sidebar()
    st.html(NARROW_CSS)
    nav = st.navigation(navigation(page_list.PAGES))
    ui.arrive(nav.url_path)  # each page owns its settings: arriving starts from the page's URL, nothing carried
    if not gc.get_freeze_count():  # once per process: what the imports made is never garbage, so the collector's
        gc.collect()               # full collections skip it (Streamlit's own one after every run is off:
        gc.freeze()                # app/.streamlit/config.toml; warmup.py freezes again once every page is warm)
    warmup.start()  # a Streamlit without st.App (no `app` served): the warm-up starts at the first session
    nav.run()
else:  # imported once by `streamlit run app/Home.py`, before its server starts: the app it serves
    asyncio_private.install()  # so from the first connection on
    app = st.App(__file__, lifespan=warmup.lifespan)  # the warm-up starts with the server (app/warmup.py)
