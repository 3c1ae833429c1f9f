"""Committed benchmark results (bench/results/*.json) that name their command match that command's JSON
schema (docs/schemas/<command>.schema.json), so what the docs quote is what the tools write."""
import json
from pathlib import Path

import pytest
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

REPO = Path(__file__).resolve().parents[1]


def _results() -> list[tuple[Path, Path]]:
    out = []
    for p in sorted((REPO / "bench" / "results").glob("*.json")):
        doc = json.loads(p.read_text())
        cmd = doc.get("command") if isinstance(doc, dict) else None
        schema = REPO / "docs" / "schemas" / f"{str(cmd).replace(' ', '-')}.schema.json"
        if cmd and schema.exists():
            out.append((p, schema))
    return out


@pytest.mark.parametrize("result,schema", _results(), ids=lambda p: p.name)
def test_committed_result_matches_its_commands_schema(result: Path, schema: Path) -> None:
    jsonschema.validate(json.loads(result.read_text()), json.loads(schema.read_text()))


def test_the_two_level_results_carry_their_calibration() -> None:
    names = {p.name for p, _ in _results()}
    for name in ("compressed-cpu-P4-hierarchical-shaped-1gbit.json",
                 "compressed-cpu-P4-hierarchical-shaped-1gbit-pipeline4.json"):
        assert name in names
        doc = json.loads((REPO / "bench" / "results" / name).read_text())
        assert doc["calibration"]["max_abs_model_error"] == max(abs(r["model_error"]) for r in doc["rows"])


# The speed claims the tests no longer time (timing them in the suite was slow and noisy): measured by the benchmarks, as ratios against a
# baseline of the same run, and held here in the committed results.

def test_row_and_tile_dropout_epochs_are_faster_than_conventional() -> None:
    """`paralab dropout mlp` (Song et al. Table I): RDP and TDP epochs beat conventional dropout's at every rate."""
    table = json.loads((REPO / "bench" / "results" / "dropout-mlp-cpu.json").read_text())["table"]
    patterns = [r for r in table if r["kind"] in ("row", "tile")]
    assert len(patterns) >= 2 and all(r["speedup"] > 1.2 for r in patterns), [
        (r["rates"], r["kind"], r["speedup"]) for r in patterns]


def test_eight_bits_beat_fp32_over_a_shaped_link() -> None:
    """`paralab bench compressed --link-rate 1gbit` on two ranks: 8-bit codecs on the wire beat fp32's allreduce by
    well over 2x on a bandwidth-bound link (Dettmers 2016 §3.3); the test_dist test checks the bytes only."""
    rows = json.loads((REPO / "bench" / "results" / "compressed-cpu-P2-shaped-1gbit.json").read_text())["rows"]
    eight = [r for r in rows if r["codec"].split("[")[0] in ("dynamic_tree", "linear") and r.get("overlap", True)]
    assert eight and all(r["speedup_vs_fp32"] > 2.5 for r in eight), [(r["codec"], r["speedup_vs_fp32"]) for r in rows]


@pytest.mark.parametrize("procs,goal", [(2, 3.0), (4, 2.5)])
def test_the_codec_rides_under_the_wire(procs: int, goal: float) -> None:
    """The compressed allreduce's goals, `paralab bench compressed --values 16M --link-rate 1gbit --baseline` alone on 2 cores: the
    dynamic tree beats fp32 by `goal` and fp16 outright with chunk pipelining on; off (the same messages, codec work
    not under the wire) it is slower; the MX and NVFP4 codecs ride in the same table."""
    rows = json.loads((REPO / "bench" / "results" / f"compressed-cpu-P{procs}-shaped-1gbit.json").read_text())["rows"]
    on = {r["codec"].split("[")[0]: r for r in rows if r.get("overlap")}
    off = {r["codec"].split("[")[0]: r for r in rows if r.get("overlap") is False}
    assert on["dynamic_tree"]["speedup_vs_fp32"] >= goal
    assert on["dynamic_tree"]["seconds"] < on["fp16"]["seconds"]
    assert off["dynamic_tree"]["seconds"] > on["dynamic_tree"]["seconds"]
    assert {"mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"} <= on.keys() & off.keys()


