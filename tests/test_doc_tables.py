"""The docs' result tables are what the commands print now. docs/generate.py renders each
marked table from `paralab ... --json`; the committed pages must equal its output, and a stale number in
a page is caught."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# iterates over the plugin registries: CI runs it again with an outside plugin package installed (.ci/run)
pytestmark = pytest.mark.registries

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


def test_the_table_counts_every_builtin_codec(gen, rendered):
    """The table counts what `pays` prices by default with the lab's own plugins: a plugin (here one registered
    now; in CI also an installed package) changes neither the count nor the committed page, and is back in
    the registry after."""
    from lab.codecs import CastCodec, CodecInfo, codec_names, register, unregister
    from lab.plan.pays import default_codecs

    register(CodecInfo("half_for_test", "fp16 cast (test plugin)", lambda: CastCodec("fp16")))
    try:
        with gen.builtin_plugins_only():
            ours = default_codecs("gpt2-small")
            assert "half_for_test" not in codec_names() and "fp16" in ours
        assert f"codecs that pay (of {len(ours)};" in rendered["pays_settings"]
        assert "half_for_test" in codec_names()
    finally:
        unregister("half_for_test")


def test_markers_must_name_a_known_table(gen, tmp_path):
    page = tmp_path / "pays.md"
    page.write_text("<!-- generated: nonsense -->\n| x |\n<!-- end generated -->\n")
    with pytest.raises(ValueError, match="no generated table 'nonsense'; known: pays_settings"):
        gen.regenerate(page, {})
