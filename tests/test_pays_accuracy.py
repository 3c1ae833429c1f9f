"""Measured steps penalties (`paralab converge` results) feed `pays` and `plan --advice`:
time to accuracy beside time per step, a codec that never reaches the target never pays (and cannot be
crowned), a codec without a measurement is "not measured", the JSON rows say where a penalty came from,
and the converge task closest to the priced model is the one used."""
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab.cli import app
from lab.plan import accuracy as acc
from lab.plan import pays as pp
from lab.experiments.plan import advice_time_to_accuracy
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # 1.5 s of import (its rfc3987 grammar): loaded by the tests that validate

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
BW = (0.5, 5.0, 50.0)  # a short bandwidth grid: these tests are about the verdicts, not the crossings


def write_result(folder: Path, task: str = "mlp", rows: dict | None = None, name: str | None = None) -> Path:
    """A `paralab converge` result in `folder`: rows {spec: penalty (inf: never reached), (penalty, CI low, CI high),
    or None (unfinished)}; a bare penalty gets the CI 0.9x-1.1x it."""
    out = []
    for spec, p in (rows or {}).items():
        if p is None:
            out.append(dict(spec=spec, seeds=0, reached=0, partial=True, measured=False))
        elif not isinstance(p, tuple) and math.isinf(p):
            out.append(dict(spec=spec, seeds=3, reached=0, never_reached=3, penalty=None, penalty_ci_low=None,
                            penalty_ci_high=None, measured=True))
        else:
            p, lo, hi = p if isinstance(p, tuple) else (p, 0.9 * p, 1.1 * p)  # (penalty, CI low, CI high)
            out.append(dict(spec=spec, seeds=3, reached=3, never_reached=0, penalty=p, penalty_ci_low=lo,
                            penalty_ci_high=hi, measured=True))
    path = folder / (name or f"converge-{task}-cpu.json")
    path.write_text(json.dumps({"command": "converge", "config": {"task": task, "mode": "sim"}, "rows": out}))
    return path


SINKING = {"fp32": 1.0, "bf16": 1.0, "dynamic_tree": 1.0, "randomk:ratio=0.01": math.inf,
           "ef:randomk:ratio=0.01": 1.5}


def test_a_sinking_penalty_changes_the_verdict(tmp_path):
    """Without a measurement random-k is the best codec on 10 GbE (per step); with one where it never
    reaches the target, it does not pay, the lesson cannot crown it, and error feedback's random-k is
    ranked by its time to accuracy."""
    codecs = ["randomk", "dynamic_tree", "ef:randomk"]
    empty = tmp_path / "none"
    empty.mkdir()
    before = pp.pays("alexnet", "8x8", inter="eth10g", codecs=codecs, bandwidths=BW, results=[empty])
    assert before.lesson["best_here"] == "randomk" and not before.lesson["best_here_measured"]
    assert "best randomk" in pp.lesson_sentence(before.lesson)
    assert "not measured" in pp.lesson_sentence(before.lesson)

    write_result(tmp_path, rows=SINKING)
    after = pp.pays("alexnet", "8x8", inter="eth10g", codecs=codecs, bandwidths=BW, results=[tmp_path])
    s = after.summary.set_index("codec")
    rk = s.loc["randomk"]
    assert rk["pays_per_step"] and not rk["pays"]
    assert rk["accuracy"] == acc.NEVER and rk["time_to_accuracy_speedup"] == 0.0
    assert rk["pays_below_tta"].startswith("never")
    ef = s.loc["ef:randomk"]
    assert ef["steps_penalty"] == pytest.approx(1.5)
    assert ef["time_to_accuracy_speedup"] == pytest.approx(ef["speedup_vs_bf16"] / 1.5)
    assert ef["time_to_accuracy_speedup_ci_low"] < ef["time_to_accuracy_speedup"] < \
        ef["time_to_accuracy_speedup_ci_high"]
    les = after.lesson
    assert les["best_here"] != "randomk" and "randomk" in les["sunk_here"]
    best = max(((c, s.loc[c, "time_to_accuracy_speedup"]) for c in ("dynamic_tree", "ef:randomk")),
               key=lambda t: t[1])
    assert les["best_here"] == best[0] and les["best_here_measured"]
    text = pp.lesson_sentence(les)
    assert "best randomk" not in text and "randomk pays per step only" in text
    assert "converge-mlp-cpu.json" in text
    # the sweep carries time to accuracy too: random-k's is 0 everywhere
    sw = after.sweep[after.sweep["codec"] == "randomk"]
    assert (sw["time_to_accuracy_speedup"] == 0.0).all()


