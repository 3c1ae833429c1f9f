"""The structure that keeps the lab easy to change: no import circle anywhere in lab/ (imports inside
functions included, so a deferred import cannot hide one), no module using another module's private
name (lab/ and app/), one meaning per name."""
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


Step = tuple[str, str, int]  # importer, imported, line of the import in the importer


def import_circles(package: str) -> list[list[Step]]:
    """Every circle of imports among the modules of `package`, one per group of modules that reach each
    other: the steps of one circle through the group. Every import counts: at module level, inside
    functions, under TYPE_CHECKING; relative ones resolved; `from pkg import name` where name is a module
    imports that module. A module importing its own package back, whose __init__ imports it, is a circle."""
    graph = grimp.build_graph(package, cache_dir=None)
    g = nx.DiGraph()
    for m in graph.modules:
        g.add_node(m)
        g.add_edges_from((m, d) for d in graph.find_modules_directly_imported_by(m))
    circles = []
    for group in nx.strongly_connected_components(g):
        if len(group) == 1 and not g.has_edge(next(iter(group)), next(iter(group))):
            continue
        steps = nx.find_cycle(g.subgraph(group))
        circles.append([(a, b, min(d["line_number"] for d in graph.get_import_details(importer=a, imported=b)))
                        for a, b in steps])
    return sorted(circles)


def _describe(circle: list[Step]) -> str:
    modules = sorted({a for a, _, _ in circle})
    path = " -> ".join(f"{a} (line {line})" for a, _, line in circle) + f" -> {circle[0][0]}"
    return f"{', '.join(modules)}: {path}"


def test_no_import_circle_in_lab():
    circles = import_circles("lab")
    assert not circles, "import circles in lab/ (move what both sides need into a module of its own):\n" + \
        "\n".join("  " + _describe(c) for c in circles)


def test_the_circle_scan_sees_every_kind_of_import(tmp_path, monkeypatch):
    """A circle closed by a function-level relative import, `from pkg.sub import mod` and an import under
    TYPE_CHECKING is found and named; modules off the circle are not in it."""
    pkg = tmp_path / "circle_probe"
    (pkg / "sub").mkdir(parents=True)
    files = {"__init__.py": "", "a.py": "def f():\n    from . import b\n", "b.py": "from circle_probe.sub import c\n",
             "sub/__init__.py": "", "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
             "    from ..d import X\n", "d.py": "import circle_probe.a as A\n", "e.py": "from . import a, d\n"}
    for name, text in files.items():
        (pkg / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    circles = import_circles("circle_probe")
    assert len(circles) == 1
    assert sorted(a for a, _, _ in circles[0]) == ["circle_probe.a", "circle_probe.b", "circle_probe.d",
                                                    "circle_probe.sub.c"]
    assert ("circle_probe.sub.c", "circle_probe.d", 3) in circles[0]
    (pkg / "a.py").write_text("def f():\n    pass\n")
    assert import_circles("circle_probe") == []


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


# ------------------------------------------------------------------ other projects' private APIs

#: names with a leading underscore that the standard library documents as public
DOCUMENTED = frozenset({"_exit", "_asdict", "_replace", "_fields", "_field_defaults", "_make", "_getframe"})


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def foreign_private_uses(root: Path = ROOT) -> list[Use]:
    """Uses, in lab/ and app/ outside the adapter modules (`*_private.py`, one per private API of another project
    the lab relies on, each with a test that pins it), of another project's private API: importing `pkg._x` or
    `from pkg import _x`, `alias._x` on (a call or attribute of) a module of another project, and `obj._x` /
    getattr(obj, "_x") where no module of lab/ or app/ defines `_x`."""
    files = [p for d in SOURCES for p in (root / d).rglob("*.py")]
    trees = {p: ast.parse(p.read_text(), str(p)) for p in files}
    ours = {_module_name(p, root).split(".")[0] for p in files}
    defined = set().union(*(_defined(t) for t in trees.values()))
    private = lambda n: _private(n) and n not in DOCUMENTED  # noqa: E731
    uses: list[Use] = []
    for path, tree in trees.items():
        if path.stem.endswith("_private"):
            continue
        mod = _module_name(path, root)
        foreign: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] not in ours:
                        foreign.add(a.asname or a.name.split(".")[0])
                        if any(map(private, a.name.split("."))):
                            uses.append(Use(mod, node.lineno, f"import {a.name}"))
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] not in ours:
                foreign.update(a.asname or a.name for a in node.names)
                if any(map(private, node.module.split("."))) or any(private(a.name) for a in node.names):
                    uses.append(Use(mod, node.lineno, f"from {node.module} import "
                                                      f"{', '.join(a.name for a in node.names)}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and private(node.attr):
                r = _root(node)
                if (isinstance(r, ast.Name) and r.id in foreign) or node.attr not in defined:
                    uses.append(Use(mod, node.lineno, ast.unparse(node)))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and private(node.args[1].value) and node.args[1].value not in defined):
                uses.append(Use(mod, node.lineno, ast.unparse(node)))
    return sorted(set(uses), key=lambda u: (u.module, u.line, u.text))


def test_other_projects_private_apis_only_in_their_adapters():
    uses = foreign_private_uses()
    assert not uses, "another project's private API used outside an adapter module (*_private.py):\n" + "\n".join(
        f"  {u.module}:{u.line}: {u.text}" for u in uses)


def test_the_adapter_scan_sees_each_kind_of_use(tmp_path):
    """Each way of reaching into another project's private API is caught, in an ordinary module and not in an
    adapter; our own private names, documented ones (os._exit) and public ones are not."""
    pkg = tmp_path / "lab"
    pkg.mkdir()
    (tmp_path / "app").mkdir()
    (pkg / "__init__.py").write_text("")
    reach = ("import os\nimport torch._dynamo\nfrom torch.distributed import fsdp\nfrom asyncio import base_events\n"
             "from pkg import _hidden\nfrom streamlit.runtime import Runtime\n"
             "def f(loop):\n    base_events._set_nodelay = None\n    Runtime.instance()._get_async_objs()\n"
             "    getattr(loop, '_transports')\n    fsdp.FSDPModule.public\n    os._exit(0)\n    return _mine\n"
             "_mine = 1\n")
    (pkg / "a.py").write_text(reach)
    (pkg / "torch_private.py").write_text(reach)
    got = sorted((u.module, u.text) for u in foreign_private_uses(tmp_path))
    assert got == [("lab.a", "Runtime.instance()._get_async_objs"), ("lab.a", "base_events._set_nodelay"),
                   ("lab.a", "from pkg import _hidden"), ("lab.a", "getattr(loop, '_transports')"),
                   ("lab.a", "import torch._dynamo")]


@pytest.mark.parametrize("name", ["Layout", "BitLayout"])
def test_one_meaning_per_name(name):
    """`Layout` is the payload's fields (lab/codecs/base.py); the user bit layout is `BitLayout`."""
    import lab.codecs.base as base
    import lab.codecs.tables as tables

    holders = [m.__name__ for m in (base, tables) if hasattr(m, name)]
    assert len(holders) == 1, f"{name} defined in {holders}"
