"""Approximate Random Dropout in training (Song et al. §IV): a seeded MLP run on scikit-learn digits
within the accuracy target, the experiment tables, the text corpora for the LSTM."""
import statistics

import pytest
import torch

from lab.experiments.dropout import (PAPER_MLP_TABLE1, drop_frequency, layer_speedup, lstm_table, mlp_table,
                                     pattern_masks, search_trace)
from lab.train.text import FORTUNES_DIR, batchify, bptt_batches, load_corpus, tokenize


pytestmark = pytest.mark.usefixtures("one_thread")


def test_mlp_accuracy_within_target_on_digits():
    """Conventional dropout vs RDP vs TDP at (0.5, 0.5), the paper's lr 0.01 and momentum 0.9,
    same seeds (same initial weights and batches): mean accuracy loss <= 0.5 points (the target)."""
    curves = []
    t = mlp_table("digits", hidden=((128, 128),), rates=((0.5, 0.5),), kinds=("bernoulli", "row", "tile"),
                  epochs=30, batch=32, seed=0, on_point=curves.append)
    accs = {k: [] for k in ("bernoulli", "row", "tile")}
    for seed in (0, 1, 2):
        if seed:
            t = mlp_table("digits", hidden=((128, 128),), rates=((0.5, 0.5),), kinds=("bernoulli", "row", "tile"),
                          epochs=30, batch=32, seed=seed)
        for r in t.table.itertuples():
            accs[r.kind].append(r.test_acc)
    mean = {k: statistics.mean(v) for k, v in accs.items()}
    assert mean["bernoulli"] > 95, mean
    for k in ("row", "tile"):
        assert mean["bernoulli"] - mean[k] <= 0.5, (k, accs)
    assert {"step", "epoch", "train_loss", "run", "kind"} <= set(curves[0])
    assert any("test_acc" in c for c in curves)


def test_mlp_table_shape_and_paper_columns():
    t = mlp_table("digits", hidden=((32, 16),), rates=((0.7, 0.7),), epochs=1, batch=64, seed=0)
    assert list(t.table.kind) == ["bernoulli", "row", "tile"]
    assert {"test_acc", "acc_change", "epoch_s", "speedup"} <= set(t.table.columns)
    assert t.table.loc[t.table.kind == "bernoulli", "acc_change"].iloc[0] == 0
    assert (t.table.epoch_s > 0).all() and len(t.curves) > 0
    assert len(PAPER_MLP_TABLE1) == 8
    with pytest.raises(ValueError, match="one rate per hidden layer"):
        mlp_table("digits", hidden=((8, 8),), rates=((0.5,),), epochs=1)
    with pytest.raises(ValueError, match="kind"):
        mlp_table("digits", hidden=((8, 8),), kinds=("gaussian",), epochs=1)


def test_pattern_and_search_tables():
    m = pattern_masks(0.5, samples=2, batch=8, units=16, tile=(4, 4))
    assert set(m.kind) == {"bernoulli", "row", "tile"} and len(m) == 3 * 2 * 8 * 16
    row = m[(m.kind == "row") & (m["sample"] == 0)]
    dp, b = int(row.dp.iloc[0]), int(row.bias.iloc[0])
    assert row[row.kept == 1].unit.unique().tolist() == list(range(b, 16, dp))
    f = drop_frequency(0.7, iterations=3000, batch=8, units=20, tile=(4, 4))
    assert f.groupby("kind").drop_freq.apply(lambda s: (s - 0.7).abs().max()).max() < 0.05
    t = search_trace(0.6, 8, trace_every=5)
    assert abs(t.rate - 0.6) < 1e-3 and t.converged
    assert {"step", "loss", "e_p", "e_n", "rate"} <= set(t.trace.columns)
    assert set(t.distribution.dp) == set(range(1, 9)) and abs(t.final.prob.sum() - 1) < 1e-9


def test_layer_speedup_table():
    df = layer_speedup((64,), (0.5,), batch=32, steps=2, repeats=1, seed=0)
    assert set(df.contestant) == {"dense", "conventional", "row", "tile"}
    assert (df.ms > 0).all() and (df.ceiling == 2).all()
    assert df.attrs["info"]["batch"] == 32 and "torch" in df.attrs["info"]["versions"]


def test_tokenize_batchify_and_ptb(tmp_path):
    assert tokenize("Don't PANIC, it's 42!") == ["don't", "panic", ",", "it's", "42", "!"]
    for split, text in (("train", "a b c\nb c d\n"), ("valid", "a b\n"), ("test", "c d e\n")):
        (tmp_path / f"ptb.{split}.txt").write_text(text)
    c = load_corpus("auto", tmp_path, vocab_size=4)
    assert c.name == "ptb" and c.vocab[:2] == ["<eos>", "<unk>"] and c.vocab_size == 4
    assert c.decode(c.train) == "<unk> b c <eos> b c <unk> <eos>"
    cols = batchify(torch.arange(11), 3)
    assert cols.shape == (3, 3) and cols[:, 0].tolist() == [0, 1, 2]
    pairs = list(bptt_batches(cols, 2))
    assert [p[0].shape[0] for p in pairs] == [2] and torch.equal(pairs[0][1], cols[1:3])
    with pytest.raises(FileNotFoundError, match="Penn Treebank"):
        load_corpus("ptb", tmp_path / "missing")
    with pytest.raises(ValueError, match="corpus"):
        load_corpus("wiki")
    with pytest.raises(ValueError, match="too few"):
        batchify(torch.arange(3), 4)


@pytest.mark.skipif(not FORTUNES_DIR.is_dir(), reason="Debian's fortunes not installed")
def test_fortunes_corpus_and_lstm_table():
    c = load_corpus("fortunes", vocab_size=2000, max_train_tokens=5000, seed=0)
    assert c.name == "fortunes" and c.train.numel() == 5000 and c.vocab_size == 2000
    assert int(c.train.max()) < 2000 and (c.train == 0).any()  # <eos> between fortunes
    t = lstm_table("fortunes", hidden=16, rates=((0.5, 0.5),), epochs=1, vocab_size=300, max_train_tokens=2000,
                   seed=0)
    assert list(t.table.kind) == ["bernoulli", "row", "tile"]
    assert (t.table.test_ppl > 1).all() and (t.table.test_ppl < 300 * 2).all()
    assert {"paper_acc", "paper_speedup", "ppl_change", "speedup"} <= set(t.table.columns)


def test_dropout_figures_build_from_the_tables():
    from lab import plots

    masks = pattern_masks(0.5, samples=2, batch=8, units=16, tile=(4, 4))
    assert len(plots.dropout_mask_figure(masks).data) == 6
    freq = drop_frequency(0.5, iterations=100, batch=8, units=16, tile=(4, 4))
    assert len(plots.drop_frequency_figure(freq).data) == 3
    t = search_trace(0.7)
    assert len(plots.search_trace_figure(t.trace).data) == 3
    bars = plots.search_distribution_figure(t.distribution).data[0]
    assert list(bars.x) == [1, 2, 3, 4] and abs(sum(bars.y) - 1) < 1e-9
    df = layer_speedup((32,), (0.5,), batch=16, steps=1, repeats=1)
    assert [tr.name for tr in plots.layer_speedup_figure(df).data][-1] == "ceiling 1/(1-p)"
    mt = mlp_table("digits", hidden=((8, 8),), rates=((0.5, 0.5),), epochs=1, batch=64)
    assert len(plots.dropout_table_figure(mt.table, "speedup").data) == 3
    assert len(plots.dropout_curve_figure(mt.curves, y="test_acc").data) == 3
