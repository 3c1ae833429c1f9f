"""The race to the target: modelled time = steps x the pays model's step time (fp32 for a
warm-up), arrivals per seed, and lessons computed from the numbers (they change when the numbers do);
`--codecs all` reads the registry, a named spec replaces its default twin, the result lists the
registered codecs measured and not, `--resume` reuses finished runs; the committed results cover
every registered codec or list it as not measured."""
import json
import math
from pathlib import Path

import pytest

from lab.experiments.race import duration_text

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def _run(spec: str, seed: int, steps: float, fp32_steps: float = 100.0, target: float = 0.5) -> dict:
    return dict(spec=spec, seed=seed, target=target, reached=math.isfinite(steps), steps_to_target=steps,
                time_to_target_s=steps / 100, penalty=steps / fp32_steps, time_penalty=steps / fp32_steps,
                final_val_loss=0.5, final_quality=10.0, step_s=0.01, bytes_per_step=1.0, diverged=False)


def _study(plain: list[float], ef: list[float], eight: list[float]) -> tuple[list[dict], list[dict]]:
    runs, pts = [], []
    for seed in range(3):
        for spec, st in (("fp32", 100.0), ("topk:ratio=0.01", plain[seed]), ("ef:topk:ratio=0.01", ef[seed]),
                         ("dynamic_tree", eight[seed]), ("powersgd:rank=1@20", 100.0)):
            runs.append(_run(spec, seed, st))
            last = int(st) if math.isfinite(st) else 300
            pts += [dict(spec=spec, seed=seed, step=k, val_loss=2.0 - 1.5 * k / max(last, 1), quality=0.0,
                         train_s=0.0) for k in range(0, last + 1, 10)]
    return runs, pts


def test_modelled_time_is_steps_times_the_pays_step_with_fp32_warm_up():
    from lab.experiments import race, step_times

    runs, pts = _study([math.inf] * 3, [120.0, 130.0, 110.0], [100.0] * 3)
    res = race(runs, pts, task="mlp", seed=1, cluster="2x8", inter="eth10g")
    t = step_times(["fp32", "ef:topk:ratio=0.01", "powersgd:rank=1@20"], "alexnet", "2x8", inter="eth10g")
    t = t.set_index("spec")
    a = res.arrivals.set_index("spec")
    assert a.loc["ef:topk:ratio=0.01", "arrival_step"] == 130
    assert a.loc["ef:topk:ratio=0.01", "arrival_modelled_s"] == pytest.approx(130 * t.loc["ef:topk:ratio=0.01", "step_s"])
    warm = t.loc["powersgd:rank=1@20"]
    assert a.loc["powersgd:rank=1@20", "arrival_modelled_s"] == pytest.approx(20 * warm.fp32_step_s + 80 * warm.step_s)
    assert t.loc["ef:topk:ratio=0.01", "step_s"] < t.loc["fp32", "step_s"]  # 10 GbE: compression shortens a step
    assert math.isinf(a.loc["topk:ratio=0.01", "modelled_time_to_target_s"])
    assert a.loc["topk:ratio=0.01", "time_to_accuracy_speedup"] == 0.0
    c = res.curves[res.curves.spec == "ef:topk:ratio=0.01"]
    assert set(c.seed) == {1} and c.modelled_s.iloc[-1] == pytest.approx(130 * t.loc["ef:topk:ratio=0.01", "step_s"])
    assert res.target == 0.5


def test_lessons_follow_the_numbers():
    from lab.experiments import race

    res = race(*_study([math.inf] * 3, [120.0, 130.0, 110.0], [100.0, 100.0, 100.0]), task="mlp")
    text = " ".join(res.lessons["steps"])
    assert "topk:ratio=0.01 never reached the target in 3 of 3 seeds" in text
    assert "with error feedback it needs 1.20x" in text and "every coordinate's update arrives" in text
    assert "1 of 1 8-bit types (dynamic_tree) reach the target with fp32" in text
    assert any("reaches the target first" in s for s in res.lessons["time"])
    hurt = race(*_study([100.0, 110.0, 100.0], [200.0, 210.0, 220.0], [150.0, 160.0, 170.0]), task="gpt",
                optimizer="adamw")
    text = " ".join(hurt.lessons["steps"])
    assert "here error feedback does not rescue it" in text and "adamw" in text
    assert "0 of 1 8-bit types" in text and "dynamic_tree needs more steps than fp32" in text


