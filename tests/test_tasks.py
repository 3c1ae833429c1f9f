"""Converge tasks are a registry (lab/train/tasks): a task is one module, found by the package scan, and
every list offers it (the experiments' choices, the CLI's help), `converge` trains it; each task brings its
own defaults and --smoke settings (the transformer keeps AdamW's own learning rate)."""
from __future__ import annotations

import json
import math
import sys
import textwrap

import pytest
from typer.testing import CliRunner

import lab.train.tasks as tasks_pkg
from lab.cli import app

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

TASK = '''
"""Logistic regression on the image data: one dense layer (a task dropped in by a test)."""
from torch import nn

from lab.train.tasks import Task


def build(cfg, data):
    return nn.Linear(data.dataset.features, data.dataset.classes)


TASK = Task("dropped_logreg", "logistic regression on the image data", "classify", "alexnet", "test error %",
            dict(dataset="digits", optimizer="sgd", lr=0.5, momentum=0.0, batch=32, steps=20, eval_every=5,
                 dropout=(0.0,)), build)
'''


@pytest.fixture
def dropped(tmp_path, monkeypatch):
    """One file dropped into the task package (a directory added to its path, not the checkout)."""
    (tmp_path / "dropped_logreg.py").write_text(textwrap.dedent(TASK))
    monkeypatch.setattr(tasks_pkg, "__path__", [*tasks_pkg.__path__, str(tmp_path)])
    yield "dropped_logreg"
    monkeypatch.undo()
    from lab.train.tasks.base import REGISTRY

    REGISTRY.items.pop("dropped_logreg", None)  # a built-in by its module's name: unregister refuses
    REGISTRY.kind.seen.discard("lab.train.tasks.dropped_logreg")
    sys.modules.pop("lab.train.tasks.dropped_logreg", None)


def test_a_task_dropped_in_as_one_file_is_found_everywhere(dropped):
    import lab.experiments as ex
    from lab.train.tasks import get_task, task_names

    assert dropped in task_names() and dropped in ex.CONVERGE_TASKS and dropped in ex.converge_task_descriptions()
    assert get_task(dropped).module == "lab.train.tasks.dropped_logreg"
    runner = CliRunner()
    for command in (["converge"], ["race"], ["pays"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
        assert r.exit_code == 0 and dropped in r.output, command
    r = runner.invoke(app, ["converge", "--task", dropped, "--codecs", "int8", "--seeds", "1", "-k", "2",
                            "--train-limit", "300", "--tolerance", "0.5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["config"]["task"] == dropped and d["config"]["lr"] == 0.5 and d["config"]["steps"] == 20
    assert [row["spec"] for row in d["rows"]] == ["fp32", "int8"] and d["task"]["description"].startswith("logistic")
    r = runner.invoke(app, ["converge", "--task", dropped, "--mode", "ddp", "-k", "2", "--json"])
    assert r.exit_code == 2 and "trains with simulated workers only" in " ".join(r.output.split())


@pytest.mark.parametrize("task", tasks_pkg.task_names())
def test_smoke_keeps_each_tasks_own_optimizer(task):
    """--smoke shrinks a task but keeps its optimizer's learning rate: the transformer's AdamW gets its own
    (0.003), not the MLP's SGD preset (0.3, 100x it)."""
    from lab.experiments import converge_config
    from lab.train.tasks import get_task

    cfg = converge_config(smoke=True, task=task)
    own = get_task(task)
    assert cfg.optimizer == own.defaults["optimizer"]
    assert cfg.lr == own.smoke.get("lr", own.defaults["lr"])
    assert cfg.steps == 60 and cfg.seeds == 3  # the shared preset
    if task == "gpt":
        assert (cfg.optimizer, cfg.lr) == ("adamw", 0.003) and cfg.tolerance < 0.5
    if task == "mlp":
        assert cfg.hidden == (64,) and cfg.lr == 0.3


def test_every_task_trains_a_step_with_its_own_model():
    """Each registered task builds its model from its data and trains: the loss is finite and falls."""
    from lab.train.converge import ConvergeConfig, Spec, load_task_data, train_sim
    from lab.train.tasks import task_names

    for name in task_names():
        cfg = ConvergeConfig(task=name, workers=2, steps=10, eval_every=10, train_limit=300, batch=16).resolved()
        run = train_sim(load_task_data(cfg, 0), Spec.parse("fp32"), 10)
        first, last = run.curve[0]["val_loss"], run.curve[-1]["val_loss"]
        assert math.isfinite(last) and last < first, name
