"""Heavy test-only packages imported on first use, not at collection (measured: jsonschema alone took
1.4 s of every `pytest --collect-only`, Streamlit's AppTest and the dashboard's modules about 1 s more).

`jsonschema = lazy("jsonschema")` or `AppTest = lazy("streamlit.testing.v1", "AppTest")` at a test module's top
keeps its call sites as they are: the import happens when a test first uses the name. The stand-in is a plain
object, not a module (importlib's LazyLoader module would load as soon as pytest's collection asks it whether it
is a class)."""
from __future__ import annotations

import importlib
from typing import Any


class Lazy:
    """Stands for `module` (or its attribute `attr`) until first used: attribute access and calls go to it."""

    def __init__(self, module: str, attr: str | None = None) -> None:
        self._module, self._attr = module, attr

    def resolve(self) -> Any:
        """The module or attribute itself (imported now if it was not yet)."""
        target = importlib.import_module(self._module)
        return target if self._attr is None else getattr(target, self._attr)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest's collection probes dunders and its own private marks: not a use
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lazy {self._module}{'.' + self._attr if self._attr else ''}>"


def lazy(module: str, attr: str | None = None) -> Any:
    """A stand-in for `module` (or `module.attr`) that imports it on first use."""
    return Lazy(module, attr)
