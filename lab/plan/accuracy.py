"""Measured steps penalties for the verdicts: which `paralab converge` result stands for a
priced model, and each codec spec's penalty in it (steps to fp32's target / fp32's steps, with its
t-based 95 % CI over seeds; `lab.train.converge`).

Time to accuracy = step time x steps to the target, so a codec's time-to-accuracy speedup against a
baseline is its per-step speedup x (the baseline's penalty / the codec's penalty). A codec that never
reached the target in some seed has an infinite penalty: it never pays. A spec the result does not
hold is *not measured*: no penalty is guessed for it.

Where results are looked for, in order (`lab.data.results.results_dirs`): $PARALAB_RESULTS when set,
else bench/results under the current directory; then the reference results shipped with paralab.
Within a folder the simulated workers' file `converge-<task>-<device>.json` comes before the DDP ones
(`-ddpP`).

Which task stands for a model: the task whose `priced_like` is the model (mlp -> alexnet, cnn ->
resnet50, gpt -> gpt2-small); otherwise by where the model's gradient values are: transformer
blocks and embeddings -> gpt, mostly convolutions -> cnn, mostly fully connected layers -> mlp.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab.data.results import RESULTS_ENV, results_dirs

from .layers import ModelSpec, get_model

TRANSFORMER_KINDS = ("block", "embedding", "attention", "head")
NOT_MEASURED = "not measured"
NEVER = "never reaches the target"


def _tasks() -> dict:
    """The registered converge tasks by name (`lab.train.tasks`), read now: a task plugin counts too."""
    from lab.train.tasks import task_infos
    return {t.name: t for t in task_infos()}


def task_for(model: str | ModelSpec) -> tuple[str, str]:
    """(converge task, why) for a model of lab.plan's catalog (see the module docstring)."""
    spec = get_model(model.replace("-", "_") if isinstance(model, str) else model)
    tasks = _tasks()
    for t in tasks.values():
        if t.priced_like.replace("-", "_") == spec.name:
            return t.name, f"{t.name} (the task priced like {spec.name})"
    total = sum(lay.params for lay in spec.layers) or 1
    share = {k: sum(lay.params for lay in spec.layers if lay.kind in kinds) / total
             for k, kinds in (("gpt", TRANSFORMER_KINDS), ("cnn", ("conv",)), ("mlp", ("fc",)))}
    if share["gpt"] >= 0.5:
        return "gpt", f"gpt ({share['gpt']:.0%} of {spec.name}'s gradient values in transformer layers)"
    if share["cnn"] > share["mlp"]:
        return "cnn", f"cnn ({share['cnn']:.0%} of {spec.name}'s gradient values in convolutions)"
    return "mlp", f"mlp ({share['mlp']:.0%} of {spec.name}'s gradient values in fully connected layers)"


def find_result(task: str, dirs: list[Path] | None = None) -> Path | None:
    """The first converge result of `task` in `dirs` (results_dirs()): simulated workers before DDP."""
    for d in results_dirs() if dirs is None else [Path(x) for x in dirs]:
        files = [p for p in d.glob(f"converge-{task}-*.json") if not p.name.endswith(".partial.json")]
        files.sort(key=lambda p: (bool(re.search(r"-ddp\d+$", p.stem)), p.name))
        if files:
            return files[0]
    return None


def canonical(spec: str) -> str:
    """A key naming what a codec spec builds ('randomk' and 'randomk:ratio=0.01' match; 'fp32' for
    fp32 / none / 32-bit; warm-up and error feedback are part of it): `lab.codecs.canonical_spec`."""
    from lab.codecs import canonical_spec

    return canonical_spec(spec)


@dataclass
class Penalties:
    """The measured penalties standing for one priced model: the task used and why, the result file
    (None: no result for that task: every codec is not measured), and its penalties by canonical spec."""

    task: str
    why: str
    path: Path | None
    by_spec: dict = field(default_factory=dict)  # canonical(spec) -> lab.train.converge.Penalty | None

    @property
    def measured(self) -> bool:
        return self.path is not None

    def get(self, spec: str):
        """The Penalty of `spec` (None: not measured)."""
        try:
            key = canonical(spec)
        except (ValueError, KeyError):
            return None
        return self.by_spec.get(key)

    def specs(self) -> list[str]:
        """The measured specs as the result names them, in its order."""
        return [v.spec for v in self.by_spec.values() if v is not None]

    def source(self, spec: str) -> dict | None:
        """Where `spec`'s penalty came from: file, task, seeds (None: not measured)."""
        p = self.get(spec)
        if p is None:
            return None
        return {"file": str(self.path), "task": self.task, "spec": p.spec, "seeds": p.seeds, "reached": p.reached,
                "mode": p.mode}

    def describe(self) -> str:
        """One line: which task and file the penalties come from, or why there are none."""
        if self.path is None:
            return (f"steps penalty: converge task {self.why}; no converge-{self.task}-*.json result: every codec "
                    f"is {NOT_MEASURED} (run `paralab converge --task {self.task} --codecs all`)")
        return f"steps penalty: converge task {self.why}, measured in {self.path}"


def load(model: str | ModelSpec, task: str | None = None, dirs: list[Path] | None = None) -> Penalties:
    """The Penalties standing for `model` (task None: `task_for`); ValueError for an unknown task or an
    unreadable result."""
    tasks = _tasks()
    if task is None:
        task, why = task_for(model)
    elif task not in tasks:
        raise ValueError(f"unknown converge task {task!r}; known: {', '.join(tasks)}")
    else:
        why = f"{task} (chosen)"
    path = find_result(task, dirs)
    if path is None:
        return Penalties(task, why, None)
    from lab.train.converge import load_penalties

    by_spec = {}
    for spec, pen in load_penalties(path).items():
        try:
            by_spec[canonical(spec)] = pen
        except (ValueError, KeyError):
            continue  # a codec no longer registered
    return Penalties(task, why, path, by_spec)


def relative(pen, base) -> tuple[float, tuple[float, float] | None]:
    """(penalty of `pen` relative to the baseline's `base` (None: relative to fp32), its CI)."""
    b = base.penalty if base is not None and math.isfinite(base.penalty) and base.penalty > 0 else 1.0
    if pen.never_reaches:
        return math.inf, None
    ci = (pen.ci[0] / b, pen.ci[1] / b) if pen.ci is not None else None
    return pen.penalty / b, ci


__all__ = ["RESULTS_ENV", "NOT_MEASURED", "NEVER", "results_dirs", "task_for", "find_result", "canonical",
           "Penalties", "load", "relative"]
