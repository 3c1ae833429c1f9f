"""Help texts that name the registered plugins, filled in from the registries when the help is shown.

An option's help (or a command's docstring) writes a placeholder such as `{algorithms}`; a command declared
with `cls=RegistryHelp` replaces it by the names registered now (plugins included) each time `--help`
renders: the help never goes stale, and the registries are read only when a help is shown."""
from __future__ import annotations

import re
from typing import Any, Callable

from typer.core import TyperCommand


def _algorithms() -> str:
    from lab.experiments import ALGORITHMS

    return " | ".join(ALGORITHMS)


def _cluster_algorithms() -> str:
    from lab.experiments import CLUSTER_ALGORITHMS

    return " | ".join(CLUSTER_ALGORITHMS)


def _codecs() -> str:
    from lab.experiments import codec_names

    return " | ".join(codec_names())


def _all_gather() -> str:
    from lab.experiments import op_catalog

    return " | ".join(op_catalog("all_gather").name)


def _tasks() -> str:
    from lab.experiments import converge_tasks

    return " | ".join(converge_tasks())


def _task_list() -> str:
    from lab.experiments import converge_task_descriptions

    return " | ".join(f"{name} ({what})" for name, what in converge_task_descriptions().items())


def _parallelisms() -> str:
    from lab.experiments import parallel_strategies

    return " | ".join(parallel_strategies())


def _schedules() -> str:
    from lab.experiments import schedule_names

    return " | ".join(schedule_names())


#: placeholder -> the names it stands for, read from the registry when the help renders
NAMES: dict[str, Callable[[], str]] = {"algorithms": _algorithms, "cluster_algorithms": _cluster_algorithms,
                                       "codecs": _codecs, "all_gather": _all_gather, "tasks": _tasks,
                                       "task_list": _task_list, "parallelisms": _parallelisms,
                                       "schedules": _schedules}
_PLACEHOLDER = re.compile(r"\{(" + "|".join(NAMES) + r")\}")


def fill(text: str | None) -> str | None:
    """`text` with every placeholder of NAMES replaced by the registered names."""
    if not text:
        return text
    return _PLACEHOLDER.sub(lambda m: NAMES[m.group(1)](), text)


class RegistryHelp(TyperCommand):
    """A typer command whose help and options' help may name registered plugins through NAMES' placeholders."""

    def format_help(self, ctx: Any, formatter: Any) -> Any:
        options = [p for p in self.params if isinstance(getattr(p, "help", None), str)]
        templates = (self.help, [p.help for p in options])
        self.help = fill(self.help)
        for p in options:
            p.help = fill(p.help)
        try:
            return super().format_help(ctx, formatter)
        finally:  # the placeholders stay: a plugin registered later is named by the next --help
            self.help = templates[0]
            for p, text in zip(options, templates[1]):
                p.help = text


__all__ = ["RegistryHelp", "fill", "NAMES"]
