"""The layers of docs/design.md, kept by import-linter: `lint-imports` with pyproject.toml's contracts (the
lab's floors; the CLI goes through lab.experiments / lab.plots / lab.backend only), and the same
rule for the dashboard (app/) and the notebooks, checked on a copy of them made into a package."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
INTERNALS = ["lab.codecs", "lab.comm", "lab.data", "lab.dropout", "lab.train", "lab.augment", "lab.plan", "lab.operators"]
UI_CONFIG = """[importlinter]
root_packages =
    lab
    uis

[importlinter:contract:ui-door]
name = app/ and notebooks/ import lab.experiments, lab.plots and lab.backend only (docs/design.md rule 3)
type = forbidden
source_modules =
    uis
forbidden_modules =
{forbidden}
allow_indirect_imports = true

[importlinter:contract:no-climbing]
name = the lab never imports a UI
type = forbidden
source_modules =
    lab
forbidden_modules =
    uis
"""

pytestmark = pytest.mark.skipif(not Path(LINT).exists(), reason="import-linter not installed (pip install -e '.[dev]')")


def lint(*args: str, cwd: Path = ROOT, path: list[Path] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in [*path, ROOT]))
    return subprocess.run([LINT, "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def ui_package(dest: Path) -> Path:
    """app/**.py and every notebook's code cells as modules of a package `uis` under `dest`."""
    pkg = dest / "uis"
    for src in [*ROOT.glob("app/*.py"), *ROOT.glob("app/views/*.py")]:
        out = pkg / src.relative_to(ROOT)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out)
    for nb in ROOT.glob("notebooks/*.ipynb"):
        cells = json.loads(nb.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        lines = [ln for ln in "\n\n".join(code).splitlines() if not ln.startswith(("%", "!"))]  # IPython magics
        (pkg / "notebooks").mkdir(parents=True, exist_ok=True)
        (pkg / "notebooks" / f"{nb.stem}.py").write_text("\n".join(lines) + "\n")
    for d in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return pkg


def test_the_lab_keeps_its_floors():
    r = lint()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout and "BROKEN" not in r.stdout


def test_app_and_notebooks_go_through_the_experiments(tmp_path):
    pkg = ui_package(tmp_path)
    assert len(list((pkg / "notebooks").glob("*.py"))) >= 5 and (pkg / "app" / "views" / "codecs.py").exists()
    config = tmp_path / ".importlinter"
    config.write_text(UI_CONFIG.format(forbidden="\n".join(f"    {m}" for m in INTERNALS)))
    r = lint("--config", str(config), path=[tmp_path])
    assert r.returncode == 0, r.stdout + r.stderr
    # the contract bites: a page that reaches past the door breaks it
    (pkg / "app" / "views" / "sneaky.py").write_text("from lab.codecs import get_codec\n")
    r = lint("--config", str(config), path=[tmp_path])
    assert r.returncode != 0 and "uis.app.views.sneaky -> lab.codecs" in r.stdout, r.stdout
