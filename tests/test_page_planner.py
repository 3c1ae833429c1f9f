"""The Planner page in Streamlit's AppTest: a two-level cluster (nodes x GPUs per node, a link
inside a node and one between nodes) gives the numbers `planner_sweep` gives for it, the two-level algorithms are
offered only there, the takeaway and the lesson name the two-level effect from the numbers shown, bad machines
are messages, and the default view keeps at most six input controls in view (the rest under More settings)."""
import pytest

from lab.experiments import INTER_LINKS, INTRA_LINKS, planner_sweep
from lab.experiments.plan import CLUSTER_ALGORITHMS
from test_app import metric, number, page
from lazy_import import lazy

AppTest = lazy("streamlit.testing.v1", "AppTest")  # Streamlit loads with the first page test, not at collection

# what a learner can touch: every Streamlit input widget kind
INPUTS = ("selectbox", "multiselect", "slider", "select_slider", "number_input", "radio", "checkbox", "text_input",
          "text_area", "toggle", "date_input", "time_input", "color_picker", "file_uploader", "segmented_control",
          "pills", "chat_input")
MAX_IN_VIEW = 6  # at most about six controls in view at first, so the lesson stays in sight
CLUSTER = "a cluster of nodes"


def top_level_inputs(at: AppTest) -> list[str]:
    """The labels of the input widgets a page shows outside any expander (More settings folds the rest)."""
    found: list[str] = []

    def walk(node) -> None:
        if getattr(node, "type", None) == "expander":
            return
        if getattr(node, "type", None) in INPUTS and getattr(node, "label", "") != "Your answer":  # a prediction
            found.append(f"{node.type} {getattr(node, 'label', '')!r}")
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return found


def _takeaway(at: AppTest) -> str:
    return next(s.value for s in at.success if s.value.startswith("**Takeaway.**"))


def _lesson(at: AppTest) -> str:
    return next(m.value for m in at.markdown if "How many GPUs pay off" in m.value)


def test_default_view_keeps_six_controls_in_view_and_the_rest_under_more_settings():
    at = page("planner")
    assert not at.exception and not at.error
    shown = top_level_inputs(at)
    assert len(shown) <= MAX_IN_VIEW, shown
    assert any("'Machine'" in w for w in shown) and any("'GPU counts P'" in w for w in shown)
    folded = {e.label for e in at.expander}
    assert "More settings" in folded
    assert "w_device" not in {w.key for w in at.selectbox}  # folded: not drawn (a new tab builds no more widgets)
    assert at.query_params["device"] in ("v100", ["v100"])  # ... yet its value is the page's, in the URL
    at.session_state["more"] = True  # open it (a click on it)
    at.run()
    assert not at.exception and at.selectbox(key="w_device").value == "v100"
    for kind in INPUTS:  # every control says what it changes
        for w in getattr(at, kind, []):
            assert w.help, f"{kind} {w.label!r} has no help tooltip"


