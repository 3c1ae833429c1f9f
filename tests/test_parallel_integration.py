"""Every registered parallelism is reachable from every door without a list to edit: `paralab train --mode
NAME` (its options mapped to its settings, one-line errors for an option, codec, model or rank count it cannot
take, --json/--out in the train schema, Ctrl-C keeping rank 0's curve, torchrun's ranks), `paralab converge
--mode NAME` for the tasks whose model it trains, the experiments' front door (lab.experiments.parallelism),
bench/parallelism.py and docs/results.md. A small strategy registered by the tests (tests/parallel_toy.py, data
parallelism by hand with the codec on its gradients) drives them, so none of this depends on the real ones."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import parallel_toy
from lab.cli import app
from lazy_import import lazy
from test_cli import ENV, REPO, schema, stop_at

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

runner = CliRunner()
TINY = ["--hidden", "16", "--dropout", "0,0", "--epochs", "0.2", "--train-limit", "256", "--evals", "1"]
# fresh processes (torchrun's ranks, a `python -m lab` run) find the toy through the registry's variable
TOY_ENV = {**ENV, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}", "PARALAB_PARALLELISMS": "parallel_toy"}


@pytest.fixture(scope="module")
def toy():
    """The toy strategy registered at run time (carried to the rank processes), removed after."""
    from lab.train.parallelism.base import REGISTRY

    s = parallel_toy.install()
    yield s
    REGISTRY.remove(s)


@pytest.fixture
def no_ranks(monkeypatch):
    """A run that would start ranks fails the test: bad input must be refused before any rank starts."""
    import lab.comm.launch as launch

    def started(*a, **k):
        raise AssertionError("ranks started")

    monkeypatch.setattr(launch, "run", started)


@pytest.mark.registries
def test_a_strategy_registered_at_run_time_is_in_every_list(toy):
    import lab.experiments as ex

    assert "toy" in ex.parallel_strategies() and "toy" in ex.converge_modes()
    assert ex.option_modes("microbatches")[-1] == "toy" and "toy" not in ex.option_modes("schedule")
    row = ex.strategy_catalog().set_index("name").loc["toy"]
    assert row.options == "--microbatches 1" and row.models == "mlp, cnn" and bool(row.bench)
    for command in (["train"], ["converge"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
        assert r.exit_code == 0 and "toy" in r.output, command


DROPPED = '''
"""A strategy dropped into the package as one file (a test's): the toy's rank function, its own settings."""
from dataclasses import dataclass

from lab.train.parallelism import Settings, Strategy
from parallel_toy import toy_rank


@dataclass(frozen=True)
class DroppedSettings(Settings):
    stripes: int = 2

    def check(self, cfg, procs):
        if self.stripes < 1:
            raise ValueError(f"--stripes {self.stripes}; allowed: >= 1")


STRATEGY = Strategy("dropped_stripes", "a strategy dropped in (test)", "test", DroppedSettings, toy_rank,
                    ("cnn",), "nothing")
'''


@pytest.mark.registries  # CI runs it again with an outside plugin package installed (.ci/run)
def test_a_strategy_dropped_in_as_one_file_or_an_entry_point_is_found(tmp_path, monkeypatch):
    """No list to edit: a module in lab/train/parallelism/ (a directory added to the package's path, not the
    checkout) and an installed distribution's `paralab.parallelisms` entry point are both modes."""
    import lab.train.parallelism as pkg
    from lab.experiments import converge_modes, parallel_strategies
    from lab.train.parallelism.base import REGISTRY

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "dropped_stripes.py").write_text(DROPPED)
    (tmp_path / "ep" / "paralab_ep_strategy").mkdir(parents=True)
    (tmp_path / "ep" / "paralab_ep_strategy" / "__init__.py").write_text(DROPPED.replace("dropped_stripes", "ep_stripes"))
    (tmp_path / "ep" / "paralab_ep_strategy-0.1.dist-info").mkdir()
    (tmp_path / "ep" / "paralab_ep_strategy-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: paralab-ep-strategy\nVersion: 0.1\n")
    (tmp_path / "ep" / "paralab_ep_strategy-0.1.dist-info" / "entry_points.txt").write_text(
        "[paralab.parallelisms]\nep_stripes = paralab_ep_strategy:STRATEGY\n")
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(tmp_path / "pkg")])
    monkeypatch.syspath_prepend(str(tmp_path / "ep"))
    try:
        for name in ("dropped_stripes", "ep_stripes"):
            assert name in parallel_strategies() and name in converge_modes()
        r = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "400"})
        assert "dropped_stripes" in r.output and "ep_stripes" in r.output
        r = runner.invoke(app, ["train", "--mode", "dropped_stripes", "--model", "cnn", "--microbatches", "2"])
        assert r.exit_code == 2 and "--microbatches is not an option of --mode dropped_stripes; its options: " \
                                     "--stripes" in r.stderr, r.output
        # a plugin's own setting, without a CLI option of its own, reaches its check typed
        r = runner.invoke(app, ["train", "--mode", "dropped_stripes", "--model", "cnn", "--setting", "stripes=0"])
        assert r.exit_code == 2 and "error: --stripes 0; allowed: >= 1" in r.stderr, r.output
    finally:
        monkeypatch.undo()
        for name, module in (("dropped_stripes", "lab.train.parallelism.dropped_stripes"),
                             ("ep_stripes", "paralab_ep_strategy")):
            REGISTRY.items.pop(name, None)  # a built-in by its module's name: remove refuses
            sys.modules.pop(module, None)
        REGISTRY.kind.seen.discard("lab.train.parallelism.dropped_stripes")


