"""Out-of-range values: every refused value, typed or from a link, is a message next to its control
naming what is allowed, the same on every page; a control folded into a closed expander says it under the
expander, where it is seen."""
import math
import re

import pytest

import page_list
from test_app import page


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


JUNK = [  # (page, query, words the message must hold)
    ("pays", {"inter": "warp_drive"}, ["'warp_drive'", "ib_ndr", "eth10g"]),
    ("pays", {"nodes": "many"}, ["Nodes", "'many'", "a whole number in 1..4096"]),
    ("pays", {"overlap": "maybe"}, ["'maybe'", "1 (on) or 0 (off)"]),
    ("dropout", {"p": "3"}, ["Dropout rate p", "'3'", "0..0.95"]),
    # drawn only when each hidden layer has its own rate: the sweep of the default view never reaches it
    ("dropout", {"rate_mode": "a rate per layer", "p2": "3", "more": "true"}, ["Layer 2 rate", "'3'", "0..0.95"]),
    ("collectives", {"compare": ["tree", "bogus"]}, ["'bogus'", "rabenseifner"]),
    ("collectives", {"size": "7"}, ["Message size per rank", "'7'"]),
    ("collectives", {"size": "big"}, ["Message size per rank", "'big'", "1048576"]),
    ("transfer", {"range": ["2", "40"]}, ["two whole numbers in 4..30"]),
    ("planner", {"check": "Figure 9"}, ["'Figure 9'"]),
]


@pytest.mark.parametrize("name,query,words", JUNK, ids=[f"{n}-{'-'.join(q)}" for n, q, _ in JUNK])
def test_a_junk_link_value_is_named_with_what_is_allowed(name, query, words):
    at = page(name, **query)
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(_errors(at))
    assert all(w in said for w in words), (query, said)


def test_a_folded_seed_out_of_range_is_said_under_its_closed_expander():
    at = page("dropout", seed="-7")
    assert not at.exception
    said = [e for e in _errors(at) if "Seed" in e]
    assert said and "More settings" in said[0] and "allowed: >= 0" in said[0] and "Computing with 0" in said[0]
    # the message sits outside the closed expander (a child of it would be hidden)
    closed = [ex for ex in at.expander if ex.label == "More settings"]
    assert closed and not any("Seed" in e.value for ex in closed for e in ex.error)


# --- Every control of every page, from a link with a value it cannot take ---------------------------------------
# A learner's link (or a hand-edited one) may hold anything. Each ui control of each page's views (its folded
# settings opened) gets, in one link per round, a fraction, a number far out of range either way, or junk.
# Each control must either take the value as given, or say why not beside it in its own name (its label) and show
# the value the page computes with; the page never raises.

CONTROLS = ("number_input", "slider", "select_slider", "selectbox", "radio", "multiselect", "checkbox")


def _number(round_: str, v) -> str | list[str]:
    """What a number control (a range slider's two ends: a tuple) gets from the link in `round_`."""
    if isinstance(v, tuple):
        return {"fraction": [f"{math.floor(v[0])}.5", str(v[1])], "low": ["-1e12", str(v[1])],
                "far": [str(v[0]), "1e12"], "junk": ["abc", str(v[1])]}[round_]
    return {"fraction": f"{math.floor(v or 0)}.5", "low": "-1e12", "far": "1e12", "junk": "abc"}[round_]


OTHER = {  # round -> what a choice (selectbox, radio, select_slider), a multiselect and a checkbox get
    "fraction": ("no such option", ["no such option"], "maybe"),
    "low": ("", ["", "zzz"], "2"),
    "far": ("0.5", ["0.5"], "-1"),
    "junk": ("'; drop", ["<b>"], ""),
}


def _bad(round_: str, kind: str, v) -> str | list[str]:
    if kind in ("number_input", "slider"):
        return _number(round_, v)
    choice, many, box = OTHER[round_]
    return many if kind == "multiselect" else box if kind == "checkbox" else choice


def _opened(name: str, view: dict) -> tuple[dict, object]:
    """The page's view `view` (a query) with every expander that folds controls open: (its query, the run)."""
    query: dict = dict(view)
    for _ in range(4):  # an opened expander may fold another
        at = page(name, **query)
        closed = {e.proto.query_param_key: "true" for e in at.expander
                  if e.proto.query_param_key and e.proto.query_param_key not in query}
        if not closed:
            return query, at
        query.update(closed)
    return query, at


def _views(at) -> tuple[dict, list[dict]]:
    """The page's tabs kept in the URL (ui.tabs): {URL parameter: its label}, and a query per view beyond the
    default one: each tab but the first, and each choice "custom" (it draws the fields of a custom device or link)."""
    labels = [t.label for t in at.tabs]
    state = at.session_state._state._state.filtered_state  # AppTest's session state has no public listing
    tabs = {k[2:]: "View" for k, v in state.items() if str(k).startswith("w_") and v in labels}
    custom = [{w.key[2:]: "custom"} for w in at.get("selectbox")
              if str(w.key).startswith("w_") and "custom" in w.options and w.value != "custom"]
    return tabs, [{key: label} for key in tabs for label in labels[1:]] + custom


