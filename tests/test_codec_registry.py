"""The codec registry (docs/design.md rule 6): one module registers a codec and every entry point finds it; one
spec-string parser; flags that agree with the codecs; no hard-coded codec lists in the UIs."""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lab.codecs.wire import WireFormat
from lab.codecs import (CodecInfo, ErrorFeedback, codec_infos, codec_names, format_spec, parse_spec,
                        unregister)
from lazy_import import lazy

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

tables = lazy("static_table", "tables")  # pandas: loaded by the first test that reads a table

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
"""A user's own codec: sign times the mean magnitude, as one module."""
import os

import torch
from lab.codecs import Codec, CodecInfo, Encoded, OptionSpec, register
from lab.codecs.base import prepare


class MeanSign(Codec):
    name = "meansign"
    requantize = True

    def __init__(self, *, gain: float = 1.0, nonfinite: str = "raise") -> None:
        self.gain, self.nonfinite = gain, nonfinite

    def encode(self, x):
        flat = prepare(x, self.nonfinite).float()
        mean = flat.abs().mean().reshape(1) if flat.numel() else flat.new_zeros(1)
        if os.environ.get("MEANSIGN_LOG"):  # the plugin's own counter, readable across processes
            with open(os.environ["MEANSIGN_LOG"], "a") as f:
                f.write(f"{flat.numel()}\\n")
        return Encoded(self.name, x.shape, x.dtype, {"signs": (flat >= 0).to(torch.uint8), "mean": mean * self.gain},
                       flat.numel() + 4)

    def decode(self, enc):
        s = enc.tensors["signs"].float() * 2 - 1
        return (s * enc.tensors["mean"]).to(enc.dtype).view(enc.shape)


BUILT = []  # the options of every MeanSign built (tests see which spec reached a run)


def build(**kw):
    BUILT.append(dict(kw))
    return MeanSign(**kw)


register(CodecInfo("meansign", "sign times the mean magnitude (test plugin)", build,
                   (OptionSpec("gain", float, 1.0, range=(0.0, 10.0), help="scale of the mean"),
                    OptionSpec("nonfinite", str, "raise", ("raise", "saturate")))))
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    pkg = tmp_path / "myplugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "meansign.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    importlib.import_module("myplugins.meansign")
    yield "meansign"
    unregister("meansign")
    for m in ("myplugins.meansign", "myplugins"):
        sys.modules.pop(m, None)


def test_spec_strings_parse_and_round_trip():
    c = parse_spec("dynamic_tree:rounding=paper,block_size=4096")
    assert (c.rounding, c.block_size) == ("paper", 4096)
    ef = parse_spec("ef:onebit")
    assert isinstance(ef, ErrorFeedback) and ef.codec.name == "onebit"
    assert parse_spec("topk:ratio=0.01").ratio == 0.01
    assert parse_spec("ef:topk:k=3").codec.k == 3
    spec = format_spec("dynamic_tree", {"rounding": "paper", "block_size": 4096, "scale": "absmax"})
    assert spec == "dynamic_tree:rounding=paper,block_size=4096"
    assert parse_spec(spec).describe() == c.describe()
    assert format_spec("onebit", {}, error_feedback=True) == "ef:onebit"


@pytest.mark.parametrize("spec, word", [("dynamic-tree", "known codecs"), ("topk:ratio=2", "ratio"),
                                        ("dynamic_tree:colour=1", "colour"), ("qsgd:levels=x", "levels"),
                                        ("linear:block_size", "option=value"), ("", "names"),
                                        ("dynamic_tree:rounding=up", "nearest, paper")])
def test_bad_specs_name_what_is_wrong(spec, word):
    with pytest.raises(ValueError, match=word):
        parse_spec(spec)


def test_flags_agree_with_the_codecs():
    for info in codec_infos():
        c = parse_spec(info.name)
        assert info.summable == c.summable, info.name
        assert info.phased == bool(c.phases), info.name
        assert info.gather_only == (not c.requantize and not c.phases), info.name
        assert info.stochastic == c.stochastic, info.name
        for o in info.options:  # every declared default is accepted by the codec
            info.build(**{o.name: o.default})


