"""The suite's measured seconds per scheduling unit (tests/durations.json), which pytest-xdist's scheduler
(conftest.pytest_xdist_make_scheduler) uses to start the longest units first, so no long module runs
last on one worker while the other idles. Refresh after a run with a JUnit report:

    python -m pytest --junitxml=/tmp/junit.xml && python tests/durations.py /tmp/junit.xml

A stale or missing file only changes the order the units start in, never what runs."""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")


def load() -> dict[str, float]:
    """Unit -> seconds, or {} when the file is absent or unreadable."""
    try:
        return {str(k): float(v) for k, v in json.loads(FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def from_junit(path: str | Path, unit) -> dict[str, float]:
    """Seconds per unit (`unit(nodeid)`) from a JUnit XML report."""
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname "tests.test_x" or "tests.test_x.TestClass": the module is the first test_* part
        name = next((m for m in module if m.startswith("test_")), None)
        if name is not None:
            out[unit(f"tests/{name}.py::{case.get('name', '')}")] += float(case.get("time") or 0.0)
    return dict(out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import scheduling_unit

    times = from_junit(sys.argv[1], scheduling_unit)
    FILE.write_text(json.dumps({k: round(v, 1) for k, v in sorted(times.items(), key=lambda kv: -kv[1])}, indent=1)
                    + "\n")
    print(f"{FILE}: {len(times)} units, {sum(times.values()):.0f} s")
