"""Approximate Random Dropout experiments (Song et al., DATE 2019) as tidy tables for the UIs:
the patterns, Algorithm 1's search trace, the per-unit drop frequency (Eq. 2), the layer speedup
sweep, and the MLP (§IV-A/B, Table I) and LSTM (§IV-C, Table II) training runs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import pandas as pd
import torch

from lab.dropout import PatternSampler, search
from lab.dropout.conventional import check_rate
from lab.dropout.search import default_max_dp
from lab.dropout.kinds import DEFAULT_TILE, KIND_LABELS, LAYER_KINDS, MODEL_KINDS
from lab.backend import Progress, RowSink
from lab.experiments.turns import Turns

# Table I of the paper: MNIST, rates (0.7, 0.7); accuracy (change vs conventional) and speedup.
# The 2048x2048 ROW change is printed as "(0.37%)" without a sign.
PAPER_MLP_TABLE1 = pd.DataFrame([
    ("1024x64", "row", 98.07, -0.42, 1.27), ("1024x64", "tile", 98.11, -0.38, 1.19),
    ("1024x1024", "row", 98.01, -0.35, 1.45), ("1024x1024", "tile", 98.15, -0.21, 1.41),
    ("2048x2048", "row", 98.44, 0.37, 1.77), ("2048x2048", "tile", 98.50, -0.31, 1.60),
    ("4096x4096", "row", 98.00, -0.47, 2.16), ("4096x4096", "tile", 98.16, -0.31, 1.95)],
    columns=["hidden", "kind", "paper_acc", "paper_acc_change", "paper_speedup"])
TABLE1_HIDDEN = ((1024, 64), (1024, 1024), (2048, 2048), (4096, 4096))
# Table II: 2-layer LSTM (1500 units), next-word accuracy (%) and speedup per rate pair.
PAPER_LSTM_TABLE2 = pd.DataFrame([
    ("(0.3,0.3)", "bernoulli", 47.9, 1.0), ("(0.5,0.5)", "bernoulli", 47.3, 1.0), ("(0.7,0.7)", "bernoulli", 45.9, 1.0),
    ("(0.3,0.3)", "row", 46.9, 1.18), ("(0.5,0.5)", "row", 46.0, 1.47), ("(0.7,0.7)", "row", 44.5, 1.53),
    ("(0.3,0.3)", "tile", 47.2, 1.18), ("(0.5,0.5)", "tile", 46.5, 1.43), ("(0.7,0.7)", "tile", 44.4, 1.49)],
    columns=["rates", "kind", "paper_acc", "paper_speedup"])
DEFAULT_RATES = ((0.3, 0.3), (0.5, 0.5), (0.7, 0.7))


def _rates_label(rates: Sequence[float]) -> str:
    return "(" + ",".join(f"{p:g}" for p in rates) + ")"


def check_kinds(kinds: Sequence[str]) -> list[str]:
    kinds = list(kinds)
    if not kinds:
        raise ValueError("need at least one dropout kind")
    for k in kinds:
        if k not in MODEL_KINDS:
            raise ValueError(f"dropout kind {k!r}; allowed: {', '.join(MODEL_KINDS)}")
    return kinds


def _sampler(p: float, kind: str, max_dp: Optional[int], tile: tuple[int, int], seed: int,
             lambda1: float = 0.9999) -> PatternSampler:
    n = max_dp if max_dp is not None else default_max_dp(p)
    return PatternSampler(search(p, n, lambda1=lambda1, seed=seed, trace_every=10**9), kind, tile, seed)


def pattern_masks(p: float = 0.5, kinds: Sequence[str] = LAYER_KINDS, *, samples: int = 3,
                  batch: int = 32, units: int = 64, tile: tuple[int, int] = DEFAULT_TILE, max_dp: Optional[int] = None,
                  seed: int = 0) -> pd.DataFrame:
    """Keep-masks of `samples` draws per kind on a batch x units activation (§III-A/B, Fig. 3):
    one row per entry (kind, sample, dp, bias, row, unit, kept)."""
    p = check_rate(p)
    if samples < 1 or batch < 1 or units < 1:
        raise ValueError("samples, batch and units must be >= 1")
    g = torch.Generator().manual_seed(seed)
    frames = []
    for kind in kinds:
        if kind not in LAYER_KINDS:
            raise ValueError(f"pattern kind {kind!r}; allowed: {', '.join(LAYER_KINDS)}")
        sampler = _sampler(p, kind, max_dp, tile, seed) if kind != "bernoulli" and p > 0 else None
        for s in range(samples):
            if sampler is None:
                mask = torch.rand(batch, units, generator=g) >= p
                dp, bias = None, None
            else:
                pat = sampler.sample()
                mask, dp, bias = pat.mask(batch, units), pat.dp, pat.bias
            r, u = torch.meshgrid(torch.arange(batch), torch.arange(units), indexing="ij")
            frames.append(pd.DataFrame({"kind": kind, "sample": s, "dp": dp, "bias": bias,
                                        "row": r.flatten().numpy(), "unit": u.flatten().numpy(),
                                        "kept": mask.flatten().numpy().astype(int)}))
    return pd.concat(frames, ignore_index=True)


def drop_frequency(p: float = 0.5, kinds: Sequence[str] = LAYER_KINDS, *, iterations: int = 2000,
                   batch: int = 32, units: int = 100, tile: tuple[int, int] = DEFAULT_TILE,
                   max_dp: Optional[int] = None, seed: int = 0,
                   progress: Optional[Progress] = None) -> pd.DataFrame:
    """Each unit's empirical drop frequency over `iterations` sampled patterns (Eq. 2: it should be
    p for every unit): kind, unit, drop_freq, z (deviation from p in binomial standard errors)."""
    p = check_rate(p)
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    g = torch.Generator().manual_seed(seed)
    rows = []
    for ki, kind in enumerate(kinds):
        dropped = torch.zeros(batch, units)
        sampler = _sampler(p, kind, max_dp, tile, seed) if kind != "bernoulli" and p > 0 else None
        for it in range(iterations):
            if sampler is None:
                dropped += (torch.rand(batch, units, generator=g) < p).float()
            else:
                dropped += (~sampler.sample().mask(batch, units)).float()
        if progress:
            progress((ki + 1) / len(kinds), f"{kind}: {iterations} patterns")
        freq = dropped / iterations  # per entry; a unit's frequency is the mean over the batch rows
        se = (p * (1 - p) / iterations) ** 0.5 if 0 < p < 1 else 1.0
        for u in range(units):
            f = float(freq[:, u].mean())
            rows.append({"kind": kind, "unit": u, "drop_freq": f, "entry_min": float(freq[:, u].min()),
                         "entry_max": float(freq[:, u].max()), "target_p": p, "z": (float(freq[0, u]) - p) / se})
    return pd.DataFrame(rows)


@dataclass
class SearchTables:
    """Algorithm 1's run: per-step loss terms and rate, d per traced step (long), and the final d."""

    trace: pd.DataFrame
    distribution: pd.DataFrame
    final: pd.DataFrame
    rate: float
    steps: int
    converged: bool


