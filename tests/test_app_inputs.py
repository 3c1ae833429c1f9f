"""Out-of-range values: every refused value, typed or from a link, is a message next to its control
naming what is allowed, the same on every page; a control folded into a closed expander says it under the
expander, where it is seen."""
import pytest

from test_app import page


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


JUNK = [  # (page, query, words the message must hold)
    ("pays", {"inter": "warp_drive"}, ["'warp_drive'", "ib_ndr", "eth10g"]),
    ("pays", {"nodes": "many"}, ["'many'", "a number in 1..4096"]),
    ("pays", {"overlap": "maybe"}, ["'maybe'", "1 (on) or 0 (off)"]),
    ("dropout", {"p": "3"}, ["Dropout rate p", "'3'", "0..0.95"]),
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
