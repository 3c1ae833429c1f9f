"""lab.experiments, the UIs' one door, imports its names plainly (go-to-definition and static tools see each
one's module), and does what its docstring says: importing it imports every experiment module."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import lab.experiments as ex

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lab" / "experiments"
LIVE = {"ALGORITHMS", "CLUSTER_ALGORITHMS"}  # read from the registries on every access


def _imports() -> list[tuple[str, str, str]]:
    """(bound name, module, name in the module) per `from .module import name [as bound]` of the package."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    return [(a.asname or a.name, f"lab.experiments.{node.module}", a.name) for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module for a in node.names]


def test_every_export_is_a_plain_import_of_its_module_s_object():
    imports = _imports()
    assert len(imports) > 100
    for bound, module, name in imports:
        assert bound in vars(ex), f"{bound} is imported but not bound on lab.experiments"
        assert getattr(ex, bound) is getattr(sys.modules[module], name), f"lab.experiments.{bound} is not {module}.{name}"


def test_only_the_live_lists_are_looked_up_late():
    for name in LIVE:
        assert name not in vars(ex) and getattr(ex, name)  # computed now, from the registries
    try:
        ex.__getattr__("no_such_experiment")
    except AttributeError as e:
        assert "no_such_experiment" in str(e)
    else:
        raise AssertionError("lab.experiments answered a name it does not have")


def test_importing_the_package_imports_every_experiment_module():
    code = "import json, sys, lab.experiments; print(json.dumps(sorted(m for m in sys.modules " \
           "if m.startswith('lab.experiments.'))))"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-2000:]
    loaded = set(json.loads(got.stdout.strip().splitlines()[-1]))
    modules = {f"lab.experiments.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert modules <= loaded, f"not imported by `import lab.experiments`: {sorted(modules - loaded)}"
