"""Batch size against speedup and perplexity on the LSTM (Song et al. 2019 §IV-C, Fig. 6b: "the speedup rate
increases when batch size increases. However, since one dropout pattern is applied to the whole batch, the
sub-models generated during training may not be sufficient, which raises the perplexity"), as tables for the
UIs. Each batch size trains conventional dropout and the patterns; the runs take turns (`Contestants`)."""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

from lab.backend import Progress, RowSink
from lab.dropout.conventional import check_rate
from lab.dropout.kinds import DEFAULT_TILE, KIND_LABELS
from lab.experiments.dropout import TrainingTables, check_kinds, Contestants, compare_runs

#: Fig. 6b's batch sizes are 20 to 40 (the text); the sweep's default adds 10 so the trend has three points
FIG6B_BATCHES = (10, 20, 40)


def lstm_batch_sweep(corpus: str = "auto", path: Optional[str] = None, *, batches: Sequence[int] = FIG6B_BATCHES,
                     p: float = 0.7, kinds: Sequence[str] = ("bernoulli", "row"), hidden: int = 128, layers: int = 3,
                     epochs: int = 1, bptt: int = 35, lr: float = 1.0, lr_decay: float = 0.8, clip: float = 5.0,
                     vocab_size: int = 2000, max_train_tokens: Optional[int] = 20_000, max_dp: Optional[int] = None,
                     tile: tuple[int, int] = DEFAULT_TILE, seed: int = 0, progress: Optional[Progress] = None,
                     on_point: Optional[RowSink] = None, on_row: Optional[RowSink] = None,
                     side_by_side: bool = True) -> TrainingTables:
    """Fig. 6b on a small LSTM language model (3 layers, as the paper's PTB model): for each batch size, test
    perplexity and time per epoch of each kind at rate p in every layer; per batch, the perplexity change and
    the speedup against conventional dropout at that batch. Rows stream through `on_row` as runs finish."""
    from lab.data.text import load_corpus
    from lab.dropout.train import train_lstm

    kinds = check_kinds(kinds)
    p = check_rate(p)
    batches = [int(b) for b in batches]
    if not batches or min(batches) < 1:
        raise ValueError(f"batch sizes must be whole numbers >= 1, got {list(batches)}")
    if layers < 1 or hidden < 1 or epochs < 1:
        raise ValueError("layers, hidden and epochs must be >= 1")
    c = load_corpus(corpus, path, vocab_size=vocab_size, max_train_tokens=max_train_tokens, seed=seed)
    runs = [(b, k) for b in batches for k in kinds]
    order = Contestants(len(runs), side_by_side, progress)

    def one(i: int, b: int, kind: str) -> tuple[pd.DataFrame, dict]:
        label = f"batch {b} {KIND_LABELS[kind]}"
        tags = dict(run=label, kind=kind, batch=b)

        def point(row: dict) -> None:
            if on_point:
                on_point(dict(row, **tags))
            order.point(i)

        curve, s = train_lstm(c.train, c.valid, c.test, c.vocab_size, hidden=hidden, layers=layers,
                              rates=(p,) * layers, kind=kind, epochs=epochs, batch=b, bptt=bptt, lr=lr,
                              lr_decay=lr_decay, clip=clip, max_dp=max_dp, tile=tile, seed=seed,
                              progress=order.report(i, label, kind), on_point=point)
        row = {"batch": b, "kind": kind, "pattern": KIND_LABELS[kind], "p": p, "test_ppl": s["test_ppl"],
               "test_acc": s["test_acc"], "epoch_s": s["epoch_s"], "epoch_s_lo": s["epoch_s_lo"],
               "epoch_s_hi": s["epoch_s_hi"], "hidden": hidden, "layers": layers, "epochs": epochs,
               "corpus": c.name, "train_tokens": int(c.train.numel()), "vocab": c.vocab_size}
        if on_row:
            on_row(dict(row))
        return curve.assign(**tags), row

    done = order.run([lambda i=i, run=run: one(i, *run) for i, run in enumerate(runs)])
    table = compare_runs(pd.DataFrame([row for _, row in done]), ["batch"], "test_ppl", "ppl_change")
    return TrainingTables(table, pd.concat([curve for curve, _ in done], ignore_index=True))
