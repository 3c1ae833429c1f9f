"""The committed gpt converge result is reproducible: retraining top-k 1 % (the codec exchange on
simulated workers, per-hop semantics) from the committed settings for 10 steps gives the committed
curve. On the machine that measured it the values are bit-identical; the tolerance only allows
another CPU's float kernels. A speed-up of training, evaluation or the simulated exchange must keep
this test passing (profile and numbers: docs/converge.md, "Where the time goes")."""
import json
from pathlib import Path

import pytest

RESULT = Path(__file__).resolve().parents[1] / "bench" / "results" / "converge-gpt-cpu.json"


def test_gpt_topk_reproduces_the_committed_curve():
    from lab.train.converge import ConvergeConfig, Spec, load_task_data, train_sim

    doc = json.loads(RESULT.read_text())
    cfg = ConvergeConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc["config"].items()
                            if k != "smoke"}).resolved()
    run = train_sim(load_task_data(cfg, 0), Spec.parse("topk:ratio=0.01"), 10)
    committed = [(c["step"], c["val_loss"]) for c in doc["curves"]
                 if c["spec"] == "topk:ratio=0.01" and c["seed"] == 0 and c["step"] <= 10]
    assert [r["step"] for r in run.curve] == [s for s, _ in committed] == [0, 10]
    assert [r["val_loss"] for r in run.curve] == pytest.approx([v for _, v in committed], rel=1e-6, abs=0)
