"""Training experiments for the UIs: curves of compressed data/model-parallel training, the
consistency models side by side, DDP with a codec hook, and the §3.4 reproduction."""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pandas as pd

from lab.train.reproduce import Reproduction, reproduce, type_summary
from lab.train.run import TrainConfig, TrainResult, load_data, train
from lab.data.images import DATASETS, DataError, locate_dataset
from lab.backend import Progress, RowSink
from lab.experiments.turns import Turns

CONFIG_FIELDS = tuple(f.name for f in fields(TrainConfig))


def config(**kw: Any) -> TrainConfig:
    """A TrainConfig from keyword arguments, naming any unknown one."""
    bad = sorted(set(kw) - set(CONFIG_FIELDS))
    if bad:
        raise ValueError(f"unknown training setting(s) {bad}; known: {', '.join(CONFIG_FIELDS)}")
    return TrainConfig(**kw)


def training_curves(variants: dict[str, dict[str, Any]], *, progress: Progress | None = None,
                    on_point: RowSink | None = None, side_by_side: bool = False,
                    **base: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One run per variant (settings laid over `base`), on the same data: the curves (a
    `variant` column; x = step, epoch, bytes or modelled time_s) and one summary row per variant.
    side_by_side: the runs take turns, one evaluation interval each (`Turns`), so a run stopped
    part-way (a callback raising) has a curve for every variant up to about the same epoch."""
    if not variants:
        raise ValueError("training_curves needs at least one variant")
    cfg0 = config(**base)
    configs = {name: replace(cfg0, **kw) for name, kw in variants.items()}
    for name, c in configs.items():
        try:
            c.check()
        except ValueError as e:
            raise ValueError(f"variant {name!r}: {e}") from None
    data = load_data(cfg0)
    fracs = [0.0] * len(configs)
    turns = Turns(len(configs)) if side_by_side else None

    def one(i: int, name: str, c: TrainConfig) -> tuple[pd.DataFrame, dict]:
        def sub(frac: float, msg: str, label=c.label()) -> None:
            fracs[i] = frac
            if progress:  # train() starts its messages with the run's label: say the variant's name once
                rest = msg[len(label) + 2:] if msg.startswith(f"{label}: ") else msg
                progress(sum(fracs) / len(configs), f"{name}: {rest}")

        def point(row: dict) -> None:
            if on_point:
                on_point(dict(row, variant=name))
            if turns is not None:
                turns.next(i)

        res = train(c, progress=sub, on_point=point, data=data)
        return res.curve.assign(variant=name), dict(variant=name, **res.summary, inputs=data.features,
                                                    architecture=architecture(c, data.features, data.classes))

    items = list(configs.items())
    if turns is None:
        done = [one(i, name, c) for i, (name, c) in enumerate(items)]
    else:
        done = turns.run([lambda i=i, name=name, c=c: one(i, name, c) for i, (name, c) in enumerate(items)])
    return pd.concat([d[0] for d in done], ignore_index=True), pd.DataFrame([d[1] for d in done])


def architecture(cfg: TrainConfig, inputs: int, classes: int) -> str:
    """The model as the paper writes it: 'MLP 784-1024-1024-10' (Dettmers 2016 §3.4), or 'CNN'."""
    if cfg.model == "mlp":
        return "MLP " + "-".join(str(k) for k in (inputs, *cfg.hidden, classes))
    return cfg.model.upper()


def dataset_info(dataset: str = "auto", *, data_path: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Which data set a run on `dataset` trains on here ('auto' falls back to scikit-learn's digits when
    no MNIST-format files are found): name, requested, fell_back, inputs, classes, image_shape,
    train and test sample counts, source (where it was read). A missing data set raises DataError."""
    ds = load_data(config(dataset=dataset, data_path=data_path, seed=seed))
    return dict(name=ds.name, requested=dataset, fell_back=dataset == "auto" and ds.name == "digits",
                inputs=ds.features, classes=ds.classes, image_shape=tuple(ds.image_shape), train=len(ds.train_y),
                test=len(ds.test_y), source=ds.source)


def check_dataset(dataset: str = "auto", data_path: Any = None, *, locate: bool = True) -> str:
    """`dataset` when a run can read it, checked without reading it (before any work): its name is known
    and (`locate`) its MNIST-format files are found, in `data_path` alone when given. DataError saying
    what is allowed or where it looked."""
    if not locate:
        if dataset not in DATASETS:
            raise DataError(f"unknown data set {dataset!r}; known: {', '.join(DATASETS)}")
        return dataset
    locate_dataset(dataset, data_path)
    return dataset


def codec_curves(codecs: list[str | None], *, progress: Progress | None = None,
                 on_point: RowSink | None = None, side_by_side: bool = False,
                 **base: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Data- or model-parallel training with each codec on the wire (None = 32-bit);
    'ef:<codec>' adds error feedback. side_by_side: the runs take turns (see `training_curves`)."""
    variants = {}
    for c in codecs:
        if c is None or c in ("", "none", "fp32"):
            variants["32-bit"] = dict(codec=None, error_feedback=False)
        elif c.startswith("ef:"):
            variants[f"ef({c[3:]})"] = dict(codec=c[3:], error_feedback=True)
        else:
            variants[c] = dict(codec=c, error_feedback=False)
    return training_curves(variants, progress=progress, on_point=on_point, side_by_side=side_by_side, **base)


def consistency_names(kinds: list[str], **base: Any) -> list[str]:
    """Each consistency run's name on the curves: ssp with its bound, gossip with its graph."""
    names = {"ssp": f"ssp(s={base.get('staleness', 2)})", "gossip": f"gossip({base.get('graph', 'ring')})"}
    return [names.get(k, k) for k in kinds]


def consistency_curves(kinds: list[str], *, progress: Progress | None = None, on_point: RowSink | None = None,
                       side_by_side: bool = False, **base: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The consistency models side by side (curves against steps and modelled time); side_by_side: the
    runs also take turns as they train (see `training_curves`)."""
    variants = dict(zip(consistency_names(kinds, **base), (dict(consistency=k) for k in kinds)))
    return training_curves(variants, progress=progress, on_point=on_point, side_by_side=side_by_side, **base)


def ddp_comparison(codec: str, procs: int = 2, *, error_feedback: bool = False, backend: str = "gloo",
                   progress: Progress | None = None, **base: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Real DDP processes: the plain fp32 all_reduce against `codec` as the communication hook."""
    from lab.train.ddp import train_ddp

    cfg = config(**base)
    runs = {"all_reduce (fp32)": replace(cfg, codec=None, error_feedback=False),
            f"{'ef(' + codec + ')' if error_feedback else codec} hook": replace(cfg, codec=codec,
                                                                             error_feedback=error_feedback)}
    curves, summaries = [], []
    for i, (name, c) in enumerate(runs.items()):
        def sub(frac: float, msg: str, i=i) -> None:
            if progress:
                progress((i + frac) / len(runs), msg)

        res = train_ddp(c, procs, backend=backend, progress=sub)
        curves.append(res.curve.assign(variant=name))
        summaries.append(dict(variant=name, **res.summary))
    return pd.concat(curves, ignore_index=True), pd.DataFrame(summaries)


def ddp_training(cfg: TrainConfig, procs: int, *, backend: str = "gloo", timeout: float = 600.0,
                 progress: Progress | None = None,
                 on_point: RowSink | None = None, trace: str | None = None) -> TrainResult | None:
    """PyTorch DDP with `cfg.codec` as the communication hook on `procs` local processes, or on
    torchrun's ranks when started by torchrun (then None on every rank but 0). on_point: each
    evaluation of rank 0's curve as it is made (local processes only). trace: a directory for one
    Chrome trace per rank (steps 3..5); the summary's `split` holds each rank's step split."""
    from .benchmarks import trace_dir

    trace = trace_dir(trace)
    from dataclasses import asdict

    from lab.comm.dist import TorchComm, in_torchrun
    from lab.train.ddp import assemble, ddp_rank, train_ddp

    if in_torchrun():
        cfg.check()
        comm = TorchComm.from_env(backend, timeout)
        every = comm.allgather_object(ddp_rank(comm, asdict(cfg), trace=trace))
        return assemble(cfg, every, backend) if comm.rank == 0 else None
    return train_ddp(cfg, procs, backend=backend, timeout=timeout, progress=progress, on_point=on_point, trace=trace)


def reproduction(which: str = "mnist-dp", *, seeds: int = 3, smoke: bool = False,
                 progress: Progress | None = None, on_point: RowSink | None = None,
                 on_run: RowSink | None = None, **base: Any) -> Reproduction:
    """Dettmers 2016 §3.4 (see lab.train.reproduce); each finished (type, seed) run's row streams
    through `on_run`."""
    cfg = config(**{"dataset": "auto", "workers": 1, "epochs": 3.0, **base})
    return reproduce(which, seeds=seeds, base=cfg, smoke=smoke, progress=progress, on_point=on_point,
                     on_run=on_run)


__all__ = ["TrainConfig", "TrainResult", "train", "training_curves", "codec_curves", "consistency_curves",
           "consistency_names",
           "ddp_comparison", "ddp_training", "reproduction", "config", "dataset_info", "check_dataset", "architecture"]


def reproduction_summary(runs: list[dict]) -> pd.DataFrame:
    """Per-type means (and CIs) of finished §3.4 runs, as `reproduction` reports them (a stopped run's rows)."""
    return type_summary(pd.DataFrame(runs))
