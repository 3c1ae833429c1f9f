"""`paralab dropout ... | bench dropout`: approximate random dropout (Song et al. 2019)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import pandas as pd
import torch
import typer

from lab.experiments import DEFAULT_TILE, LAYER_KINDS, MODEL_KINDS

from .base import (ABOVE_ZERO, app, bench_app, bench_out, check_results_dir, console, device_option, emit, fail, json_option, numbers, out_option, print_frame, result,
                   Session, session)


dropout_app = typer.Typer(no_args_is_help=True,
                          help="Approximate Random Dropout (Song et al. 2019): patterns, the pattern-distribution "
                               "search, the MLP and LSTM experiments.")
app.add_typer(dropout_app, name="dropout")
TILE = ",".join(map(str, DEFAULT_TILE))


def _dropout_rate_sets(text: str, layers: int) -> list[tuple[float, ...]]:
    """'0.3;0.5,0.6' -> [(0.3,)*layers, (0.5, 0.6)]: groups split by ';', one value = every layer."""
    from lab.experiments import check_rate

    out = []
    for group in (g for g in text.split(";") if g.strip()):
        vals = numbers(group, "--rates")
        if len(vals) == 1:
            vals = vals * layers
        if len(vals) != layers:
            fail(f"--rates group {group!r} has {len(vals)} rates for {layers} layers (give one or {layers})")
        try:
            out.append(tuple(check_rate(p) for p in vals))
        except ValueError as e:
            fail(f"--rates: {e}")
    if not out:
        fail("--rates is empty")
    return out


def _dropout_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    for k in kinds:
        if k not in MODEL_KINDS:
            fail(f"--kinds {k!r}; allowed: {', '.join(MODEL_KINDS)}")
    if not kinds:
        fail("--kinds is empty")
    return kinds


def _keep_finished(s: Session, label: Callable[[dict], str]) -> dict:
    """on_row / on_point for a training table: each finished run's row and the curve points so far go
    into the session, so Ctrl-C writes them (marked partial)."""
    curves = s.extra.setdefault("curves", [])
    return {"on_row": lambda r: s.add([r], label(r)), "on_point": curves.append}


def _dropout_output(command: str, tables, title: str, out: Optional[Path], as_json: bool, config: dict,
                    cols: list[str]) -> None:
    if emit(result(command, config, rows=tables.table, curves=tables.curves), out, as_json):
        return
    print_frame(tables.table[[c for c in cols if c in tables.table]], title)


@dropout_app.command("search")
def dropout_search(p: float = typer.Option(0.5, "--p", "-p", min=0.0, max=1.0, help="target global dropout rate, 0 <= p < 1"),
                   max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n",
                                                        min=1, max=10_000, help="N, the largest dp (default: the smallest N >= 2 "
                                                             "with (N-1)/N >= p + min(0.025, (1-p)/2); 3 for "
                                                             "p = 0.5, 4 for 0.7, 14 for 0.9)"),
                   lambda1: float = typer.Option(0.9999, min=ABOVE_ZERO, max=1.0, help="weight of the rate term (lambda2 = 1 - lambda1)"),
                   lr: float = typer.Option(1.0, min=ABOVE_ZERO, max=1e6, help="SGD learning rate on v"),
                   threshold: float = typer.Option(1e-10, min=ABOVE_ZERO, max=1.0, help="stop when |loss change| < threshold"),
                   max_steps: int = typer.Option(100_000, min=1, max=100_000_000, help="give up after this many steps"),
                   trace: bool = typer.Option(False, "--trace", help="also print the loss trace"),
                   seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed of v's initialisation"),
                   as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Algorithm 1: the distribution d over dp = 1..N whose expected dropout rate is p."""
    from lab.experiments.dropout import search_trace

    try:
        t = search_trace(p, max_dp, lambda1=lambda1, lr=lr, threshold=threshold, max_steps=max_steps,
                         trace_every=max(1, max_steps // 2000), seed=seed)
    except ValueError as e:
        fail(str(e))
        return
    config = {"p": p, "max_dp": max_dp, "lambda1": lambda1, "lr": lr, "threshold": threshold, "max_steps": max_steps,
              "seed": seed}
    # rows: the distribution d over dp = 1..N
    if emit(result("dropout search", config, rows=t.final, rate=t.rate, steps=t.steps, converged=t.converged,
                   trace=t.trace if trace else None), out, as_json):
        return
    print_frame(t.final, f"Algorithm 1: d over dp = 1..{len(t.final)} for p = {p}")
    console.print(f"expected rate d.p_u = {t.rate:.6f} (target {p}, |error| {abs(t.rate - p):.1e}); "
                  f"{t.steps} steps, {'converged' if t.converged else 'step limit reached'}")
    if trace:
        print_frame(t.trace, "loss trace")


@dropout_app.command("patterns")
def dropout_patterns(p: float = typer.Option(0.5, "--p", "-p", min=0.0, max=1.0, help="dropout rate"),
                     kinds: str = typer.Option(",".join(LAYER_KINDS), help=", ".join(LAYER_KINDS)),
                     batch: int = typer.Option(16, min=1, max=1024, help="rows (samples) shown"),
                     units: int = typer.Option(64, min=1, max=4096, help="units shown"),
                     tile: str = typer.Option(TILE, help="tile rows,cols for the tile pattern (the paper's, §III-B)"),
                     iterations: int = typer.Option(2000, min=1, max=100_000, help="patterns drawn for the drop-frequency check"),
                     max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", min=1, max=10_000, help="N, the largest dp"),
                     seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
                     as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """One sampled mask per kind ('#' kept, '.' dropped) and every unit's drop frequency over many
    sampled patterns against p (the paper's Eq. 2)."""
    from lab.experiments.dropout import drop_frequency, pattern_masks

    tl = tuple(numbers(tile, "--tile", int))
    if len(tl) != 2:
        fail(f"--tile {tile!r}: give rows,cols")
    ks = [k.strip() for k in kinds.split(",") if k.strip()]
    try:
        masks = pattern_masks(p, ks, samples=1, batch=batch, units=units, tile=tl, max_dp=max_dp, seed=seed)
        freq = drop_frequency(p, ks, iterations=iterations, batch=batch, units=units, tile=tl, max_dp=max_dp,
                              seed=seed)
    except ValueError as e:
        fail(str(e))
        return
    drawn = {}
    for k, m in masks.groupby("kind", sort=False):
        grid = m.pivot(index="row", columns="unit", values="kept").to_numpy()
        dp = m["dp"].iloc[0]
        drawn[k] = {"dp": None if pd.isna(dp) else int(dp), "bias": None if pd.isna(dp) else int(m["bias"].iloc[0]),
                    "mask": ["".join("#" if v else "." for v in r) for r in grid]}
    summary = freq.assign(abs_z=freq["z"].abs()).groupby("kind", sort=False).agg(
        mean_drop=("drop_freq", "mean"), min_drop=("drop_freq", "min"), max_drop=("drop_freq", "max"),
        max_abs_z=("abs_z", "max")).reset_index()
    config = {"p": p, "kinds": ks, "batch": batch, "units": units, "tile": list(tl), "iterations": iterations,
              "max_dp": max_dp, "seed": seed}
    # rows: drop frequency per kind; masks: one sampled mask per kind ('#' kept); frequency: every unit's
    if emit(result("dropout patterns", config, rows=summary, masks=drawn, frequency=freq), out, as_json):
        return
    for k, d in drawn.items():
        console.print(f"{k}" + (f" (dp={d['dp']}, b={d['bias']})" if d["dp"] is not None else ""), highlight=False)
        for line in d["mask"]:
            console.print(line, highlight=False)
    print_frame(summary, f"drop frequency per unit over {iterations} patterns (target p = {p})")


@dropout_app.command("mlp")
def dropout_mlp(dataset: str = typer.Option("auto", help="auto | mnist | fashion-mnist | digits"),
                data_path: Optional[Path] = typer.Option(None, help="directory of MNIST-format IDX files"),
                hidden: str = typer.Option("2048,2048", help="hidden widths (the paper's 784-2048-2048-10)"),
                table1: bool = typer.Option(False, "--table1", help="Table I: hidden 1024x64, 1024x1024, 2048x2048, "
                                                                    "4096x4096 at rates (0.7, 0.7)"),
                rates: str = typer.Option("0.3;0.5;0.7", help="rate sets split by ';', one rate per hidden layer "
                                                              "or one for all, e.g. '0.3;0.5,0.7'"),
                kinds: str = typer.Option(",".join(LAYER_KINDS), help="bernoulli (conventional), row, tile, none"),
                epochs: int = typer.Option(1, min=1, max=10_000, help="epochs per run"),
                batch: int = typer.Option(128, min=1, max=1 << 20, help="mini-batch"),
                lr: float = typer.Option(0.01, min=ABOVE_ZERO, max=1000.0, help="learning rate"),
                momentum: float = typer.Option(0.9, min=0.0, max=1.0, help="SGD momentum"),
                train_samples: Optional[int] = typer.Option(None, min=1, max=1 << 31, help="seeded subset of the training set"),
                test_samples: Optional[int] = typer.Option(None, min=1, max=1 << 31, help="seeded subset of the test set"),
                max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", min=1, max=10_000, help="N, the largest dp"),
                smoke: bool = typer.Option(False, help="seconds: digits, hidden 64x64, one epoch"),
                threads: Optional[int] = typer.Option(None, min=1, max=1024, help="torch threads (same for every run)"),
                seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
                out: Optional[Path] = out_option(), as_json: bool = json_option()) -> None:
    """§IV-A/B: MLP test accuracy and time per epoch with conventional dropout, RDP and TDP."""
    from lab.experiments import DataError, check_dataset
    from lab.experiments.dropout import TABLE1_HIDDEN, mlp_table

    try:  # as given, also where --smoke or --table1 replaces them: a bad value is never silently dropped
        check_dataset(dataset, locate=False)
    except DataError as e:
        fail(str(e))
    _dropout_rate_sets(rates, len(numbers(hidden, "--hidden", int)))
    if smoke:
        dataset, hidden, epochs, batch = "digits", "64,64", 2, 32
        threads = threads or 1
    try:  # before any work: the data set is found (in --data-path alone when given)
        check_dataset(dataset, data_path)
    except DataError as e:
        fail(str(e))
    hs = [tuple(TABLE1_HIDDEN[i]) for i in range(len(TABLE1_HIDDEN))] if table1 else \
        [tuple(numbers(hidden, "--hidden", int))]
    rs = [(0.7,) * len(hs[0])] if table1 else _dropout_rate_sets(rates, len(hs[0]))
    ks = _dropout_kinds(kinds)
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    config = {"dataset": dataset, "hidden": hs, "rates": rs, "kinds": ks, "epochs": epochs, "batch": batch, "lr": lr,
              "momentum": momentum, "train_samples": train_samples, "test_samples": test_samples, "max_dp": max_dp,
              "smoke": smoke, "threads": threads, "seed": seed}
    try:
        with session("dropout mlp", config, out, as_json) as s:
            t = mlp_table(dataset, str(data_path) if data_path else None, hidden=hs, rates=rs, kinds=ks, epochs=epochs,
                          batch=batch, lr=lr, momentum=momentum, train_samples=train_samples,
                          test_samples=test_samples, max_dp=max_dp, threads=threads, seed=seed, progress=s.progress,
                          **_keep_finished(s, lambda r: f"{r['hidden']} {r['rates']} {r['pattern']}"))
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
        return
    ds = t.table["dataset"].iloc[0]
    n_tr, n_te = t.table["train_samples"].iloc[0], t.table["test_samples"].iloc[0]
    _dropout_output("dropout mlp", t, f"MLP on {ds} ({n_tr} train / {n_te} test, {epochs} epochs): test accuracy (%), change vs "
                       "conventional (points), time per epoch (s), speedup",
                    out, as_json, {**config, "dataset": ds, "threads": torch.get_num_threads()},
                    ["hidden", "rates", "pattern", "test_acc", "acc_change", "epoch_s", "speedup", "paper_acc",
                     "paper_acc_change", "paper_speedup"])


@dropout_app.command("lstm")
def dropout_lstm(corpus: str = typer.Option("auto", help="auto | ptb | fortunes | bible | pydoc (Python's own "
                                                         "documentation, always there)"),
                 path: Optional[Path] = typer.Option(None, help="Penn Treebank directory (ptb.train.txt, ...)"),
                 hidden: int = typer.Option(256, min=1, max=1 << 16, help="units per LSTM layer (the paper: 1500)"),
                 layers: int = typer.Option(2, min=1, max=64, help="LSTM layers"),
                 rates: str = typer.Option("0.3;0.5;0.7", help="rate sets split by ';' (one rate, or one per layer)"),
                 kinds: str = typer.Option(",".join(LAYER_KINDS), help="bernoulli (conventional), row, tile, none"),
                 epochs: int = typer.Option(1, min=1, max=10_000, help="epochs per run"),
                 batch: int = typer.Option(20, min=1, max=1 << 16, help="batch (the paper's 20)"),
                 bptt: int = typer.Option(35, min=1, max=1 << 16, help="truncated-BPTT length (the paper's 35)"),
                 lr: float = typer.Option(1.0, min=ABOVE_ZERO, max=1000.0, help="learning rate (the paper's 1)"),
                 lr_decay: float = typer.Option(0.8, min=ABOVE_ZERO, max=1.0, help="learning-rate factor per epoch after the first"),
                 vocab: int = typer.Option(10_000, min=3, max=10_000_000, help="vocabulary size (PTB's 10k)"),
                 max_tokens: Optional[int] = typer.Option(None, min=2, max=1 << 40, help="use only this many training tokens"),
                 max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", min=1, max=10_000, help="N, the largest dp"),
                 smoke: bool = typer.Option(False, help="seconds: 3,000 tokens, 32 units, vocab 500"),
                 threads: Optional[int] = typer.Option(None, min=1, max=1024, help="torch threads (same for every run)"),
                 seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
                 out: Optional[Path] = out_option(), as_json: bool = json_option()) -> None:
    """§IV-C: LSTM language model, test perplexity / next-word accuracy and time per epoch with
    conventional dropout, RDP and TDP on the non-recurrent connections."""
    from lab.experiments.dropout import lstm_table

    if smoke:
        max_tokens, hidden, vocab, epochs = 3000, 32, 500, 1
        threads = threads or 1
    if layers < 1 or hidden < 1:
        fail(f"--layers {layers}, --hidden {hidden}: both must be >= 1")
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    rs = _dropout_rate_sets(rates, layers)
    ks = _dropout_kinds(kinds)
    config = {"corpus": corpus, "hidden": hidden, "layers": layers, "rates": rs, "kinds": ks, "epochs": epochs,
              "batch": batch, "bptt": bptt, "lr": lr, "lr_decay": lr_decay, "vocab": vocab, "max_tokens": max_tokens,
              "max_dp": max_dp, "smoke": smoke, "threads": threads, "seed": seed}
    try:
        with session("dropout lstm", config, out, as_json) as s:
            t = lstm_table(corpus, str(path) if path else None, hidden=hidden, layers=layers, rates=rs, kinds=ks,
                           epochs=epochs, batch=batch, bptt=bptt, lr=lr, lr_decay=lr_decay, vocab_size=vocab,
                           max_train_tokens=max_tokens, max_dp=max_dp, threads=threads, seed=seed,
                           progress=s.progress, **_keep_finished(s, lambda r: f"{r['rates']} {r['pattern']}"))
    except (ValueError, FileNotFoundError) as e:
        fail(str(e))
        return
    c, src = t.table["corpus"].iloc[0], t.table["corpus_source"].iloc[0]
    n_tok = t.table["train_tokens"].iloc[0]
    _dropout_output("dropout lstm", t, f"LSTM LM on {c}: {src} ({n_tok} training tokens, {layers}x{hidden} units, "
                                       f"{epochs} epochs): test perplexity, next-word accuracy (%), time per epoch (s), "
                                       "speedup",
                    out, as_json, {**config, "corpus": c, "corpus_source": src, "threads": torch.get_num_threads()},
                    ["rates", "pattern", "test_ppl", "ppl_change", "test_acc", "acc_change", "epoch_s", "speedup",
                     "paper_acc", "paper_speedup"])


@bench_app.command("dropout")
def bench_dropout(widths: str = typer.Option("1024,2048,4096", help="layer widths w of the pair"),
                  rates: str = typer.Option("0.3,0.5,0.7", help="dropout rates p"),
                  batch: int = typer.Option(128, min=1, max=1 << 20, help="batch (rows of the activation)"),
                  steps: int = typer.Option(16, min=1, max=1_000_000, help="training steps per timed sample"),
                  repeats: int = typer.Option(5, min=1, max=10_000, help="timed samples per contestant (median reported)"),
                  max_dp: Optional[int] = typer.Option(None, "--max-dp", "-n", min=1, max=10_000, help="N, the largest dp"),
                  tile: str = typer.Option(TILE, help="TDP tile rows,cols (the paper's, §III-B)"),
                  threads: Optional[int] = typer.Option(None, min=1, max=1024, help="torch threads for every contestant"),
                  device: Optional[str] = device_option(),
                  seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
                  as_json: bool = json_option(),
                  out: Optional[Path] = out_option(" (default bench/results/dropout-<device>.json)")) -> None:
    """Forward+backward of a hidden-layer pair: conventional dropout + full GEMMs vs RDP vs TDP,
    same run; speedup and its ratio to the ceiling 1/(1-p)."""
    from lab import backend
    from lab.experiments import check_rate
    from lab.experiments.dropout import layer_speedup

    ws = numbers(widths, "--widths", int)
    ps = numbers(rates, "--rates")
    tl = tuple(numbers(tile, "--tile", int))
    if len(tl) != 2 or min(tl) < 1:
        fail(f"--tile {tile!r}: give two positive integers rows,cols")
    if min(ws) < 1 or batch < 1 or steps < 1 or repeats < 1:
        fail("--widths, --batch, --steps and --repeats must be >= 1")
    if threads is not None and threads < 1:
        fail(f"--threads {threads}; need >= 1")
    try:
        for p in ps:
            check_rate(p)
    except ValueError as e:
        fail(f"--rates: {e}")
    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda needs a CUDA GPU")
    config = {"widths": ws, "rates": ps, "batch": batch, "steps": steps, "repeats": repeats, "max_dp": max_dp,
              "tile": list(tl), "threads": threads, "device": dev.type, "seed": seed}
    check_results_dir(out, as_json)
    path = bench_out(out, as_json, f"dropout-{backend.device_slug(dev)}")
    info: dict = {}
    try:
        with session("bench dropout", config, path, as_json, device=backend.device_name(dev)) as s:
            for i, w in enumerate(ws):  # one width at a time: Ctrl-C keeps the finished ones
                part = layer_speedup([w], ps, batch=batch, steps=steps, repeats=repeats, max_dp=max_dp, tile=tl,
                                     device=dev, threads=threads, seed=seed, progress=s.part(i, len(ws)))
                info = part.attrs["info"]
                s.add(part.to_dict(orient="records"), f"width {w}")
    except ValueError as e:
        fail(str(e))
        return
    df = pd.DataFrame(s.rows)
    info = {**info, "widths": ws}
    device_name = info.pop("device")
    if emit(result("bench dropout", config, device=device_name, rows=df, **info), path, as_json):
        return
    info["device"] = device_name
    cols = ["width", "p", "contestant", "ms", "speedup", "ceiling", "of_ceiling", "kept_fraction"]
    print_frame(df[cols], f"Layer pair fwd+bwd on {info['device']}, batch {batch} "
                          "(speedup: conventional dropout + full GEMMs time / this time)")