def test_missing_measurement_is_not_measured(tmp_path):
    write_result(tmp_path, rows={"fp32": 1.0, "dynamic_tree": 1.0, "onebit": None})
    r = pp.pays("alexnet", "8x8", inter="eth10g", codecs=["dynamic_tree", "onebit", "topk"], bandwidths=BW,
                results=[tmp_path])
    s = r.summary.set_index("codec")
    for c in ("onebit", "topk"):  # an unfinished row and a spec the file does not hold
        assert s.loc[c, "accuracy"] == acc.NOT_MEASURED
        assert math.isnan(s.loc[c, "steps_penalty"]) and math.isnan(s.loc[c, "time_to_accuracy_speedup"])
        assert s.loc[c, "penalty_source"] is None and s.loc[c, "pays_below_tta"] == acc.NOT_MEASURED
        assert s.loc[c, "pays"] == s.loc[c, "pays_per_step"]  # the per-step verdict, flagged
    # bf16 not measured: penalties relative to fp32, and the note says so
    assert s.loc["dynamic_tree", "penalty_source"]["relative_to"] == "fp32"
    assert any("bf16 not measured" in n for n in r.notes)
    # no result for the task at all: every codec not measured, and the output says which task was looked for
    nothing = tmp_path / "empty"
    nothing.mkdir()
    r = pp.pays("alexnet", "8x8", codecs=["dynamic_tree"], bandwidths=BW, results=[nothing])
    assert (r.summary["accuracy"].iloc[1:] == acc.NOT_MEASURED).all()
    assert "no converge-mlp-*.json" in r.accuracy and "not measured" in r.accuracy


def test_penalty_is_relative_to_bf16_when_bf16_was_measured(tmp_path):
    write_result(tmp_path, rows={"fp32": 1.0, "bf16": 1.25, "onebit": 2.0})
    r = pp.pays("alexnet", "8x8", codecs=["onebit"], bandwidths=BW, results=[tmp_path])
    row = r.summary.set_index("codec").loc["onebit"]
    assert row["steps_penalty"] == pytest.approx(2.0 / 1.25)
    assert row["steps_penalty_ci_low"] == pytest.approx(0.9 * 2.0 / 1.25)