def search_trace(p: float = 0.5, n: Optional[int] = None, *, lambda1: float = 0.9999, lr: float = 1.0,
                 momentum: float = 0.9, threshold: float = 1e-10, max_steps: int = 100_000,
                 trace_every: int = 10, seed: int = 0, progress: Optional[Progress] = None) -> SearchTables:
    """Algorithm 1 (§III-C) with its trace: loss, E_p, E_n and expected rate per traced step, and
    the distribution d over dp = 1..N at each traced step."""
    n = n if n is not None else default_max_dp(check_rate(p))
    if progress:
        progress(0.0, f"searching d over dp = 1..{n} for p = {p}")
    res = search(p, n, lambda1=lambda1, lr=lr, momentum=momentum, threshold=threshold, max_steps=max_steps,
                 trace_every=trace_every, seed=seed)
    trace = pd.DataFrame([{k: v for k, v in r.items() if k != "d"} for r in res.trace])
    dist = pd.DataFrame([{"step": r["step"], "dp": i + 1, "prob": q} for r in res.trace for i, q in enumerate(r["d"])])
    final = pd.DataFrame({"dp": range(1, n + 1), "prob": res.d.tolist(),
                          "pattern_rate": [(i - 1) / i for i in range(1, n + 1)],
                          "keep_fraction": [1 / i for i in range(1, n + 1)]})
    if progress:
        progress(1.0, f"rate {res.rate:.5f} after {res.steps} steps")
    return SearchTables(trace, dist, final, res.rate, res.steps, res.converged)


