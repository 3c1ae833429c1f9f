"""One plotly chart on a dashboard page: the figure's JSON drawn in the page by a plotly.js bundle of just the
traces the pages draw (app/static/plotly-paralab.min.js, 1.3 MB: scatter, bar, heatmap, image; built by
app/plotly_bundle) instead of Streamlit's own chart element, whose full plotly.js (4.7 MB) costs every new tab
~0.5 s more on a 2-core machine (measured by bench/app_browser.py). Needs Streamlit's static serving
(`app/.streamlit/config.toml`, read beside the entry point from any folder); without it the chart falls
back to `st.plotly_chart`. Every chart gets the same layout defaults, so nothing of it is cut on a narrow window:
its legend in rows under the plot (`legend_below`), a long title wrapped (`title_wrapped`)."""
from __future__ import annotations

import json
import textwrap
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


LEGEND_ROW_PX = 24    # one row of a legend below the plot
LEGEND_ROW_CHARS = 56  # legend text per row at the narrowest a chart is read at (a half column at 800 px, ~420 px)
PLOTLY_HEIGHT_PX = 450  # plotly's height of a figure that sets none
PLOTLY_MARGIN_PX = 100  # plotly's top margin of a figure that sets none


def legend_below(fig: Any) -> Any:
    """A figure that leaves its legend where plotly puts it, beside the plot (150-250 px of an 800 px window's
    width, the plot squeezed to a sliver), gets it in rows under the plot instead, the figure taller by those rows;
    a figure that places its own legend (orientation, x or y set) keeps it. Changes `fig` (once: the legend is
    then placed) and returns it."""
    legend = fig.layout.legend
    if fig.layout.showlegend is False or legend.orientation is not None or legend.x is not None or legend.y is not None:
        return fig
    shown = [getattr(t, "showlegend", None) for t in fig.data]  # an image trace has no legend entry at all
    names = [str(t.name) for t, s in zip(fig.data, shown) if s is not False and t.name]
    if len(names) < 2 and not any(shown):
        return fig  # plotly draws no legend for one trace
    rows, used = 1, 0
    for n in names:
        w = len(n) + 6  # the line sample and the gap
        if used and used + w > LEGEND_ROW_CHARS:
            rows, used = rows + 1, 0
        used += w
    titled = bool(legend.title.text)
    fig.update_layout(height=(fig.layout.height or PLOTLY_HEIGHT_PX) + LEGEND_ROW_PX * (rows + titled),
                      legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                              "xanchor": "left", **({"title_side": "top left"} if titled else {})})
    return fig


TITLE_CHARS = 48  # a title line's characters that fit a half column at 800 px (~360 px at plotly's 17 px)
TITLE_LINE_PX = 22


def title_wrapped(fig: Any) -> Any:
    """A figure title longer than TITLE_CHARS, which plotly draws on one line and the chart's edge cuts (a timeline's
    131-character title lost 241 px), wrapped at word breaks into lines of at most TITLE_CHARS, the figure taller
    by the lines added and its top margin grown to hold them, the title at its top. A title with line
    breaks of its own is left as it is. Changes `fig` (once) and returns it."""
    text = fig.layout.title.text
    if not text or "<br>" in text or len(text) <= TITLE_CHARS:
        return fig
    lines = textwrap.wrap(text, TITLE_CHARS, break_long_words=False, break_on_hyphens=False)
    top = fig.layout.margin.t
    # at the top of the figure: plotly draws a title of several lines ~15 px above its "top" anchor (its centred
    # default sits lower, over the plot), hence the pad
    fig.update_layout(title={"text": "<br>".join(lines), "yref": "container", "y": 1, "yanchor": "top",
                             "pad": {"t": 24}},
                      margin_t=max(TITLE_LINE_PX * len(lines) + 24, PLOTLY_MARGIN_PX if top is None else top),
                      height=(fig.layout.height or PLOTLY_HEIGHT_PX) + TITLE_LINE_PX * (len(lines) - 1))
    return fig


def plotly(fig: Any, key: str) -> None:
    """Draw `fig` (a plotly Figure) full width under `key` (unique on the page), its legend below it
    (`legend_below`) and a long title wrapped (`title_wrapped`)."""
    legend_below(fig)
    title_wrapped(fig)
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