def test_the_8_bit_lesson_says_when_their_step_costs_more_than_fp32s():
    """On a fast network the codec's own time can exceed the wire time it saves: the lesson must not
    call a slower step 'almost nothing'."""
    from lab.experiments import race

    study = _study([math.inf] * 3, [120.0, 130.0, 110.0], [100.0] * 3)
    slow = race(*study, task="mlp", cluster="8x8", inter="ib_ndr")
    a = slow.arrivals.set_index("spec")
    assert a.loc["dynamic_tree", "step_vs_fp32"] > 1  # priced slower than fp32 here
    text = " ".join(slow.lessons["time"])
    assert "cost almost nothing" not in text and "reach the target later than fp32" in text
    fast = race(*study, task="mlp", cluster="8x8", inter="eth10g")
    assert fast.arrivals.set_index("spec").loc["dynamic_tree", "step_vs_fp32"] < 1
    assert "dynamic_tree reaches the target" in " ".join(fast.lessons["time"])


def test_race_needs_a_finished_fp32_run():
    from lab.experiments import race

    runs, pts = _study([100.0] * 3, [100.0] * 3, [100.0] * 3)
    with pytest.raises(ValueError, match="no finished fp32 run"):
        race([r for r in runs if r["spec"] != "fp32"], pts, task="mlp")
    with pytest.raises(ValueError, match="seed 7 has no finished fp32 run"):
        race(runs, pts, task="mlp", seed=7)


def test_all_reads_the_registry_and_a_named_spec_replaces_its_default_twin():
    from lab.codecs import codec_names
    from lab.train.converge import ConvergeConfig, expand_specs

    names = [n for n in codec_names() if n != "fp32"]
    assert expand_specs(["all"]) == names
    specs = [s.text for s in ConvergeConfig(specs=("topk:ratio=0.01", "all")).parsed_specs()]
    assert specs.count("topk:ratio=0.01") == 1 and "topk" not in specs
    assert len(specs) == 1 + len(names)  # fp32, then every registered codec once


SPELLINGS = ["fp32", "FP32", "none", "32-bit", " ", "topk", "topk:ratio=0.01", " topk : ratio=0.010 ", "ef:topk",
             "ef:topk:ratio=0.01", "onebit", "onebit@10", "onebit @ 10", "onebit@0", "powersgd", "powersgd:rank=1",
             "powersgd:rank=2", "ef:randomk", "randomk:ratio=0.01", "dynamic_tree", "int8", "bf16"]


def test_one_canonical_spec_for_converge_and_the_verdicts():
    """converge's de-duplication and the verdicts' lookup of measured penalties use the registry's one
    canonical form, so they agree on every spelling (whitespace around '@N' included)."""
    from lab.codecs import FP32_ALIASES, canonical_spec
    from lab.plan import accuracy
    from lab.train.converge import ConvergeConfig

    for s in SPELLINGS:
        assert accuracy.canonical(s) == canonical_spec(s), s
    key = {s: canonical_spec(s) for s in SPELLINGS}
    assert {key[s] for s in ("fp32", "FP32", "none", "32-bit", " ")} == {"fp32"} and "" in FP32_ALIASES
    assert key["topk"] == key["topk:ratio=0.01"] == key[" topk : ratio=0.010 "]
    assert key["topk"] != key["ef:topk"] == key["ef:topk:ratio=0.01"]
    assert key["onebit@10"] == key["onebit @ 10"] != key["onebit"] == key["onebit@0"]
    assert key["powersgd"] == key["powersgd:rank=1"] != key["powersgd:rank=2"]
    # converge runs each canonical spec once; the verdicts find a penalty under any spelling of it
    ran = [s.text for s in ConvergeConfig(specs=tuple(SPELLINGS[4:])).parsed_specs()]
    assert len(ran) == len(set(key.values())) and len({canonical_spec(s) for s in ran}) == len(ran)
    with pytest.raises(ValueError, match="'@x' must be '@N'"):
        canonical_spec("onebit@x")


