"""How codecs and collective algorithms are found: one mechanism for both (DESIGN.md rule 6).

A kind of plugin (`codecs`, `algorithms`) is a registry plus a `Kind` that says where its plugins
live. `discover(kind)` imports, once each, and hands every module or object to the registry:

1. the package scan: every module of the built-in package (`lab.codecs`, `lab.comm.algorithms`);
   a module dropped into the package is found, nothing lists it;
2. entry points of the installed distributions, group `paralab.codecs` / `paralab.algorithms`
   (`importlib.metadata`): a third-party package declares its plugins in its pyproject.toml,
       [project.entry-points."paralab.codecs"]
       meansign = "my_codecs.meansign"          # a module, or "module:object"
   and every process that reads the registry finds them, rank processes included;
3. modules named in the environment variable of the kind (`PARALAB_CODECS`, `PARALAB_ALGORITHMS`,
   comma-separated), for plugins that are not installed (read only: nothing here writes it);
4. modules whose plugins were registered at run time (`register(...)` from a test's or a notebook's
   module): the registry records them with `remember`, and the processes this one starts carry them
   along: `lab.comm.launch` hands `carried()` to its rank processes, which `adopt` it before they
   run, so a plugin registered in the parent is known on every rank.

The scan and the entry points are read again when `sys.path` or the package's path changes (a
distribution or a package directory that appears later is found then).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping

__all__ = ["Kind", "declare", "discover", "remember", "carried", "adopt", "kinds"]


@dataclass
class Kind:
    """One kind of plugin: its name, built-in package, entry-point group, environment variable and
    `accept(obj, origin)`, the registry's hook that registers what a module or entry-point object
    declares (origin: where it came from, for messages)."""

    name: str
    package: str
    group: str
    env: str
    accept: Callable[[Any, str], None]
    seen: set[str] = field(default_factory=set)      # modules / entry points handed to `accept` already
    runtime: list[str] = field(default_factory=list)  # modules registered at run time (carried to children)
    key: tuple | None = None                          # (sys.path, package path, env) of the last discovery


_lock = threading.RLock()
_kinds: dict[str, Kind] = {}
_adopted: dict[str, list[str]] = {}  # carried in from the parent process, before the kind was declared


def declare(kind: Kind) -> Kind:
    """Make a kind known (its registry module does this once, at import)."""
    with _lock:
        old = _kinds.get(kind.name)
        if old is not None:
            return old
        kind.runtime.extend(m for m in _adopted.pop(kind.name, []) if m not in kind.runtime)
        _kinds[kind.name] = kind
        return kind


def kinds() -> list[str]:
    """The declared kinds' names."""
    return sorted(_kinds)


def _import(name: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ValueError(f"{what} names module {name!r}, which cannot be imported: {e}") from None


def _load_entry_point(ep: importlib.metadata.EntryPoint, origin: str) -> Any:
    try:
        return ep.load()
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{origin} ({ep.value}) cannot be loaded: {e}") from None


def _env_modules(kind: Kind) -> list[str]:
    return [m.strip() for m in os.environ.get(kind.env, "").split(",") if m.strip()]


def discover(name: str) -> None:
    """Find every plugin of kind `name` not handed to its registry yet (package scan, entry points,
    environment, modules carried from the parent); cheap when nothing changed since the last call."""
    kind = _kinds[name]
    pkg = importlib.import_module(kind.package)
    key = (tuple(sys.path), tuple(getattr(pkg, "__path__", ())), os.environ.get(kind.env, ""), len(kind.runtime))
    if key == kind.key:
        return
    with _lock:
        if key == kind.key:
            return
        found: list[tuple[str, Callable[[], Any], str]] = []
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            mod = f"{kind.package}.{info.name}"
            found.append((mod, lambda m=mod: importlib.import_module(m), f"package {kind.package}"))
        for ep in sorted(importlib.metadata.entry_points(group=kind.group), key=lambda e: (e.name, e.value)):
            origin = f"entry point {ep.name!r} of group {kind.group!r}"
            found.append((f"entry point {ep.value}", lambda e=ep, o=origin: _load_entry_point(e, o), origin))
        for mod in _env_modules(kind):
            found.append((mod, lambda m=mod: _import(m, f"${kind.env}"), f"${kind.env}"))
        for mod in list(kind.runtime):
            found.append((mod, lambda m=mod: _import(m, "the parent process"), "the parent process"))
        for ident, load, origin in found:
            if ident in kind.seen:
                continue
            kind.seen.add(ident)  # first: a module that registers at import re-enters discover
            try:
                kind.accept(load(), origin)
            except BaseException:
                kind.seen.discard(ident)  # the next use tries again and reports the same error
                raise
        kind.key = key


def remember(name: str, module: str) -> None:
    """Record `module` as the home of a plugin of kind `name` registered at run time, so processes
    started from this one (`carried`) import it too. Built-ins and `__main__` are not recorded."""
    kind = _kinds[name]
    if not module or module == "__main__" or module == kind.package or module.startswith(kind.package + "."):
        return
    with _lock:
        if module not in kind.runtime:
            kind.runtime.append(module)
            kind.seen.add(module)  # registered here already


def forget(name: str, module: str) -> None:
    """Stop carrying `module` (its plugin was unregistered)."""
    kind = _kinds[name]
    with _lock:
        if module in kind.runtime:
            kind.runtime.remove(module)
        kind.seen.discard(module)


def carried() -> dict[str, list[str]]:
    """kind -> modules registered at run time in this process (and those it adopted): what a child
    process needs to `adopt` to know the same plugins."""
    with _lock:
        out = {k.name: list(k.runtime) for k in _kinds.values() if k.runtime}
        for name, mods in _adopted.items():
            out.setdefault(name, []).extend(m for m in mods if m not in out.get(name, []))
        return out


def adopt(modules: Mapping[str, list[str]]) -> None:
    """In a child process: take over the parent's `carried()`, so the next discovery imports them
    (kinds not declared yet keep them until they are)."""
    with _lock:
        for name, mods in modules.items():
            kind = _kinds.get(name)
            target = kind.runtime if kind is not None else _adopted.setdefault(name, [])
            target.extend(m for m in mods if m not in target)