def test_a_cluster_gives_the_numbers_planner_sweep_gives_and_the_takeaway_names_the_two_level_effect():
    at = page("planner", gpus=["1", "2", "4", "8", "16", "32"], more="true", guess="skip")
    at.radio(key="w_machine").set_value(CLUSTER).run()
    at.number_input(key="w_nodes").set_value(4).run()
    at.selectbox(key="w_inter").set_value("ib_hdr").run()
    assert not at.exception and not at.error
    assert at.query_params["machine"] in (CLUSTER, [CLUSTER]) and at.query_params["inter"] in ("ib_hdr", ["ib_hdr"])
    assert set(at.selectbox(key="w_intra").options) == set(INTRA_LINKS)  # the registry's presets, per level
    for kind in INPUTS:  # the cluster's controls say what they change too
        for w in getattr(at, kind, []):
            assert w.help, f"{kind} {w.label!r} has no help tooltip"
    assert set(at.selectbox(key="w_inter").options) == set(INTER_LINKS)
    Ps = [1, 2, 4, 8, 16, 32]
    want = planner_sweep("alexnet", Ps, strategies=["data", "hybrid"], device="v100", batch_per_gpu=128,
                         cluster="4x8", intra="nvlink4", inter="ib_hdr").set_index(["strategy", "P"])
    assert number(metric(at, "data: speedup on 32 GPUs")) == pytest.approx(want.speedup["data", 32], abs=0.005)
    assert number(metric(at, "hybrid: speedup on 32 GPUs")) == pytest.approx(want.speedup["hybrid", 32], abs=0.005)
    ring = want.comm_ms["data", 32]
    hier = planner_sweep("alexnet", Ps, strategies=["data"], device="v100", batch_per_gpu=128, cluster="4x8",
                         intra="nvlink4", inter="ib_hdr", algorithm="hierarchical").set_index("P").comm_ms[32]
    assert hier < ring / 2  # the lesson only holds if the network is the bottleneck of the flat ring
    assert number(metric(at, "Gradient allreduce at P = 32: flat ring")) == pytest.approx(ring, abs=0.005)
    assert number(metric(at, "Gradient allreduce at P = 32: hierarchical")) == pytest.approx(hier, abs=0.005)
    take = _takeaway(at)
    assert "4 nodes × 8 GPUs (nvlink4 inside a node, ib_hdr between nodes)" in take
    assert f"hierarchical allreduce takes {hier:.2f} ms against the flat ring's {ring:.2f} ms " \
           f"({ring / hier:.1f}x faster" in take
    flat = planner_sweep("alexnet", [8, 16], strategies=["data"], device="v100", batch_per_gpu=128, cluster="4x8",
                         intra="nvlink4", inter="ib_hdr").set_index("P").comm_ms
    assert f"goes from {flat[8]:.2f} ms at P = 8 to {flat[16]:.2f} ms at P = 16" in _lesson(at)
    # the chosen algorithm joins the comparison, and the headline numbers follow it
    at.selectbox(key="w_algorithm").set_value("hierarchical").run()
    assert not at.exception and not at.error
    h = planner_sweep("alexnet", Ps, strategies=["data"], device="v100", batch_per_gpu=128, cluster="4x8",
                      intra="nvlink4", inter="ib_hdr", algorithm="hierarchical").set_index("P")
    assert number(metric(at, "data: speedup on 32 GPUs")) == pytest.approx(h.speedup[32], abs=0.005)


def test_two_level_algorithms_only_on_a_cluster_and_bad_machines_are_messages():
    at = page("planner", more="true")
    assert not set(CLUSTER_ALGORITHMS) & set(at.selectbox(key="w_algorithm").options)  # one link: flat only
    at.radio(key="w_machine").set_value(CLUSTER).run()
    assert set(CLUSTER_ALGORITHMS) <= set(at.selectbox(key="w_algorithm").options)
    at.selectbox(key="w_algorithm").set_value("in_network").run()
    assert not at.exception and not at.error
    assert number(metric(at, "Gradient allreduce at P = 64: in_network")) < \
        number(metric(at, "Gradient allreduce at P = 64: hierarchical"))  # NVLS + IB SHARP beat the ring's bytes
    at.selectbox(key="w_intra").set_value("pcie3").run()  # no switch that reduces inside a PCIe node
    assert not at.exception
    assert "NVLink SHARP" in " ".join(e.value for e in at.error)
    at.radio(key="w_machine").set_value("one link").run()  # back on one link: a flat algorithm again
    assert not at.exception and not at.error
    assert at.selectbox(key="w_algorithm").value == "ring"
    at = page("planner", machine=CLUSTER, nodes="300")  # 300 x 8 NICs: more than NDR's two-tier fat tree
    assert not at.exception
    assert "at most 256 nodes of 8 NICs" in " ".join(e.value for e in at.error)
    at = page("planner", machine=CLUSTER, gpus_per_node="16")
    assert not at.exception and "more than nvlink4 connects" in " ".join(e.value for e in at.error)
    at = page("planner", machine=CLUSTER, plan_show="Codec advice")
    assert not at.exception and any("one link" in i.value for i in at.info)


def test_paper_checks_are_tabs_in_the_url_and_presets_open_theirs():
    at = page("planner")
    assert not any(m.label.startswith("Figure 2:") for m in at.metric)  # only the open tab is computed
    next(b for b in at.button if b.label.startswith("Preset: Deep Image Fig. 2")).click().run()
    assert not at.exception
    assert metric(at, "Figure 2: data beats hybrid from") == "P = 82"
    assert at.query_params["check"] in ("Deep Image Figure 2 (data vs hybrid)",
                                        ["Deep Image Figure 2 (data vs hybrid)"])
    assert at.query_params["machine"] in ("one link", ["one link"])  # the papers' machines are one link