def _controls(at) -> dict[str, tuple[str, str, bool, object]]:
    """The ui controls drawn (their widget keys are `w_<URL parameter>`): parameter -> (kind, label, whole-number,
    value)."""
    out = {}
    for kind in CONTROLS:
        for w in at.get(kind):
            if not str(w.key).startswith("w_") or str(w.key).endswith("__skip"):
                continue
            # a whole-number field is a field of floats shown without decimals (ui.number)
            whole = (kind == "slider" and w.proto.data_type == w.proto.INT
                     or kind == "number_input" and w.proto.format == "%.0f")
            out[w.key[2:]] = (kind, w.label, whole, w.value)
    return out


def _taken(kind: str, value, given) -> bool:
    """Whether the control shows the link's value as given."""
    try:
        if kind in ("number_input", "slider"):
            if isinstance(given, list):
                return [float(g) for g in given] == [float(x) for x in value]
            return value is not None and float(given) == float(value)
        if kind == "multiselect":
            return [str(x) for x in value] == list(given)
        if kind == "checkbox":
            return False
        return str(value) == given
    except ValueError:
        return False


def _names(label: str, message: str) -> bool:
    """Whether `message` names the control `label`: the label, or its words before a bracket, as words of their
    own (in any case, singular or plural): "Pick at least one codec" names "Codecs", "bandwidth_GBps" does not
    name "Bandwidth (GB/s)"."""
    for words in {label, label.split(" (")[0]}:
        stem = re.escape(words.removesuffix("s"))
        if re.search(rf"(?<!\w){stem}s?(?!\w)", message, re.IGNORECASE):
            return True
    return False


def _shown(v) -> str:
    if isinstance(v, (list, tuple)):
        return "..".join(_shown(x) for x in v)
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


SWEPT = [p.module.split(".")[1] for p in page_list.PAGES]
# views a choice on the page opens (not a tab): swept too, with that choice kept as given
BEYOND = {"training": [{"experiment": "consistency models"}]}


@pytest.mark.parametrize("name", SWEPT)
def test_every_control_says_in_its_own_name_what_it_did_with_a_bad_link_value(name):
    """Regression: `gpus=1.5` became 1 and `P=4.7` became 4 with no message; `batch_size=-4` was refused in
    another name (batch_per_gpu). In each view of the page (its tabs kept in the URL), per round, one link gives
    every control a value it cannot take: the page does not raise, and every control not showing the link's value
    has a message naming it (its label) that says what is allowed and which value it shows instead, the value the
    control shows (a whole number for a whole-number control). A junk tab is said as the page's "View"."""
    opened, at = _opened(name, {})
    tabs, others = _views(at)
    assert _controls(at) or name == "overview", name
    for view in [{}, *others, *BEYOND.get(name, [])]:
        opened, at = _opened(name, view) if view else (opened, at)
        controls = _controls(at)
        pinned = view if view in BEYOND.get(name, []) else {}
        for round_ in OTHER:
            query = {**opened, **{k: _bad(round_, kind, v) for k, (kind, _, _, v) in controls.items()}, **pinned}
            if round_ == "junk" and not view:
                query.update({k: "no such view" for k in tabs})
            at = page(name, **query)
            assert not at.exception, (name, view, round_, [e.value for e in at.exception])
            said = _errors(at)
            now = _controls(at)
            labels = {c[1] for c in now.values()} | {"View"}
            # a value a control took as given and the page then refused is said in a control's name too, not in
            # the library's (batch_size=-4 was "batch_per_gpu must be an int >= 1")
            unnamed = [m for m in said if not any(_names(label, m) for label in labels)]
            assert not unnamed, (name, view, round_, unnamed)
            # ... and in the page's words, not the command line's ("--schedule 1f1b ... cannot run --microbatches 1")
            flags = [m for m in said if re.search(r"(?<![\w-])--[a-z]", m)]
            assert not flags, (name, view, round_, flags)
            wanted = [(k, *c[:3]) for k, c in controls.items() if k in now]  # drawn in this run too
            wanted += [(k, "tab", label, False) for k, label in tabs.items() if query.get(k) == "no such view"]
            for key, kind, label, whole in wanted:
                value = now[key][3] if key in now else None
                if kind != "tab" and _taken(kind, value, query[key]):
                    continue
                mine = [m for m in said if label in m]
                assert mine, (name, view, round_, key, label, query[key], value, said)
                assert "allowed" in mine[0], (name, key, mine[0])
                if whole:
                    assert all(float(x) == int(x) for x in (value if isinstance(value, tuple) else [value])), \
                        (name, key, value)
                # a number control names the value it shows (an empty answer field, None, asks for a number instead)
                if kind in ("number_input", "slider") and value is not None:
                    assert re.search(rf"(?:Computing with|Showing) {re.escape(_shown(value))}\b", mine[0]), \
                        (name, key, value, mine[0])


