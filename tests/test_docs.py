"""The repository explains itself (docs/design.md rule 8): README is a short front door with the two commands,
every relative link in README and docs/ leads to a file that exists, and no file of the repository points
outside it (the design file of another folder, its notes) or to a tracker's numbers instead of saying the reason."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_README_LINES = 260

# Exactly what .ci/run runs, and how a newcomer starts the lab.
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
                "pip install -e '.[dev]' && python -m pytest -q")
LAUNCH = "streamlit run app/Home.py"

OUTSIDE = {  # what a reader of the repository cannot follow, and what to write instead
    r"\.\./shared|/work/\bshared|\bshared/(?:notes|papers)\b": "a folder outside the repository",
    r"DESIGN\.md": "the design file outside the repository (the rules are docs/design.md)",
    r"\b[Ii]ssues?\s+#?\d": "an issue number (say the reason; an outside project's is owner/repo#N)",
    r"\b[Ii]tems?\s+\d": "an item of an issue (say the reason)",
}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _repo_files() -> list[Path]:
    """The files the repository holds or is about to (tracked, and untracked ones git does not ignore)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the repository's own file list is unknown")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, check=True).stdout.decode()
    return [REPO / p for p in sorted(set(out.split("\0"))) if p and (REPO / p).is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # a binary file (a screenshot, a bundle): nothing a reader follows


def test_nothing_points_outside_the_repository_or_to_an_issue_number():
    found = []
    for path in _repo_files():
        text = _text(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for pattern, what in OUTSIDE.items():
                if m := re.search(pattern, line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {m.group(0)!r} is {what}")
    assert not found, "\n".join(found)


def test_the_check_catches_each_kind_of_pointer():
    """The patterns above are live: each catches what it is for and lets an outside project's citation pass."""
    def caught(line: str) -> bool:
        return any(re.search(p, line) for p in OUTSIDE)

    # spelt with placeholders, so that this file does not trip its own check
    words = {"up": "..", "shared": "shared", "design": "DESIGN", "issue": "issue", "Issue": "Issue", "item": "item"}
    for bad in ("see {up}/{shared}/notes/codecs.md", "the {shared}/papers folder", "({design}.md rule 3)",
                "({issue} 32)", "{Issue} 28.5: a bug", "{issue}s 17 and 19", "({issue} 27 {item} 10)",
                "-- {item} 8: the ring"):
        assert caught(bad.format(**words)), bad
    for fine in ("docs/design.md rule 3", "NVIDIA/nccl#1083", "the issue's targets", "a shared helper",
                 "data/ shared by train/ and dropout/"):
        assert not caught(fine), fine


def test_readme_is_a_short_front_door_with_both_commands():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; the front door keeps to " \
                                           f"{MAX_README_LINES}: move detail into docs/"
    assert TEST_COMMAND in text, "README.md must carry the exact test command .ci/run runs"
    assert TEST_COMMAND in (REPO / ".ci" / "run").read_text(), ".ci/run must run README's test command"
    assert LAUNCH in text or "python app/serve.py" in text, "README.md must say how to launch the lab"
    assert "docs/screenshots/" in text, "README.md shows the lab before it explains it"


def _relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold commands, not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


@pytest.mark.parametrize("page", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path):
    broken = [t for t in _relative_links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not broken, f"{page.relative_to(REPO)} links to files that do not exist: {broken}"


def test_a_broken_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md) [anchor](#x) [web](https://example.org) ![img](missing.png)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    assert _relative_links(page) == ["there.md", "missing.png"]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate_results", REPO / "docs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_results_page_lists_every_result_with_its_device_and_vector_isa(tmp_path, monkeypatch):
    """docs/results.md is built from bench/results: a result added there is in the index, with its device and,
    where the file records one, its vector ISA (a CPU's speed depends on it)."""
    gen = _generator()
    committed = sorted(p.name for p in gen.RESULTS.glob("*.json"))
    index = gen.results_index()
    assert all(f"({'../bench/results/' + n})" in index for n in committed)
    (tmp_path / "codecs-cpu.json").write_text((gen.RESULTS / "codecs-cpu.json").read_text())
    (tmp_path / "augment-mine.json").write_text(json.dumps(
        {"command": "bench augment", "device": "CPU (Xeon, 8 threads)", "vector_isa": "avx512",
         "versions": {"torch": "2.13.0+cpu"}, "rows": [{"op": "crop", "speedup": 2.0}, {"op": "all", "speedup": 1.5}]}))
    monkeypatch.setattr(gen, "RESULTS", tmp_path)
    rows = gen.results_index().splitlines()[2:]
    assert len(rows) == 2
    mine = next(r for r in rows if "augment-mine" in r)
    assert "CPU (Xeon, 8 threads); vector ISA avx512" in mine and "whole pipeline 1.50x" in mine
    assert "vector ISA" not in next(r for r in rows if "codecs-cpu" in r)  # not recorded: not invented


def test_every_command_is_documented_in_the_cli_reference():
    """Each `paralab` command (from typer's own tree, plugins' commands included) has its row in docs/cli.md."""
    from typer.main import get_command

    from lab.cli import app

    def leaves(cmd, path=()):
        subs = getattr(cmd, "commands", None)
        if subs is None:
            yield " ".join(path)
        for name, sub in (subs or {}).items():
            yield from leaves(sub, (*path, name))

    page = (REPO / "docs" / "cli.md").read_text()
    missing = [c for c in leaves(get_command(app)) if f"`paralab {c}" not in page]
    assert not missing, f"docs/cli.md has no row for: {', '.join('paralab ' + c for c in missing)}"


REPO_PATH = re.compile(r"(?<![\w./-])((?:lab|app|tests|bench|kernels|notebooks|docs|\.ci)/[\w./-]*[\w/])(.{0,2})")


def _named_paths(text: str) -> list[str]:
    """The repository paths a page names (`lab/comm/cost.py`, `tests/cuda_emu/`), leaving out patterns such as
    `bench/results/<name>-<device>.json` or `...-{a,b}.json`."""
    return [m.group(1).rstrip("./") for m in REPO_PATH.finditer(text) if not set(m.group(2)) & set("<{*")]


@pytest.mark.parametrize("page", [README, *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_file_a_page_names_exists(page: Path):
    """A module renamed or removed leaves no page pointing at it."""
    gone = sorted({p for p in _named_paths(page.read_text()) if not (REPO / p).exists()})
    assert not gone, f"{page.relative_to(REPO)} names files that do not exist: {gone}"


def test_named_paths_leave_patterns_out():
    assert _named_paths("see `lab/comm/cost.py`, tests/cuda_emu/ and bench/results/codecs-<device>.json, "
                        "`...-{a,b}.json` in bench/results/compressed-{a,b}.json.") == \
        ["lab/comm/cost.py", "tests/cuda_emu"]