def test_encode_as_is_every_codecs_signature():
    x = torch.randn(64)
    for name in ("dynamic_tree", "onebit"):
        plain, ef = parse_spec(name), parse_spec(f"ef:{name}")
        assert torch.equal(plain.decode(plain.encode_as(x, "w")), plain.roundtrip(x))
        enc = ef.encode_as(x, "w")
        assert torch.allclose(ef.residual("w") + ef.decode(enc).float(), x, atol=1e-6)
        assert WireFormat.of(ef, 64).nbytes == WireFormat.of(plain, 64).nbytes


def test_plugin_codec_reaches_every_entry_point(plugin):
    from typer.testing import CliRunner

    from lab.cli import app
    from lab.comm import allreduce
    from lab.comm.sim import simulate
    from lab.experiments import codec_catalog
    from lab.plan import codec_advice

    assert plugin in codec_names() and plugin in [c.name for c in codec_catalog()]
    assert parse_spec("meansign:gain=2").gain == 2.0
    # CLI
    r = CliRunner().invoke(app, ["codecs", "--json"])
    assert r.exit_code == 0 and "meansign" in r.output
    r = CliRunner().invoke(app, ["errors", "--codec", "meansign:gain=1.5", "--samples", "1000", "--json"])
    assert r.exit_code == 0, r.output
    assert "meansign" in r.output
    # allreduce on SimComm, requantize (decode-add-encode per hop) and gather (with error feedback)
    for codec, mode in (("meansign", "requantize"), ("ef:meansign", "gather")):
        outs = simulate(lambda comm: allreduce(comm, torch.ones(256) * (comm.rank + 1), codec=codec, mode=mode), 4)
        assert all(torch.allclose(o, torch.full((256,), 10.0), rtol=1e-5) for o in outs), (codec, mode)
    # the planner's advice
    df = codec_advice("alexnet", 8, candidates=("none", "meansign"))
    assert "meansign_ms" in df.columns and df["meansign_ms"].notna().all()
    assert "meansign_ms" in codec_advice("alexnet", 8, candidates="all").columns


def test_plugin_codec_reaches_the_ddp_hook(plugin):
    import torch.distributed as dist

    from lab.train.ddp_hook import CodecHookState

    state = CodecHookState.of("ef:meansign", start_iter=0)
    assert state.codec.stateful and state.codec.payload_codec.name == "meansign"
    state = CodecHookState.of("meansign:gain=1", error_feedback=True)
    assert state.codec.stateful
    assert dist.is_available()


