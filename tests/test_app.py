"""Dashboard pages render without exceptions and react to their controls (streamlit AppTest)."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parent.parent / "app" / "pages"


def test_overview_shows_device():
    at = AppTest.from_file(str(PAGES / "overview.py")).run(timeout=60)
    assert not at.exception
    assert "CPU" in at.metric[0].value or "NVIDIA" in at.metric[0].value


def test_codecs_page_updates_error_table():
    at = AppTest.from_file(str(PAGES / "codecs.py")).run(timeout=120)
    assert not at.exception
    df = at.dataframe[0].value
    assert set(df.codec) >= {"dynamic_tree[nearest,tensor]", "linear[nearest,tensor]"}
    before = df.set_index("codec").mean_rel_error["dynamic_tree[nearest,tensor]"]
    at.radio[0].set_value("paper").run(timeout=120)
    after = at.dataframe[0].value.set_index("codec").mean_rel_error["dynamic_tree[paper,tensor]"]
    assert after > 1.3 * before
    assert at.query_params["rounding"] in ("paper", ["paper"])


def test_codecs_page_bad_distribution_is_a_message():
    at = AppTest.from_file(str(PAGES / "codecs.py")).run(timeout=120)
    at.text_input[0].set_value("gauss(0,1)").run(timeout=60)
    assert not at.exception
    assert "unknown distribution" in at.error[0].value