@pytest.fixture(scope="module")
def toy_run(toy, tmp_path_factory):
    """`paralab train --mode toy ... --json --out F`: (what it printed, what it wrote)."""
    out = tmp_path_factory.mktemp("toy") / "toy.json"
    r = runner.invoke(app, ["train", "--mode", "toy", "--procs", "2", "--codec", "dynamic_tree", "--microbatches", "2",
                            *TINY, "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return r.stdout, json.loads(out.read_text())


def test_train_mode_json_is_the_schemas_and_the_codec_ran(toy_run):
    printed, written = toy_run
    doc = json.loads(printed)
    jsonschema.validate(doc, schema("train"))
    assert doc == written
    c, s = doc["config"], doc["summary"]
    assert c["mode"] == "toy" and c["procs"] == 2 and c["settings"] == {"microbatches": 2} and c["torchrun"] is False
    assert s["mode"] == "toy" and s["procs"] == 2 and s["microbatches"] == 2 and s["carries"] == "gradients (toy)"
    # 8-bit codes plus a scale per block: a quarter of fp32's bytes, counted on the wire
    assert 0.24 < s["bytes_ratio"] < 0.3 and s["bytes"] == round(s["bytes_ratio"] * s["fp32_bytes"])
    assert s["parameters"] == 64 * 16 + 16 + 16 * 10 + 10 and s["final_test_loss"] == doc["curve"][-1]["test_loss"]
    assert [row["rank"] for row in doc["tables"]["per_rank"]] == [0, 1]


def test_a_missing_shared_field_fails_the_schema(toy_run):
    doc = json.loads(toy_run[0])
    for where, field in (("summary", "bytes_ratio"), ("summary", "carries"), ("config", "settings"), ("", "tables")):
        bad = json.loads(toy_run[0])
        del (bad[where] if where else bad)[field]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema("train"))
    stopped = {k: doc[k] for k in ("command", "version", "device", "config")}
    stopped.update(partial=True, stopped="evaluation at epoch 0.50", curve=doc["curve"],
                   summary={k: doc["summary"][k] for k in ("label", "mode", "final_test_error", "best_test_error",
                                                          "bytes", "steps", "parameters")})
    jsonschema.validate(stopped, schema("train"))  # a stopped run keeps the shared keys only


@pytest.mark.parametrize("args, says", [
    (["--mode", "toy", "--schedule", "gpipe"], "--schedule is not an option of --mode toy; its options: --microbatches"),
    (["--mode", "ddp", "--microbatches", "2"], "toy, not of --mode ddp"),
    (["--mode", "sim", "--experts", "8", "--top-k", "2"], "--top-k is an option of --mode"),
    (["--mode", "toy", "--microbatches", "100"], "--microbatches 100: a rank's 64 samples cannot make 100"),
    (["--mode", "toy", "--procs", "1"], "--mode toy runs on at least 2 ranks"),
    (["--mode", "toy", "--codec", "int8", "--error-feedback"], "--error-feedback is for gradients summed step after step"),
    (["--mode", "toy", "--codec", "topk"], "it cannot carry gradients (toy); allowed: "),
    (["--mode", "toy", "--weights-codec", "int8"], "--weights-codec: --mode fsdp's option(s)"),
    (["--mode", "toy", "--grads-codec", "int8"], "--grads-codec is not an option of --mode toy"),
    (["--mode", "toy", "--algorithm", "ring"], "--algorithm is not an option of --mode toy"),
    (["--mode", "toy", "--parallel", "model"], "--parallel and --consistency are the simulated workers'"),
    (["--mode", "toy", "--link-rate", "fast"], "bad rate 'fast'"),
    (["--mode", "nosuch"], "--mode 'nosuch'; allowed: sim, ddp, fsdp, "),
    (["--mode", "sim", "--trace", "/tmp/x"], "--trace records real processes: use it with --mode ddp, fsdp or "),
    (["--mode", "toy", "--setting", "microbatches=many"], "microbatches takes int values, got 'many'"),
    (["--mode", "toy", "--setting", "stripes=2"], "--mode toy has no setting 'stripes'; its settings: microbatches"),
    (["--mode", "toy", "--setting", "microbatches=2", "--microbatches", "2"], "microbatches is given twice"),
    (["--mode", "ddp", "--setting", "microbatches=2"], "--setting is an option of the parallelisms ("),
])
def test_bad_input_is_one_line_before_any_rank_starts(toy, no_ranks, args, says):
    r = runner.invoke(app, ["train", *args, *TINY])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert says in lines[0], lines[0]


def test_the_front_door_checks_and_trains(toy):
    from lab.experiments import TrainConfig, parallel_settings, parallel_training

    cfg = dict(hidden=(16,), dropout=(0.0, 0.0), epochs=0.2, train_limit=256, evals_per_epoch=1)
    assert parallel_settings("toy", cfg, 2, {"microbatches": 3}).microbatches == 3
    with pytest.raises(ValueError, match="--mode toy trains --model mlp or cnn; got --model gpt"):
        parallel_settings("toy", TrainConfig(model="gpt"), 2)
    with pytest.raises(ValueError, match=r"unknown training setting\(s\) \['hiden'\]"):
        parallel_settings("toy", {"hiden": (8,)}, 2)
    with pytest.raises(ValueError, match="unknown parallelism 'pipe'"):
        parallel_settings("pipe", cfg, 2)
    res = parallel_training("toy", cfg, 2)  # fp32: the bytes are fp32's
    assert res.summary["bytes"] == res.summary["fp32_bytes"] > 0 and len(res.curve) == 1


def test_converge_trains_the_tasks_the_strategy_can(toy, tmp_path):
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["converge", "--mode", "toy", "-k", "2", "--hidden", "16", "--train-limit", "256",
                            "--steps", "10", "--eval-every", "5", "--seeds", "1", "--batch", "16", "--budget", "1",
                            "--tolerance", "0.9", "--codecs", "dynamic_tree", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema("converge"))
    rows = {row["spec"]: row for row in doc["rows"]}
    assert doc["config"]["mode"] == "toy" and set(rows) == {"fp32", "dynamic_tree"}
    assert rows["dynamic_tree"]["bytes_per_step"] / rows["fp32"]["bytes_per_step"] < 0.3
    assert rows["fp32"]["measured"] and rows["fp32"]["penalty"] == 1.0


@pytest.mark.parametrize("args, says", [
    (["--task", "gpt"], "--mode toy cannot train task 'gpt' (it trains --model mlp or cnn); the tasks it can "
                        "train: mlp, cnn"),
    (["--codecs", "ef:dynamic_tree"], "codec spec 'ef:dynamic_tree' cannot train with --mode toy"),
    (["--codecs", "dynamic_tree@5"], "a warm-up ('@N') is the DDP hook's fp32 start"),
    (["-k", "8"], "workers=8; --mode toy runs 2..4 processes here"),
])
def test_converge_refuses_what_the_strategy_cannot_train(toy, no_ranks, args, says):
    r = runner.invoke(app, ["converge", "--mode", "toy", *args])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and says in r.stderr, r.output


def test_ctrl_c_keeps_rank_0s_curve(tmp_path):
    out = tmp_path / "partial.json"
    rest = stop_at(["train", "--mode", "toy", "--hidden", "16", "--dropout", "0,0", "--epochs", "200",
                    "--train-limit", "256", "--evals", "2"], "done: evaluation at epoch 0.50", out, TOY_ENV)
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema("train"))
    assert doc["partial"] is True and doc["summary"]["mode"] == "toy" and doc["curve"][0]["bytes"] > 0
    assert doc["stopped"].split(" (")[0] in rest


