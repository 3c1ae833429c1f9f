"""How plugins are found: one mechanism for every kind (docs/design.md rule 6).

A kind of plugin (`codecs`, `algorithms`, `collectives`, `tasks`, `parallelisms`) is a registry plus a `Kind` that says
where its plugins live. `discover(kind)` imports, once each, and hands every module or object to the registry:

1. the package scan: every module of the built-in package (`lab.codecs`, `lab.comm.algorithms`,
   `lab.comm.collectives`, `lab.train.tasks`, `lab.train.parallelism`); a module dropped into the package is found, nothing lists it;
2. entry points of the installed distributions, group `paralab.codecs` / `paralab.algorithms` /
   `paralab.collectives` / `paralab.tasks` / `paralab.parallelisms` (`importlib.metadata`): a third-party package declares its
   plugins in its pyproject.toml,
       [project.entry-points."paralab.codecs"]
       meansign = "my_codecs.meansign"          # a module, or "module:object"
   and every process that reads the registry finds them, rank processes included;
3. modules named in the environment variable of the kind (`PARALAB_CODECS`, `PARALAB_ALGORITHMS`,
   `PARALAB_COLLECTIVES`, `PARALAB_TASKS`, `PARALAB_PARALLELISMS`, comma-separated), for plugins that are not installed (read only:
   nothing here writes it);
4. modules whose plugins were registered at run time (`register(...)` from a test's or a notebook's
   module): the registry records them with `remember`, and the processes this one starts carry them
   along: `lab.comm.launch` hands `carried()` to its rank processes, which `adopt` it before they
   run, so a plugin registered in the parent is known on every rank.

The scan and the entry points are read again when `sys.path` or the package's path changes (a
distribution or a package directory that appears later is found then).

`Registry` is the registry side, one for every kind (codecs, allreduce algorithms, collectives, converge
tasks, parallelisms): its plugins by key, what discovery hands it, `register`, `register_module`, `remove`, and the
lists and look-ups every kind's module offers (`ordered`, `names`, `lookup`).
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
from typing import Any, Callable, Generic, Hashable, Mapping, Optional, TypeVar

__all__ = ["Kind", "Registry", "declare", "discover", "remember", "forget", "carried", "adopt", "kinds"]


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
    # read for every list of plugins (the cost model's many): the package from sys.modules, not import_module
    pkg = sys.modules.get(kind.package) or importlib.import_module(kind.package)
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


T = TypeVar("T")


def _a(name: str) -> str:
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


class Registry(Generic[T]):
    """The plugins of one kind (declared here as a `Kind`), keyed by `key(item)`; `label(item)` names one
    in messages ("algorithm 'ring'"). A module declares its plugin as the attribute `attr` (None: its
    plugins register themselves at import); an entry point may also give an item or a list of items.
    `check(item)` (optional) validates an item before it is added. `module_of(item)`: the module that
    defines it, carried to child processes when registered at run time. `protect_builtins`: `remove`
    refuses the built-in package's plugins. `order(item)`: the sort key of lists (None: the registry key);
    `name_of(item)`: what lists and messages call it."""

    def __init__(self, name: str, package: str, group: str, env: str, cls: type, *, attr: Optional[str],
                 key: Callable[[T], Hashable], label: Callable[[T], str],
                 module_of: Callable[[T], str] = lambda item: getattr(item, "module", "") or "",
                 check: Optional[Callable[[T], None]] = None, protect_builtins: bool = True,
                 order: Optional[Callable[[T], Any]] = None,
                 name_of: Callable[[T], str] = lambda item: item.name) -> None:
        self.cls, self.attr, self.key, self.label, self.module_of = cls, attr, key, label, module_of
        self.check, self.protect_builtins = check, protect_builtins
        self.order, self.name_of = order or key, name_of
        self.items: dict[Hashable, T] = {}
        self.lock = threading.RLock()
        self.kind = declare(Kind(name, package, group, env, self.accept))

    def load(self) -> None:
        """Every plugin of the kind found (`discover`)."""
        discover(self.kind.name)

    def get(self, key: Hashable) -> Optional[T]:
        """The plugin under `key`, or None (also for a key that cannot be one: unhashable); discovers only when `key`
        is not registered yet (discovery only adds, and the cost model looks names up ~10^5 times a call)."""
        try:
            item = self.items.get(key)
        except TypeError:
            return None
        if item is None:
            self.load()
            item = self.items.get(key)
        return item

    def ordered(self, where: Optional[Callable[[T], bool]] = None) -> list[T]:
        """Every plugin (those `where` accepts), after a discovery, sorted by `order`."""
        self.load()
        return sorted((i for i in list(self.items.values()) if where is None or where(i)), key=self.order)

    def names(self, where: Optional[Callable[[T], bool]] = None) -> list[str]:
        """The names of `ordered(where)`, in the same order."""
        return [self.name_of(i) for i in self.ordered(where)]

    def lookup(self, key: Any, unknown: str, where: Optional[Callable[[T], bool]] = None, **fields: Any) -> T:
        """The plugin under `key` (as `get`); otherwise ValueError(unknown.format(key=key, known=the names of
        `ordered(where)` joined by ', ', **fields))."""
        item = self.get(key)
        if item is None:
            raise ValueError(unknown.format(key=key, known=", ".join(self.names(where)), **fields))
        return item

    def builtin(self, item: T) -> bool:
        """Whether `item` is defined in the kind's built-in package."""
        return self.module_of(item).startswith(self.kind.package + ".")

    def add(self, item: T, replace: bool = False) -> None:
        """Put `item` in the registry (no discovery, nothing carried); ValueError if its key is taken by
        another item and not `replace`."""
        if self.check is not None:
            self.check(item)
        with self.lock:
            old = self.items.get(self.key(item))
            if old is not None and old is not item and not replace:
                raise ValueError(f"{self.label(item)} is already registered (from {self.module_of(old) or 'unknown'}); "
                                 "pass replace=True to replace it")
            self.items[self.key(item)] = item

    def _declared(self, mod: ModuleType) -> Optional[T]:
        item = getattr(mod, self.attr, None) if self.attr else None
        if item is None:
            return None
        if not isinstance(item, self.cls):
            raise ValueError(f"{mod.__name__}.{self.attr} is {_a(type(item).__name__)}; it must be "
                             f"{_a(self.cls.__name__)}")
        self.add(item)
        return item

    def accept(self, obj: Any, origin: str) -> None:
        """What discovery found (`Kind.accept`): a module (its `attr`, if it defines one), an item or a list."""
        with self.lock:
            if isinstance(obj, ModuleType):
                self._declared(obj)
                return
            items = obj if isinstance(obj, (list, tuple)) else [obj]
            for item in items:
                if not isinstance(item, self.cls):
                    module = f"a module that defines {self.attr} (or registers its plugins)" if self.attr else \
                        "a module that registers its plugins"
                    raise ValueError(f"{origin} gives {_a(type(item).__name__)}; allowed: {module}, "
                                     f"{_a(self.cls.__name__)}, or a list of them")
                if self.items.get(self.key(item)) is not item:
                    self.add(item)

    def register(self, item: T, replace: bool = False) -> T:
        """Add `item` at run time; its module is carried to the processes this one starts (`remember`)."""
        if not isinstance(item, self.cls):
            raise ValueError(f"register takes {_a(self.cls.__name__)}, got {type(item).__name__}")
        if self.attr is not None:  # self-registering modules register during discovery: no discovery from here
            self.load()
        self.add(item, replace)
        remember(self.kind.name, self.module_of(item))
        return item

    def register_module(self, module: str) -> list[T]:
        """Import `module` and register what it declares (or registered itself at import): those items,
        the declared one first; carried to child processes."""
        self.load()
        mod = importlib.import_module(module)
        with self.lock:
            declared = self._declared(mod)
            found = ([declared] if declared is not None else []) + [
                i for i in self.items.values() if i is not declared and self.module_of(i) == module]
        if found:
            remember(self.kind.name, module)
        return found

    def remove(self, item: T) -> None:
        """Take `item` out (tests, temporary plugins); ValueError for a protected built-in. Its module stops
        being carried once none of its plugins is left."""
        if self.protect_builtins and self.builtin(item):
            raise ValueError(f"{self.label(item)} is built-in and cannot be removed")
        with self.lock:
            if self.items.get(self.key(item)) is item:
                del self.items[self.key(item)]
        if not any(self.module_of(i) == self.module_of(item) for i in self.items.values()):
            forget(self.kind.name, self.module_of(item))
