"""The Dropout page's lessons beyond the training run (Song et al. 2019): why skipping dropped units by a branch
fails (Fig. 1b) with its warp grid, RDP's against TDP's sub-models and the tile size (§III-A/B), a rate per hidden
layer and Fig. 4's sweep (§IV-A), and the LSTM's batch sweep (Fig. 6b). Each opens with a question, predicts
first, and its takeaway is the numbers on screen (streamlit AppTest; app/ is on the pythonpath)."""
import pytest

from apptest_runs import held, job, stop_after_rows
from test_app import finish, page
from test_app_tables import assert_for_people
from lazy_import import lazy

tables = lazy("static_table", "tables")
figures = lazy("chart", "figures")


def _takeaway(at, start: str) -> str:
    return next(s.value for s in at.success if s.value.startswith(f"**Takeaway.** {start}"))


def _has_takeaway(at, start: str) -> bool:
    return any(s.value.startswith(f"**Takeaway.** {start}") for s in at.success)


def _titles(at) -> list[str]:
    return [a["text"] for f in figures(at) for a in f["layout"].get("annotations", []) if "text" in a]


def test_why_not_skip_asks_first_then_shows_the_warps_and_the_useful_work():
    from lab.experiments.dropout_warps import warp_divergence

    at = page("dropout")
    assert any("Why not just skip the dropped units?" in h.value for h in at.subheader)
    assert any("what share of the warps can skip their work" in m.value for m in at.markdown)
    assert not _has_takeaway(at, "At p = 0.7 a branch") and not any("warps run" in t for t in _titles(at))
    at.radio(key="w_guess_warps").set_value("almost none (under 1 %)").run()
    assert not at.exception
    assert any(s.value.startswith("**Right.**") and "0.7³² = 1.1e-05" in s.value for s in at.success)
    want = warp_divergence(0.7, ["bernoulli", "row", "tile"], batch=32, units=1024).set_index("pattern")
    for label in ("conventional", "RDP (row)", "TDP (tile)"):
        m = next(m for m in at.metric if m.label == f"{label}: work saved by the branch")
        saved = want.loc[label, "work_saved"]
        assert m.value == (f"{saved:.1%}" if saved >= 0.001 else f"{100 * saved:.2g} %")
        assert m.delta.startswith(f"{want.loc[label, 'run_fraction']:.1%} of warps run")
    take = _takeaway(at, "At p = 0.7 a branch")
    assert "100.0% of the warps still run, with 30% of their lanes busy" in take
    assert "RDP (row) saves 70% with 100% of the running lanes busy" in take and "whole warps skip" in take
    assert_for_people(at, "dropout warps")
    grid = [t for t in _titles(at) if "warps run" in t]  # the warp grid, one panel per pattern
    assert len(grid) == 3 and grid[0].startswith("conventional") and grid[0].endswith("64 of 64 warps run")
    assert next(m for m in at.metric if m.label.startswith("conventional")).value == "0.0011 %"  # not "0.0%"
    # warps along the units (torch's layout): an RDP warp holds kept and dropped units, so it diverges too
    at = page("dropout", guess_warps="skip", lanes="units")
    take = _takeaway(at, "At p = 0.7 a branch")
    assert "RDP (row) saves 0% with 30% of the running lanes busy" in take and "diverge" in take


def test_sub_models_compares_the_paper_s_counts_and_what_one_step_trains():
    from lab.experiments.dropout_submodels import sub_model_counts

    at = page("dropout", guess_models="TDP (tiles)")
    assert not at.exception
    said = next(w.value for w in at.warning if w.value.startswith("**Not quite.**"))
    assert "524,800 patterns" in said and "⌊1024/32⌋·⌊32/32⌋ = 32: 528" in said
    assert_for_people(at, "dropout sub-models")
    shown = next(t for t in tables(at) if "Possible patterns" in t.columns)
    assert shown["Possible patterns"].tolist()[1:] == [524800, 528]
    take = _takeaway(at, "By the paper's formulas")
    assert "RDP has more patterns here (524,800 RDP, 528 TDP)" in take and "only 10 patterns (dp ≤ 4)" in take
    assert "TDP 1.00 on average" in take and "16×16 tiles would give 1.30" in take
    # the tile size is the page's: 16x16 tiles on a batch of 64 give TDP more sub-networks per step
    at = page("dropout", guess_models="skip", tile="16×16", mlp_batch="64", more="true")
    assert not at.exception
    want = sub_model_counts(0.7, 1024, 64, tile=(16, 16)).set_index("kind")
    take = _takeaway(at, "By the paper's formulas")
    assert f"TDP {want.loc['tile', 'per_step']:.2f} on average" in take and want.loc["tile", "per_step"] > 1
    assert "tile row" not in take  # several tile rows: TDP's extra sub-networks are said, not the fix
    tiles = next(t for t in tables(at) if "Tile" in t.columns)
    assert tiles["Tile"].tolist() == ["8×8", "16×16", "32×32", "64×64"]
    assert any("16×16 tiles, so the kept part" in c.value for c in at.caption)  # the masks' picture follows it