@pytest.mark.skipif(shutil.which("torchrun") is None and not (Path(sys.executable).parent / "torchrun").exists(),
                    reason="torchrun is not installed")
def test_two_ranks_under_torchrun(tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    out = tmp_path / "result.json"
    base = [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "lab", "train", "--mode", "toy", *TINY,
            "--codec", "dynamic_tree"]
    p = subprocess.run([*base, "--out", str(out)], cwd=REPO, env=TOY_ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema("train"))
    assert doc["config"]["torchrun"] is True and doc["summary"]["procs"] == 2 and doc["summary"]["bytes_ratio"] < 0.3


def test_under_torchrun_the_link_is_torchruns(toy, no_ranks, monkeypatch):
    from lab.experiments import parallel_training

    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match="^--link-rate shapes the links between local ranks; under torchrun"):
        parallel_training("toy", None, 2, link_rate="1gbit")


def _load(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_benchmark_writes_what_the_results_page_renders(toy, tmp_path, monkeypatch):
    """bench/parallelism.py at a tiny size on loopback (the committed results run on the shaped link): fp32 and
    the codec alternately over two seeds, the ratios and the ISA recorded, and docs/results.md's table reads it."""
    bench = _load(REPO / "bench" / "parallelism.py", "bench_parallelism")
    assert bench.main(["--strategies", "toy", "--seeds", "2", "--link-rate", "none", "--out-dir", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "parallelism_toy.json").read_text())
    s = doc["summary"]
    assert doc["vector_isa"] and doc["versions"]["vector_isa"] == doc["vector_isa"] and doc["threads_per_rank"] == 1
    assert [(r["seed"], r["variant"]) for r in doc["runs"]] == [(0, "fp32"), (0, "codec"), (1, "codec"), (1, "fp32")]
    assert 0.24 < s["bytes_ratio"] < 0.3 and s["step_ratio"] > 0 and len(s["step_ratio_per_seed"]) == 2
    assert s["test_loss_sd_fp32"] > 0 and s["loss_within_noise"] is True  # the codec's loss: fp32's, within seeds
    assert s["own"]["microbatches"] == {"fp32": 1.0, "codec": 1.0} and doc["link_rate"] is None

    gen = _load(REPO / "docs" / "generate.py", "docs_generate_parallel")
    monkeypatch.setattr(gen, "RESULTS", tmp_path)
    row = gen.results_parallelism().splitlines()[2]
    assert "toy (dynamic_tree)" in row and f"{s['step_ratio']:.2f}x" in row and "| yes |" in row
    assert "`parallelism`" in gen.results_index() and "vector ISA" in gen.results_index()
