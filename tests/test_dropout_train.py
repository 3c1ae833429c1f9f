"""Approximate Random Dropout in training (Song et al. §IV): a seeded MLP run on scikit-learn digits
within the accuracy target, the experiment tables, the text corpora for the LSTM."""
import statistics

import pytest
import torch

from lab.experiments.dropout import (PAPER_MLP_TABLE1, drop_frequency, layer_speedup, lstm_table, mlp_table,
                                     pattern_masks, search_trace)
from lab.data.system import ENV_ROOT
from lab.data.text import available_corpora, batchify, bptt_batches, fortunes_dir, load_corpus, tokenize


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


class _Enough(Exception):
    pass


def test_side_by_side_runs_take_turns_with_the_results_of_runs_one_after_another():
    """The Dropout page trains its contestants side by side, a logged point each in turn, so a Stop keeps a curve
    of every one; each run keeps its own stream of torch's generator (conventional dropout's masks), so the
    tables and curves are those of the runs one after another, bit for bit."""
    kw = dict(hidden=((64, 64),), rates=((0.7, 0.7),), epochs=2, batch=64, lr=0.01, seed=0)
    alone = mlp_table("digits", **kw)
    order, fracs = [], []
    turns = mlp_table("digits", side_by_side=True, on_point=lambda r: order.append(r["kind"]),
                      progress=lambda f, m: fracs.append(f), **kw)
    assert turns.table.test_acc.tolist() == alone.table.test_acc.tolist()
    assert turns.curves.train_loss.tolist() == alone.curves.train_loss.tolist()
    assert order == ["bernoulli", "row", "tile"] * (len(alone.curves) // 3)  # one point a turn, round robin
    assert fracs == sorted(fracs) and fracs[-1] == 1.0  # the mean of the three runs' progress
    # stopped part-way (a callback raising, as Stop does), every contestant has come about as far
    seen = []

    def stop_at_seven(row: dict) -> None:
        seen.append(row["kind"])
        if len(seen) == 7:
            raise _Enough()

    with pytest.raises(_Enough):
        mlp_table("digits", side_by_side=True, on_point=stop_at_seven, **kw)
    assert seen == ["bernoulli", "row", "tile"] * 2 + ["bernoulli"]
    lkw = dict(hidden=16, rates=((0.5, 0.5),), kinds=("bernoulli", "row"), epochs=1, vocab_size=300,
               max_train_tokens=2000, seed=0)
    assert (lstm_table("auto", side_by_side=True, **lkw).table.test_ppl.tolist()
            == lstm_table("auto", **lkw).table.test_ppl.tolist())


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


WORDS = ("the cat sat on a mat while the dog ran to the park and a bird sang in the old tree near "
         "our house every morning before the sun rose over the quiet hills").split()


def _fake_fortunes(root, n=400):
    """A hand-made Debian `fortunes` install under a system root: two files of '%'-separated fortunes."""
    d = root / "usr" / "share" / "games" / "fortunes"
    d.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for name in ("wisdom", "people"):
        texts = [" ".join(WORDS[int(i)] for i in torch.randint(len(WORDS), (12,), generator=g)) + "."
                 for _ in range(n // 2)]
        (d / name).write_text("\n%\n".join(texts) + "\n%\n")
        (d / f"{name}.dat").write_bytes(b"\0" * 24)  # strfile's index: not text, skipped
    return d


def _fake_bible(root):
    """A `bible` command in <root>/usr/bin printing three chapters the way bible-kjv's -l0 does."""
    b = root / "usr" / "bin"
    b.mkdir(parents=True)
    lines = []
    for ch in range(3):
        lines.append(f"Genesis {ch + 1}")
        lines += [f"  {v + 1} In the beginning God created the heaven and the earth {ch} {v}." for v in range(5)]
    exe = b / "bible"
    exe.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    exe.chmod(0o755)


def test_a_fresh_machine_falls_back_to_pythons_own_documentation():
    """The session's system root is empty (conftest): no fortunes, no bible, so 'auto' reads the
    documentation every Python ships, and says so."""
    assert available_corpora() == ["pydoc"]
    c = load_corpus("auto", vocab_size=2000, max_train_tokens=5000, seed=0)
    assert c.name == "pydoc" and "pydoc_data.topics" in c.source
    assert c.train.numel() == 5000 and c.vocab_size == 2000 and (c.train == 0).any()
    assert load_corpus("pydoc", vocab_size=50, seed=1).train.numel() > 50_000  # the whole text: ~90 K tokens
    for name, pkg in (("fortunes", "apt install fortunes"), ("bible", "apt install bible-kjv")):
        with pytest.raises(FileNotFoundError, match=pkg):
            load_corpus(name)
    with pytest.raises(FileNotFoundError, match="needs the Penn Treebank directory"):
        load_corpus("ptb")
    t = lstm_table("auto", hidden=16, rates=((0.5, 0.5),), kinds=("bernoulli", "row"), epochs=1, vocab_size=300,
                   max_train_tokens=2000, seed=0)
    assert set(t.table.corpus) == {"pydoc"} and t.table.corpus_source.str.contains("Python").all()
    assert (t.table.test_ppl > 1).all()


def test_system_root_redirects_debian_data_and_debian_corpora_come_first(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_ROOT, str(tmp_path))
    _fake_bible(tmp_path)
    assert available_corpora() == ["bible", "pydoc"]
    c = load_corpus("auto", vocab_size=100)
    assert c.name == "bible" and str(tmp_path) in c.source and "3 chapters" in c.source
    d = _fake_fortunes(tmp_path)
    assert fortunes_dir() == d and available_corpora() == ["fortunes", "bible", "pydoc"]
    c = load_corpus("auto", vocab_size=2000, max_train_tokens=2000, seed=0)
    assert c.name == "fortunes" and "2 files, 400 fortunes" in c.source
    assert int(c.train.max()) < 2000 and (c.train == 0).any()  # <eos> between fortunes
    t = lstm_table("fortunes", hidden=16, rates=((0.5, 0.5),), epochs=1, vocab_size=300, max_train_tokens=2000,
                   seed=0)
    assert list(t.table.kind) == ["bernoulli", "row", "tile"] and set(t.table.corpus) == {"fortunes"}
    assert (t.table.test_ppl > 1).all() and (t.table.test_ppl < 300 * 2).all()
    assert {"paper_acc", "paper_speedup", "ppl_change", "speedup"} <= set(t.table.columns)


def test_real_fortunes_when_installed(real_system_data):
    if "fortunes" not in available_corpora():
        pytest.skip("Debian's fortunes not installed (apt install fortunes)")
    c = load_corpus("fortunes", vocab_size=2000, max_train_tokens=5000, seed=0)
    assert c.name == "fortunes" and c.train.numel() == 5000 and c.vocab_size == 2000


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
