"""One plotly chart on a dashboard page: the figure's JSON drawn in the page by a plotly.js bundle of just the
traces the pages draw (app/static/plotly-paralab.min.js, 1.3 MB: scatter, bar, heatmap, image; built by
app/plotly_bundle) instead of Streamlit's own chart element, whose full plotly.js (4.7 MB) costs every new tab
~0.5 s more on a 2-core machine (measured by bench/app_browser.py). Needs Streamlit's static serving
(`app/.streamlit/config.toml`, read beside the entry point from any folder); without it the chart falls
back to `st.plotly_chart`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st

BUNDLE = "plotly-paralab.min.js"
_JS = (Path(__file__).with_name("chart.js")).read_text()
_mount = st.components.v2.component("paralab_chart", js=_JS, isolate_styles=False)


def _src() -> str:
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}/app/static/{BUNDLE}" if base else f"/app/static/{BUNDLE}"


def _served() -> bool:
    return bool(st.get_option("server.enableStaticServing"))


def plotly(fig: Any, key: str) -> None:
    """Draw `fig` (a plotly Figure) full width under `key` (unique on the page)."""
    if not _served():
        st.plotly_chart(fig, key=key)
        return
    _mount(key=key, data={"figure": fig.to_json(), "src": _src()})


def figures(at: Any) -> list[dict]:
    """The figures an AppTest run drew (tests and bench/app_render.py count and read them)."""
    out = []
    for el in [*at.get("bidi_component"), *at.get("plotly_chart")]:
        proto = el.proto
        if getattr(proto, "component_name", None) == "paralab_chart":
            data = json.loads(proto.json)
            if data.get("figure"):
                out.append(json.loads(data["figure"]))
        elif hasattr(proto, "spec"):
            out.append(json.loads(proto.spec))
    return out
