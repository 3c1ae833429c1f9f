"""Codecs and algorithms are found by one mechanism (lab/plugins.py): a
module dropped into the package, an entry point of an installed distribution, and a plugin
registered at run time, which reaches real rank processes; registering writes nothing to the
environment; a codec's flags are declared once, in its class."""
from __future__ import annotations

import importlib
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import lab.codecs
import lab.comm.algorithms
from lab import plugins
from lab.codecs import CodecInfo, codec_info, codec_names, register, unregister
from lab.comm.algorithms import algorithm_names, get_algorithm
from lab.comm.algorithms import unregister as unregister_algorithm

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

ALGO = '''
"""A plugin allreduce: the ring's, under its own name (test plugin)."""
from lab.comm.algorithms import Algorithm
from lab.comm.algorithms import ring


def reduce(comm, buf, ch):
    ring.ALGORITHM.reduce(comm, buf, ch)


ALGORITHM = Algorithm(name="{name}", summary="the ring, as a plugin", citation="test plugin", reduce=reduce,
                      coefficients=ring.ALGORITHM.coefficients, total_bytes=ring.ALGORITHM.total_bytes,
                      order=900)
'''

CODEC = '''
"""A plugin codec: an fp16 cast under its own name (test plugin)."""
from lab.codecs import CastCodec, CodecInfo, register


def build(**kw):
    return CastCodec("fp16", **kw)


INFO = CodecInfo("{name}", "fp16 cast (test plugin)", build)
{register}
'''


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _forget_modules(prefix: str) -> None:
    for m in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[m]


def test_a_module_dropped_into_the_package_is_found(tmp_path, monkeypatch):
    """No list to edit: a codec module in lab/codecs/ and an algorithm module in
    lab/comm/algorithms/ are found by the package scan (the test adds a directory to each package's
    path instead of writing into the checkout)."""
    _write(tmp_path / "codecs", {"dropped_codec.py": CODEC.format(name="dropped16", register="register(INFO)")})
    _write(tmp_path / "algorithms", {"dropped_algo.py": ALGO.format(name="dropped_ring")})
    monkeypatch.setattr(lab.codecs, "__path__", [*lab.codecs.__path__, str(tmp_path / "codecs")])
    monkeypatch.setattr(lab.comm.algorithms, "__path__", [*lab.comm.algorithms.__path__, str(tmp_path / "algorithms")])
    try:
        assert "dropped16" in codec_names()
        assert codec_info("dropped16").build().roundtrip(torch.ones(4)).tolist() == [1.0] * 4
        assert "dropped_ring" in algorithm_names()
        assert get_algorithm("dropped_ring").module == "lab.comm.algorithms.dropped_algo"
        assert plugins.carried().get("codecs", []) == []  # built-ins: every process scans them itself
    finally:
        unregister("dropped16")
        lab.comm.algorithms.base.REGISTRY.items.pop("dropped_ring", None)  # a built-in now: unregister refuses
        _forget_modules("lab.codecs.dropped_codec")
        _forget_modules("lab.comm.algorithms.dropped_algo")