def test_converge_results_are_found_where_results_go(monkeypatch, tmp_path):
    """lab.plan.accuracy looks first where every result is written (lab.data.results.results_dir, which
    lab.experiments.results writes to), then in the shipped reference results."""
    from lab.data import results
    from lab.experiments import results as written
    from lab.plan import accuracy

    assert written.results_dir is results.results_dir
    assert accuracy.results_dirs is results.results_dirs
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    assert accuracy.results_dirs() == [tmp_path, results.reference_dir()]
    (tmp_path / "converge-gpt-cpu.json").write_text("{}")
    assert accuracy.find_result("gpt") == tmp_path / "converge-gpt-cpu.json"


def test_coverage_names_registered_codecs_without_a_finished_run():
    from lab.codecs import codec_names
    from lab.train.converge import coverage

    rows = [dict(spec="fp32", measured=True), dict(spec="ef:topk:ratio=0.01@5", measured=True),
            dict(spec="int8", measured=False)]
    cov = coverage(rows)
    assert cov["measured"] == ["topk"]
    assert "int8" in cov["not_measured"] and "fp32" not in cov["not_measured"]
    assert sorted(cov["measured"] + cov["not_measured"]) == sorted(n for n in codec_names() if n != "fp32")


def test_resume_reuses_finished_runs_and_refuses_other_settings(tmp_path):
    from typer.testing import CliRunner

    from lab.cli import app

    runner = CliRunner()
    base = ["converge", "--hidden", "16", "--train-limit", "256", "--steps", "10", "--eval-every", "5", "--seeds", "1",
            "-k", "2", "--batch", "16", "--budget", "1", "--tolerance", "0.5"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert runner.invoke(app, [*base, "--codecs", "int8", "--out", str(a)]).exit_code == 0
    r = runner.invoke(app, [*base, "--codecs", "int8,bf16", "--resume", str(a), "--out", str(b)])
    assert r.exit_code == 0, r.output
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    old = {(x["spec"], x["seed"]): x for x in da["runs"]}
    new = {(x["spec"], x["seed"]): x for x in db["runs"]}
    assert new[("int8", 0)]["wall_s"] == old[("int8", 0)]["wall_s"]  # reused, not trained again
    assert ("bf16", 0) in new and [c for c in db["curves"] if c["spec"] == "int8"]
    assert db["codecs"]["measured"] == ["bf16", "int8"]
    r = runner.invoke(app, [*base, "--lr", "0.05", "--codecs", "int8", "--resume", str(a), "--json"])
    assert r.exit_code == 2 and "cannot resume: the result has lr=" in " ".join(r.output.split())
    r = runner.invoke(app, [*base, "--resume", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "cannot read it as JSON" in " ".join(r.output.split()) and "Traceback" not in r.output


@pytest.mark.parametrize("task", ["mlp", "cnn", "gpt"])
def test_committed_results_cover_every_builtin_codec_or_list_it_as_not_measured(task):
    """The committed studies were made with the lab's own codecs: each lists every one of them as measured or
    not; a plugin codec installed in the environment is in no committed study and changes none of this."""
    from lab.codecs.registry import REGISTRY, codec_infos
    from lab.train.converge import coverage

    builtin = [i.name for i in codec_infos() if REGISTRY.builtin(i) and i.name != "fp32"]
    doc = json.loads((RESULTS / f"converge-{task}-cpu.json").read_text())
    cov = coverage(doc["rows"], builtin)
    assert doc.get("codecs") == cov, "the file's list of measured / not measured codecs is stale"
    assert sorted(cov["measured"] + cov["not_measured"]) == sorted(builtin)
    if task in ("mlp", "cnn"):
        assert cov["not_measured"] == [], f"{task}: every built-in codec is measured"


def test_race_figure_marks_the_target_and_each_arrival():
    from lab.experiments import race
    from lab.plots import race_figure

    res = race(*_study([math.inf] * 3, [120.0, 130.0, 110.0], [100.0] * 3), task="mlp")
    fig = race_figure(res.curves, res.arrivals, res.target, "modelled_s")
    names = [t.name for t in fig.data]
    assert "topk:ratio=0.01 (never)" in names and "ef:topk:ratio=0.01" in names
    stars = next(t for t in fig.data if t.name == "reaches the target")
    a = res.arrivals.set_index("spec")
    assert sorted(stars.x) == sorted(a.loc[s, "arrival_modelled_s"] for s in a.index if math.isfinite(a.loc[s, "arrival_step"]))
    assert fig.layout.shapes[0].y0 == res.target and fig.layout.annotations[0].y == pytest.approx(math.log10(res.target))
    with pytest.raises(ValueError, match="allowed: step, modelled_s"):
        race_figure(res.curves, res.arrivals, res.target, "epoch")


def _cli(*args: str, **kw):
    from typer.testing import CliRunner

    from lab.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"}, **kw)


def test_race_cli_prints_the_page_table_from_a_committed_result():
    """`paralab race`: the race view's arrivals as a table and --json, from the committed mlp result:
    modelled time to target = mean over seeds of steps x the pays step time on the cluster."""
    from lab.experiments import committed_race_data, race, step_times

    r = _cli("race", "--task", "mlp", "--cluster", "2x8", "--inter", "eth25g", "--codecs",
             "dynamic_tree,randomk:ratio=0.01,ef:randomk:ratio=0.01", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["command"] == "race" and doc["config"]["model"] == "alexnet"
    assert doc["config"]["results"].endswith("converge-mlp-cpu.json")
    rows = {x["spec"]: x for x in doc["rows"]}
    assert set(rows) == {"fp32", "dynamic_tree", "randomk:ratio=0.01", "ef:randomk:ratio=0.01"}
    highs = [r["time_to_target_ci_high"] for r in doc["rows"] if r["arrived"] == "yes"]
    assert highs == sorted(highs) and list(rows)[-1] == "randomk:ratio=0.01"  # best first; never last
    data = committed_race_data("mlp")
    t = step_times(list(rows), "alexnet", "2x8", inter="eth25g").set_index("spec")
    runs = data["runs"]
    for spec in ("fp32", "dynamic_tree", "ef:randomk:ratio=0.01"):
        steps = runs[runs.spec == spec]["steps_to_target"]
        assert rows[spec]["steps_mean"] == pytest.approx(steps.mean())
        assert rows[spec]["modelled_time_to_target_s"] == pytest.approx(steps.mean() * t.loc[spec, "step_s"])
        assert rows[spec]["step_ms"] == pytest.approx(1e3 * t.loc[spec, "step_s"])
        lo, hi = rows[spec]["time_to_target_ci_low"], rows[spec]["time_to_target_ci_high"]
        assert lo <= rows[spec]["modelled_time_to_target_s"] <= hi and rows[spec]["arrived"] == "yes"
    fp32_t = rows["fp32"]["modelled_time_to_target_s"]
    dt = rows["dynamic_tree"]
    assert dt["time_to_accuracy_speedup"] == pytest.approx(fp32_t / dt["modelled_time_to_target_s"])
    assert dt["speedup_ci_low"] == pytest.approx(fp32_t / dt["time_to_target_ci_high"])
    never = rows["randomk:ratio=0.01"]
    assert never["arrived"] == "never" and never["modelled_time_to_target_s"] is None and never["never_reached"] > 0
    page = race(runs[runs.spec.isin(list(rows))], data["curves"], task="mlp", cluster="2x8", inter="eth25g",
                specs=list(rows), seeds_asked=data["config"]["seeds"])  # what the Training page shows
    assert [round(x, 9) for x in page.arrivals["step_ms"]] == [round(rows[s]["step_ms"], 9) for s in rows]
    assert list(page.arrivals["spec"]) == list(rows) and doc["first"] == page.first and doc["tied"] == page.tied
    assert [rows[s]["verdict"] for s in rows] == list(page.arrivals["verdict"])
    assert doc["takeaway"] in page.lessons["time"]
    r = _cli("race", "--task", "mlp", "--cluster", "2x8", "--inter", "eth25g", "--codecs",
             "dynamic_tree,randomk:ratio=0.01")
    assert r.exit_code == 0, r.output
    assert "time_to_target" in r.output and "speedup_vs_fp32" in r.output and "never" in r.output
    assert "reaches the target first" in r.output


def test_race_cli_bad_input_is_one_line(tmp_path, monkeypatch):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"command": "pays", "rows": []}))
    gpt = RESULTS / "converge-gpt-cpu.json"
    from lab.train.tasks import task_names

    cases = [(["--task", "vit"], "unknown task 'vit'; known: " + ", ".join(task_names())),
             (["--cluster", "8y8"], "cluster '8y8': give NODESxGPUS"),
             (["--inter", "eth7g"], "unknown inter-node link 'eth7g'"),
             (["--model", "bert"], "unknown model 'bert'"),
             (["--codecs", "qsgd:levels=3"], "'qsgd:levels=3' not in"),
             (["--seed", "9"], "seed 9 has no finished fp32 run"),
             (["--results", str(tmp_path / "none.json")], "cannot read it as JSON"),
             (["--results", str(other)], "is not a `paralab converge` result"),
             (["--results", str(gpt), "--task", "mlp"], "is a result of task 'gpt', not 'mlp'")]
    for args, msg in cases:
        r = _cli("race", *args)
        out = " ".join(r.output.split())
        assert r.exit_code == 2 and msg in out and "Traceback" not in r.output, (args, r.output)
    import lab.plan.accuracy as acc

    monkeypatch.setattr(acc, "find_result", lambda task, dirs=None: None)
    r = _cli("race", "--task", "cnn")
    assert r.exit_code == 2 and "no converge result for task 'cnn'" in " ".join(r.output.split())
    assert "give --results FILE" in " ".join(r.output.split())


def test_race_figure_before_any_arrival():
    """A live race draws its curves before any spec has arrived (an empty arrivals table): no star, no error."""
    import math

    import pandas as pd

    from lab.plots import race_figure

    curves = pd.DataFrame({"spec": ["fp32", "fp32"], "step": [1, 2], "val_loss": [2.0, 1.5], "modelled_s": [0.1, 0.2]})
    arrivals = pd.DataFrame(columns=["spec", "arrival_step", "arrival_modelled_s", "arrival_val_loss"])
    fig = race_figure(curves, arrivals, math.nan)
    assert [t.name for t in fig.data] == ["fp32"]


def _paired(a: list[float], b: list[float], c: list[float]) -> tuple[list[dict], list[dict]]:
    """A study of fp32 (100 steps every seed), plain top-k (steps a), top-k with error feedback (b) and dynamic tree
    (c) over three seeds."""
    runs, pts = [], []
    for seed in range(3):
        for spec, st in (("fp32", 100.0), ("topk:ratio=0.01", a[seed]), ("ef:topk:ratio=0.01", b[seed]),
                         ("dynamic_tree", c[seed])):
            runs.append(_run(spec, seed, st))
            pts += [dict(spec=spec, seed=seed, step=k, val_loss=2.0 - 1.5 * k / st, quality=0.0, train_s=0.0)
                    for k in range(0, int(st) + 1, 10)]
    return runs, pts


def test_the_race_crowns_no_codec_its_interval_does_not_put_first():
    """Who reaches the target first is decided by the intervals over seeds: the first by the upper end of its 95% CI
    of modelled time, and no single first where another codec's interval overlaps its own. Top-k at 118, 122, 120
    steps (mean 120, CI 115.0-125.0) against error feedback's 120, 130, 110 (CI 95.2-144.8): both cheap steps of
    about the same price, so their intervals overlap. Dynamic tree at 60, 100, 140 steps (CI 0.6-199.4) is within
    noise of fp32 on NDR400, where its step costs about fp32's."""
    from lab.experiments import race
    from lab.experiments.race import NOISE_OF_FP32, SOONER, rank_arrivals

    half = 4.302652729749464 * 2.0 / math.sqrt(3)  # t(0.975, 2) x sd 2 / sqrt(3): top-k's CI half-width, steps
    tied = race(*_paired([118.0, 122.0, 120.0], [120.0, 130.0, 110.0], [100.0] * 3), task="mlp", inter="eth10g")
    a = tied.arrivals.set_index("spec")
    tk, ef = a.loc["topk:ratio=0.01"], a.loc["ef:topk:ratio=0.01"]
    assert tk["time_to_target_ci_high"] == pytest.approx((120 + half) * tk["step_ms"] / 1e3)
    assert ef["time_to_target_ci_high"] == pytest.approx((120 + 5 * half) * ef["step_ms"] / 1e3)
    assert ef["time_to_target_ci_low"] <= tk["time_to_target_ci_high"]  # the overlap
    assert (tied.first, tied.tied) == ("topk:ratio=0.01", ["ef:topk:ratio=0.01"])
    assert list(tied.arrivals["spec"])[:2] == ["topk:ratio=0.01", "ef:topk:ratio=0.01"]
    assert list(rank_arrivals(tied.arrivals.iloc[::-1])["spec"]) == list(tied.arrivals["spec"])
    head = next(t for t in tied.lessons["time"] if "reaches the target first" in t)
    assert "no single codec reaches the target first beyond the seeds' spread: topk:ratio=0.01 leads by its " \
           "interval's upper end" in head and "the intervals of ef:topk:ratio=0.01 overlap its own" in head
    assert "95% CI" in head and tk["verdict"] == SOONER
    # top-k at 60 steps every seed: no interval reaches its own, so it is first, said with its numbers
    clear = race(*_paired([60.0, 61.0, 59.0], [120.0, 130.0, 110.0], [100.0] * 3), task="mlp", inter="eth10g")
    assert (clear.first, clear.tied) == ("topk:ratio=0.01", [])
    c = clear.arrivals.set_index("spec").loc["topk:ratio=0.01"]
    assert c["time_to_target_ci_high"] == pytest.approx((60 + half / 2) * c["step_ms"] / 1e3)
    head = next(t for t in clear.lessons["time"] if "reaches the target first" in t)
    assert f"topk:ratio=0.01 reaches the target first ({duration_text(c['modelled_time_to_target_s'])} modelled, " \
           f"95% CI {duration_text(c['time_to_target_ci_low'])}-{duration_text(c['time_to_target_ci_high'])}; " \
           f"{c['time_to_accuracy_speedup']:.2f}x sooner than fp32" in head and "ahead of every other" in head
    # a speedup interval straddling 1 is within noise of fp32
    noisy = race(*_paired([60.0, 61.0, 59.0], [120.0, 130.0, 110.0], [60.0, 100.0, 140.0]), task="mlp",
                 inter="ib_ndr")
    dt = noisy.arrivals.set_index("spec").loc["dynamic_tree"]
    assert dt["time_to_target_ci_low"] == pytest.approx((100 - 20 * half) * dt["step_ms"] / 1e3)
    assert dt["speedup_ci_low"] < 1 < dt["speedup_ci_high"] and dt["verdict"] == NOISE_OF_FP32