def test_json_rows_gain_penalty_fields(tmp_path, monkeypatch):
    path = write_result(tmp_path, rows=SINKING)
    monkeypatch.setenv(acc.RESULTS_ENV, str(tmp_path))
    res = runner.invoke(app, ["pays", "--model", "alexnet", "--inter", "eth10g", "--codecs",
                              "randomk,dynamic_tree,onebit", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    jsonschema.validate(data, json.loads((REPO / "docs" / "schemas" / "pays.schema.json").read_text()))
    rows = {r["codec"]: r for r in data["rows"]}
    dt = rows["dynamic_tree"]
    assert dt["steps_penalty"] == pytest.approx(1.0) and dt["steps_penalty_ci_low"] == pytest.approx(0.9)
    assert dt["time_to_accuracy_speedup"] == pytest.approx(dt["speedup_vs_bf16"])
    assert dt["penalty_source"] == {"file": str(path), "task": "mlp", "spec": "dynamic_tree", "seeds": 3,
                                    "reached": 3, "mode": "sim", "relative_to": "bf16"}
    rk = rows["randomk"]
    assert rk["steps_penalty"] is None and rk["time_to_accuracy_speedup"] == 0.0 and rk["pays"] is False
    assert rk["accuracy"] == acc.NEVER and rk["penalty_source"]["spec"] == "randomk:ratio=0.01"
    ob = rows["onebit"]
    assert ob["accuracy"] == acc.NOT_MEASURED and ob["penalty_source"] is None and ob["steps_penalty"] is None
    assert str(path) in data["accuracy"] and "mlp" in data["accuracy"]
    # the table shows it too
    res = runner.invoke(app, ["pays", "--model", "alexnet", "--inter", "eth10g", "--codecs", "randomk,onebit"],
                        env={"COLUMNS": "250", acc.RESULTS_ENV: str(tmp_path)})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "never" in flat and "randomk pays per step only" in flat
    assert "converge-mlp-cpu.json" in flat


def test_task_matching(tmp_path):
    assert acc.task_for("gpt2-small")[0] == "gpt"
    assert acc.task_for("alexnet")[0] == "mlp"
    assert acc.task_for("resnet50")[0] == "cnn"
    task, why = acc.task_for("vgg16")  # not any task's priced_like: by where its gradient values are
    assert task == "mlp" and "fully connected" in why
    # gpt2-small with only an MLP result: not measured, never the MLP's penalties
    write_result(tmp_path, "mlp", SINKING)
    r = pp.pays("gpt2-small", "8x8", codecs=["randomk"], bandwidths=BW, results=[tmp_path])
    assert r.summary.set_index("codec").loc["randomk", "accuracy"] == acc.NOT_MEASURED
    assert "gpt" in r.accuracy and "not measured" in r.accuracy
    # a chosen task overrides, and the output says so
    r = pp.pays("gpt2-small", "8x8", codecs=["randomk"], bandwidths=BW, results=[tmp_path], converge_task="mlp")
    assert r.summary.set_index("codec").loc["randomk", "accuracy"] == acc.NEVER
    assert "mlp (chosen)" in r.accuracy
    from lab.train.tasks import task_names

    with pytest.raises(ValueError, match="unknown converge task 'rnn'; known: " + ", ".join(task_names())):
        pp.pays("gpt2-small", "8x8", codecs=["randomk"], bandwidths=BW, results=[tmp_path], converge_task="rnn")
    # simulated workers' file before a DDP one; the user's folder before the shipped one
    write_result(tmp_path, "cnn", {"fp32": 1.0}, name="converge-cnn-cpu-ddp2.json")
    write_result(tmp_path, "cnn", {"fp32": 1.0}, name="converge-cnn-cpu.json")
    assert acc.find_result("cnn", [tmp_path]).name == "converge-cnn-cpu.json"
    assert acc.find_result("mlp", [tmp_path, REPO / "bench" / "results"]) == tmp_path / "converge-mlp-cpu.json"


def test_cli_task_option_and_bad_task(tmp_path):
    res = runner.invoke(app, ["pays", "--codecs", "onebit", "--task", "rnn"])
    assert res.exit_code != 0 and "unknown converge task 'rnn'" in res.output
    assert "Traceback" not in res.output


def test_spec_matching_and_error_feedback_pricing():
    assert acc.canonical("randomk") == acc.canonical("randomk:ratio=0.01")
    assert acc.canonical("ef:randomk") != acc.canonical("randomk")
    assert acc.canonical("powersgd:rank=2") != acc.canonical("powersgd")
    dev = pp.get_device("h100")
    ob, ef = pp.codec_cost("onebit", dev), pp.codec_cost("ef:onebit", dev)
    assert ef.bytes_per_value == ob.bytes_per_value and ef.encode_s_per_value > ob.encode_s_per_value
    assert "error feedback" in ef.source
    with pytest.raises(ValueError, match="keeps its own error feedback"):
        pp.codec_cost("ef:powersgd", dev)
    with pytest.raises(ValueError, match="warm-up"):
        pp.codec_cost("onebit@10", dev)


def test_default_codecs_add_the_measured_specs(tmp_path):
    write_result(tmp_path, rows={"fp32": 1.0, "ef:randomk:ratio=0.01": 1.5, "randomk:ratio=0.01": math.inf,
                                 "onebit@20": 1.1})
    r = pp.pays("alexnet", "8x8", bandwidths=BW, results=[tmp_path])
    codecs = list(r.summary["codec"])
    assert "ef:randomk:ratio=0.01" in codecs          # measured, priced with error feedback
    assert "randomk:ratio=0.01" not in codecs          # the same codec as the registered default randomk
    assert not any("@" in c for c in codecs)          # warm-up specs are not priced
    assert r.lesson["codecs"] == len(pp.candidate_codecs()) + 1


def test_plan_advice_time_to_accuracy(tmp_path):
    write_result(tmp_path, rows=SINKING)
    t = advice_time_to_accuracy("alexnet", 8, link="eth10g", candidates=["dynamic_tree", "randomk", "onebit"],
                                results=[tmp_path]).set_index("codec")
    assert t.loc["none", "time_to_accuracy_speedup"] == pytest.approx(1.0)
    assert t.loc["dynamic_tree", "time_to_accuracy_speedup"] == pytest.approx(t.loc["dynamic_tree", "speedup"])
    assert t.loc["randomk", "accuracy"] == acc.NEVER and t.loc["randomk", "time_to_accuracy_speedup"] == 0.0
    assert t.loc["onebit", "accuracy"] == acc.NOT_MEASURED
    assert math.isnan(t.loc["onebit", "time_to_accuracy_speedup"])


def test_plan_advice_cli_never_advises_a_sunk_codec(tmp_path):
    write_result(tmp_path, rows=SINKING)
    res = runner.invoke(app, ["plan", "--gpus", "8", "--link", "eth10g", "--advice", "--json"],
                        env={acc.RESULTS_ENV: str(tmp_path)})
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    jsonschema.validate(data, json.loads((REPO / "docs" / "schemas" / "plan.schema.json").read_text()))
    adv = data["advice"]["data"]["rows"]
    assert any(r["best_per_step"] == "randomk" for r in adv)  # fastest per step on some layers ...
    assert all(r["best"] != "randomk" for r in adv)           # ... but it never reaches the target
    tta = {r["codec"]: r for r in data["advice_time_to_accuracy"]["rows"]}
    assert tta["randomk"]["accuracy"] == acc.NEVER and tta["randomk"]["time_to_accuracy_speedup"] == 0.0
    assert tta["ef:randomk:ratio=0.01"]["steps_penalty"] == pytest.approx(1.5)
    assert tta["onebit"]["accuracy"] == acc.NOT_MEASURED
    assert "converge-mlp-cpu.json" in data["advice_time_to_accuracy"]["accuracy"]


def test_an_unreadable_result_is_one_line(tmp_path):
    (tmp_path / "converge-mlp-cpu.json").write_text('{"command": "train", "rows": []}')
    with pytest.raises(ValueError, match="is not a `paralab converge` result"):
        pp.pays("alexnet", "8x8", codecs=["onebit"], bandwidths=BW, results=[tmp_path])
    res = runner.invoke(app, ["pays", "--model", "alexnet", "--codecs", "onebit"], env={acc.RESULTS_ENV: str(tmp_path)})
    assert res.exit_code != 0 and "is not a `paralab converge` result" in res.output
    assert "Traceback" not in res.output


def test_chart_in_time_to_accuracy_draws_only_measured_codecs(tmp_path):
    from lab.plots.pays import pays_sweep_figure

    write_result(tmp_path, rows=SINKING)
    r = pp.pays("alexnet", "8x8", inter="eth10g", codecs=["randomk", "ef:randomk", "onebit"], bandwidths=BW,
                results=[tmp_path])
    per_step = [t.name for t in pays_sweep_figure(r.sweep, r.summary, 1.25).data]
    tta = pays_sweep_figure(r.sweep, r.summary, 1.25, time_to_accuracy=True)
    assert {"randomk", "onebit", "ef:randomk"} <= set(per_step)
    lines = {t.name: t for t in tta.data if t.name != "break-even"}
    assert set(lines) == {"ef:randomk"}  # randomk never reaches the target, onebit is not measured
    assert "time to accuracy" in tta.layout.yaxis.title.text
    sw = r.sweep[r.sweep["codec"] == "ef:randomk"].groupby("inter_GBps")["time_to_accuracy_speedup"].max()
    assert list(lines["ef:randomk"].y) == pytest.approx(list(sw.values))


def test_page_opens_on_time_to_accuracy_per_step_one_click_away():
    """The committed MLP result prices alexnet: the page opens on time to accuracy (its chart, its best
    measured codec, never random-k), and Per step is one click away; gpt2_small (no gpt result) says so."""
    from test_app import page as app_page
    from chart import figures

    at = app_page("pays", model="alexnet", inter="eth10g", guess="skip")
    assert not at.exception and not at.error
    assert at.radio(key=next(r.key for r in at.radio if r.label == "Speedup")).value == "Time to accuracy"
    best = [m for m in at.metric if m.label.startswith("Best measured codec")]
    assert best and best[0].delta.split(",")[0] not in ("randomk", "topk")  # both never reach the target
    fig = figures(at)[0]
    assert "time to accuracy" in fig["layout"]["yaxis"]["title"]["text"]
    assert "randomk" not in {t.get("name") for t in fig["data"]}  # never reaches the target: no line
    takeaway = " ".join(str(s.value) for s in at.success)
    assert "best randomk" not in takeaway and "converge-mlp-cpu.json" in takeaway
    radio = next(r for r in at.radio if r.label == "Speedup")
    at = radio.set_value("Per step").run()
    assert not at.exception and not at.error
    fig = figures(at)[0]
    assert "a training step" in fig["layout"]["yaxis"]["title"]["text"]
    assert any(m.label == "Best codec here" for m in at.metric)
    at = app_page("pays", guess="skip")  # gpt2_small: priced with the committed gpt task's penalties
    assert not at.exception and not at.error
    assert "converge-gpt-cpu.json" in " ".join(str(s.value) for s in at.success)


def test_a_penalty_below_one_within_noise_is_not_credited():
    """Time to accuracy never credits a codec with training faster than bf16 from noise: a penalty below 1
    whose CI reaches 1 counts as 1; one below 1 with its whole CI below counts; above 1 always stands."""
    from lab.plan.pays import credited_penalty

    assert credited_penalty(0.93, (0.49, 1.37)) == 1.0
    assert credited_penalty(0.93, None) == 1.0
    assert credited_penalty(0.90, (0.85, 0.95)) == 0.90
    assert credited_penalty(1.87, (0.76, 2.97)) == 1.87
    assert credited_penalty(float("inf"), None) == float("inf")


def test_the_interval_of_the_steps_penalty_decides_the_verdict():
    """A codec's time to accuracy carries its steps penalty's 95% interval: per-step speedup / the penalty's CI
    bounds, the part of the CI below 1 counted as 1 (as the point is: no codec is credited with training faster
    than bf16 from noise). Pays where the whole interval clears 1.01x, within noise where it straddles it."""
    def fields(p, lo, hi):
        return {"steps_penalty": pp.credited_penalty(p, (lo, hi)), "steps_penalty_ci_low": lo,
                "steps_penalty_ci_high": hi, "accuracy": "measured"}

    topk = pp.standing(2.64, fields(0.97, 0.63, 1.31))  # the gpt task's top-k on 8x8 over 10 GbE
    assert topk.point == pytest.approx(2.64) and topk.lo == pytest.approx(2.64 / 1.31) and topk.hi == 2.64
    assert topk.verdict == pp.PAYS
    dt = pp.standing(1.39, fields(1.07, 0.76, 1.39))  # dynamic tree there: 1.0x .. 1.39x
    assert (dt.lo, dt.hi) == pytest.approx((1.0, 1.39)) and dt.point == pytest.approx(1.39 / 1.07)
    assert dt.verdict == pp.NOISE and not dt.pays
    inside = pp.standing(0.95, fields(0.97, 0.63, 1.31))  # slower per step: the noise cannot make it pay
    assert inside.hi == pytest.approx(0.95) and inside.verdict == pp.NO
    below = pp.standing(1.2, fields(0.9, 0.85, 0.95))  # the whole CI below 1: credited
    assert (below.lo, below.point, below.hi) == pytest.approx((1.2 / 0.95, 1.2 / 0.9, 1.2 / 0.85))
    assert pp.standing(3.0, {"steps_penalty": math.inf, "steps_penalty_ci_low": math.nan,
                             "steps_penalty_ci_high": math.nan, "accuracy": acc.NEVER}).verdict == pp.NEVER_VERDICT


def printed_rows(output: str) -> dict[str, list[str]]:
    """The rows of the first table the CLI printed (rich's box drawing), each cell's wrapped lines joined by a
    space, by their first cell."""
    rows: list[list[str]] = []
    for line in output.splitlines():
        if line.startswith("└"):
            break
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
    return {r[0]: r for r in rows}


NOISY = {"fp32": 1.0, "topk:ratio=0.01": (0.97, 0.63, 1.31), "onebit": (1.2, 0.9, 1.5),
         "dynamic_tree": (1.3, 0.9, 1.7)}


def test_no_winner_is_crowned_that_the_interval_does_not_support(tmp_path):
    """AlexNet on 8x8 over 10 GbE: top-k (5.94x per step, penalty 0.97, CI 0.63-1.31) ranks first by its
    interval's low end (5.94 / 1.31 = 4.53x), but 1-bit's interval (5.09x / 1.5 .. 5.09x / 1 = 3.39-5.09x)
    overlaps it: the lesson names no single best. Dynamic tree (1.61x per step, penalty 1.3, CI 0.9-1.7:
    0.95-1.61x) is within noise and does not count as paying. With 1-bit's penalty pinned at 1.5 (CI 1.4-1.6)
    nothing overlaps top-k: it is the best, said with its interval."""
    codecs = ["topk", "onebit", "dynamic_tree"]
    write_result(tmp_path, rows=NOISY)
    r = pp.pays("alexnet", "8x8", inter="eth10g", codecs=codecs, results=[tmp_path])  # the CLI's bandwidths
    s = r.summary.set_index("codec")
    tk, ob, dt = s.loc["topk"], s.loc["onebit"], s.loc["dynamic_tree"]
    assert tk["steps_penalty"] == 1.0 and tk["steps_penalty_measured"] == pytest.approx(0.97)
    assert tk["time_to_accuracy_speedup_ci_low"] == pytest.approx(tk["speedup_vs_bf16"] / 1.31)
    assert tk["time_to_accuracy_speedup_ci_high"] == pytest.approx(tk["speedup_vs_bf16"])
    assert ob["time_to_accuracy_speedup_ci_high"] == pytest.approx(ob["speedup_vs_bf16"])
    assert ob["time_to_accuracy_speedup_ci_high"] > tk["time_to_accuracy_speedup_ci_low"]  # the overlap
    assert (tk["verdict"], ob["verdict"], dt["verdict"]) == (pp.PAYS, pp.PAYS, pp.NOISE)
    assert dt["time_to_accuracy_speedup"] == pytest.approx(dt["speedup_vs_bf16"] / 1.3)  # 1.24x, yet ...
    assert not dt["pays"] and dt["time_to_accuracy_speedup_ci_low"] < 1.0  # ... its interval reaches 0.95x
    les = r.lesson
    assert les["pay_here"] == 2 and les["noise_here"] == ["dynamic_tree"] and les["tied_here"] == ["onebit"]
    text = pp.lesson_sentence(les)
    lo = tk["time_to_accuracy_speedup_ci_low"]
    assert "best topk" not in text and f"no single best: topk ranks first by its interval's low end, at least " \
        f"{lo:.2f}x" in text and "overlaps those of onebit" in text and "1 more within noise (dynamic_tree" in text
    # the CLI says the same, row by row, best first by the interval's low end
    res = runner.invoke(app, ["pays", "--model", "alexnet", "--inter", "eth10g", "--codecs", ",".join(codecs)],
                        env={acc.RESULTS_ENV: str(tmp_path)})
    assert res.exit_code == 0, res.output
    assert text in " ".join(res.output.split())
    table = printed_rows(res.output)
    assert list(table) == ["bf16", "topk", "onebit", "dynamic_tree"]
    assert table["topk"][5:8] == ["0.97 (0.63-1.31) → 1.00", f"{tk['speedup_vs_bf16']:.2f}x ({lo:.2f}-"
                                  f"{tk['speedup_vs_bf16']:.2f})", "pays"]
    assert table["dynamic_tree"][5:8] == ["1.30 (0.90-1.70)", f"{dt['time_to_accuracy_speedup']:.2f}x "
                                          f"({dt['time_to_accuracy_speedup_ci_low']:.2f}-{dt['speedup_vs_bf16']:.2f})",
                                          "within noise"]
    data = json.loads(runner.invoke(app, ["pays", "--model", "alexnet", "--inter", "eth10g", "--codecs",
                                          ",".join(codecs), "--json"], env={acc.RESULTS_ENV: str(tmp_path)}).output)
    assert {row["codec"]: row["verdict"] for row in data["rows"]} == {
        "bf16": "baseline", "topk": pp.PAYS, "onebit": pp.PAYS, "dynamic_tree": pp.NOISE}
    # the chart carries the interval too: top-k's line at every bandwidth, its hover the interval 1 / 1.31 .. 1 of it
    from lab.plots.pays import pays_sweep_figure

    line = next(t for t in pays_sweep_figure(r.sweep, r.summary, 1.25, time_to_accuracy=True).data if t.name == "topk")
    assert "95% interval" in line.hovertemplate and len(line.y) == len(pp.DEFAULT_BANDWIDTHS)
    assert [v for c in line.customdata for v in c] == pytest.approx([v for y in line.y for v in (y / 1.31, y)])
    # 1-bit's penalty pinned well above 1: no interval overlaps top-k's, which is then the best, with its interval
    write_result(tmp_path, rows={**NOISY, "onebit": (1.5, 1.4, 1.6)})
    les = pp.pays("alexnet", "8x8", inter="eth10g", codecs=codecs, bandwidths=BW, results=[tmp_path]).lesson
    assert les["tied_here"] == [] and les["best_here"] == "topk"
    assert f"best topk, {tk['speedup_vs_bf16']:.2f}x in time to accuracy (95% interval {lo:.2f}-" \
        f"{tk['speedup_vs_bf16']:.2f}), ahead of every other codec's interval" in pp.lesson_sentence(les)
