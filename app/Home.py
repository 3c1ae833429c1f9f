"""ParaLab dashboard entry: `streamlit run app/Home.py`. The navigation is built from the one page list
(`page_list.PAGES`); each page is a module in views/ with a `render()` function (not a pages/ folder:
Streamlit would also auto-list that)."""
import gc
import importlib

import streamlit as st

import _common as ui
import asyncio_private
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


asyncio_private.install()  # the server's responses without Nagle's 40 ms waits
st.set_page_config(page_title="ParaLab", layout="wide")
# Narrow windows (800 px): a row of controls wraps instead of squeezing each to a sliver, and nothing
# makes the page scroll sideways (wide tables scroll in their own box, app/static_table.py); metric labels and
# button labels wrap rather than end in "…" (a cut label such as "Preset: Deep Imag…" no longer says which).
st.html("""<style>
[data-testid="stMain"] [data-testid="stHorizontalBlock"] { flex-wrap: wrap; }
[data-testid="stMain"] [data-testid="stColumn"] { min-width: min(8rem, 100%); }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] table { display: block; overflow-x: auto; max-width: 100%; }
[data-testid="stMain"] [data-testid="stMetricLabel"] *,
[data-testid="stMain"] [data-testid="stMetricValue"] *,
[data-testid="stMain"] [data-testid="stButton"] button * { white-space: normal; overflow: visible; text-overflow: clip; }
</style>""")
nav = st.navigation(navigation(page_list.PAGES))
ui.arrive(nav.url_path)  # each page owns its settings: arriving starts from the page's URL, nothing carried
if not gc.get_freeze_count():  # once per process: what the imports made is never garbage, so the collector's
    gc.collect()               # full collections skip it (Streamlit's own one after every run is off:
    gc.freeze()                # app/.streamlit/config.toml; warmup.py freezes again once every page is warm)
warmup.start()  # once per server; app/serve.py starts it with the server, before this first session
nav.run()
