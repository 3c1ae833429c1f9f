"""docs/papers.md, the lab's map of the papers, stays true: each row's status is one the legend defines, every file
it names exists, every page it names (in bold) is in the page list and every `paralab` command it names is one,
the counts tables are the rows', and at most 6 rows are out of scope, each with its one-line reason."""
import re
from collections import Counter
from pathlib import Path

import pytest

import page_list

REPO = Path(__file__).resolve().parents[1]
MAP = REPO / "docs" / "papers.md"
MAX_OUT_OF_SCOPE = 6
PATH = re.compile(r"(?<![\w/.-])((?:app|lab|notebooks|kernels|docs|bench|tests)/[\w./-]*[\w/])")
COMMAND = re.compile(r"`paralab ((?:[a-z0-9]+)(?: [a-z0-9]+)?)")


def _cells(line: str) -> list[str]:
    """A markdown table line's cells (an escaped pipe, `\\|`, stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


@pytest.fixture(scope="module")
def doc():
    text = MAP.read_text()
    legend = dict(re.findall(r"\*\*([A-Z])\*\* ([a-z][^,(]*?)(?=[,(]| \*\*)", text.split("## The rows")[0]))
    rows = {}
    for line in text.splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if cells and cells[0].isdigit() and len(cells) == 7:
            rows[int(cells[0])] = dict(zip(["n", "paper", "section", "concept", "status", "shown", "notes"], cells))
    counts = [_cells(ln) for ln in text.split("## Counts")[1].splitlines() if ln.startswith("| ")]
    return text, legend, rows, counts


def test_every_row_has_a_status_from_the_legend_and_a_place_that_shows_it(doc):
    text, legend, rows, _ = doc
    assert set(legend) == {"I", "L", "P", "A", "O"}, legend
    assert sorted(rows) == list(range(1, 81))
    papers = set(re.findall(r"\(\w[^()]*?;\s+\*\*([A-Z])\*\*\)", text.split("## The rows")[0]))
    assert papers == {"D", "H", "W", "S", "R"}, papers
    for n, r in rows.items():
        assert r["status"] in legend, (n, r["status"])
        assert set(r["paper"].split("+")) <= papers, (n, r["paper"])
        assert r["concept"] and r["section"] and r["notes"], n
        if r["status"] in "ILP":  # shown somewhere: a page, a notebook or a command
            assert r["shown"] not in ("", "—"), n
        if r["status"] == "I":  # interactive: a page or a notebook's controls reach it
            assert "**" in r["shown"] or "notebooks/" in r["shown"], n


def test_every_file_page_and_command_it_names_exists(doc):
    from typer.main import get_command

    from lab.cli import app

    text, _, rows, _ = doc
    named = set(PATH.findall(text))
    assert len(named) > 60  # the rows name their code
    assert not [p for p in sorted(named) if not (REPO / p).exists()], "docs/papers.md names files that do not exist"
    assert "../" not in text
    titles = {p.title for p in page_list.PAGES}
    for n, r in rows.items():
        pages = set(re.findall(r"\*\*([^*]+)\*\*", r["shown"]))
        assert pages <= titles, (n, pages - titles)
    root = get_command(app)
    for cmd in set(COMMAND.findall(text)):
        first, *rest = cmd.split()
        assert first in root.commands, cmd
        sub = root.commands[first]
        if rest and hasattr(sub, "commands"):
            assert rest[0] in sub.commands, cmd


def test_the_counts_are_the_rows_and_out_of_scope_rows_are_few_and_say_why(doc):
    _, legend, rows, counts = doc
    by_status = {s: sorted(n for n, r in rows.items() if r["status"] == s) for s in legend}
    status_rows = [c for c in counts if len(c) == 3 and re.match(r"[A-Z]: ", c[0])]
    assert [c[0][0] for c in status_rows] == list(legend)
    for c in status_rows:
        listed = [int(x) for x in re.findall(r"\d+", c[1])]
        assert listed == by_status[c[0][0]], (c[0], set(listed) ^ set(by_status[c[0][0]]))
        assert int(c[2]) == len(listed)
    header = next(c for c in counts if c[0] == "Paper")
    paper_rows = [c for c in counts if re.match(r"[A-Z]: .*\(rows \d+–\d+\)", c[0])]
    assert len(paper_rows) == 5
    for c in paper_rows:
        lo, hi = map(int, re.search(r"rows (\d+)–(\d+)", c[0]).groups())
        have = Counter(rows[n]["status"] for n in range(lo, hi + 1))
        want = dict(zip(header[1:-1], map(int, c[1:-1])))
        assert want == {s: have.get(s, 0) for s in want}, (c[0], have)
        assert int(c[-1]) == hi - lo + 1
        assert {rows[n]["paper"].split("+")[0] for n in range(lo, hi + 1)} == {c[0][0]}, c[0]
    out = by_status["O"]
    assert len(out) <= MAX_OUT_OF_SCOPE, out
    for n in out:
        why = rows[n]["notes"]
        assert why.startswith("Out of scope: ") and len(why) > 40, (n, why)