def test_the_eight_bit_ring_holds_on_avx2() -> None:
    """The goal on a CPU without AVX-512: `ATEN_CPU_CAPABILITY=avx2 paralab bench compressed --procs 4 --values 16M
    --link-rate 1gbit --codecs dynamic_tree,fp16`, three runs alone on 2 cores: the median dynamic tree ring is >= 2.5x
    fp32 and faster than fp16, with the error it has on AVX-512 (the same codes), and every file says AVX2."""
    def rows(run: str) -> tuple[dict, dict[str, dict]]:
        doc = json.loads((REPO / "bench" / "results" / f"compressed-cpu-P4-shaped-1gbit-{run}.json").read_text())
        return doc, {r["codec"].split("[")[0]: r for r in doc["rows"]}
    runs = [rows(f"avx2-{r}") for r in "abc"]
    assert all(doc["versions"]["vector_isa"] == "AVX2" and doc["procs"] == 4 for doc, _ in runs)
    speedups = sorted(r["dynamic_tree"]["speedup_vs_fp32"] for _, r in runs)
    assert speedups[1] >= 2.5, speedups
    assert all(r["dynamic_tree"]["seconds"] < r["fp16"]["seconds"] for _, r in runs)
    avx512 = rows("avx512")
    assert avx512[0]["versions"]["vector_isa"] == "AVX512"
    assert all(r["dynamic_tree"]["rel_error"] == pytest.approx(avx512[1]["dynamic_tree"]["rel_error"], rel=1e-6)
               for _, r in runs)


@pytest.mark.parametrize("name", ["h4096-cpu", "h4096-dynamic_tree-cpu", "h4096-dynamic_tree-cpu-rerun"])
def test_eight_bit_fsdp_is_twice_as_fast_as_fp32_fsdp(name: str) -> None:
    """The 8-bit FSDP goal, `paralab train --mode fsdp --procs 4 --ranks-per-node 2 --link-rate 1gbit --hidden 4096,4096`
    alone on 2 cores: 8-bit weights and gradients (MXFP8, the dynamic tree) on FSDP2's all-gathers and
    reduce-scatters step at least 2x as fast as fp32 FSDP2 in the same command, with a quarter of its bytes and
    the test loss within 2 % after the same steps (docs/fsdp.md)."""
    s = json.loads((REPO / "bench" / "results" / f"train-fsdp4-2x2-shaped-1gbit-{name}.json").read_text())["summary"]
    assert s["procs"] == 4 and s["ranks_per_node"] == 2 and s["weights_codec"] and s["grads_codec"]
    assert s["speedup"] >= 2.0 and s["bytes_ratio"] <= 0.26, (s["speedup"], s["bytes_ratio"])
    assert s["test_loss_ratio"] <= 1.02 and s["late_test_loss_ratio"] <= 1.02


@pytest.mark.parametrize("run", ["a", "b"])
def test_hierarchical_keeps_two_and_a_half_x_on_huge_pages(run: str) -> None:
    """The hierarchical allreduce's goal, `paralab bench compressed --procs 4 --algorithm hierarchical --ranks-per-node 2
    --intra-codec none --link-rate 1gbit`, alone on 2 cores: with the rank processes' tensors on transparent huge
    pages (lab.comm.launch) the dynamic tree across nodes is >= 2.5x its fp32, per tensor and in blocks, and each
    call is faster than the same command with 4 kB pages (THP_MEM_ALLOC_ENABLE=0) run beside it, the same hour."""
    def rows(pages: str) -> dict[str, dict]:
        doc = json.loads((REPO / "bench" / "results" /
                          f"compressed-cpu-P4-hierarchical-shaped-1gbit-{pages}-{run}.json").read_text())
        return {r["codec"]: r for r in doc["rows"] if r["algorithm"] == "hierarchical"}
    huge, small = rows("hugepages"), rows("4kpages")
    for codec in ("dynamic_tree[nearest,tensor]", "dynamic_tree[nearest,block4096]"):
        assert huge[codec]["speedup_vs_fp32"] >= 2.5, (codec, huge[codec]["speedup_vs_fp32"])
        assert huge[codec]["seconds"] < small[codec]["seconds"], codec
    assert huge["fp32"]["seconds"] < small["fp32"]["seconds"]
