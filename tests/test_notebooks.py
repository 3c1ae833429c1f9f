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
    from notebook_client import notebook_client

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs are committed"
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "one cell tagged 'parameters'"
    cell = nbformat.v4.new_code_cell("smoke = True")
    cell.metadata["tags"] = ["injected-parameters"]  # what papermill -p smoke True does
    nb.cells.insert(params[0] + 1, cell)
    notebook_client(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_valid_and_every_cell_has_an_id(path):
    """nbformat 4.5 wants a unique id on every cell (Jupyter otherwise rewrites the file on open)."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    ids = [c.get("id") for c in nb.cells]
    assert all(ids) and len(set(ids)) == len(ids), ids


def test_the_notebook_client_waits_for_the_kernel_in_short_polls():
    """notebook_client's channels never wait on the kernel in one poll longer than SLICE_S, so a poll that misses
    its socket's wake-up costs at most that (nbclient's own waits a cell's whole timeout in one poll: a notebook
    once took 180 s instead of 10-20 s, its kernel idle). A reply that comes later is still taken."""
    import asyncio

    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session

    import fresh_loop
    from notebook_client import SLICE_S, notebook_client

    kc = notebook_client(nbformat.v4.new_notebook(), timeout=180, kernel_name="python3").create_kernel_manager().client()
    polls: list[int] = []

    async def reply_after_a_while() -> dict:
        ctx = zmq.asyncio.Context()
        ours, kernel = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        ours.bind("inproc://shell")
        kernel.connect("inproc://shell")

        class Watched(type(ours)):
            def poll(self, timeout=None, flags=zmq.POLLIN):
                polls.append(timeout)
                return super().poll(timeout, flags)

        ours.__class__ = Watched
        session = Session()

        async def reply() -> None:
            await asyncio.sleep(1.5 * SLICE_S)
            session.send(kernel, "kernel_info_reply", {})

        task = asyncio.ensure_future(reply())
        try:
            return await kc.shell_channel_class(ours, session).get_msg(timeout=180)
        finally:
            await task
            ctx.destroy(linger=0)

    assert fresh_loop.run(reply_after_a_while())["msg_type"] == "kernel_info_reply"
    assert len(polls) >= 2 and max(polls) <= SLICE_S * 1000, polls
    assert kc.iopub_channel_class is kc.shell_channel_class
