"""Committed benchmark results (bench/results/*.json) that name their command match that command's JSON
schema (docs/schemas/<command>.schema.json), so what the README and docs quote is what the tools write."""
import json
from pathlib import Path

import pytest
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

REPO = Path(__file__).resolve().parents[1]


def _results() -> list[tuple[Path, Path]]:
    out = []
    for p in sorted((REPO / "bench" / "results").glob("*.json")):
        doc = json.loads(p.read_text())
        cmd = doc.get("command") if isinstance(doc, dict) else None
        schema = REPO / "docs" / "schemas" / f"{str(cmd).replace(' ', '-')}.schema.json"
        if cmd and schema.exists():
            out.append((p, schema))
    return out


@pytest.mark.parametrize("result,schema", _results(), ids=lambda p: p.name)
def test_committed_result_matches_its_commands_schema(result: Path, schema: Path) -> None:
    jsonschema.validate(json.loads(result.read_text()), json.loads(schema.read_text()))


def test_the_two_level_results_carry_their_calibration() -> None:
    names = {p.name for p, _ in _results()}
    for name in ("compressed-cpu-P4-hierarchical-shaped-1gbit.json",
                 "compressed-cpu-P4-hierarchical-shaped-1gbit-pipeline4.json"):
        assert name in names
        doc = json.loads((REPO / "bench" / "results" / name).read_text())
        assert doc["calibration"]["max_abs_model_error"] == max(abs(r["model_error"]) for r in doc["rows"])
