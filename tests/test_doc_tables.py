"""Issue 27 item 8: the docs' result tables are what the commands print now. docs/generate.py renders each
marked table from `paralab ... --json`; the committed pages must equal its output, and a stale number in
a page is caught."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gen():
    return _generator()


@pytest.fixture(scope="module")
def rendered(gen):
    """Every generated table, rendered once from the commands' output now."""
    return {name: t.render() for name, t in gen.TABLES.items()}


def test_committed_docs_match_what_the_commands_print(gen, rendered):
    for page in sorted({t.page for t in gen.TABLES.values()}):
        text = (DOCS / page).read_text()
        assert gen.regenerate(DOCS / page, rendered) == text, \
            f"docs/{page}: a generated table is stale; run python docs/generate.py"


def test_a_stale_number_is_caught(gen, rendered, tmp_path):
    page = tmp_path / "pays.md"
    text = (DOCS / "pays.md").read_text()
    first = rendered["pays_settings"].splitlines()[2]  # the first data row
    page.write_text(text.replace(first, first.replace("| 0 |", "| 22 |", 1)))
    assert page.read_text() != text
    assert gen.regenerate(page, rendered) == text  # regenerating puts the command's numbers back


def test_the_table_counts_every_registered_codec(gen, rendered):
    from lab.plan.pays import default_codecs

    assert f"codecs that pay (of {len(default_codecs('gpt2-small'))})" in rendered["pays_settings"]


def test_markers_must_name_a_known_table(gen, tmp_path):
    page = tmp_path / "pays.md"
    page.write_text("<!-- generated: nonsense -->\n| x |\n<!-- end generated -->\n")
    with pytest.raises(ValueError, match="no generated table 'nonsense'; known: pays_settings"):
        gen.regenerate(page, {})