def layer_speedup(widths: Sequence[int] = (1024, 2048, 4096), rates: Sequence[float] = (0.3, 0.5, 0.7), *,
                  batch: int = 128, steps: int = 16, repeats: int = 5, max_dp: Optional[int] = None,
                  tile: tuple[int, int] = DEFAULT_TILE, device: Optional[str] = None, threads: Optional[int] = None,
                  seed: int = 0, progress: Optional[Progress] = None) -> pd.DataFrame:
    """Forward+backward time of a hidden-layer pair: conventional dropout + full GEMMs vs RDP vs
    TDP (and dense without dropout), same run; speedup and its ratio to 1/(1-p). Run info in .attrs."""
    from lab.dropout import bench

    for p in rates:
        check_rate(p)
    df, info = bench.run(tuple(widths), tuple(rates), batch=batch, steps=steps, repeats=repeats, max_dp=max_dp,
                         tile=tile, device=device, threads=threads, seed=seed, progress=progress)
    df.attrs["info"] = info
    return df


@dataclass
class TrainingTables:
    """One row per run (the paper's table shape) and the training curves of all runs."""

    table: pd.DataFrame
    curves: pd.DataFrame


def compare_runs(table: pd.DataFrame, keys: list[str], metric: str, change: str) -> pd.DataFrame:
    """Add metric change and speedup against the conventional run with the same keys."""
    base = table[table.kind == "bernoulli"].set_index(keys)
    chg, spd, lo, hi = [], [], [], []
    for _, r in table.iterrows():
        k = tuple(r[c] for c in keys)
        k = k[0] if len(k) == 1 else k
        if k in base.index:
            b = base.loc[k]
            chg.append(r[metric] - float(b[metric]))
            spd.append(float(b["epoch_s"]) / r["epoch_s"])
            if "epoch_s_lo" in r:  # the speedup's range over the epochs: slowest vs fastest, both ways
                lo.append(float(b["epoch_s_lo"]) / r["epoch_s_hi"])
                hi.append(float(b["epoch_s_hi"]) / r["epoch_s_lo"])
        else:
            chg.append(float("nan"))
            spd.append(float("nan"))
            lo.append(float("nan"))
            hi.append(float("nan"))
    table[change] = chg
    table["speedup"] = spd
    if len(lo) == len(table):
        table["speedup_lo"], table["speedup_hi"] = lo, hi
    return table


class Contestants:
    """The runs of one table, one after another or (`side_by_side`) taking turns a logged point each (`Turns`), so a
    run stopped part-way (a callback raising) has a curve of every contestant up to about the same epoch. Progress
    is the mean of the runs' fractions. Each run keeps its own stream of torch's global generator across its turns
    (conventional dropout draws its masks from it), so the results equal the runs' one after another."""

    def __init__(self, n: int, side_by_side: bool, progress: Optional[Progress]) -> None:
        self.n, self.progress = n, progress
        self.fracs = [0.0] * n
        self.turns = Turns(n) if side_by_side and n > 1 else None

    def report(self, i: int, label: str, kind: str) -> Progress:
        """Run i's progress callback (the training loop's messages start with the raw kind: the label names it)."""
        def sub(frac: float, msg: str) -> None:
            self.fracs[i] = frac
            if self.progress:
                rest = msg[len(kind) + 1:] if msg.startswith(f"{kind} ") else msg
                self.progress(sum(self.fracs) / self.n, f"{label}: {rest}")
        return sub

    def point(self, i: int) -> None:
        """Run i logged a point: with turns, the next run goes on, and run i waits for its turn again."""
        if self.turns is not None:
            rng = torch.get_rng_state()
            self.turns.next(i)
            torch.set_rng_state(rng)

    def run(self, jobs: list[Callable[[], Any]]) -> list:
        return [job() for job in jobs] if self.turns is None else self.turns.run(jobs)


