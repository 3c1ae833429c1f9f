"""The CLI reads the registries: `train --mode ddp --algorithm X` runs X (or refuses it in one line before a
rank starts), `bench codecs` times every registered codec (or a --codecs selection) and names a broken one
in one line, and no help text lists a registry's names by hand: they are filled in when --help renders,
plugins registered later included."""
from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from lab.cli import app

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

runner = CliRunner()
DDP = ["train", "--mode", "ddp", "-p", "2", "--hidden", "16", "--epochs", "0.05", "--timeout", "240", "--json"]


@pytest.fixture
def echo_ring():
    """The test plugin algorithm of tests/echo_ring.py, registered at run time (carried to the ranks)."""
    from echo_ring import ALGORITHM as ECHO_RING
    from lab.comm.algorithms import register, unregister

    register(ECHO_RING)
    yield ECHO_RING.name
    unregister(ECHO_RING.name)


def test_train_ddp_runs_the_algorithm_it_names(echo_ring):
    """DDP's gradients are summed by the named algorithm: the echo ring's bytes (the ring's 2m plus rank 0's
    echo m on 2 ranks) are 1.5x DDP's own all_reduce's, and the result records the algorithm that ran."""
    r = runner.invoke(app, [*DDP, "--algorithm", echo_ring])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["config"]["algorithm"] == echo_ring and d["summary"]["steps"] >= 1
    assert d["summary"]["bytes"] == pytest.approx(1.5 * d["summary"]["fp32_allreduce_bytes"])
    r = runner.invoke(app, DDP)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["config"]["algorithm"] == "native" and d["summary"]["bytes"] == d["summary"]["fp32_allreduce_bytes"]


