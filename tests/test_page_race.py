"""Training's "Race to the target" view in AppTest: the committed result's race against steps and
modelled time with the lessons computed from its numbers, the seed and cluster from the URL, and a live race
whose Stop keeps the finished runs (the unfinished codec not measured)."""
import math

from apptest_runs import held, stop_after_rows
from test_app import page as app_page

RACE = "Race to the target"


def page(**query):
    return app_page("training", view=RACE, **query)


def texts(at, kind: str) -> str:
    return " ".join(str(e.value) for e in at.get(kind))


def test_committed_race_shows_both_views_and_lessons_from_its_numbers():
    from lab.experiments import committed_race_data, race

    at = page(race_seed="1", race_cluster="2x8", race_inter="eth100g")
    assert not at.exception and not at.error, at.error
    md = texts(at, "markdown")
    assert "**Against steps** (seed 1;" in md and "2 nodes x 8 H100" in md and "eth100g between nodes" in md
    d = committed_race_data("mlp")
    shown = [s for s in dict.fromkeys(d["runs"]["spec"])]
    from lab.experiments import RACE_COMMITTED_DEFAULT as COMMITTED_DEFAULT
    specs = ["fp32", *[s for s in COMMITTED_DEFAULT if s in shown]]
    res = race(d["runs"][d["runs"].spec.isin(specs)], d["curves"], task="mlp", seed=1, optimizer="sgd",
               seeds_asked=d["config"]["seeds"], specs=specs, cluster="2x8", inter="eth100g")
    shown_text = md + " " + " ".join(str(e.value) for e in at.success)
    for text in res.lessons["steps"] + res.lessons["time"]:
        assert text in shown_text  # each lesson on the page is the one computed from the shown numbers
    assert "reaches the target first" in " ".join(str(e.value) for e in at.success)  # the takeaway
    assert any("error feedback" in t for t in res.lessons["steps"])
    from test_page_planner import MAX_IN_VIEW, top_level_inputs
    assert len(top_level_inputs(at)) <= MAX_IN_VIEW, top_level_inputs(at)
    assert any("8-bit" in t for t in res.lessons["steps"])
    # the target line is seed 1's: fp32's loss at its last step x (1 + tolerance)
    fp32 = d["runs"][(d["runs"].spec == "fp32") & (d["runs"].seed == 1)].iloc[0]
    assert f"target {fp32.target:.4g}" in md


def test_live_race_stop_keeps_finished_runs():
    at = page(race_source="live race (small)", race_seeds="1", race_live_specs=["dynamic_tree", "randomk:ratio=0.01"])
    assert not at.exception and not at.error
    # Stop once fp32 and the first codec have finished: the second has not
    with held("race_run", lambda rows: sum(r.get("_kind") == "run" for r in rows) >= 2):
        at.button(key="run_race_run").click().run()
        run = stop_after_rows(at, "race_run")
    assert not at.exception
    assert any("Stopped: the race below keeps the 2 finished run(s)" in w.value for w in at.warning)
    md = texts(at, "markdown")
    assert "dynamic_tree" in md and "not measured" in md  # random-k: no finished run
    assert "Partial" in texts(at, "caption")
    assert math.isfinite(float(next(r for r in run.rows if r.get("_kind") == "run")["target"]))
