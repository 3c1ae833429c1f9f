"""Issue 27 item 5, kept from coming back: no import circle inside lab/codecs (deferred imports
included), no module using another module's private name (lab/ and app/), one meaning per name."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from lazy_import import lazy

nx = lazy("networkx")  # loaded by the test that walks the graph, not at collection

grimp = pytest.importorskip("grimp", reason="import-linter (grimp) not installed: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("lab", "app")


def test_no_import_circle_inside_lab_codecs():
    """Every import counts, the ones inside functions and under TYPE_CHECKING too."""
    graph = grimp.build_graph("lab", cache_dir=None)
    inside = lambda m: m == "lab.codecs" or m.startswith("lab.codecs.")  # noqa: E731
    g = nx.DiGraph()
    for m in filter(inside, graph.modules):
        g.add_node(m)
        g.add_edges_from((m, d) for d in graph.find_modules_directly_imported_by(m) if inside(d))
    # the package's __init__ may import its modules; a module importing the package back is a circle
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1 or g.has_edge(c[0], c[0])]
    assert not cycles, "import circles in lab/codecs: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles)


# ------------------------------------------------------------------ private names across modules

@dataclass(frozen=True)
class Use:
    module: str
    line: int
    text: str


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[0] == "app":  # the dashboard runs with app/ on sys.path: `import _common as ui`
        parts = parts[1:] or ["app"]
    return ".".join(parts)


def _resolve(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _defined(tree: ast.AST) -> set[str]:
    """Private names a module defines: functions, classes, assignments, attributes of self/cls, parameters."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.add(node.attr)  # `other._x = ...` reaches into another object: not a definition
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return {n for n in out if _private(n)}


def private_uses(root: Path = ROOT) -> list[Use]:
    """Uses, in lab/ and app/, of a private name (`_x`) that another module of lab/ or app/ defines:
    `from m import _x`, `m._x` on an imported module, and `obj._x` / getattr(obj, "_x") / `self._x`
    (not super()) where `_x` is defined in another module and not in this one (a hook a subclass in
    another module overrides, such as Comm._exchange, stays private)."""
    files = [p for d in SOURCES for p in (root / d).rglob("*.py")]
    trees = {_module_name(p, root): (p, ast.parse(p.read_text(), str(p))) for p in files}
    defined = {m: _defined(t) for m, (_, t) in trees.items()}
    owners: dict[str, set[str]] = {}
    for m, names in defined.items():
        for n in names:
            owners.setdefault(n, set()).add(m)
    ours = set(trees)
    uses: list[Use] = []
    for mod, (path, tree) in trees.items():
        here = defined[mod]
        elsewhere = lambda n: bool(owners.get(n, set()) - {mod})  # noqa: E731
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in ours or a.name.split(".")[0] in ours:
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, path.name == "__init__.py", node.level, node.module)
                if src not in ours:
                    continue
                for a in node.names:
                    if f"{src}.{a.name}" in ours:
                        aliases[a.asname or a.name] = f"{src}.{a.name}"
                    elif _private(a.name):
                        uses.append(Use(mod, node.lineno, f"from {src} import {a.name}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                v = node.value
                if isinstance(v, ast.Name) and v.id in aliases:
                    uses.append(Use(mod, node.lineno, ast.unparse(node)))
                elif isinstance(v, ast.Name) and v.id in ("self", "cls"):
                    if node.attr not in here and elsewhere(node.attr):
                        uses.append(Use(mod, node.lineno, ast.unparse(node)))
                elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                    continue
                elif node.attr not in here and elsewhere(node.attr):
                    uses.append(Use(mod, node.lineno, ast.unparse(node)))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _private(node.args[1].value) and node.args[1].value not in here
                  and elsewhere(node.args[1].value)):
                uses.append(Use(mod, node.lineno, ast.unparse(node)))
    return uses


def test_no_module_uses_another_modules_private_name():
    uses = private_uses()
    assert not uses, "private names used across modules (make them public):\n" + "\n".join(
        f"  {u.module}:{u.line}: {u.text}" for u in uses)


def test_the_scan_sees_each_kind_of_use(tmp_path):
    """The scan itself: each way of reaching into another module is caught; a module's own private
    names, self, super() and names no module of ours defines (os._exit) are not."""
    pkg = tmp_path / "lab"
    pkg.mkdir()
    (tmp_path / "app").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def _helper(): pass\n_TABLE = {}\nclass Base:\n    def _hook(self): pass\n"
                              "    def _own(self): return self._hook()\n")
    (pkg / "b.py").write_text("import os\nfrom . import a\nfrom .a import _helper\n"
                              "class Sub(a.Base):\n    def run(self, other):\n        self._hook()\n"
                              "        super()._own()\n        other._own()\n        getattr(other, '_hook')\n"
                              "        os._exit(0)\n        return a._TABLE, self._mine\n"
                              "    def _mine(self): pass\n")
    got = sorted((u.module, u.text) for u in private_uses(tmp_path))
    assert got == [("lab.b", "a._TABLE"), ("lab.b", "from lab.a import _helper"), ("lab.b", "getattr(other, '_hook')"),
                   ("lab.b", "other._own"), ("lab.b", "self._hook")]


@pytest.mark.parametrize("name", ["Layout", "BitLayout"])
def test_one_meaning_per_name(name):
    """`Layout` is the payload's fields (lab/codecs/base.py); the user bit layout is `BitLayout`."""
    import lab.codecs.base as base
    import lab.codecs.tables as tables

    holders = [m.__name__ for m in (base, tables) if hasattr(m, name)]
    assert len(holders) == 1, f"{name} defined in {holders}"
