"""The `paralab` CLI: one result shape (checked against docs/schemas/), nccl-tests' flags, torchrun's
parser and 2-rank torchrun runs, plain progress off a terminal, Ctrl-C keeping finished rows, no
third-party noise, --version and shell completion. Small sizes throughout: the file must stay quick."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.main import get_command
from typer.testing import CliRunner

from lab.cli import TORCHRUN_COMMANDS, app
from lazy_import import lazy

jsonschema = lazy("jsonschema")  # loaded by the first test that validates, not at collection

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "docs" / "schemas"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}

# smoke arguments of every command that produces a result (--json / --out are added by the tests)
SMOKE = {
    "table1": ["table1", "--samples", "2000"],
    "errors": ["errors", "--codec", "qsgd", "--codec", "linear", "--dist", "normal(0,1)", "--samples", "1000"],
    "codecs": ["codecs"],
    "scale": ["scale", "--codec", "linear", "--algorithm", "ring", "--ranks", "2,4", "--values", "64"],
    "train": ["train", "--hidden", "16", "--dropout", "0,0", "--epochs", "0.2", "--train-limit", "256",
              "--evals", "1"],
    "plan": ["plan", "--gpus", "1,2", "--strategy", "data,pipeline", "--layers", "--advice"],
    "pays": ["pays", "--cluster", "2x4", "--codecs", "mxfp4_e2m1,dynamic_tree"],
    "trace": ["trace", "--algorithm", "ring", "-P", "4", "--codec", "dynamic_tree", "--values", "24"],
    "converge": ["converge", "--hidden", "16", "--train-limit", "256", "--steps", "10", "--eval-every", "5",
                 "--seeds", "2", "-k", "2", "--batch", "16", "--budget", "1", "--tolerance", "0.9"],
    "race": ["race", "--task", "mlp", "--cluster", "2x8", "--codecs", "dynamic_tree,ef:randomk:ratio=0.01"],
    "augment": ["augment"],
    "operators": ["operators", "-n", "2", "--c-in", "3", "--c-out", "4", "--height", "6", "--width", "6",
                  "--splits", "1,2", "--repeats", "3"],
    "kernels report": ["kernels", "report"],
    "fusion": ["fusion", "--dataset", "digits", "--epochs", "1", "--train-size", "100", "--test-size", "50",
               "--scales", "8,12"],
    "bench codecs": ["bench", "codecs", "-b", "4K", "-e", "4K", "--repeats", "1", "--device", "cpu"],
    "bench transfer": ["bench", "transfer", "-b", "4K", "-e", "4K", "--codecs", "linear", "--target-s", "0.01"],
    "bench compressed": ["bench", "compressed", "-p", "2", "--values", "1K", "--codecs", "linear",
                         "--target-s", "0.01", "--baseline"],
    "bench dropout": ["bench", "dropout", "--widths", "32", "--rates", "0.5", "--steps", "1", "--repeats", "1",
                      "--batch", "8", "--threads", "1", "--device", "cpu"],
    "bench augment": ["bench", "augment", "--batch", "1", "--image-size", "40", "--crop", "32", "--repeats", "1",
                      "--device", "cpu"],
    "dropout search": ["dropout", "search", "-p", "0.5", "--trace"],
    "dropout patterns": ["dropout", "patterns", "--batch", "4", "--units", "16", "--iterations", "50"],
    "dropout mlp": ["dropout", "mlp", "--smoke", "--rates", "0.5", "--kinds", "bernoulli,row",
                    "--train-samples", "200", "--test-samples", "100"],
    "dropout lstm": ["dropout", "lstm", "--corpus", "ptb", "--path", "{ptb}", "--smoke", "--rates", "0.3",
                     "--kinds", "bernoulli"],
}
# every command that runs under torchrun: its arguments for a 2-rank Gloo run (its result is checked
# against its schema too, so `bench collectives` needs no separate schema run)
TORCHRUN = {
    "bench collectives": ["bench", "collectives", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1",
                          "--algorithms", "native,ring"],
    "train": ["train", "--mode", "ddp", "--hidden", "16", "--dropout", "0,0", "--epochs", "0.2",
              "--train-limit", "256", "--evals", "1", "--codec", "dynamic_tree"],
}


def walk(cmd=None, path=()):
    """(path, click command) for the root, every group and every command, from typer's own tree."""
    cmd = cmd or get_command(app)
    yield list(path), cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from walk(sub, (*path, name))


def options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option"]


