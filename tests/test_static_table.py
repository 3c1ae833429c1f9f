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


def test_numbers_read_as_people_write_them():
    """No exponent, no Python values: thousands separated, tiny and huge numbers the way papers write them."""
    assert t.number_text(263712.0) == "263,712" and t.number_text(263712) == "263,712"  # not 2.637e+05
    assert t.number_text(263712.0, "%.3g") == "264,000" and t.number_text(12345.678, "%.1f") == "12,345.7"
    assert t.number_text(1.5e-5) == "1.5×10⁻⁵" and t.number_text(1.4e15) == "1.4×10¹⁵"
    assert t.number_text(0.0001636) == "0.0001636" and t.number_text(1.534567891) == "1.535"
    assert t.number_text(1.49e-8, "percent") == "1.49×10⁻⁶ %" and t.number_text(2016) == "2016"
    assert t.number_text(float("inf")) == "∞" and t.number_text(-float("inf")) == "−∞"
    html = t.html(pd.DataFrame({"Fits": [True, False], "n": [2.637e5, float("inf")]}))
    assert ">yes<" in html and ">no<" in html and ">263,700<" in html and ">∞<" in html
    assert t.read(html).n.tolist() == [2.637e5, float("inf")]  # the exact numbers, as before


def test_people_headers_units_and_the_main_columns():
    df = pd.DataFrame({"variant": ["a", "b"], "step_s": [0.0123, 0.5], "bytes_per_step": [263712.0, 12.0e6],
                       "late_test_loss": [0.1, 0.2], "exposed_comm_ms": [1.0, 2.0]})
    cols = {"variant": ("Run",), "step_s": ("Step", "ms", "median step", 1e3, "%.1f"),
            "bytes_per_step": ("Sent per step", t.BYTES)}
    shown, tips, formats = t.people(df, cols)
    assert list(shown.columns) == ["Run", "Step (ms)", "Sent per step (MB)"]  # the unit from the largest value
    assert shown["Step (ms)"].tolist() == pytest.approx([12.3, 500.0]) and formats == {"Step (ms)": "%.1f"}
    assert shown["Sent per step (MB)"].tolist() == pytest.approx([0.263712, 12.0]) and tips == {"Step (ms)": "median step"}
    every, _, _ = t.people(df, cols, ["variant"], every=True)
    assert list(every.columns) == ["Run", "Step (ms)", "Sent per step (MB)", "Late test loss", "Exposed comm (ms)"]
    assert t.hidden_columns(df, cols, ["variant"]) == ["step_s", "bytes_per_step", "late_test_loss", "exposed_comm_ms"]
    assert t.human_header("images_per_s") == "Images per second" and t.human_header("saving_pct") == "Saving (%)"
