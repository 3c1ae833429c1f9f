"""FSDP2 across two nodes for real (docs/fsdp.md): torchrun in two network namespaces (the machinery of
test_two_nodes.py), 2 ranks each, hpZ over the nodes: the backward all-gather stays on each machine."""
from __future__ import annotations

import json

import pytest

from test_two_nodes import torchrun_two_nodes, two_nodes  # noqa: F401 - the fixture


@pytest.mark.slow  # ~45 s loaded; test_fsdp.py covers hpZ's groups (4 local ranks) and torchrun (one node) cheaper
def test_fsdp_with_hpz_across_two_nodes(two_nodes, tmp_path):  # noqa: F811
    out = tmp_path / "fsdp.json"
    torchrun_two_nodes(two_nodes, ["train", "--mode", "fsdp", "--hpz", "2", "--weights-codec", "mxfp8_e4m3",
                                   "--grads-codec", "int8", "--no-baselines", "--epochs", "0.25", "--train-limit", "512",
                                   "--hidden", "32", "--dropout", "0,0", "--batch", "64", "--evals", "1",
                                   "--out", str(out)], tmp_path)
    res = json.loads(out.read_text())
    s = res["summary"]
    assert s["mode"] == "fsdp" and s["procs"] == 4 and s["hpz"] == 2 and s["ranks_per_node"] == 2
    nodes = {(0, 1), (2, 3)}
    back = [g for g in res["groups"] if g["op"] == "all_gather" and g["phase"] == "backward"]
    assert back and {tuple(g["ranks"]) for g in back} <= nodes
    assert all(g["cross_node"] == 0 for g in back)
    fwd = [g for g in res["groups"] if g["op"] == "all_gather" and g["phase"] == "forward"]
    assert {tuple(g["ranks"]) for g in fwd} == {(0, 1, 2, 3)} and all(g["cross_node"] > 0 for g in fwd)
    assert s["final_test_error"] < 90