def schema(command: str) -> dict:
    return json.loads((SCHEMAS / f"{command.replace(' ', '-')}.schema.json").read_text())


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def ptb(tmp_path_factory):
    """A tiny Penn-Treebank-format corpus, so `dropout lstm` needs no installed text."""
    d = tmp_path_factory.mktemp("ptb")
    words = "the cat sat on a mat and a dog ran to the big red house".split()
    for name, n in (("ptb.train.txt", 120), ("ptb.valid.txt", 20), ("ptb.test.txt", 20)):
        (d / name).write_text("\n".join(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(8))
                                        for i in range(n)) + "\n")
    return d


# -- one result shape

def test_every_result_command_has_json_out_a_schema_and_a_smoke_run():
    found = set()
    for path, cmd in walk():
        names = {o for p in options(cmd) for o in p.opts}
        if "--json" in names or "--out" in names:
            assert {"--json", "--out"} <= names, f"{' '.join(path)} needs both --json and --out"
            found.add(" ".join(path))
    assert found == set(SMOKE) | set(TORCHRUN), found ^ (set(SMOKE) | set(TORCHRUN))
    for command in found:
        jsonschema.Draft202012Validator.check_schema(schema(command))


@pytest.mark.parametrize("command", list(SMOKE))
def test_json_matches_schema_and_out_is_the_same(command, ptb, tmp_path):
    args = [a.replace("{ptb}", str(ptb)) for a in SMOKE[command]]
    out = tmp_path / "result.json"
    r = runner.invoke(app, [*args, "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)  # nothing but the JSON on stdout
    jsonschema.validate(printed, schema(command))
    assert printed["command"] == command and printed == json.loads(out.read_text())
    assert not [p for p in tmp_path.iterdir() if p != out]  # the temp file was renamed, not left behind
    if command == "train":  # the command's --mode, not the codec's TrainConfig.mode ("auto")
        assert printed["config"]["mode"] == "sim" and printed["config"]["codec_mode"] == "auto"


def test_table1_and_errors_content():
    r = runner.invoke(app, ["table1", "--samples", "20000", "--json"])
    out = json.loads(r.stdout)
    assert len(out["rows"]) == 16 and "not reproducible" in out["note"].lower()
    assert {"rel_pct_paper", "rel_pct_nearest", "paper_rel_pct"} <= set(out["rows"][0])
    r = runner.invoke(app, ["errors", "--codec", "qsgd", "--dist", "laplace(0,1)", "--samples", "1000", "--json"])
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["codec"].startswith("qsgd") and rows[0]["data"] == "laplace(0,1)"


def test_table1_extended_adds_the_block_scaled_formats_with_bits_per_value(tmp_path):
    out = tmp_path / "t1.json"
    r = runner.invoke(app, ["table1", "--samples", "4096", "--extended", "--rounding", "nearest", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("table1"))
    rows = data["rows"]
    assert data["config"]["extended"] is True and len(rows) == 4 * 11 and "Extended rows" in data["note"]
    bits = {(r["distribution"], r["type"]): r["bits_per_value"] for r in rows}
    assert bits[("N(0,1)", "mxfp4_e2m1")] == 4.25 and bits[("N(0,1)", "nvfp4")] == 4.5 + 32 / 4096
    assert bits[("N(0,1)", "mxfp6_e2m3")] == 6.25 and 8 <= bits[("N(0,1)", "dynamic_tree")] < 8.1
    new = [r for r in rows if r["type"] == "mxfp8_e4m3"]
    assert len(new) == 4 and all(r["paper_rel_pct"] is None and r["rel_pct_nearest"] > 0 for r in new)
    plain = json.loads(runner.invoke(app, ["table1", "--samples", "1000", "--json"]).stdout)
    assert "bits_per_value" not in plain["rows"][0] and len(plain["rows"]) == 16


def test_clear_errors():
    r = runner.invoke(app, ["table1", "--rounding", "up"])
    assert r.exit_code == 2 and "allowed: paper, nearest, both" in r.output
    r = runner.invoke(app, ["errors", "--codec", "dynamic", "--samples", "100"])
    assert r.exit_code == 2 and "known codecs" in r.output


def test_trace_prints_the_step_through_as_numbers():
    """`paralab trace`: the ring moves exactly 2(P−1)/P·n per link and rank, fp32 is exact, a codec's
    error grows from the first hop to the last, a binary tree's root moves log2 P · n."""
    ring = json.loads(runner.invoke(app, ["trace", "-P", "4", "--codec", "fp32", "--json"]).stdout)
    assert len(ring["rows"]) == 24 and ring["traffic"]["steps"] == 6
    assert [(r["src"], r["dst"]) for r in ring["links"]] == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert all(r["x_n"] == 1.5 and r["of_share"] == 1.0 and r["bytes"] == 6 * 24 for r in ring["links"])
    assert all(r["sent_x_n"] == r["received_x_n"] == 1.5 for r in ring["ranks"])
    assert all(r["max_abs_error"] < 1e-6 for r in ring["rows"]) and ring["traffic"]["exact_provenance"]  # fp32 rounding only
    assert {r["carries"] for r in ring["rows"] if r["step"] == 0} == {f"own data of rank {i}" for i in range(4)}
    fp = ring["busbw"][0]
    assert fp["busbw_GBps"] == pytest.approx(fp["algbw_GBps"] * 1.5) and 0.95 < fp["busbw_of_link"] <= 1.0
    assert "exactly the 2(P−1)/P·n = 1.5·n" in ring["takeaway"]

    q = json.loads(runner.invoke(app, ["trace", "-P", "4", "--codec", "dynamic_tree", "--json"]).stdout)
    assert all(r["bytes"] < r["fp32_bytes"] for r in q["rows"]) and len(q["busbw"]) == 2
    first = max(r["max_abs_error"] for r in q["rows"] if r["contributions"] == 1)
    assert 0 < first < q["traffic"]["final_max_abs_error"] < 0.1
    assert q["busbw"][1]["time_us"] < q["busbw"][0]["time_us"] / 2  # 8-bit wire: under half the fp32 time

    tree = json.loads(runner.invoke(app, ["trace", "--algorithm", "tree", "-P", "8", "--json"]).stdout)
    assert max(r["sent_x_n"] for r in tree["ranks"]) == 3.0 and tree["traffic"]["busiest_rank_x_n"] == 3.0
    assert tree["busbw"][0]["busbw_of_link"] < 0.6 and "busbw reaches only" in tree["takeaway"]

    r = runner.invoke(app, ["trace", "-P", "4", "--codec", "dynamic_tree"])
    assert r.exit_code == 0 and "2(P−1)/P·n" in r.output and "partial sum of ranks 0,1" in r.output
    assert "with dynamic_tree[nearest,tensor] the result" in r.output  # not eaten as rich markup


@pytest.mark.parametrize("args, says", [
    (["-P", "9"], "allowed: an integer from 2 to 8"),
    (["--algorithm", "spiral"], "allowed: tree"),
    (["--codec", "nope"], "known codecs"),
    (["--codec", "topk"], "allowed"),
    (["--values", "0"], "allowed: an integer from 1 to 4096"),
    (["--link", "carrier_pigeon"], "nvlink4"),
    (["--size", "12Q"], "K, M or G suffix"),
])
def test_trace_bad_input_is_one_clear_line(args, says):
    r = runner.invoke(app, ["trace", *args])
    assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output


# -- nccl-tests' flags, torchrun

def test_no_option_collides_with_torchrun():
    """Every option of every command, as `torchrun ... -m lab <command> <option> [value]`, reaches the
    script untouched through torchrun's own parser (prefix matching included). The hidden aliases kept
    for one release (--min, --max, --factor) are the names that did collide; they are exempt."""
    from torch.distributed.run import get_args_parser

    checked = 0
    for path, cmd in walk():
        for p in options(cmd):
            if p.hidden:
                continue
            for opt in p.opts + p.secondary_opts:
                forms = [[opt]] if p.is_flag or p.count else [[opt, "1"], [f"{opt}=1"] if opt.startswith("--") else []]
                for form in filter(None, forms):
                    script_args = [*path, *form]
                    argv = ["--nproc-per-node", "2", "-m", "lab", *script_args]
                    try:
                        parsed = get_args_parser().parse_args(argv)
                    except SystemExit:
                        pytest.fail(f"torchrun refuses `{' '.join(script_args)}`")
                    assert parsed.module and parsed.training_script == "lab"
                    assert parsed.training_script_args == script_args, script_args
                    checked += 1
    assert checked > 150


def test_the_old_collision_is_what_the_test_catches():
    from torch.distributed.run import get_args_parser

    with pytest.raises(SystemExit):
        get_args_parser().parse_args(["--nproc-per-node", "2", "-m", "lab", "bench", "collectives", "--max", "4M"])


def test_torchrun_commands_say_so_and_are_tested():
    for path, cmd in walk():
        if not path or hasattr(cmd, "commands"):
            continue
        name = " ".join(path)
        says = "torchrun" in (cmd.help or "")
        assert says == (name in TORCHRUN_COMMANDS), name
    assert set(TORCHRUN_COMMANDS) == set(TORCHRUN)
    r = runner.invoke(app, ["bench", "collectives", "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert "Runs under torchrun" in r.output and "--minbytes" in r.output and "--warmup_iters" in r.output
    assert "--max " not in r.output and "--factor" not in r.output  # the old names are hidden


def test_old_size_names_still_work_with_a_note():
    r = runner.invoke(app, ["bench", "collectives", "--min", "8K", "--max", "4K", "--factor", "2"])
    assert r.exit_code == 2 and "sizes 8192..4096" in r.output
    assert "--min is deprecated" in r.output and "-e/--maxbytes" in r.output and "-f/--stepfactor" in r.output


def test_bench_codecs_takes_nccl_tests_size_flags_and_the_old_exponents_with_a_note():
    """-b/-e/-f in bytes of the fp32 input (K/M/G as bench collectives); --min-exp/--max-exp are hidden
    aliases for one release (2^k values = 4*2^k bytes) that say so."""
    r = runner.invoke(app, ["bench", "codecs", "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert "--minbytes" in r.output and "--stepfactor" in r.output and "--min-exp" not in r.output
    r = runner.invoke(app, ["bench", "codecs", "-b", "64K", "-e", "4K"])
    assert r.exit_code == 2 and "sizes 65536..4096" in r.output
    r = runner.invoke(app, ["bench", "codecs", "-b", "1X"])
    assert r.exit_code == 2 and "allowed: an integer with an optional K, M or G suffix" in r.output
    r = runner.invoke(app, ["bench", "codecs", "-b", "1K", "-e", "4K", "-f", "2", "--repeats", "1", "--device", "cpu",
                            "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["sizes"] == [256, 512, 1024]
    assert {k: data["config"][k] for k in ("minbytes", "maxbytes", "stepfactor")} == {
        "minbytes": 1024, "maxbytes": 4096, "stepfactor": 2}
    r = runner.invoke(app, ["bench", "codecs", "--min-exp", "9", "--max-exp", "8"])
    assert r.exit_code == 2 and "sizes 2048..1024" in r.output
    assert "--min-exp is deprecated" in r.output and "--max-exp is deprecated" in r.output
    assert "-b/--minbytes" in r.output and "-e/--maxbytes" in r.output
    r = runner.invoke(app, ["bench", "codecs", "--min-exp", "40"])
    assert r.exit_code == 2 and "'--min-exp'" in r.output and "allowed: an integer from 0 to 31" in r.output


@pytest.mark.skipif(shutil.which("torchrun") is None and not (Path(sys.executable).parent / "torchrun").exists(),
                    reason="torchrun is not installed")
@pytest.mark.parametrize("command", list(TORCHRUN))
def test_two_ranks_under_torchrun(command, tmp_path):
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    out = tmp_path / "result.json"
    p = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", "-m", "lab", *TORCHRUN[command],
                        "--out", str(out)], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema(command))
    assert data["config"]["torchrun"] is True
    if command == "bench collectives":
        assert data["procs"] == 2 and {r["rank"] for r in data["ranks"]} == {0, 1}
        assert all(r["wrong"] == 0 for r in data["rows"])
        for line in ("# nThread 1 nGpus 0 minBytes 1024 maxBytes 4096", "# Using devices", "#  Rank  1 Group  0",
                     "# algorithm: native", "# Avg bus bandwidth"):
            assert line in p.stdout, p.stdout
        assert p.stdout.count("# Using devices") == 1  # rank 0 alone prints
    else:
        assert data["config"]["procs"] == 2 and data["summary"]["final_test_error"] >= 0


# -- progress off a terminal, Ctrl-C, noise

def test_plain_progress_lines_when_not_a_terminal():
    p = subprocess.run([sys.executable, "-m", "lab", "scale", "--codec", "linear", "--algorithm", "ring",
                        "--ranks", "2,4", "--values", "64", "--json"], cwd=REPO, env=ENV, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["command"] == "scale"
    assert "\x1b[" not in p.stderr and "\r" not in p.stderr  # no bar, no colours
    assert "done: P=2 (1 rows)" in p.stderr and "[100%]" in p.stderr


def test_ctrl_c_keeps_finished_rows(tmp_path):
    out = tmp_path / "errors.json"
    codecs = ["fp16"] + ["dynamic_tree"] * 30
    cmd = [sys.executable, "-m", "lab", "errors", *[a for c in codecs for a in ("--codec", c)],
           "--dist", "normal(0,1)", "--samples", "200000", "--out", str(out)]
    p = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_from_a_shell)
    seen = []
    deadline = time.monotonic() + 240
    for line in p.stderr:
        seen.append(line)
        if line.startswith("done: codec fp16"):
            p.send_signal(signal.SIGINT)
            break
        assert time.monotonic() < deadline, "".join(seen)
    rest = p.stderr.read()
    assert p.wait(timeout=120) == 130, "".join(seen) + rest
    assert "interrupted" in rest and f"written to {out}" in rest and "Traceback" not in rest
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema("errors"))
    assert data["partial"] is True and 1 <= len(data["rows"]) < len(codecs)
    assert data["rows"][0]["codec"].startswith("fp16")


# commands whose experiment is one call: it streams each finished run (on_row / on_point) into the session
STOPPABLE = {
    "dropout mlp": (["dropout", "mlp", "--smoke", "--rates", "0.1;0.2;0.3;0.5;0.6;0.7;0.8"], "done: 64x64 (0.1,0.1)",
                    "rows"),
    "train": (["train", "--hidden", "16", "--dropout", "0,0", "--epochs", "40", "--train-limit", "256",
               "--evals", "2"], "done: evaluation at epoch 0.50", "curve"),
    "fusion": (["fusion", "--dataset", "digits", "--epochs", "2", "--train-size", "200", "--test-size", "100",
                "--scales", "8,10,12,14,16,18,20,24"], "done: 8 px", "rows"),
}


def _as_from_a_shell() -> None:
    """In the child before exec: Ctrl-C's default disposition, unblocked, as an interactive shell starts a
    command (an ignored or blocked SIGINT is inherited through exec, and the test process's may not be
    the default)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def stop_at(args: list[str], marker: str, out, env: dict | None = None) -> str:
    """Run `paralab <args> --out <out>`, press Ctrl-C when a stderr line starts with `marker`, and check
    the stop: exit 130, 'interrupted', the partial result written, no traceback. Returns stderr after
    the stop."""
    p = subprocess.Popen([sys.executable, "-m", "lab", *args, "--out", str(out)], cwd=REPO, env=env or ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_shell)
    seen = []
    deadline = time.monotonic() + 240
    for line in p.stderr:
        seen.append(line)
        if line.startswith(marker):
            p.send_signal(signal.SIGINT)
            break
        assert time.monotonic() < deadline, "".join(seen)
    rest = p.stderr.read()
    assert p.wait(timeout=120) == 130, "".join(seen) + rest
    assert "interrupted" in rest and f"written to {out}" in rest and "Traceback" not in rest, rest
    return rest


@pytest.mark.parametrize("command", list(STOPPABLE))
def test_ctrl_c_keeps_what_a_one_call_experiment_finished(command, tmp_path):
    args, marker, key = STOPPABLE[command]
    out = tmp_path / "partial.json"
    rest = stop_at(args, marker, out)
    data = json.loads(out.read_text())
    jsonschema.validate(data, schema(command))
    assert data["partial"] is True and data["stopped"] and len(data[key]) >= 1
    assert data["stopped"].split(" (")[0] in rest  # stderr says where it stopped


def test_known_third_party_messages_are_silenced():
    """bitsandbytes logs a kernels-community warning at import on AVX512-BF16 CPUs, and torch.compile's
    imports raise a torch.jit deprecation: both are emitted here as their libraries do; neither reaches
    `paralab codecs`' output, while an unrelated warning on the same logger still does."""
    code = (
        "import logging, sys, warnings\n"
        "import lab.cli\n"
        "log = logging.getLogger('bitsandbytes.backends.cpu.ops')\n"
        "log.warning('Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you "
        "already `pip install kernels` and the kernels >= 0.11.1', 'no network')\n"
        "warnings.warn('`torch.jit.script_method` is deprecated. Please switch to `torch.compile` or "
        "`torch.export`.', DeprecationWarning)\n"
        "log.warning('an unrelated bitsandbytes warning')\n"
        "sys.argv = ['paralab', 'codecs']\n"
        "lab.cli.main()\n")
    p = subprocess.run([sys.executable, "-W", "default", "-c", code], cwd=REPO, env=ENV, capture_output=True,
                       text=True, timeout=120)
    both = p.stdout + p.stderr
    assert p.returncode == 0, both
    assert "dynamic_tree" in p.stdout
    assert "kernels-community" not in both and "script_method" not in both
    assert "an unrelated bitsandbytes warning" in p.stderr
    p = subprocess.run([sys.executable, "-m", "lab", "codecs"], cwd=REPO, env=ENV, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stderr == "" and "Warning" not in p.stdout, p.stderr


# -- version, completion

def test_version_and_completion():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip().startswith("paralab ") and r.stdout.strip() != "paralab unknown"
    r = runner.invoke(app, ["--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert "--install-completion" in r.output and "--version" in r.output