def mlp_table(dataset: str = "auto", path: Optional[str] = None, *,
              hidden: Sequence[Sequence[int]] = ((2048, 2048),), rates: Sequence[Sequence[float]] = DEFAULT_RATES,
              kinds: Sequence[str] = LAYER_KINDS, epochs: int = 1, batch: int = 128,
              lr: float = 0.01, momentum: float = 0.9, train_samples: Optional[int] = None,
              test_samples: Optional[int] = None, max_dp: Optional[int] = None,
              tile: tuple[int, int] = DEFAULT_TILE, threads: Optional[int] = None, seed: int = 0,
              progress: Optional[Progress] = None, on_point: Optional[RowSink] = None,
              on_row: Optional[RowSink] = None, side_by_side: bool = False) -> TrainingTables:
    """The MLP experiments (§IV-A: rates (0.3,0.3)..(0.7,0.7) on 784-2048-2048-10; §IV-B, Table I:
    hidden sizes at (0.7,0.7)): test accuracy and time per epoch for each dropout kind, the change
    in accuracy and the speedup against conventional dropout with the same sizes and rates.
    Curve points stream through `on_point` (run, step, epoch, train_loss, test_acc), and each run's
    table row through `on_row` as it finishes (before the change and speedup columns exist). side_by_side: the
    runs take turns, a logged point (a quarter epoch) each, with the same results (`Contestants`)."""
    from lab.dropout.train import train_mlp
    from lab.data.images import load_dataset

    kinds = check_kinds(kinds)
    hidden = [tuple(int(h) for h in hs) for hs in hidden]
    rates = [tuple(float(p) for p in r) for r in rates]
    for hs in hidden:
        if not hs or min(hs) < 1:
            raise ValueError(f"hidden sizes must be >= 1, got {hs}")
    for r in rates:
        for p in r:
            check_rate(p)
    if threads is not None:
        torch.set_num_threads(threads)
    ds = load_dataset(dataset, path, seed=seed)
    if train_samples is not None or test_samples is not None:
        ds = ds.subset(train_samples, test_samples, seed=seed)
    runs = [(hs, r, k) for hs in hidden for r in rates for k in kinds]
    bad = [(hs, r) for hs, r in {(hs, r) for hs, r, _ in runs} if len(r) != len(hs)]
    if bad:
        raise ValueError(f"each rate tuple needs one rate per hidden layer: {bad[0][1]} for hidden {bad[0][0]}")
    order = Contestants(len(runs), side_by_side, progress)

    def one(i: int, hs: tuple, r: tuple, kind: str) -> tuple[pd.DataFrame, dict]:
        label = f"{'x'.join(map(str, hs))} {_rates_label(r)} {KIND_LABELS[kind]}"
        tags = dict(run=label, kind=kind, hidden="x".join(map(str, hs)), rates=_rates_label(r))

        def point(row: dict) -> None:
            if on_point:
                on_point(dict(row, **tags))
            order.point(i)

        curve, s = train_mlp(ds.train_x, ds.train_y, ds.test_x, ds.test_y, ds.classes, hidden=hs, rates=r,
                             kind=kind, epochs=epochs, batch=batch, lr=lr, momentum=momentum, max_dp=max_dp,
                             tile=tile, seed=seed, progress=order.report(i, label, kind), on_point=point)
        row = {"dataset": ds.name, "hidden": "x".join(map(str, hs)), "rates": _rates_label(r), "kind": kind,
               "pattern": KIND_LABELS[kind], "test_acc": s["test_acc"], "epoch_s": s["epoch_s"],
               "epoch_s_lo": s["epoch_s_lo"], "epoch_s_hi": s["epoch_s_hi"],
               "epochs": epochs, "train_samples": len(ds.train_y), "test_samples": len(ds.test_y)}
        if on_row:
            on_row(dict(row))
        return curve.assign(**tags), row

    done = order.run([lambda i=i, run=run: one(i, *run) for i, run in enumerate(runs)])
    curves, rows = [curve for curve, _ in done], [row for _, row in done]
    table = compare_runs(pd.DataFrame(rows), ["hidden", "rates"], "test_acc", "acc_change")
    if set(table.rates) == {"(0.7,0.7)"}:
        table = table.merge(PAPER_MLP_TABLE1, on=["hidden", "kind"], how="left")
    return TrainingTables(table, pd.concat(curves, ignore_index=True))


def lstm_corpora() -> pd.DataFrame:
    """The LSTM experiment's corpora: name, what it is, and whether it can be loaded here without
    a path (Penn Treebank always needs one; 'auto' names the corpus it would pick)."""
    from lab.data.text import CORPORA, CORPUS_HELP, available_corpora

    found = available_corpora()
    rows = []
    for name in CORPORA:
        ok = bool(found) if name == "auto" else name in found
        text = CORPUS_HELP[name] + (f" (here: {found[0]})" if name == "auto" and found else "")
        rows.append({"corpus": name, "description": text, "available": ok, "needs_path": name == "ptb"})
    return pd.DataFrame(rows)


