"""The kernels' report card (lab.codecs.kernel_card, `paralab kernels report`): the occupancy rules on cases
worked by hand, a traffic model for every kernel, the instruction counts read from a cubin and PTX, the committed
card consistent with its own numbers (the roofline's bound included) and, where nvcc is installed, with a fresh
ptxas run and SASS count."""
from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from cuda_emu import compile_cache, harness
from lab.cli import app
from lab.codecs import kernel_card as K
from lab.codecs import instructions, ptxas
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
    launchers' CTA sizes; the memory roof's times are bytes / bandwidth, so B200's is 8000/3350 = 2.39x H100's;
    the issue roof is instructions / (SMs x 128 x clock), 67 fp32 TFLOP/s / 2 on H100; the slower roof names the
    bound."""
    assert {"sm_80", "sm_90"} <= set(COMMITTED["archs"]) and COMMITTED["nvcc"].startswith("Cuda compilation tools")
    threads = K.launch_threads()
    rows = {(r["kernel"], r["arch"]): r for r in COMMITTED["rows"]}
    assert set(rows) == {(k, a) for k in threads for a in COMMITTED["archs"]}
    gpus = {g["name"]: g for g in COMMITTED["gpus"]}
    assert gpus["H100"]["issue_per_ns"] * 2 == pytest.approx(66_900, rel=0.01)  # the data sheet's 67 TFLOP/s
    for (kernel, arch), r in rows.items():
        assert r["threads"] == sorted(threads[kernel])
        assert r["occupancy"] == {str(t): occupancy(arch, t, r["registers"], r["shared_bytes"]) for t in r["threads"]}
        assert r["bytes_per_value"] == K.bytes_per_value(kernel)[0]
        assert r["values_per_thread"] == K.values_per_thread(kernel)
        assert r["instructions_per_value"] == pytest.approx(r["sass_instructions"] / r["values_per_thread"])
        assert 0 < r["ptx"]["memory"] < r["ptx"]["total"] == r["ptx"]["memory"] + r["ptx"]["control"] + r["ptx"]["arithmetic"]
        for gpu in K.GPUS:
            if gpu.arch == arch:
                p = r["predicted"][gpu.name]
                memory, issue = r["bytes_per_value"] / gpu.hbm_GBps, r["instructions_per_value"] / gpu.issue_per_ns
                assert (p["memory_ns_per_value"], p["issue_ns_per_value"]) == (pytest.approx(memory), pytest.approx(issue))
                assert p["ns_per_value"] == pytest.approx(max(memory, issue))
                assert p["bound"] == ("memory" if memory >= issue else "issue")
    h100 = rows[("encode_block_f32_lut", "sm_90")]["predicted"]["H100"]["memory_ns_per_value"]
    assert rows[("encode_block_f32_lut", "sm_100")]["predicted"]["B200"]["memory_ns_per_value"] == pytest.approx(
        h100 / 2.388, rel=1e-3)


def test_decoders_issue_fewer_instructions_per_value_than_their_encoders() -> None:
    """A decoder is a table lookup and a multiply; its encoder also reduces the absmax and searches the table: on
    every architecture, each decoder issues fewer instructions per value than every encoder of its format and
    dtype, and the plain decoders of the table codecs are memory bound on H100 and H200."""
    rows = {(r["kernel"], r["arch"]): r for r in COMMITTED["rows"]}
    ipv = {k: r["instructions_per_value"] for k, r in rows.items()}
    for arch in COMMITTED["archs"]:
        for dt in ("f32", "f16", "bf16"):
            for mode in ("block", "scale"):
                assert all(ipv[f"decode_{mode}_{dt}", arch] < ipv[f"encode_{mode}_{dt}_{s}", arch] for s in ("lut", "binary"))
            assert all(ipv[f"block_decode_{dt}", arch] < ipv[f"{k}_encode_{dt}", arch] for k in ("mx", "nvfp4"))
            if arch == "sm_90":
                assert {p["bound"] for p in rows[f"decode_block_{dt}", arch]["predicted"].values()} == {"memory"}


def test_instruction_counts_read_from_a_cubin_and_ptx() -> None:
    """A cubin is an ELF file whose .text.<kernel> sections hold 16-byte SASS instructions: the count stops at
    the closing self-branch (BRA) before the NOP padding; PTX instructions are classed by opcode."""
    import struct
    nop, bra, other = (struct.pack("<QQ", op | 0x7000, 0) for op in (0x918, 0x947, 0x210))
    code = other * 5 + bra + nop * 2
    names = b"\0.shstrtab\0.text.k\0"
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    sections = [(0, 0, 0), (1, 64, len(names)), (11, 64 + len(names), len(code))]
    shoff = 64 + len(names) + len(code)
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, len(sections), 1)
    table = b"".join(struct.pack("<IIQQQQIIQQ", n, 1, 0, 0, off, size, 0, 0, 1, 0) for n, off, size in sections)
    assert instructions.sass_counts(bytes(head) + names + code + table) == {"k": 5}
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        instructions.sass_counts(b"PK\x03\x04" + bytes(60))
    ptx = (".visible .entry k(\n .param .u64 k_p\n)\n{\n .reg .b32 %r<3>;\n ld.param.u64 %rd1, [k_p];\n"
           " ld.global.u32 %r1, [%rd1];\n add.s32 %r2, %r1, 1;\n@%p1 bra $L1;\n$L1:\n st.global.u32 [%rd1], %r2;\n"
           " ret;\n}\n")
    assert instructions.ptx_classes(ptx) == {"k": {"total": 6, "memory": 3, "control": 2, "arithmetic": 1}}


@pytest.mark.skipif(ptxas.nvcc() is None, reason="nvcc is not on the PATH: the committed card is not re-checked")
def test_committed_card_matches_a_fresh_ptxas_run() -> None:
    """ptxas run again on today's sources gives the committed registers, spills, shared and local memory, and
    the cubin and PTX the committed instruction counts (kept in cuda_emu.compile_cache under the source, arch and
    nvcc version, as ccache would)."""
    version = ptxas.nvcc_version()
    if version != COMMITTED["nvcc"]:
        pytest.skip(f"the card was made by {COMMITTED['nvcc']!r}, this nvcc is {version!r}")
    from lab.backend import kernel_source
    fresh = {}
    for arch in COMMITTED["archs"]:
        fresh[arch] = {}
        for name in K.MODULES:
            def make(out, name=name, arch=arch) -> None:
                out.write_text(json.dumps(K.module_resources(name, arch)))
            path = compile_cache.cached(f"{name}-{arch}.card.json", make, kernel_source(name), arch, version,
                                        " ".join(ptxas.NVCC_OPTIONS))
            fresh[arch].update(json.loads(path.read_text()))
    keys = ("registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes", "sass_instructions", "ptx")
    got = {(k, a): tuple(r[x] for x in keys) for a, ks in fresh.items() for k, r in ks.items()}
    want = {(r["kernel"], r["arch"]): tuple(r[x] for x in keys) for r in COMMITTED["rows"]}
    assert got == want, "nvcc differs from bench/results/kernel_report_card.json: run `paralab kernels report --fresh --out bench/results/kernel_report_card.json`"


def test_cli_prints_the_card_and_rejects_an_unknown_arch() -> None:
    out = runner.invoke(app, ["kernels", "report", "--arch", "sm_90", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["command"] == "kernels report" and {r["arch"] for r in d["rows"]} == {"sm_90"} and len(d["rows"]) == 38
    table = runner.invoke(app, ["kernels", "report"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "decode_sum" in table.output and "B200 ps/value" in table.output
    assert "H200 bound" in table.output and "instr/value" in table.output
    bad = runner.invoke(app, ["kernels", "report", "--arch", "sm_75"])
    assert bad.exit_code == 2 and "the card has: sm_80, sm_90" in bad.output


@pytest.mark.emu
def test_every_kernel_on_the_card_has_a_call_that_launches_it_alone(cuda_emu) -> None:
    """bench/gpu_all.py times each kernel of the card through lab.codecs.kernel_timing: each call launches its
    kernel and no other, so a kernel added to kernels/*.cu without a call fails here; the per-tensor hop's
    absmax pass, launched by hand, reduces the true |decode(a) + decode(b)| (emulated launches)."""
    from lab.codecs import kernel_timing
    from lab.codecs import cuda as C

    n = 1024
    calls = kernel_timing.kernel_calls(n, "cpu")
    assert set(calls) == set(K.launch_threads())
    words = {}
    for kernel, call in calls.items():
        before = len(cuda_emu.launches)
        words[kernel] = call()
        assert [launch[1] for launch in cuda_emu.launches[before:]] == [kernel]
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    from lab.codecs.registry import get_codec
    from lab.codecs.table_codec import search_tables_on
    codec = get_codec("dynamic_tree")
    t = search_tables_on(codec.table, codec.rounding, "absmax", torch.device("cpu"))
    amax = x.abs().amax().reshape(1)
    a, _ = C.encode_cuda(x, t.bpad, t.lut, t.K, block_size=None, scale=amax)
    b, _ = C.encode_cuda(x.flip(0), t.bpad, t.lut, t.K, block_size=None, scale=amax)
    total = t.values256[a.long()] * amax + t.values256[b.long()] * amax
    assert words["hop_codes_absmax"].item() == total.abs().max().item() > 0
    with pytest.raises(ValueError, match="n=100: a positive multiple of 64"):
        kernel_timing.kernel_calls(100, "cpu")
    from lab.experiments.kernel_report import measured_beside_card
    rows_of = {r["kernel"]: r for r in COMMITTED["rows"] if r["arch"] == "sm_90"}
    fake = {k: {"ns_per_value": 2 * r["predicted"]["H200"]["ns_per_value"], "low": 0.0, "high": 1.0}
            for k, r in rows_of.items()}
    beside = measured_beside_card(fake, COMMITTED, "NVIDIA H200", "sm_90")
    assert beside["gpu"] == "H200" and len(beside["rows"]) == len(rows_of)
    assert {round(r["measured_over_predicted"], 9) for r in beside["rows"]} == {2.0}
    assert measured_beside_card(fake, COMMITTED, "NVIDIA A100-SXM4-80GB", "sm_80")["rows"][0].keys() == {
        "kernel", "family", "measured_ps", "fastest_ps", "slowest_ps"}


def test_gpu_all_plans_every_gpu_benchmark_within_ten_minutes(capsys) -> None:
    """`python bench/gpu_all.py --dry-run`: the gpu tests, every `paralab bench` command with an option that speaks
    of a GPU (CUDA, a GPU, NCCL as a backend: read from the CLI here, so a new GPU benchmark cannot be left out)
    in its GPU mode, and the kernels measured beside the card; budgets that sum to 10 minutes at most, outputs
    named *-gpu.json that docs/generate.py summarises."""
    import re
    import sys
    from pathlib import Path

    import typer.main

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "bench"))
    import gpu_all
    assert gpu_all.main(["--dry-run", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    steps = {s["name"]: s for s in got["steps"]}
    speaks = re.compile(r"\b(cuda|gpu)\b|\bnccl\b(?!-tests)", re.I)
    bench = typer.main.get_group(app).commands["bench"]
    gpu_benches = {n for n, c in bench.commands.items() if any(speaks.search(p.help or "") for p in c.params
                                                                 if hasattr(p, "help"))}
    assert {"codecs", "dropout", "augment", "transfer", "collectives"} <= gpu_benches
    assert gpu_benches | {"env", "tests", "kernels"} == set(steps)
    assert steps["tests"]["command"][2:5] == ["pytest", "-m", "gpu"]
    assert "--device" in steps["codecs"]["command"] and "cuda" in steps["codecs"]["command"]
    assert "--pcie" in steps["transfer"]["command"] and "nccl" in steps["collectives"]["command"]
    assert steps["kernels"]["command"][2] == "--measure-kernels" and gpu_all.measure_kernels
    assert sum(s["budget_s"] for s in got["steps"]) <= 600 == got["limit_s"]
    assert all(s["writes"].endswith("-gpu.json") for n, s in steps.items() if n not in ("env", "tests"))
    sys.path.insert(0, str(root / "docs"))
    import generate
    rows = [{"kernel": "decode_sum", "measured_over_predicted": 1.5}, {"kernel": "nvfp4_encode_f32",
                                                                       "measured_over_predicted": 3.0}]
    said = generate._headline("kernels measure", {"device": "NVIDIA H200", "rows": rows})
    assert said == "2 kernels on NVIDIA H200: measured / predicted median 3.00x (1.50x-3.00x), 1 within 2x of the card"
    log = {"benchmark": "gpu_all", "steps": [{"status": "ok"}, {"status": "timed out"}, {"status": "skipped"}],
           "tests": {"passed": 40, "failures": 1, "errors": 0}}
    assert generate._kind("gpu_all-nvidia-h200-gpu", log) == "gpu_all"
    assert generate._headline("gpu_all", log) == ("3 steps: 1 ok, 1 failed or timed out, 1 skipped; gpu tests 40 "
                                                  "passed, 1 failed")