def test_train_refuses_an_algorithm_it_cannot_run_before_any_rank_starts(monkeypatch):
    from lab.comm import launch

    def no_ranks(*a, **kw):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(launch, "run", no_ranks)
    for args, needle in ((["--algorithm", "spiral"], "unknown algorithm 'spiral'; known: native, "),
                         (["--mode", "fsdp", "--algorithm", "ring"],
                          "--algorithm is the allreduce of --mode sim and ddp")):
        r = runner.invoke(app, [*DDP, *args])
        assert r.exit_code == 2 and needle in " ".join(r.output.split()), r.output
        assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_bench_codecs_times_a_selection_and_names_a_broken_codec():
    """--codecs picks the contestants (specs with options too); the baselines stay; a registered codec whose
    encode raises is one note and left out, the run goes on."""
    from lab.codecs import Codec, CodecInfo, register, unregister

    class Broken(Codec):
        name = "broken_for_test"

        def encode(self, x):
            raise RuntimeError("this codec is broken")

    register(CodecInfo("broken_for_test", "raises in encode (test)", Broken))
    try:
        args = ["bench", "codecs", "-b", "16K", "-e", "16K", "--repeats", "1", "--device", "cpu", "--json"]
        r = runner.invoke(app, [*args, "--codecs", "int8,topk:ratio=0.1,broken_for_test"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        names = {row["contestant"] for row in d["rows"]}
        assert {"int8", "topk:ratio=0.1", "torch fp8_e4m3 cast"} <= names and "broken_for_test" not in names
        assert not names & {"nvfp4", "dynamic_tree tensor", "fp16"}
        assert d["config"]["codecs"] == ["int8", "topk:ratio=0.1", "broken_for_test"]
        assert [m for m in d["notes"] if "broken_for_test" in m and "this codec is broken" in m]
        for bad, needle in (("int9", "int9"), (" , ", "names no codec")):
            r = runner.invoke(app, [*args, "--codecs", bad])
            assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1, r.output
    finally:
        unregister("broken_for_test")


def test_bench_codecs_covers_every_registered_codec_by_default():
    import torch

    from lab.codecs import bench, codec_names

    notes: list[str] = []
    names = {c.name for c in bench.contestants(torch.device("cpu"), notes)}
    for n in codec_names():
        assert n in names or (n == "dynamic_tree" and "dynamic_tree tensor" in names) or \
            any(m.startswith(f"codec {n!r} skipped") for m in notes), n


def _commands(group=None, prefix=""):
    group = group or typer.main.get_command(app)
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_no_help_text_lists_a_registrys_names_by_hand():
    """An option's help that names half of a registry's names (3 at least) is a hand-written list that goes
    stale: it must be a placeholder filled in from the registry (lab/cli/names.py)."""
    from lab.experiments import ALGORITHMS, CONVERGE_TASKS, codec_names

    registries = {"algorithms": ALGORITHMS, "codecs": codec_names(), "tasks": CONVERGE_TASKS}
    bad = []
    for path, cmd in _commands():
        for p in cmd.params:
            words = set((getattr(p, "help", None) or "").replace(",", " ").replace("|", " ").split())
            for kind, names in registries.items():
                if len(words & set(names)) >= max(3, len(names) // 2):
                    bad.append(f"{path} --{p.name} ({kind})")
    assert not bad, f"hand-written lists of registered names in help texts: {bad}"


def test_help_names_a_plugin_registered_later(echo_ring):
    for command in (["trace"], ["train"], ["plan"], ["bench", "compressed"], ["converge"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
        assert r.exit_code == 0 and echo_ring in r.output and "{algorithms}" not in r.output, command
    r = runner.invoke(app, ["bench", "codecs", "--help"], env={"COLUMNS": "400"})
    assert "nvfp4" in r.output and "{codecs}" not in r.output


def _outside_plugin() -> None:
    """Skip unless tests/outside_plugin is installed; .ci/run installs it and sets PARALAB_OUTSIDE_PLUGIN=1,
    so there a missing plugin fails instead."""
    import importlib.metadata
    import os

    try:
        importlib.metadata.distribution("paralab-outside-plugin")
    except importlib.metadata.PackageNotFoundError:
        if os.environ.get("PARALAB_OUTSIDE_PLUGIN") == "1":
            pytest.fail("PARALAB_OUTSIDE_PLUGIN=1 but paralab-outside-plugin is not installed")
        pytest.skip("tests/outside_plugin is not installed (.ci/run installs it: pip install ./tests/outside_plugin)")


def test_the_outside_plugins_run_in_ddp_rank_processes():
    """The outside package's codec and allreduce algorithm, found through entry points alone, train a real DDP
    job: its sign codec on its allreduce's gathers (1 bit per value on the wire), fp32 warm-up steps raw."""
    _outside_plugin()
    from lab.experiments import ALGORITHMS, codec_names, op_catalog

    assert "naive" in ALGORITHMS and "signscale" in codec_names() and "naive" in set(op_catalog("all_gather").name)
    r = runner.invoke(app, ["train", "--mode", "ddp", "-p", "2", "--hidden", "16", "--epochs", "0.3", "--timeout",
                            "240", "--algorithm", "naive", "--codec", "signscale", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["config"]["algorithm"] == "naive" and d["summary"]["steps"] >= 3
    assert 0 < d["summary"]["bytes_ratio_compressed"] < 0.25  # 1-bit weights; biases (< 1024 values) in fp32


def test_the_outside_all_gather_runs_inside_fsdp2():
    """The outside package's all-gather moves FSDP2's weights: the same training, step for step, as FSDP2 on
    the process group's own all-gather in the same run, and its bytes."""
    _outside_plugin()
    r = runner.invoke(app, ["train", "--mode", "fsdp", "-p", "2", "--hidden", "32", "--train-limit", "256",
                            "--epochs", "1.5", "--timeout", "240", "--all-gather", "naive", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["config"]["all_gather"] == "naive"
    curves = {}
    for p in d["curve"]:
        curves.setdefault(p["variant"], []).append((p["step"], p["test_loss"]))
    runs = {x["variant"]: x for x in d["runs"]}
    assert len(curves["FSDP2 fp32 ag=naive"]) >= 2 and curves["FSDP2 fp32 ag=naive"] == curves["FSDP2 fp32"]
    assert runs["FSDP2 fp32 ag=naive"]["bytes_per_step"] == runs["FSDP2 fp32"]["bytes_per_step"]


def test_pays_prices_an_algorithm_without_a_codec_model_without_codecs():
    """`Algorithm.codec_counts` is optional: a plugin that declares none is priced for the raw baseline and left
    out of the codec rows that need it, never taking `pays` down."""
    from dataclasses import replace

    from lab.comm.algorithms import get_algorithm, register, unregister

    from echo_ring import reduce

    register(replace(get_algorithm("ring"), name="uncounted_ring", reduce=reduce, module="", codec_counts=None,
                     cluster_time=None))
    try:
        r = runner.invoke(app, ["pays", "--cluster", "2x8", "--codecs", "int8,onebit", "--json"])
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)["algorithms"]  # one row per codec x algorithm priced
        mine = {(row["codec"], row["algorithm"]) for row in rows if row["algorithm"] == "uncounted_ring"}
        assert ("bf16", "uncounted_ring") in mine and ("int8", "uncounted_ring") not in mine
    finally:
        unregister("uncounted_ring")