def test_a_rate_per_layer_and_the_fig4_sweep_train_those_rates():
    at = page("dropout", net_hidden="64", net_epochs="1", kinds=["bernoulli", "row"], rate_mode="a rate per layer",
              p2="0.3", more="true")
    assert not at.exception and at.slider(key="w_p2").value == 0.3
    at.button(key="run_net_run").click().run()
    finish(at, lambda a: job(a, "net_run") is not None and job(a, "net_run").finished)
    run = job(at, "net_run")
    assert run.params["rates"] == [[0.7, 0.3]] and run.result.table.rates.unique().tolist() == ["(0.7,0.3)"]
    assert "At rates (0.7,0.3)" in _takeaway(at, "At rates")
    # the preset sets Fig. 4's sweep; a small sweep trains every pattern at the three rate pairs
    at.button[[b.label for b in at.button].index("Preset: Fig. 4 rate sweep")].click().run()
    assert at.session_state["w_rate_mode"] == "Fig. 4 sweep" and at.session_state["w_net_hidden"] == 512
    at = page("dropout", net_hidden="64", net_epochs="1", kinds=["bernoulli", "row"], rate_mode="Fig. 4 sweep")
    at.button(key="run_net_run").click().run()
    finish(at, lambda a: job(a, "net_run") is not None and job(a, "net_run").finished)
    t = job(at, "net_run").result.table
    assert t.rates.tolist() == ["(0.3,0.3)", "(0.3,0.3)", "(0.5,0.5)", "(0.5,0.5)", "(0.7,0.7)", "(0.7,0.7)"]
    row = t[t.kind == "row"]
    take = _takeaway(at, "RDP (row) runs")
    assert (f"{row.speedup.iloc[0]:.2f}x at (0.3,0.3) and {row.speedup.iloc[-1]:.2f}x at (0.7,0.7)" in take
            and "paper: RDP 1.2–1.8x" in take)
    assert any("test accuracy (%)" in t for t in _titles(at))
    assert_for_people(at, "dropout rate sweep")


def test_the_batch_sweep_predicts_runs_in_turns_and_stop_keeps_the_curves():
    query = dict(sweep_batches=["40", "80"], sweep_hidden="64", sweep_epochs="1", guess_batch="it grows")
    at = page("dropout", **query)
    assert any("Does a bigger batch buy more speed?" in h.value for h in at.subheader)
    assert any("from 40 to 80, how does RDP's speedup" in m.value for m in at.markdown)
    with held("batch_run", rows=2):
        at.button(key="run_batch_run").click().run()
        stop_after_rows(at, "batch_run")
    kinds = [r["kind"] for r in job(at, "batch_run").curve()]
    assert kinds[:2] == ["bernoulli", "row"]  # the runs take turns
    assert any(c.value.startswith("Partial curves of the stopped sweep: batch 40 conventional to epoch")
               for c in at.caption)
    at.button(key="run_batch_run").click().run()
    finish(at, lambda a: _has_takeaway(a, "From batch 40 to 80"))
    assert not at.exception and not at.error
    assert_for_people(at, "dropout batch sweep")
    t = job(at, "batch_run").result.table.set_index(["batch", "kind"])
    sp = [t.loc[(b, "row"), "speedup"] for b in (40, 80)]
    assert sp[0] == pytest.approx(t.loc[(40, "bernoulli"), "epoch_s"] / t.loc[(40, "row"), "epoch_s"])
    trend = "grows" if sp[1] > 1.05 * sp[0] else "shrinks" if sp[1] < sp[0] / 1.05 else "stays about the same"
    take = _takeaway(at, "From batch 40 to 80")
    assert f"speedup over conventional dropout {trend} ({sp[0]:.2f}x → {sp[1]:.2f}x)" in take
    verdict = "**Right.**" if trend == "grows" else "**Not quite.**"
    assert any(v.value.startswith(verdict) for v in [*at.success, *at.warning])