def test_entry_point_plugins_are_found(tmp_path, monkeypatch):
    """A third-party distribution declares `paralab.codecs` and `paralab.algorithms` entry points
    (here: a dist-info directory on a temporary sys.path entry, as pip would install it)."""
    _write(tmp_path, {
        "paralab_ep_demo/__init__.py": "",
        "paralab_ep_demo/codec.py": CODEC.format(name="ep16", register=""),  # the entry point names INFO
        "paralab_ep_demo/algo.py": ALGO.format(name="ep_ring"),
        "paralab_ep_demo-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: paralab-ep-demo\nVersion: 0.1\n",
        "paralab_ep_demo-0.1.dist-info/entry_points.txt":
            "[paralab.codecs]\nep16 = paralab_ep_demo.codec:INFO\n\n[paralab.algorithms]\nep_ring = paralab_ep_demo.algo\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "ep16" in codec_names()
        assert codec_info("ep16").summable  # read from its class: CastCodec is summable
        assert "ep_ring" in algorithm_names()
        assert get_algorithm("ep_ring").module == "paralab_ep_demo.algo"
    finally:
        unregister("ep16")
        if "ep_ring" in lab.comm.algorithms.base.REGISTRY.items:
            unregister_algorithm("ep_ring")
        _forget_modules("paralab_ep_demo")


def test_a_bad_entry_point_is_a_message(tmp_path, monkeypatch):
    _write(tmp_path, {
        "paralab_ep_bad/__init__.py": "VALUE = 3\n",
        "paralab_ep_bad-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: paralab-ep-bad\nVersion: 0.1\n",
        "paralab_ep_bad-0.1.dist-info/entry_points.txt": "[paralab.codecs]\nbad = paralab_ep_bad:VALUE\n",
        "paralab_ep_gone-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: paralab-ep-gone\nVersion: 0.1\n",
        "paralab_ep_gone-0.1.dist-info/entry_points.txt": "[paralab.algorithms]\ngone = paralab_ep_gone.algo\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ValueError, match="entry point 'bad' of group 'paralab.codecs' gives an int; allowed"):
            codec_names()
        with pytest.raises(ValueError, match=r"entry point 'gone' of group 'paralab.algorithms' \(paralab_ep_gone.algo\) "
                                             "cannot be loaded: No module named 'paralab_ep_gone'"):
            algorithm_names()
    finally:
        monkeypatch.undo()  # the distributions go away; the next read no longer sees them
        _forget_modules("paralab_ep_bad")
    assert "fp16" in codec_names() and "ring" in algorithm_names()


def _on_rank(comm, codec: str, algorithm: str) -> tuple[bool, bool, list[float]]:
    from lab.comm import allreduce
    from lab.comm.algorithms import algorithm_names as names

    x = torch.arange(6, dtype=torch.float32) + comm.rank
    out = allreduce(comm, x, algorithm=algorithm, codec=codec, mode="requantize")
    return codec in lab.codecs.codec_names(), algorithm in names(), out.tolist()


def test_plugins_registered_in_the_parent_reach_rank_processes(tmp_path, monkeypatch):
    """A codec and an algorithm registered here (not installed, not named in the environment) are
    known on the ranks `lab.comm.launch.run` starts: the launcher carries their modules; the
    registries write nothing to os.environ."""
    from lab.comm.algorithms import ENV, register_module
    from lab.codecs.registry import PLUGINS_ENV
    from lab.comm.launch import run

    _write(tmp_path, {"paralab_carry_demo/__init__.py": "",
                      "paralab_carry_demo/codec.py": CODEC.format(name="carry16", register="register(INFO)"),
                      "paralab_carry_demo/algo.py": ALGO.format(name="carry_ring")})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    importlib.import_module("paralab_carry_demo.codec")
    register_module("paralab_carry_demo.algo")
    try:
        assert ENV not in os.environ and PLUGINS_ENV not in os.environ
        carried = plugins.carried()
        assert "paralab_carry_demo.codec" in carried["codecs"] and "paralab_carry_demo.algo" in carried["algorithms"]
        results = run(_on_rank, 2, "carry16", "carry_ring", timeout=120)
        expected = [2 * v + 1 for v in range(6)]
        for known_codec, known_algorithm, out in results:
            assert known_codec and known_algorithm
            assert out == expected
    finally:
        unregister("carry16")
        unregister_algorithm("carry_ring")
        _forget_modules("paralab_carry_demo")
    assert not any(m.startswith("paralab_carry_demo") for mods in plugins.carried().values() for m in mods)


def test_codec_flags_are_declared_once_in_the_class():
    """The registry entry reads summable / stochastic / phased / gather-only from the codec class;
    it has no second declaration of them to fall out of step."""
    from lab.codecs import Codec

    with pytest.raises(TypeError):
        CodecInfo("twice", "", lambda **kw: None, summable=True)  # type: ignore[call-arg]

    class Gathered(Codec):
        name = "gathered_probe"
        summable, stochastic = True, True

    info = register(CodecInfo("gathered_probe", "flags from the class (test plugin)", lambda **kw: Gathered()))
    try:
        assert (info.summable, info.stochastic, info.phased, info.gather_only) == (True, True, False, True)
    finally:
        unregister("gathered_probe")
    for info in lab.codecs.codec_infos():
        c = info.build()
        assert (info.summable, info.stochastic, info.phased) == (c.summable, c.stochastic, bool(c.phases)), info.name


def test_one_registry_class_serves_every_kind(tmp_path, monkeypatch):
    """Codecs, allreduce algorithms, collectives, converge tasks and parallelisms keep their plugins in one
    `plugins.Registry` (one add,
    accept, register, register_module and remove); a new kind gives only its item class, key and label."""
    from lab.codecs.registry import REGISTRY as codecs
    from lab.comm.algorithms.base import REGISTRY as algorithms
    from lab.comm.collectives.base import REGISTRY as collectives
    from lab.train.parallelism.base import REGISTRY as parallelisms
    from lab.train.tasks.base import REGISTRY as tasks

    kinds = (codecs, algorithms, collectives, tasks, parallelisms)
    assert all(isinstance(r, plugins.Registry) for r in kinds)
    assert [r.kind.group for r in kinds] == [
        "paralab.codecs", "paralab.algorithms", "paralab.collectives", "paralab.tasks", "paralab.parallelisms"]
    assert set(plugins.kinds()) >= {r.kind.name for r in kinds}
    _write(tmp_path, {"paralab_widgets/__init__.py": "",
                      "paralab_widgets/base.py": "from typing import NamedTuple\n\n\nclass Widget(NamedTuple):\n"
                                                 "    name: str\n    module: str\n",
                      "paralab_widgets/one.py": "from .base import Widget\n\nWIDGET = Widget('one', __name__)\n",
                      "paralab_widgets/bad.py": "WIDGET = 3\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from paralab_widgets.base import Widget

        reg = plugins.Registry("widgets_test", "paralab_widgets", "paralab.widgets_test", "PARALAB_WIDGETS_TEST",
                               Widget, attr="WIDGET", key=lambda w: w.name, label=lambda w: f"widget {w.name!r}")
        with pytest.raises(ValueError, match=r"paralab_widgets.bad.WIDGET is an int; it must be a Widget"):
            reg.load()
        (tmp_path / "paralab_widgets/bad.py").write_text("WIDGET = None\n")
        _forget_modules("paralab_widgets.bad")
        reg.load()
        assert list(reg.items) == ["one"]
        with pytest.raises(ValueError, match=r"widget 'one' is already registered \(from paralab_widgets.one\); "
                                             "pass replace=True"):
            reg.register(Widget("one", "elsewhere"))
        with pytest.raises(ValueError, match="register takes a Widget, got str"):
            reg.register("two")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="widget 'one' is built-in and cannot be removed"):
            reg.remove(reg.items["one"])
        two = reg.register(Widget("two", "paralab_widgets_elsewhere"))
        assert plugins.carried()["widgets_test"] == ["paralab_widgets_elsewhere"]
        assert reg.names() == ["one", "two"] and reg.ordered(lambda w: w.name != "one") == [two]
        assert reg.lookup("two", "no widget {key!r}") is two
        with pytest.raises(ValueError, match=r"^no widget 'three' \(of 2\); known: two$"):
            reg.lookup("three", "no widget {key!r} (of {n}); known: {known}", lambda w: w.name == "two", n=2)
        with pytest.raises(ValueError, match=r"^no widget \['x'\]; known: one, two$"):
            reg.lookup(["x"], "no widget {key!r}; known: {known}")
        reg.remove(two)
        assert "widgets_test" not in plugins.carried() and list(reg.items) == ["one"]
        with pytest.raises(ValueError, match="entry point 'x' gives an int; allowed: a module that defines WIDGET"):
            reg.accept(3, "entry point 'x'")
    finally:
        _forget_modules("paralab_widgets")
