"""`Task`: one time-to-accuracy task as a plugin (`paralab converge --task`), and the registry of them.

A task is one module of this package that defines `TASK = Task(...)`: what is trained (its `build`), on
which kind of data, its quality metric, the model of lab.plan's catalog it stands for, and its defaults
(optimizer and learning rate included) and `--smoke` settings. Tasks are found the way codecs and
algorithms are (`lab.plugins`): this package's modules, entry points of group `paralab.tasks`, modules
named in $PARALAB_TASKS, and tasks registered at run time. Nothing lists them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from lab import plugins

ENV = "PARALAB_TASKS"
#: the data a task trains on: image classification (lab.data's image sets, one label per sample) or a word
#: corpus for next-token prediction (lab.data's corpora)
KINDS = ("classify", "lm")
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


@dataclass(frozen=True, eq=False)
class Task:
    """One training task.

    build(cfg, data) -> nn.Module: its model, from the resolved `lab.train.converge.ConvergeConfig` and the
        seed's `TaskData` (classify: `data.dataset` with features, classes, image_shape; lm: `data.vocab`);
        initialised from torch's global RNG (seeded by the caller).
    kind: 'classify' | 'lm' (KINDS): which data it gets and how it is scored.
    priced_like: the model of lab.plan's catalog the task stands for (the pays page's verdicts).
    quality: what its quality column means (e.g. 'test error %').
    defaults: the ConvergeConfig settings it fills in when not given (its optimizer and lr among them).
    smoke: the settings `--smoke` gives it on top of the shared preset (`lab.train.converge.SMOKE`).
    train_model: the `paralab train` model (lab.train.models) DDP ranks build for it; None: simulated
        workers only.
    order: position in lists (lower first).
    """

    name: str
    description: str
    kind: str
    priced_like: str
    quality: str
    defaults: dict[str, Any]
    build: Callable[[Any, Any], Any]
    smoke: dict[str, Any] = field(default_factory=dict)
    train_model: str | None = None
    order: int = 100
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"task name {self.name!r}: allowed are lower-case identifiers ([a-z][a-z0-9_]*)")
        if self.kind not in KINDS:
            raise ValueError(f"task {self.name!r}: kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if not callable(self.build):
            raise ValueError(f"task {self.name!r}: build must be callable, got {self.build!r}")
        if not self.module:
            object.__setattr__(self, "module", getattr(self.build, "__module__", "") or "")


_PACKAGE = __name__.rsplit(".", 1)[0]
#: every task found (`lab.plugins`: this package's modules that define TASK, entry points `paralab.tasks`,
#: $PARALAB_TASKS, modules carried from the parent process)
REGISTRY: plugins.Registry[Task] = plugins.Registry(
    "tasks", _PACKAGE, "paralab.tasks", ENV, Task, attr="TASK", key=lambda t: t.name,
    label=lambda t: f"task {t.name!r}", order=lambda t: (t.order, t.name))


def register(task: Task, *, replace: bool = False) -> Task:
    """Add a task at run time (every list, the CLI and the pages see it)."""
    return REGISTRY.register(task, replace)


def unregister(name: str) -> None:
    """Remove a plugin task (tests); built-ins stay."""
    REGISTRY.remove(get_task(name))


def task_infos() -> list[Task]:
    """Every registered task, in display order."""
    return REGISTRY.ordered()


def task_names() -> list[str]:
    """The names of `task_infos()`, in the same order."""
    return REGISTRY.names()


def get_task(name: str) -> Task:
    """The registered task called `name`; ValueError naming the known ones otherwise."""
    return REGISTRY.lookup(name, "unknown task {key!r}; known: {known}")
