"""docs/schemas/train.schema.json describes what `paralab train --mode fsdp --json` writes: the committed FSDP2
runs (bench/results/train-fsdp4-*.json, written by that command) validate, every FSDP field is described,
and a result missing a required FSDP field fails. No process is launched here (test_fsdp.py's torchrun run
validates a fresh --no-baselines result against the same schema)."""
import copy
import json
from pathlib import Path

import pytest
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

REPO = Path(__file__).resolve().parents[1]
RUNS = sorted((REPO / "bench" / "results").glob("train-fsdp*.json"))


def _schema() -> dict:
    return json.loads((REPO / "docs" / "schemas" / "train.schema.json").read_text())


def _errors(doc: dict) -> list:
    return list(jsonschema.Draft202012Validator(_schema()).iter_errors(doc))


def test_committed_fsdp_runs_exist_and_validate():
    assert len(RUNS) >= 2, RUNS
    for p in RUNS:
        doc = json.loads(p.read_text())
        assert doc["summary"]["mode"] == "fsdp"
        assert _errors(doc) == [], p.name


def test_every_fsdp_field_is_described():
    s = _schema()
    defs = s["$defs"]
    tables = [defs[k]["properties"] for k in ("fsdp_summary", "fsdp_curve_row", "fsdp_run_row", "fsdp_collective_row",
                                              "fsdp_group_row")]
    tables.append(s["allOf"][0]["then"]["properties"]["config"]["properties"])
    for props in tables:
        for name, spec in props.items():
            assert len(spec.get("description", "")) > 10, name
    # and every field the committed runs carry is one of them
    doc = json.loads(RUNS[0].read_text())
    for key, table in (("summary", tables[0]), ("curve", tables[1]), ("runs", tables[2]), ("collectives", tables[3]),
                       ("groups", tables[4])):
        rows = [doc[key]] if key == "summary" else doc[key]
        assert {k for r in rows for k in r} <= set(table), key


@pytest.mark.parametrize("where, field", [
    ("summary", "bytes_per_step"), ("summary", "cross_node_per_step"), ("summary", "step_s"),
    ("summary", "procs"), ("summary", "grads_codec"),
    ("curve", "test_loss"), ("curve", "variant"), ("runs", "step_s"), ("collectives", "bytes_per_step"),
    ("collectives", "ratio"), ("groups", "cross_node"), ("config", "weights_codec"), ("config", "torchrun"),
    ("", "collectives"), ("", "groups"), ("", "runs"),
])
def test_a_result_missing_a_required_fsdp_field_fails(where, field):
    doc = json.loads(RUNS[0].read_text())
    bad = copy.deepcopy(doc)
    if not where:
        del bad[field]
    elif isinstance(bad[where], list):
        del bad[where][0][field]
    else:
        del bad[where][field]
    assert _errors(bad), f"{where}.{field} removed and still valid"


def test_baselines_come_together_and_a_run_without_them_is_valid():
    doc = json.loads(RUNS[0].read_text())
    half = copy.deepcopy(doc)
    del half["summary"]["speedup"]  # bytes_ratio without the rest of the baseline comparison
    assert _errors(half)
    alone = copy.deepcopy(doc)  # --no-baselines: the codec run alone
    for k in ("fp32_bytes_per_step", "fp32_cross_node_per_step", "cross_node_ratio", "bytes_ratio", "speedup",
              "train_loss_ratio", "test_loss_ratio"):
        del alone["summary"][k]
    label = alone["summary"]["label"]
    alone["runs"] = [r for r in alone["runs"] if r["variant"] == label]
    alone["curve"] = [r for r in alone["curve"] if r["variant"] == label]
    alone["collectives"] = [dict(r, fp32_fsdp_per_step=None) for r in alone["collectives"] if r["variant"] == label]
    alone["config"]["baselines"] = False
    assert _errors(alone) == []
    wrong = copy.deepcopy(alone)
    wrong["groups"][0]["phase"] = "sideways"
    assert _errors(wrong)


def test_a_stopped_fsdp_run_keeps_the_shared_keys_only():
    doc = json.loads(RUNS[0].read_text())
    points = doc["curve"][:2]
    stopped = {k: doc[k] for k in ("command", "version", "device", "config")}
    stopped.update(partial=True, stopped="FSDP2: evaluation at epoch 0.28", curve=points,
                   summary={"label": points[-1]["variant"], "mode": "fsdp",
                            "final_test_error": points[-1]["test_error"],
                            "best_test_error": min(p["test_error"] for p in points), "bytes": points[-1]["bytes"],
                            "steps": points[-1]["step"], "parameters": None})
    assert _errors(stopped) == []
