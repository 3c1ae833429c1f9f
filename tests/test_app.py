"""Dashboard pages render without exceptions and react to their controls (streamlit AppTest). A page is
a `render()` function in app/views/ listed once in app/page_list.py (app/ is on pytest's pythonpath, as
`streamlit run app/Home.py` puts it on sys.path)."""
import sys
import textwrap
from pathlib import Path

import pytest

import page_list
from apptest_runs import shared_components
from test_app_tables import assert_for_people
from lazy_import import lazy

tables = lazy("static_table", "tables")  # pandas: loaded by the first test that reads a table

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection
figures = lazy("chart", "figures")

APP = Path(__file__).resolve().parent.parent / "app"


def _render(module: str) -> None:
    import importlib

    importlib.import_module(module).render()


def page(name: str, **query) -> AppTest:
    """The page app/views/<name>.py on its own, its URL carrying `query`."""
    at = shared_components(AppTest.from_function(_render, args=(f"views.{name}",), default_timeout=120))
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def home() -> AppTest:
    return shared_components(AppTest.from_file(str(APP / "Home.py"), default_timeout=120)).run()


def goto(at: AppTest, url_path: str) -> AppTest:
    """Open the navigation's page at `url_path`, as a click in the sidebar does (AppTest.switch_page
    takes files only; these pages are functions)."""
    hashes = [h for h, info in at._registered_pages.items() if info.get("url_pathname") == url_path]
    assert hashes, f"no page at {url_path!r}: {[i.get('url_pathname') for i in at._registered_pages.values()]}"
    at._page_hash = hashes[0]
    at.query_params.clear()  # the sidebar's link carries no query (the browser drops the last page's)
    return at.run()


def metric(at: AppTest, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r} in {[m.label for m in at.metric]}")


def finish(at: AppTest, done, timeout: float = 120) -> AppTest:
    """Rerun a page whose Run button started a background job (app/_runs.py) until `done(at)` holds (rerun
    when a run ends, not on a clock: apptest_runs.rerun_until)."""
    from apptest_runs import rerun_until

    return rerun_until(at, done, "the run to finish", timeout)


def number(text: str) -> float:
    return float(text.replace(",", "").split()[0].rstrip("x%"))


def test_home_entry_navigates_every_page():
    at = home()
    assert not at.exception
    assert "CPU" in at.metric[0].value or "NVIDIA" in at.metric[0].value
    for name in ("transfer", "collectives", "dropout"):
        goto(at, name)
        assert not at.exception, name
        # transfer's chart waits for its prediction (predict, then reveal); its takeaway is there at once
        assert figures(at) if name != "transfer" else any("Takeaway." in s.value for s in at.success), name


