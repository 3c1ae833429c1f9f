"""The dashboard's result tables (app/static_table.py) and charts (app/chart.py): what a reader sees and what
the tests read back."""
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as s
from plotly.offline import get_plotlyjs_version

import static_table as t
from lazy_import import lazy

chart = lazy("chart")  # Streamlit loads with the first test that draws, not at collection

APP = Path(__file__).resolve().parent.parent / "app"


def test_numbers_are_rounded_for_reading_and_exact_on_hover():
    df = pd.DataFrame({"Codec": ["dynamic_tree", "linear"], "Error (%)": [1.534567891, 4.3], "Bits": [8, 8],
                       "Share": [0.25, 0.5]})
    html = t.html(df, help={"Error (%)": "mean relative error × 100"}, formats={"Share": "percent"})
    assert ">1.535<" in html and 'title="1.534567891"' in html  # 4 significant digits, exact value in the tooltip
    assert ">25 %<" in html and ">8<" in html
    assert 'title="mean relative error × 100"' in html
    assert "\n" not in html  # one markdown HTML block: a blank line would end it
    back = t.read(html)
    assert list(back.columns) == list(df.columns)
    assert back["Error (%)"].tolist() == [1.534567891, 4.3] and back.Bits.tolist() == [8, 8]
    assert back.Codec.tolist() == ["dynamic_tree", "linear"]


def test_text_is_escaped_and_dollars_do_not_start_tex():
    df = pd.DataFrame({"a<b": ["<script>x</script>", "costs $5 and $6"], "n": [float("nan"), 1.0]})
    html = t.html(df)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "$" not in html
    back = t.read(html)
    assert back["a<b"].tolist() == ["<script>x</script>", "costs $5 and $6"]
    assert math.isnan(back.n[0]) and back.n[1] == 1.0


def test_long_tables_scroll_inside_a_box():
    short, long = pd.DataFrame({"x": range(t.SCROLL_ROWS)}), pd.DataFrame({"x": range(t.SCROLL_ROWS + 1)})
    assert "max-height" not in t.html(short) and "max-height" in t.html(long)
    # every table scrolls sideways inside its box, never the page (also in an 800 px window)
    assert all("overflow:auto" in t.html(d) for d in (short, long))
    assert t.read(t.html(long)).x.tolist() == list(range(t.SCROLL_ROWS + 1))


@given(s.lists(s.tuples(s.from_regex(r"[A-Za-z_<>&$ ]{1,8}", fullmatch=True),
                        s.floats(allow_nan=False, allow_infinity=False)), min_size=1, max_size=20))
def test_any_table_reads_back_exactly(rows):
    df = pd.DataFrame(rows, columns=["name", "value"])
    back = t.read(t.html(df))
    assert back.value.tolist() == df.value.tolist() and back.name.tolist() == df.name.tolist()


def test_the_bundled_chart_library_matches_plotly_py():
    """The figures' JSON comes from plotly.py; the browser draws it with the bundled plotly.js: same major
    version (the schema changes between majors)."""
    head = (APP / "static" / chart.BUNDLE).read_text()[:200]
    bundled = re.search(r"v(\d+)\.(\d+)\.(\d+)", head).group(0)[1:]
    assert bundled.split(".")[0] == get_plotlyjs_version().split(".")[0], (bundled, get_plotlyjs_version())
    assert "paralab" in head and (APP / "static" / "plotly-paralab.LICENSE.txt").exists()


def test_the_bundle_has_every_trace_the_dashboard_draws():
    """app/plotly_bundle/entry.js registers the traces the pages use (plotly.js's core brings scatter); a page
    drawing another trace type would show an empty chart in the browser."""
    entry = (APP / "plotly_bundle" / "entry.js").read_text()
    bundled = {"scatter", *re.findall(r"plotly\.js/lib/(\w+)'", entry)}
    used = set()
    for path in [*APP.rglob("*.py"), *(APP.parent / "lab").rglob("*.py")]:
        used |= {name.lower() for name in re.findall(r"\bgo\.([A-Z]\w*)\(", path.read_text())} - {"figure", "frame"}
    assert {"scatter", "bar", "heatmap", "image"} <= used, used  # the scan finds what the pages draw
    assert used <= bundled, f"traces drawn but not in app/plotly_bundle/entry.js: {sorted(used - bundled)}"


def test_a_chart_without_static_serving_falls_back_to_streamlits_element(monkeypatch):
    import chart  # the module itself: monkeypatch sets its attribute
    from streamlit.testing.v1 import AppTest

    script = "import plotly.graph_objects as go, chart\nchart.plotly(go.Figure(go.Bar(x=[1, 2], y=[3, 4])), key='c')\n"
    for served, element in ((True, "bidi_component"), (False, "plotly_chart")):
        monkeypatch.setattr(chart, "_served", lambda: served)
        at = AppTest.from_string(script).run()
        assert not at.exception, at.exception
        assert len(at.get(element)) == 1
        assert chart.figures(at)[0]["data"][0]["y"] == [3, 4]
