"""The kernels' report card (lab.codecs.kernel_card, `paralab kernels report`): the occupancy rules on cases
worked by hand, a traffic model for every kernel, the committed card consistent with its own numbers and, where
nvcc is installed, with a fresh ptxas run."""
from __future__ import annotations

import json
import subprocess

import pytest
from typer.testing import CliRunner

from cuda_emu import compile_cache, harness
from lab.cli import app
from lab.codecs import kernel_card as K
from lab.codecs import ptxas
from lab.codecs.occupancy import occupancy
from lab.experiments.kernel_report import CARD

runner = CliRunner()
COMMITTED = json.loads(CARD.read_text())


@pytest.mark.parametrize("arch,threads,regs,smem,ctas,share,limit", [
    ("sm_90", 256, 32, 1024, 8, 1.0, "warps"),          # 8 warps x 8 CTAs = 64 warps
    ("sm_90", 256, 64, 1024, 4, 0.5, "registers"),      # 64 x 32 = 2048 registers a warp: 32 warps
    ("sm_90", 256, 46, 1024, 5, 0.625, "registers"),    # 46 x 32 = 1472 -> 1536 a warp: 42 -> 40 warps
    ("sm_80", 1024, 40, 20000, 1, 0.5, "registers"),    # 1280 a warp: 51 -> 48 warps, one CTA of 32
    ("sm_90", 128, 255, 0, 2, 0.125, "registers"),      # 8192 a warp: 8 warps
    ("sm_80", 64, 16, 40 * 1024, 4, 0.125, "shared memory"),  # 41 KiB a CTA (1 KiB reserved) in 164 KiB
    ("sm_100", 32, 16, 0, 32, 0.5, "ctas"),              # 32 CTAs of one warp
])
def test_occupancy_follows_cudas_rules(arch, threads, regs, smem, ctas, share, limit) -> None:
    o = occupancy(arch, threads, regs, smem)
    assert (o["ctas_per_sm"], o["occupancy"], o["limited_by"]) == (ctas, share, limit)


def test_occupancy_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="arch='sm_75'; allowed"):
        occupancy("sm_75", 256, 32, 0)
    with pytest.raises(ValueError, match="threads=2048"):
        occupancy("sm_90", 2048, 32, 0)


def test_every_kernel_has_a_traffic_model_and_a_plan() -> None:
    kernels = {k for name in K.MODULES for k in harness.module(name).kernels}
    assert set(K.launch_threads()) == kernels and len(kernels) == 38
    assert K.bytes_per_value("encode_block_f32_lut")[0] == 4 + 1 + 4 / K.BLOCK
    assert K.bytes_per_value("nvfp4_encode_bf16")[0] == 2 + 0.5 + 1 / 16
    assert K.bytes_per_value("decode_sum")[0] == K.PAYLOADS * (1 + 4 / K.BLOCK) + 4
    with pytest.raises(ValueError, match="no traffic model"):
        K.bytes_per_value("new_kernel")


def test_committed_card_covers_every_kernel_and_is_consistent() -> None:
    """Every kernel on every architecture; occupancy recomputed from the card's own ptxas numbers and the
    launchers' CTA sizes; the memory roof's times are bytes / bandwidth, so B200 is 8000/3350 = 2.39x H100."""
    assert {"sm_80", "sm_90"} <= set(COMMITTED["archs"]) and COMMITTED["nvcc"].startswith("Cuda compilation tools")
    threads = K.launch_threads()
    rows = {(r["kernel"], r["arch"]): r for r in COMMITTED["rows"]}
    assert set(rows) == {(k, a) for k in threads for a in COMMITTED["archs"]}
    for (kernel, arch), r in rows.items():
        assert r["threads"] == sorted(threads[kernel])
        assert r["occupancy"] == {str(t): occupancy(arch, t, r["registers"], r["shared_bytes"]) for t in r["threads"]}
        assert r["bytes_per_value"] == K.bytes_per_value(kernel)[0]
        for gpu in K.GPUS:
            if gpu.arch == arch:
                assert r["predicted"][gpu.name]["ns_per_value"] == pytest.approx(r["bytes_per_value"] / gpu.hbm_GBps)
    h100 = rows[("encode_block_f32_lut", "sm_90")]["predicted"]["H100"]["ns_per_value"]
    assert rows[("encode_block_f32_lut", "sm_100")]["predicted"]["B200"]["ns_per_value"] == pytest.approx(h100 / 2.388,
                                                                                                           rel=1e-3)


@pytest.mark.skipif(ptxas.nvcc() is None, reason="nvcc is not on the PATH: the committed card is not re-checked")
def test_committed_card_matches_a_fresh_ptxas_run() -> None:
    """ptxas run again on today's sources gives the committed registers, spills, shared and local memory (the
    reports are kept in cuda_emu.compile_cache under the source, arch and nvcc version, as ccache would)."""
    version = ptxas.nvcc_version()
    if version != COMMITTED["nvcc"]:
        pytest.skip(f"the card was made by {COMMITTED['nvcc']!r}, this nvcc is {version!r}")
    fresh = {}
    for arch in COMMITTED["archs"]:
        fresh[arch] = {}
        for name in K.MODULES:
            def make(out, name=name, arch=arch) -> None:
                out.write_text(ptxas.ptxas_text(name, arch))
            from lab.backend import kernel_source
            text = compile_cache.cached(f"{name}-{arch}.ptxas.txt", make, kernel_source(name), arch, version,
                                        " ".join(ptxas.NVCC_OPTIONS)).read_text()
            fresh[arch].update(ptxas.parse(text))
    keys = ("registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes")
    got = {(k, a): tuple(r[x] for x in keys) for a, ks in fresh.items() for k, r in ks.items()}
    want = {(r["kernel"], r["arch"]): tuple(r[x] for x in keys) for r in COMMITTED["rows"]}
    assert got == want, "ptxas differs from bench/results/kernel_report_card.json: run `paralab kernels report --fresh --out bench/results/kernel_report_card.json`"


def test_cli_prints_the_card_and_rejects_an_unknown_arch() -> None:
    out = runner.invoke(app, ["kernels", "report", "--arch", "sm_90", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["command"] == "kernels report" and {r["arch"] for r in d["rows"]} == {"sm_90"} and len(d["rows"]) == 38
    table = runner.invoke(app, ["kernels", "report"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "decode_sum" in table.output and "B200 ps/value" in table.output
    bad = runner.invoke(app, ["kernels", "report", "--arch", "sm_75"])
    assert bad.exit_code == 2 and "the card has: sm_80, sm_90" in bad.output