def test_the_page_list_drives_navigation_and_overview(tmp_path, monkeypatch):
    """One entry added to page_list.PAGES is a page in Home's navigation, a row of the overview and a step of the
    tour."""
    (tmp_path / "extra_page.py").write_text(textwrap.dedent("""
        import streamlit as st

        def render() -> None:
            st.title("Extra page for the test")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = page_list.PageInfo("Extra", ":material/star:", "extra_page", "extra", "How one list feeds both.",
                               "[nobody 2026](https://example.org)")
    monkeypatch.setattr(page_list, "PAGES", [*page_list.PAGES, extra])
    at = home()
    assert not at.exception
    assert [i.get("url_pathname") for i in at._registered_pages.values()] == [p.url_path for p in page_list.PAGES]
    text = " ".join(m.value for m in at.markdown)
    assert "**Extra** | How one list feeds both." in text and "**Codecs**" in text
    assert [p.proto.label for p in at.get("page_link")][-1].endswith(": Extra")  # and the last step of the tour
    goto(at, "extra")
    assert not at.exception and at.title[0].value == "Extra page for the test"
    sys.modules.pop("extra_page", None)


def test_every_listed_page_is_a_render_function():
    import importlib

    assert len({p.url_path for p in page_list.PAGES}) == len(page_list.PAGES)
    for p in page_list.PAGES:
        assert callable(importlib.import_module(p.module).render), p.module
    views = {f.stem for f in (APP / "views").glob("*.py") if not f.stem.startswith("_")}
    assert views == {p.module.split(".")[-1] for p in page_list.PAGES}  # no page left out of the list


def test_overview_shows_device_and_papers():
    at = page("overview")
    assert not at.exception
    assert "CPU" in at.metric[0].value or "NVIDIA" in at.metric[0].value
    text = " ".join(m.value for m in at.markdown)
    assert "arxiv.org/abs/1511.04561" in text and "Collectives" in text


def test_codecs_page_updates_error_table():
    at = page("codecs", guess="skip")  # the error table shows once the prediction is made or skipped
    assert not at.exception
    df = tables(at)[0]
    assert set(df.Codec) >= {"dynamic_tree[nearest,tensor]", "linear[nearest,tensor]"}
    before = df.set_index("Codec")["Mean relative error (%)"]["dynamic_tree[nearest,tensor]"]
    at.radio(key="w_rounding").set_value("paper").run()
    assert not at.exception
    after = tables(at)[0].set_index("Codec")["Mean relative error (%)"]["dynamic_tree[paper,tensor]"]
    assert after > 1.3 * before
    assert at.query_params["rounding"] in ("paper", ["paper"])
    assert len(figures(at)) >= 2


def test_codecs_page_url_reproduces_view_and_captured_tensors():
    at = page("codecs", dist="uniform", **{"uniform.a": "0", "uniform.b": "1"}, rounding="paper",
              codecs=["dynamic_tree"], guess="skip")
    assert not at.exception
    df = tables(at)[0]
    assert list(df.Codec) == ["dynamic_tree[paper,tensor]"] and df.Data[0] == "uniform(0,1)"
    assert 1.2 < df["Mean relative error (%)"][0] < 1.6  # the paper's 1.39 % (kernel rounding)
    at.radio(key="w_source").set_value("captured tensor").run()
    assert not at.exception
    assert any(d.startswith("grad") for d in tables(at)[0].Data)


def test_codecs_page_bad_parameters_are_messages():
    at = page("codecs", designer="true", guess="skip")  # the bit-layout designer open, the error table shown
    at.number_input(key="w_normal.sigma").set_value(-1.0).run()
    assert not at.exception
    assert "scale parameter must be > 0" in at.error[0].value
    at.number_input(key="w_normal.sigma").set_value(1.0).run()
    at.checkbox(key="w_layout_on").check().run()
    assert not at.exception and not at.error
    assert len(tables(at)[0]) == 5  # the four default codecs and the layout
    at.checkbox(key="w_lay_dynamic").uncheck().run()
    at.number_input(key="w_lay_exp").set_value(7).run()  # leaves no bits for a linear mantissa
    at.selectbox(key="w_lay_mantissa").set_value("linear").run()
    assert not at.exception
    assert "Impossible bit layout" in at.error[0].value


def test_transfer_page_link_changes_speedup():
    at = page("transfer", guess="skip")  # the speedups show once the prediction is made or skipped
    assert not at.exception
    fast = number(metric(at, "Its speedup"))
    at.selectbox(key="w_link").set_value("eth1g").run()
    assert not at.exception
    slow = number(metric(at, "Its speedup"))
    assert slow > fast > 1
    at.selectbox(key="w_link").set_value("custom").run()
    at.number_input(key="w_bw_gbps").set_value(0.0).run()
    assert not at.exception
    assert "Bandwidth (GB/s) = 0.0 is out of range" in at.error[0].value


def _until(at: AppTest, done, timeout: float = 180.0) -> AppTest:
    """Rerun the page until done(at): a Run button's work goes on in the background (rerun when it ends)."""
    from apptest_runs import rerun_until

    return rerun_until(at, done, "the page's run", timeout)


def test_collectives_page_model_and_limits():
    at = page("collectives", part="Measured here")
    assert not at.exception
    t8 = number(metric(at, "ring time"))
    at.number_input(key="w_P").set_value(64).run()
    assert number(metric(at, "ring time")) > t8
    at.selectbox(key="w_algorithm").set_value("tree").run()
    assert not at.exception
    at.number_input(key="w_P").set_value(1024).run()
    at.button(key="run_meas_run").click().run()
    _until(at, lambda a: a.error)
    assert not at.exception
    assert "more than this machine can host" in at.error[0].value


def test_training_page_runs_and_compares_bytes():
    at = page("training", codecs=["32-bit", "dynamic_tree"], epochs="1", workers="2")
    assert not at.exception
    assert [m.label for m in at.metric] == ["32-bit: bytes per step", "dynamic_tree: bytes per step"]  # no run yet
    at.button(key="run_train_run").click().run()
    _until(at, lambda a: len(a.metric) >= 6)
    assert not at.exception
    assert "vs 32-bit" in at.metric[-2].delta
    share = number(at.metric[-2].delta.split("(")[1])
    assert 20 < share < 30  # 8 bits on the wire instead of 32
    err = number(next(m.value for m in at.metric if m.label == "32-bit"))  # its final test error
    assert 0 < err < 60
    at.multiselect(key="w_codecs").set_value(["32-bit", "onebit"]).run()
    assert any("earlier Train" in c.value for c in at.caption)  # new runs: press Train again
    at.button(key="run_train_run").click().run()
    _until(at, lambda a: len(a.metric) >= 6 and not any("earlier Train" in c.value for c in a.caption))
    assert number(at.metric[-2].delta.split("(")[1]) < 10


def test_dropout_page_rate_changes_search():
    at = page("dropout", p="0.5", guess="skip")  # the rate shows once the prediction is made or skipped
    assert not at.exception
    assert "drops every unit 0.500 of the time" in at.success[0].value  # the takeaway, from Algorithm 1's run
    at.slider(key="w_p").set_value(0.7).run()
    assert not at.exception
    assert "drops every unit 0.700 of the time" in at.success[0].value
    assert len(figures(at)) >= 2


@pytest.mark.parametrize("net", ["MLP", "LSTM"])
def test_dropout_page_training_run(net):
    size = {"net_hidden": "64", "net_epochs": "1"} if net == "MLP" else {"lstm_hidden": "64", "lstm_epochs": "1"}
    at = page("dropout", net=net, kinds=["bernoulli", "row"], **size)
    at.button(key="run_net_run").click().run()
    finish(at, lambda a: any(m.label.startswith("RDP (row)") for m in a.metric) or a.exception)
    assert not at.exception
    assert "%" in metric(at, "RDP (row)")
    assert tables(at)[-1].shape[0] == 2
    if net == "LSTM":  # a fresh machine (conftest): Python's own documentation, and the page says so
        assert any(c.value.startswith("Corpus that ran: **pydoc") for c in at.caption)


def test_dropout_page_missing_corpus_is_a_message():
    at = page("dropout", net="LSTM", lstm_hidden="64", lstm_epochs="1", kinds=["bernoulli"], corpus="ptb",
              ptb_path="/nonexistent/ptb", more="true")
    assert at.selectbox(key="w_corpus").value == "ptb"
    offered = " | ".join(at.selectbox(key="w_corpus").options)
    assert "Python documentation" in offered and "apt install fortunes" not in offered  # fortunes absent here
    at.button(key="run_net_run").click().run()
    finish(at, lambda a: a.error or a.exception)
    assert not at.exception
    assert "no Penn Treebank at '/nonexistent/ptb'" in at.error[0].value


def _sweep(at: AppTest):
    return next(d for d in tables(at) if {"Strategy", "GPUs P", "Speedup vs one GPU (x)"} <= set(d.columns))


def test_deep_image_pages_render_with_defaults():
    at = page("augmentations", di_view="Table 1 counts")
    assert not at.exception and not at.error
    assert metric(at, "Rows matching the paper") == "6 of 6"  # Table 1, computed beside the paper
    assert at.query_params["seed"] in ("0", ["0"])
    charts = len(figures(at))
    at = page("planner", guess="skip")  # its speedup chart shows once the prediction is made or skipped
    assert not at.exception and not at.error
    assert number(metric(at, "Full synchronisation")) == pytest.approx(127.7, abs=0.1)  # Dettmers §2.3.2
    assert charts + len(figures(at)) >= 2  # one view at a time, so a default view draws fast
    at = page("fusion")
    assert not at.exception and not at.error
    assert not any(m.label.endswith("test error") for m in at.metric)  # fusion waits for its button


def test_deep_image_planner_reacts_to_gpus_strategy_and_link():
    at = page("planner", plan_show="Table", guess="skip")
    s64 = number(metric(at, "data: speedup on 64 GPUs"))
    at.multiselect(key="w_gpus").set_value(["1", "2", "4", "8"]).run()
    assert not at.exception
    s8 = number(metric(at, "data: speedup on 8 GPUs"))
    assert 1 < s8 < s64
    assert sorted(_sweep(at)["GPUs P"].unique()) == [1, 2, 4, 8]
    at.multiselect(key="w_strategies").set_value(["model"]).run()
    assert not at.exception and not at.error
    assert set(_sweep(at).Strategy) == {"model"}
    assert number(metric(at, "model: speedup on 8 GPUs")) > 0
    at.multiselect(key="w_strategies").set_value(["data"]).run()
    at.selectbox(key="w_plan_link").set_value("eth1g").run()
    assert number(metric(at, "data: speedup on 8 GPUs")) < s8  # a slower link scales worse
    assert at.query_params["plan_link"] in ("eth1g", ["eth1g"])


def test_deep_image_presets_reproduce_the_papers():
    at = page("planner", guess="skip")  # the speedups show once the prediction is made or skipped
    next(b for b in at.button if b.label.startswith("Preset: Dettmers")).click().run()
    assert not at.exception and not at.error
    assert metric(at, "data: speedup on 4 GPUs") == "0.59x"  # slower than one GPU, as Dettmers says
    assert number(metric(at, "Step at P = 4")) == pytest.approx(170.8, abs=0.1)
    next(b for b in at.button if b.label.startswith("Preset: Deep Image Fig. 3")).click().run()
    assert not at.exception
    assert number(metric(at, "data: speedup on 64 GPUs")) == pytest.approx(50.05, abs=0.01)  # paper 47x
    next(b for b in at.button if b.label.startswith("Preset: Deep Image Fig. 2")).click().run()
    assert not at.exception
    assert metric(at, "Data beats hybrid from") == "P = 128"
    at.selectbox(key="w_plan_show").set_value("Table").run()
    assert set(_sweep(at).Strategy) == {"data", "hybrid"}


def test_deep_image_bad_values_are_messages():
    at = page("planner", gpus=["1", "4"], more="true")
    at.number_input(key="w_batch_size").set_value(0).run()
    assert not at.exception  # said in the control's own name, not the library's (batch_per_gpu)
    assert "Images per GPU = 0 is out of range; allowed: >= 1" in at.error[0].value
    assert number(metric(at, "Full synchronisation")) > 0  # the other sections still render
    at.number_input(key="w_batch_size").set_value(64).run()
    aug = page("augmentations", more_card="true")
    aug.number_input(key="w_crop").set_value(300).run()
    assert not aug.exception
    assert "larger than the images" in aug.error[0].value
    at.selectbox(key="w_plan_link").set_value("custom").run()
    at.number_input(key="w_bw_gbps").set_value(0.0).run()
    assert not at.exception
    assert "Bandwidth (GB/s) = 0.0 is out of range; allowed: 1e-06..10000" in at.error[0].value


def test_deep_image_settings_tab_takes_every_parameter_and_names_bad_ones():
    at = page("augmentations", di_view="Set the parameters", set_strength="0.6", set_angle="10", set_degree="0.2", set_kind="pincushion",
              set_r="12", set_flip="1", more_card="true")
    assert not at.exception and not at.error
    assert at.slider(key="w_set_strength").value == pytest.approx(0.6)
    assert at.slider(key="w_set_r").value == 12 and at.checkbox(key="w_set_flip").value
    at.number_input(key="w_set_top").set_value(100).run()
    assert not at.exception
    assert "crop top offset must be an integer in 0..32" in at.error[0].value
    assert at.query_params["set_top"] in ("100", ["100"])


def test_deep_image_fusion_runs_from_the_button():
    at = page("fusion", epochs="2", scales=["8", "16"], guess="skip")  # the errors show once the question is out
    at.button(key="run_fusion_run").click().run()
    finish(at, lambda a: any(m.label.startswith("fused") for m in a.metric) or a.exception)
    assert not at.exception and not at.error
    err = number(metric(at, "fused: test error"))
    assert 0 <= err < 60
    assert tables(at)[-1]["Test images (%)"].sum() == pytest.approx(100.0, abs=0.05)
    assert_for_people(at, "fusion")
    at.multiselect(key="w_scales").set_value(["16"]).run()
    at.button(key="run_fusion_run").click().run()
    finish(at, lambda a: a.error or a.exception)
    assert not at.exception
    assert "at least two different sizes" in at.error[0].value


def test_home_entry_reaches_deep_image():
    at = goto(home(), "deep_image")
    assert not at.exception
    assert figures(at) and "different training images" in at.success[0].value  # the preview and its takeaway


def test_a_type_error_is_a_bug_not_a_message():
    """USER_ERRORS (shown on the page as a message) are the lab's bad-input errors; a TypeError is a
    bug in the caller and must surface, not be turned into a message."""
    import _common as ui

    def buggy() -> None:
        raise TypeError("unsupported operand")

    assert ValueError in ui.USER_ERRORS and TypeError not in ui.USER_ERRORS
    with pytest.raises(TypeError):
        ui.shown(buggy)