def lstm_table(corpus: str = "auto", path: Optional[str] = None, *, hidden: int = 256, layers: int = 2,
               rates: Sequence[Sequence[float]] = DEFAULT_RATES, kinds: Sequence[str] = LAYER_KINDS,
               epochs: int = 1, batch: int = 20, bptt: int = 35, lr: float = 1.0, lr_decay: float = 0.8,
               clip: float = 5.0, vocab_size: int = 10_000, max_train_tokens: Optional[int] = None,
               max_dp: Optional[int] = None, tile: tuple[int, int] = DEFAULT_TILE, threads: Optional[int] = None,
               seed: int = 0, progress: Optional[Progress] = None,
               on_point: Optional[RowSink] = None, on_row: Optional[RowSink] = None,
               side_by_side: bool = False) -> TrainingTables:
    """The LSTM language-model experiment (§IV-C, Table II): test perplexity, next-word accuracy
    and time per epoch for each dropout kind at each rate pair, with the change against
    conventional dropout at the same rates and the speedup. `corpus` is one of
    `lab.data.text.CORPORA` ('auto': PTB at `path`, else Debian's fortunes or bible-kjv, else the
    Python documentation that ships with Python); the table's `corpus` and `corpus_source`
    columns say which one was used. A missing corpus raises FileNotFoundError. Each run's table
    row streams through `on_row` as it finishes (before the change and speedup columns exist). side_by_side: as
    in `mlp_table`."""
    from lab.dropout.train import train_lstm
    from lab.data.text import load_corpus

    kinds = check_kinds(kinds)
    rates = [tuple(float(p) for p in r) for r in rates]
    for r in rates:
        if len(r) not in (1, layers):
            raise ValueError(f"rates {r}: need one rate or one per layer ({layers})")
        for p in r:
            check_rate(p)
    if threads is not None:
        torch.set_num_threads(threads)
    c = load_corpus(corpus, path, vocab_size=vocab_size, max_train_tokens=max_train_tokens, seed=seed)
    runs = [(r, k) for r in rates for k in kinds]
    order = Contestants(len(runs), side_by_side, progress)

    def one(i: int, r: tuple, kind: str) -> tuple[pd.DataFrame, dict]:
        label = f"{_rates_label(r)} {KIND_LABELS[kind]}"
        tags = dict(run=label, kind=kind, rates=_rates_label(r))

        def point(row: dict) -> None:
            if on_point:
                on_point(dict(row, **tags))
            order.point(i)

        curve, s = train_lstm(c.train, c.valid, c.test, c.vocab_size, hidden=hidden, layers=layers, rates=r,
                              kind=kind, epochs=epochs, batch=batch, bptt=bptt, lr=lr, lr_decay=lr_decay, clip=clip,
                              max_dp=max_dp, tile=tile, seed=seed, progress=order.report(i, label, kind), on_point=point)
        row = {"corpus": c.name, "corpus_source": c.source, "rates": _rates_label(r), "kind": kind,
               "pattern": KIND_LABELS[kind],
               "test_ppl": s["test_ppl"], "test_acc": s["test_acc"], "valid_ppl": s["valid_ppl"],
               "epoch_s": s["epoch_s"], "epoch_s_lo": s["epoch_s_lo"], "epoch_s_hi": s["epoch_s_hi"],
               "epochs": epochs, "hidden": hidden, "vocab": c.vocab_size,
               "train_tokens": int(c.train.numel())}
        if on_row:
            on_row(dict(row))
        return curve.assign(**tags), row

    done = order.run([lambda i=i, run=run: one(i, *run) for i, run in enumerate(runs)])
    curves, rows = [curve for curve, _ in done], [row for _, row in done]
    table = compare_runs(pd.DataFrame(rows), ["rates"], "test_ppl", "ppl_change")
    base = table[table.kind == "bernoulli"].set_index("rates")["test_acc"]
    table["acc_change"] = [r.test_acc - base[r.rates] if r.rates in base.index else float("nan")
                           for r in table.itertuples()]
    table = table.merge(PAPER_LSTM_TABLE2, on=["rates", "kind"], how="left")
    return TrainingTables(table, pd.concat(curves, ignore_index=True))
