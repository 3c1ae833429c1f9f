"""Every teaching notebook executes headless (nbclient) in smoke mode, and none is committed
with outputs."""
from pathlib import Path

import pytest
from lazy_import import lazy

nbformat = lazy("nbformat")  # with jsonschema, 1-2 s: loaded by the first notebook test, not at collection

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook_per_capability():
    names = {p.stem for p in NOTEBOOKS}
    assert {"codecs", "collectives", "training", "dropout"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs are committed"
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "one cell tagged 'parameters'"
    cell = nbformat.v4.new_code_cell("smoke = True")
    cell.metadata["tags"] = ["injected-parameters"]  # what papermill -p smoke True does
    nb.cells.insert(params[0] + 1, cell)
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_valid_and_every_cell_has_an_id(path):
    """nbformat 4.5 wants a unique id on every cell (Jupyter otherwise rewrites the file on open)."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    ids = [c.get("id") for c in nb.cells]
    assert all(ids) and len(set(ids)) == len(ids), ids
