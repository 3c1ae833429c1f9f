"""The codec registry (issue 16): one module registers a codec and every entry point finds it; one
spec-string parser; flags that agree with the codecs; no hard-coded codec lists in the UIs."""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lab.codecs import (CodecInfo, ErrorFeedback, codec_infos, codec_names, format_spec, parse_spec,
                        unregister)

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
"""A user's own codec: sign times the mean magnitude, as one module."""
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
        return Encoded(self.name, x.shape, x.dtype, {"signs": (flat >= 0).to(torch.uint8), "mean": mean * self.gain},
                       flat.numel() + 4)

    def decode(self, enc):
        s = enc.tensors["signs"].float() * 2 - 1
        return (s * enc.tensors["mean"]).to(enc.dtype).view(enc.shape)


register(CodecInfo("meansign", "sign times the mean magnitude (test plugin)", lambda **kw: MeanSign(**kw),
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
        assert info.gather_only == (not c.requantize), info.name
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
        assert ef.wire_format(64).nbytes == plain.wire_format(64).nbytes


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


@pytest.mark.parametrize("page_name, key", [("codecs", "w_codecs"), ("transfer", "w_codecs"),
                                            ("collectives", "w_err_codecs"), ("training", "w_codecs")])
def test_plugin_codec_in_every_pages_codec_choice(plugin, page_name, key):
    from test_app import page

    at = page(page_name)
    assert not at.exception
    assert "meansign" in at.multiselect(key=key).options


def test_no_codec_name_lists_outside_the_registry():
    """Module-level lists/tuples of codec names in the UIs and experiments: the registry is the list."""
    names = set(codec_names())
    bad = []
    allowed = {ROOT / "lab" / "experiments" / "codec_table1.py"}  # the paper's Table 1: its four types and figures
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