def test_plugin_codec_is_the_hook_of_a_two_rank_ddp_run(plugin, tmp_path, monkeypatch):
    """A 2-rank Gloo DDP run whose hook codec is the plugin: registered here only, the launcher
    carries its module to the rank processes (lab.plugins; no environment variable), it encodes the gradient buckets (its own log), and the wire carries fewer bytes
    than fp32 (a byte per sign where it compresses; small buckets and the hook's first steps go fp32)."""
    import os

    from lab.train.ddp import train_ddp
    from lab.train.run import TrainConfig

    log = tmp_path / "encodes.txt"
    monkeypatch.delenv("PARALAB_CODECS", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MEANSIGN_LOG", str(log))
    cfg = TrainConfig(codec="meansign:gain=1.5", dataset="digits", hidden=(32, 32), epochs=0.5, batch=64,
                      evals_per_epoch=1)
    r = train_ddp(cfg, 2, timeout=120)
    assert r.summary["compressed_buckets"] > 0
    assert r.summary["bytes_ratio"] < 0.6
    encoded = [int(n) for n in log.read_text().split()]
    assert len(encoded) >= 2 and all(n > 0 for n in encoded)


TAB = {"collectives": {"part": "Error as P grows"}}  # the tab a page's codec choice is in, where it has tabs


@pytest.mark.parametrize("page_name, key", [("codecs", "w_codecs"), ("transfer", "w_codecs"),
                                            ("collectives", "w_err_codecs"), ("training", "w_codecs")])
def test_plugin_codec_in_every_pages_codec_choice(plugin, page_name, key):
    from test_app import page

    at = page(page_name, **TAB.get(page_name, {}))
    assert not at.exception
    assert "meansign" in at.multiselect(key=key).options


@pytest.mark.parametrize("page_name, key, query", [
    ("codecs", "codecs", {"samples": "10000"}), ("transfer", "codecs", {}), ("collectives", "err_codecs", {"err_maxP": "8", "part": "Error as P grows"}),
    ("training", "codecs", {"epochs": "0.25", "workers": "2", "hidden": "32"})])
def test_plugin_codec_options_are_widgets_and_reach_the_run(plugin, page_name, key, query):
    """The plugin's option (gain, float in [0, 10]) is a number input drawn from its OptionSpec, its
    URL value reaches the run as a spec string, and a value out of range is a message that names the
    value used instead (ui.number)."""
    from test_app import finish, page

    BUILT = sys.modules["myplugins.meansign"].BUILT
    opened = {"more": "true"} if page_name == "codecs" else {f"{key}.options": "true"}  # where its options fold
    at = page(page_name, **{key: ["meansign"], f"{key}.meansign.gain": "2.5"}, **query, **opened)
    assert not at.exception
    gain = at.number_input(key=f"w_{key}.meansign.gain")
    assert gain.value == 2.5 and "scale of the mean" in gain.help and "[0.0, 10.0]" in gain.help
    assert at.selectbox(key=f"w_{key}.meansign.nonfinite").options == ["raise", "saturate"]
    if page_name == "training":
        # the default view's one real step (what each run puts on the wire) already builds it with the option
        assert {"gain": 2.5} in [{k: v for k, v in b.items() if k == "gain"} for b in BUILT]
        BUILT.clear()
        at.button(key="run_train_run").click().run()
        finish(at, lambda a: bool(a.exception) or bool(a.error)
               or any("Final test error per run" in c.value for c in a.caption), timeout=240)
        assert not at.exception and not at.error
        assert any("meansign:gain=2.5" in d.astype(str).to_string() for d in tables(at))
    assert {"gain": 2.5} in [{k: v for k, v in b.items() if k == "gain"} for b in BUILT]
    BUILT.clear()
    gain.set_value(20.0).run()
    assert not at.exception
    # said under the field, with the value the page computes with instead (the nearest allowed one)
    assert any("gain" in e.value and "10" in e.value and "Computing with 10" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert all(b.get("gain", 0) <= 10 for b in BUILT)  # never run with the refused value


def test_codec_option_widgets_cover_every_option_kind():
    """bool -> checkbox, choices -> selectbox, a number that may be None -> a 'default' checkbox."""
    from test_app import page

    at = page("codecs", codecs=["randomk", "dynamic_tree"], block="256", more="true", guess="skip")
    assert not at.exception
    assert at.checkbox(key="w_codecs.randomk.unbiased").value is False
    assert at.checkbox(key="w_codecs.randomk.ratio.default").value is True
    at.checkbox(key="w_codecs.randomk.ratio.default").uncheck().run()
    assert not at.exception
    at.number_input(key="w_codecs.randomk.ratio").set_value(0.25).run()
    assert not at.exception
    assert any("randomk" in c for c in tables(at)[0].Codec)
    keys = {w.key for w in at.selectbox}
    assert "w_codecs.dynamic_tree.search" in keys
    assert "w_codecs.dynamic_tree.rounding" not in keys  # the page's Table 1 rounding sets it
    assert at.query_params["codecs.randomk.ratio"] in ("0.25", ["0.25"])


def test_no_codec_name_lists_outside_the_registry():
    """Module-level lists/tuples of codec names in the UIs and experiments: the registry is the list."""
    names = set(codec_names())
    bad = []
    # experiment designs that name their contestants: the paper's Table 1 (its four types and figures) and the
    # block-scaling lesson (the paper's per-tensor types against MX/NVFP4 at the same bits per value), the race's
    # lessons (the pairs they compare; every registered codec can still join: race_live_specs)
    allowed = {ROOT / "lab" / "experiments" / "codec_table1.py", ROOT / "lab" / "experiments" / "errors.py",
               ROOT / "lab" / "experiments" / "race.py"}
    files = [*(ROOT / "app").rglob("*.py"), *(ROOT / "lab" / "experiments").rglob("*.py"),
             *(ROOT / "notebooks").rglob("*.ipynb")]
    for f in files:
        if f in allowed:
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.match(r'\s*"?\s*[A-Z_]+\s*[:=][^=]*[\[(]', line):
                found = set(re.findall(r"['\"]([a-z0-9_]+)['\"]", line)) & names
                if len(found) >= 3:
                    bad.append(f"{f.relative_to(ROOT)}:{i}: {sorted(found)}")
    assert not bad, "hard-coded codec lists (read lab.experiments.codec_catalog()):\n" + "\n".join(bad)