# A value each control takes alone that the others rule out (a schedule that cannot run that many micro-batches,
# more stages than layers): the message starts with the control's label, sits beside it (in its column, or under
# the closed expander it is folded into) and says what is allowed with the other settings.
TOGETHER = [  # (page, query, the control's key, its label, words the message holds)
    ("pipeline", {"M": "1"}, "M", "Micro-batches M", ["M = 1", "1f1b on 4 ranks", "allowed with these: 4..32"]),
    ("pipeline", {"schedule": "dualpipev"}, "M", "Micro-batches M", ["M = 4", "allowed with these: 8..32"]),
    ("pipeline", {"V": "2"}, "V", "Stages per rank", ["= 2", "1f1b runs one stage per rank", "allowed with it: auto, 1"]),
    ("pipeline", {"schedule": "interleaved1f1b", "V": "1"}, "V", "Stages per rank",
     ["runs several stages per rank", "allowed with it: auto, 2, 3, 4"]),
    ("pipeline", {"layers": "1", "more": "true"}, "layers", "Hidden layers", ["= 1", "4 stages", "auto or 3..16"]),
    ("pipeline", {"batch": "3", "more": "true"}, "batch", "Batch", ["= 3", "4 micro-batches", "allowed with these: 4..1024"]),
    ("pipeline", {"batch": "3"}, None, "Under “More settings”: Batch", ["allowed with these: 4..1024"]),
]


@pytest.mark.parametrize("name,query,key,label,words", TOGETHER, ids=[f"{n}-{'-'.join(q)}" for n, q, *_ in TOGETHER])
def test_a_value_the_other_settings_rule_out_is_said_beside_its_control_in_its_name(name, query, key, label, words):
    """Regression: the Pipeline page said "--schedule 1f1b on 4 pipeline ranks x 1 stages per rank cannot run
    --microbatches 1" under its charts, in the command line's words."""
    at = page(name, guess="skip", **query)
    assert not at.exception, [e.value for e in at.exception]
    said = [m for m in _errors(at) if m.startswith(label)]
    assert len(said) == 1 and all(w in said[0] for w in words), (query, _errors(at))
    assert not re.search(r"(?<![\w-])--[a-z]", said[0]), said
    if key is not None:  # beside its control: in the column that holds it
        col = [c for c in at.columns if any(w.key == f"w_{key}" for kind in CONTROLS for w in c.get(kind))]
        assert col and said[0] in [e.value for e in col[-1].error], (key, said)


NAMED = [  # (page, query, the control's key, the value it shows, words its message holds)
    ("pays", {"gpus": "1.5"}, "gpus", 2, ["GPUs per node = '1.5' from the link is not a whole number",
                                          "allowed: a whole number in 1..72", "Computing with 2"]),
    ("collectives", {"P": "4.7"}, "P", 5, ["GPUs / processes P = '4.7' from the link is not a whole number",
                                           "Computing with 5"]),
    ("planner", {"batch_size": "-4", "more": "true"}, "batch_size", 1,
     ["Images per GPU = '-4' from the link is out of range", "allowed: >= 1", "Computing with 1"]),
    ("pays", {"nodes": "1e9"}, "nodes", 4096, ["Nodes = '1e9' from the link is out of range", "allowed: 1..4096"]),
]


@pytest.mark.parametrize("name,query,key,shown,words", NAMED, ids=[f"{n}-{k}" for n, _, k, _, _ in NAMED])
def test_a_fraction_or_out_of_range_link_value_shows_the_nearest_and_says_so_in_the_control_s_name(
        name, query, key, shown, words):
    """Regression: `gpus=1.5` silently became 1, `P=4.7` 4, and `batch_size=-4` was refused as "batch_per_gpu"."""
    at = page(name, **query)
    assert not at.exception
    assert at.number_input(key=f"w_{key}").value == shown
    said = " ".join(_errors(at))
    assert all(w in said for w in words), (query, said)
    assert "batch_per_gpu" not in said


def test_a_typed_value_out_of_range_is_replaced_by_the_nearest_and_said_until_the_field_changes():
    """A typed number beyond its limits, or a fraction for a whole number: the field shows the nearest allowed
    value and the message under it says what was typed; it stays while the field shows that value (another
    control's change included) and goes once the learner changes the field."""
    at = page("pays")
    gpus = at.number_input(key="w_gpus")
    gpus.set_value(100).run()
    assert not at.exception
    assert at.number_input(key="w_gpus").value == 72 and at.query_params["gpus"] == "72"
    msg = "GPUs per node = 100 is out of range; allowed: 1..72. Computing with 72, the nearest."
    assert msg in _errors(at)
    at.number_input(key="w_nodes").set_value(4).run()
    assert msg in _errors(at)
    at.number_input(key="w_gpus").set_value(4).run()
    assert not any("GPUs per node" in e for e in _errors(at)) and at.number_input(key="w_gpus").value == 4
    # a typed fraction reaches the page (Streamlit's whole-number field would drop the ".5" in the browser, unsaid)
    at.number_input(key="w_gpus").set_value(2.5).run()
    assert at.number_input(key="w_gpus").value == 3 and at.query_params["gpus"] == "3"
    assert ("GPUs per node = 2.5 is not a whole number; allowed: a whole number in 1..72. Computing with 3, the "
            "nearest.") in _errors(at)
