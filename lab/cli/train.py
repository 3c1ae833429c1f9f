"""`paralab train`: simulated, DDP and FSDP2 training with codecs on the wire, every registered parallelism on
real ranks (pipeline, tensor, hybrid, expert: `--mode NAME`), and the §3.4 reproduction."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from lab.experiments import CONSISTENCY_KINDS, TrainConfig, check_backend

from .base import ABOVE_ZERO, app, console, emit, fail, json_option, numbers, out_option, print_frame, result, runs_under_torchrun, session
from .names import RegistryHelp


D = TrainConfig()  # the defaults, declared once (the consistency settings in lab.train.consistency)


@app.command(cls=RegistryHelp)
@runs_under_torchrun("train")
def train(
    mode: str = typer.Option("sim", help="sim: K virtual workers in this process; ddp: real processes, "
                                         "PyTorch DDP with the codec as its communication hook; fsdp: real "
                                         "processes, PyTorch FSDP2 with codecs on its all-gather and reduce-scatter; "
                                         "or a parallelism on real processes, --codec on what its ranks send: "
                                         "{parallelisms}"),
    reproduce: Optional[str] = typer.Option(None, help="Dettmers 2016 §3.4: mnist-dp or mnist-mp "
                                                       "(every type, --seeds seeds, CIs, ANOVA)"),
    seeds: int = typer.Option(3, min=1, max=1000, help="seeds for --reproduce"),
    smoke: bool = typer.Option(False, help="--reproduce on scikit-learn digits with a small MLP, in seconds"),
    dataset: Optional[str] = typer.Option(None, help="auto | mnist | fashion-mnist | digits "
                                                     "(default digits; --reproduce: auto)"),
    data_path: Optional[Path] = typer.Option(None, help="directory of MNIST-format IDX files"),
    train_limit: Optional[int] = typer.Option(None, min=1, max=1 << 31, help="use a seeded subset of this many training samples"),
    model: str = typer.Option("mlp", help="mlp (the paper's 784-1024-1024-10) | cnn"),
    hidden: str = typer.Option("1024,1024", help="hidden layer widths ('': no hidden layer)"),
    dropout: Optional[str] = typer.Option(None, help="dropout rates: input, then each hidden layer "
                                                     "(default the paper's 0.2, then 0.3 per hidden layer)"),
    activation: str = typer.Option("relu", help="relu | logistic"),
    parallel: str = typer.Option("data", help="data | model (sim mode)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-k",
                                          min=1, max=1024, help="virtual workers K (default 4; --reproduce: 1, the paper's "
                                               "single-GPU simulation)"),
    procs: int = typer.Option(2, "--procs", "-p", min=1, max=1024, help="processes (ddp, fsdp and the parallelisms)"),
    codec: Optional[str] = typer.Option(None, help="codec on the wire (none = 32-bit), e.g. dynamic_tree"),
    error_feedback: bool = typer.Option(False, "--error-feedback", help="keep each worker's residual (1-bit SGD)"),
    scheme: str = typer.Option("all", help="all: every gradient compressed; paper: own gradient 32-bit"),
    algorithm: Optional[str] = typer.Option(None, help="allreduce algorithm: sim: of the simulated workers (default "
                                                       "ring); ddp: DDP's gradient sum through a communication hook "
                                                       "(default native: DDP's own all_reduce): native | {algorithms}; "
                                                       "hybrid: the conv gradients' allreduce"),
    consistency: str = typer.Option(D.consistency, help=" | ".join(CONSISTENCY_KINDS)),
    staleness: int = typer.Option(D.staleness, min=0, max=1_000_000, help="ssp: staleness bound s (clocks)"),
    delay_ms: float = typer.Option(D.delay_s * 1e3, min=0.0, max=1e7, help="async: mean random network delay per push, ms"),
    straggler: float = typer.Option(D.straggler, min=0.0, max=10.0, help="sigma of the log-normal compute-time jitter per worker step"),
    alpha: Optional[float] = typer.Option(D.alpha, min=ABOVE_ZERO, max=1.0, help="easgd: elastic alpha (default beta/K)"),
    beta: float = typer.Option(D.beta, min=ABOVE_ZERO, max=1.0, help="easgd: centre moving rate beta"),
    period: int = typer.Option(D.period, min=1, max=1_000_000, help="easgd: steps between elastic exchanges"),
    graph: str = typer.Option(D.graph, help="gossip: the workers' neighbours, ring | random (seeded)"),
    optimizer: str = typer.Option("rmsprop", help="rmsprop (the paper's) | sgd (momentum)"),
    lr: float = typer.Option(0.003, min=ABOVE_ZERO, max=1000.0, help="learning rate"),
    momentum: float = typer.Option(0.9, min=0.0, max=1.0, help="sgd momentum"),
    batch: int = typer.Option(128, min=1, max=1 << 24, help="global mini-batch"),
    epochs: Optional[float] = typer.Option(None, min=0.001, max=10_000.0, help="epochs, fractions allowed (default 1; --reproduce: 3)"),
    evals: int = typer.Option(4, min=1, max=10_000, help="test evaluations per epoch"),
    link: str = typer.Option("eth10g", help="link preset for the modelled clock: pcie3, nvlink4, ib_hdr, "
                                            "eth1g, eth10g, ..."),
    compute_ms: Optional[float] = typer.Option(None, min=ABOVE_ZERO, max=1e7, help="modelled compute per worker step (default: measured)"),
    weights_codec: Optional[str] = typer.Option(None, help="fsdp: codec on the weights' all-gather (qwZ), e.g. "
                                                           "mxfp8_e4m3 (none = fp32)"),
    grads_codec: Optional[str] = typer.Option(None, help="fsdp: codec on the gradients' reduce-scatter (qgZ, "
                                                         "one-shot all-to-all), e.g. dynamic_tree, ef:topk; hybrid: "
                                                         "on the data-parallel conv layers' gradients"),
    all_gather: Optional[str] = typer.Option(None, "--all-gather", help="fsdp: the weights' all-gather algorithm: "
                                             "native (the process group's own, default) or a registered one, e.g. "
                                             "ring, recursive_doubling, bruck (`bench collectives --op all_gather`)"),
    reduce_scatter: Optional[str] = typer.Option(None, "--reduce-scatter", help="fsdp: the gradients' reduce-scatter "
                                                 "algorithm: native (default: the process group's own, with a codec "
                                                 "one-shot all-to-all) or a registered one, e.g. ring, direct"),
    hpz: Optional[int] = typer.Option(None, min=1, max=1024, help="fsdp: ZeRO++ hpZ, ranks per node: a secondary weight "
                                                                  "shard per node, the backward all-gather stays inside it"),
    overlap: bool = typer.Option(True, "--overlap/--no-overlap", help="fsdp: async all-gathers, the next unit's "
                                 "issued before this one computes (FSDP2 prefetch); --no-overlap: FSDP2's blocking "
                                 "defaults"),
    baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="fsdp: also train fp32 FSDP2 and DDP "
                                                                            "on the same data and seeds"),
    link_rate: Optional[str] = typer.Option(None, "--link-rate", help="fsdp: nodes talk over a shaped link of "
                                                                      "this rate, e.g. 1gbit (root); the "
                                                                      "parallelisms: every rank does"),
    ranks_per_node: Optional[int] = typer.Option(None, "--ranks-per-node", min=1, max=1024,
                                                 help="fsdp: ranks per node (default --hpz or 1): the "
                                                      "shaped link's layout and the cross-node byte counts"),
    backend_name: str = typer.Option("gloo", "--backend", help="ddp, fsdp: gloo | nccl"),
    timeout: float = typer.Option(600.0, min=1.0, max=604_800.0, help="ddp: seconds a rank may wait on a peer"),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
    schedule: Optional[str] = typer.Option(None, help="pipeline: the schedule, torch's names lower-cased: "
                                                      "{schedules} (default 1f1b)"),
    microbatches: Optional[int] = typer.Option(None, min=1, max=4096, help="pipeline: micro-batches per step "
                                                                           "(default 4)"),
    stages_per_rank: Optional[int] = typer.Option(None, "--stages-per-rank", min=1, max=64,
                                                  help="pipeline: stages per rank (default 1, or 2 for the "
                                                       "multi-stage schedules)"),
    data: Optional[int] = typer.Option(None, min=1, max=1024, help="pipeline, tensor: data-parallel replicas, a 2-D "
                                                                  "mesh (procs = data x model ranks; default 1)"),
    sequence_parallel: bool = typer.Option(False, "--sequence-parallel", help="tensor: sequence parallelism "
                                           "(reduce-scatter / all-gather instead of the all-reduce)"),
    experts: Optional[int] = typer.Option(None, min=1, max=1024, help="expert: experts in the mixture-of-experts "
                                                                     "layer (default 4)"),
    top_k: Optional[int] = typer.Option(None, "--top-k", min=1, max=1024, help="expert: experts per token (default 1)"),
    capacity_factor: Optional[float] = typer.Option(None, "--capacity-factor", min=ABOVE_ZERO, max=1000.0,
                                                    help="expert: tokens an expert takes, x the even share; the "
                                                         "rest are dropped (default 1.25)"),
    combine: Optional[str] = typer.Option(None, help="expert: the combine all-to-all's precision, fp32 | bf16 "
                                                     "(default fp32)"),
    expert_hidden: Optional[int] = typer.Option(None, "--expert-hidden", min=1, max=1 << 20,
                                                help="expert: each expert's hidden width (default 256)"),
    setting: Optional[List[str]] = typer.Option(None, "--setting", help="a parallelism's setting that has no option "
                                                "of its own (a plugin strategy's), NAME=VALUE; repeat it for more"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="ddp, fsdp, the parallelisms: record steps 3..5 under torch.profiler and write "
                                         "one Chrome/Perfetto trace per rank to this directory (forward, backward, "
                                         "optimizer, encode, add ranges); the summary gains each rank's split "
                                         "(docs/trace.md)"),
    out: Optional[Path] = out_option(),
    as_json: bool = json_option(),
) -> None:
    """Train with compressed gradients/activations: simulated K workers (data or model parallel,
    consistency models), real DDP or FSDP2 processes, or a parallelism on real processes ({parallelisms});
    --reproduce runs Dettmers 2016 §3.4.

    Runs under torchrun too with --mode ddp (one process per rank; rank 0 prints and writes the result):
    `torchrun --nproc-per-node 2 -m lab train --mode ddp --codec dynamic_tree`; --mode fsdp likewise
    (`--weights-codec mxfp8_e4m3 --grads-codec dynamic_tree [--hpz 2]`), and every parallelism."""
    from dataclasses import asdict

    from lab.experiments import in_torchrun, parallel_strategies

    rep = reproduce is not None
    dataset = dataset or ("auto" if rep else "digits")
    workers = workers or (1 if rep else 4)
    epochs = epochs or (3.0 if rep else 1.0)
    strategies = parallel_strategies()
    real = mode in ("ddp", "fsdp") or mode in strategies
    if real:
        if in_torchrun():  # torchrun decides the world, not --procs
            import os

            procs = int(os.environ["WORLD_SIZE"])
    widths = tuple(numbers(hidden, "--hidden", int, allow_empty=True))
    rates = tuple(numbers(dropout, "--dropout", allow_empty=True)) if dropout else (0.2,) + (0.3,) * len(widths)
    try:
        cfg = TrainConfig(dataset=dataset, data_path=str(data_path) if data_path else None, train_limit=train_limit,
                          model=model, hidden=widths, dropout=rates, activation=activation, parallel=parallel,
                          workers=procs if real else workers, codec=codec,
                          algorithm=algorithm if mode == "sim" and algorithm is not None else "ring",
                          hook_algorithm=algorithm if mode == "ddp" and algorithm != "native" else None,
                          scheme=scheme, error_feedback=error_feedback, consistency=consistency,
                          staleness=staleness, delay_s=delay_ms / 1e3, straggler=straggler, alpha=alpha, beta=beta,
                          period=period, graph=graph, optimizer=optimizer, lr=lr, momentum=momentum, batch=batch, epochs=epochs,
                          evals_per_epoch=evals, link=link, compute_s=compute_ms / 1e3 if compute_ms is not None else None,
                          seed=seed)
        if mode not in ("sim", "ddp", "fsdp") and mode not in strategies:
            raise ValueError(f"--mode {mode!r}; allowed: " + ", ".join(["sim", "ddp", "fsdp", *strategies]))
        if trace is not None and not real:
            raise ValueError("--trace records real processes: use it with --mode ddp, fsdp or "
                             + " | ".join(strategies))
        if reproduce is not None:
            if mode != "sim":
                raise ValueError(f"--reproduce runs the simulated workers; drop --mode {mode}")
        options = _strategy_options(mode, strategies, schedule=schedule, microbatches=microbatches,
                                    stages_per_rank=stages_per_rank, data=data, sequence_parallel=sequence_parallel,
                                    experts=experts, top_k=top_k, capacity_factor=capacity_factor, combine=combine,
                                    expert_hidden=expert_hidden)
        for item in setting or ():
            if mode not in strategies:
                raise ValueError(f"--setting is an option of the parallelisms ({' | '.join(strategies)}), not of "
                                 f"--mode {mode}")
            from lab.experiments import parse_setting

            key, value = parse_setting(mode, item)
            if key in options:
                raise ValueError(f"--setting {item!r}: {key} is given twice")
            options[key] = value
        fsdp_only = {"--weights-codec": weights_codec, "--grads-codec": grads_codec, "--hpz": hpz,
                     "--all-gather": all_gather, "--reduce-scatter": reduce_scatter,
                     "--link-rate": link_rate, "--ranks-per-node": ranks_per_node}
        if mode in strategies:  # a parallelism takes the shaped link, and --grads-codec where its settings have it
            fsdp_only = {k: v for k, v in fsdp_only.items() if k not in ("--grads-codec", "--link-rate")}
        if mode != "fsdp" and any(v is not None for v in fsdp_only.values()):
            raise ValueError(f"{', '.join(k for k, v in fsdp_only.items() if v is not None)}: --mode fsdp's "
                             f"option(s); add --mode fsdp")
        if algorithm is not None and mode == "fsdp":
            raise ValueError("--algorithm is the allreduce of --mode sim and ddp; FSDP's collectives are "
                             "--all-gather and --reduce-scatter")
        # every option is checked in every mode (a name no mode takes is never silently kept), before any work
        check_backend(backend_name)
        cfg.check()
        if mode in strategies:
            if grads_codec is not None:
                options["grads_codec"] = grads_codec
            if algorithm is not None:
                options["algorithm"] = algorithm
            return _train_parallel(mode, cfg, procs, options, backend_name, link_rate, timeout,
                                   None if trace is None else str(trace), out, as_json)
        if mode == "fsdp":
            if codec is not None or error_feedback:
                raise ValueError("--mode fsdp takes --weights-codec and --grads-codec (ef:CODEC for error feedback), "
                                 "not --codec / --error-feedback")
            config = {**_config(mode, cfg), "procs": procs, "backend": backend_name,
                      "weights_codec": weights_codec, "grads_codec": grads_codec, "hpz": hpz, "baselines": baselines,
                      "overlap": overlap, "link_rate": link_rate, "ranks_per_node": ranks_per_node,
                      "all_gather": all_gather, "reduce_scatter": reduce_scatter}
            if trace is not None:
                config["trace"] = str(trace)
            return _train_fsdp(cfg, procs, config, timeout, out, as_json)
        if reproduce is not None:
            return _reproduce(reproduce, seeds, cfg, smoke, out, as_json)
        config = _config(mode, cfg)
        if mode == "ddp":  # what sums the gradients: the hook's algorithm, or DDP's own all_reduce
            config.update(procs=procs, backend=backend_name, algorithm=cfg.hook_algorithm or "native")
            if trace is not None:
                config["trace"] = str(trace)
            res = _train_ddp(cfg, procs, backend_name, timeout, config, out, as_json,
                             None if trace is None else str(trace))
            if res is None:
                return
        else:
            from lab.experiments import train as run_train

            with session("train", config, out, as_json) as s:
                s.what, s.shape = "curve points", lambda pts: {"summary": _partial_summary(cfg, pts), "curve": pts}
                res = run_train(cfg, progress=s.progress,
                                on_point=lambda r: s.add([r], f"evaluation at epoch {r['epoch']:.2f}"))
    except ValueError as e:
        fail(str(e))
        return
    if emit(result("train", config, summary=res.summary, curve=res.curve), out, as_json):
        return
    print_frame(res.curve, f"{res.summary['label']} — {mode}, {cfg.workers} workers, {cfg.dataset}")
    shown = {k: v for k, v in res.summary.items() if k != "split"}
    print_frame(pd.DataFrame({"": list(shown), "value": list(shown.values())}), "summary")
    if res.summary.get("split"):
        cols = ["rank", "seconds", "compute_s", "codec_s", "comm_s", "python_s", "forward_s", "backward_s",
                "optimizer_s"]
        print_frame(pd.DataFrame([s for s in res.summary["split"] if s])[cols],
                    f"where a training step's time went per rank (median of steps 3..5, traced; traces in {trace})")


def _strategy_options(mode: str, strategies: list[str], **given) -> dict:
    """The parallelisms' options given (None, and a flag left off, are not given): a mode that is not a
    parallelism takes none of them, and the error names the modes that do."""
    given = {k: v for k, v in given.items() if v is not None and v is not False}
    if given and mode not in strategies:
        from lab.experiments import option_modes

        raise ValueError("; ".join(f"--{k.replace('_', '-')} is an option of --mode "
                                   f"{' | '.join(option_modes(k)) or '(no registered parallelism)'}"
                                   for k in given) + f", not of --mode {mode}")
    return given


def _train_parallel(mode: str, cfg, procs: int, options: dict, backend_name: str, link_rate: Optional[str],
                    timeout: float, trace: Optional[str], out: Optional[Path], as_json: bool) -> None:
    """--mode NAME, a registered parallelism: its settings checked before any rank starts, rank 0's curve
    streamed (Ctrl-C keeps it), the result with the strategy's own summary numbers and tables."""
    from dataclasses import asdict

    from lab.experiments import check_link_rate, in_torchrun, parallel_settings, parallel_training, \
        partial_parallel_summary

    settings = parallel_settings(mode, cfg, procs, options)
    check_link_rate(link_rate)
    config = {**_config(mode, cfg), "procs": procs, "backend": backend_name, "link_rate": link_rate,
              "settings": asdict(settings), "torchrun": in_torchrun()}
    if trace is not None:
        config["trace"] = trace
    kw = dict(link_rate=link_rate, backend=backend_name, timeout=timeout, trace=trace)
    if in_torchrun():
        res = parallel_training(mode, cfg, procs, settings, **kw)
        if res is None:
            return
    else:
        with session("train", config, out, as_json) as s:
            s.what = "curve points"
            s.shape = lambda pts: {"summary": partial_parallel_summary(mode, cfg, pts), "curve": pts}
            res = parallel_training(mode, cfg, procs, settings, progress=s.progress,
                                    on_point=lambda r: s.add([r], f"evaluation at epoch {r['epoch']:.2f}"), **kw)
    if emit(result("train", config, summary=res.summary, curve=res.curve, tables=res.tables), out, as_json):
        return
    print_frame(res.curve, f"{res.summary['label']} — {mode}, {procs} processes, {cfg.dataset}")
    shown = {k: v for k, v in res.summary.items() if not isinstance(v, (list, dict))}
    print_frame(pd.DataFrame({"": list(shown), "value": list(shown.values())}), "summary")
    for name, table in res.tables.items():
        if len(table) <= 40:
            print_frame(table, f"{name} (every rank)")
        else:
            console.print(f"{name}: {len(table)} rows of every rank (in --json / --out)", highlight=False)


def _partial_summary(cfg, points: list[dict]) -> dict:
    """A stopped simulated run's summary: its curve so far (final = the last evaluation)."""
    return {"label": cfg.label(), "final_test_error": points[-1]["test_error"],
            "best_test_error": min(p["test_error"] for p in points), "bytes": points[-1]["bytes"],
            "steps": points[-1]["step"], "modelled_time_s": points[-1]["time_s"], "parameters": None}


def _partial_reproduction(runs: list[dict]) -> dict:
    """A stopped --reproduce: the finished (type, seed) runs and their per-type means; no ANOVA."""
    from lab.experiments import reproduction_summary

    return {"rows": reproduction_summary(runs), "runs": runs, "anova": None}


def _train_ddp(cfg, procs: int, backend_name: str, timeout: float, config: dict, out: Optional[Path],
               as_json: bool, trace: Optional[str] = None):
    from lab.experiments import ddp_training, in_torchrun

    config["torchrun"] = in_torchrun()
    if in_torchrun():
        import os

        config["procs"] = int(os.environ["WORLD_SIZE"])
        return ddp_training(cfg, procs, backend=backend_name, timeout=timeout, trace=trace)
    with session("train", config, out, as_json) as s:
        s.what, s.shape = "curve points", lambda pts: {"summary": _partial_ddp_summary(cfg, pts), "curve": pts}
        return ddp_training(cfg, procs, backend=backend_name, timeout=timeout, progress=s.progress, trace=trace,
                            on_point=lambda r: s.add([r], f"evaluation at epoch {r['epoch']:.2f}"))


def _train_fsdp(cfg, procs: int, config: dict, timeout: float, out: Optional[Path], as_json: bool) -> None:
    """--mode fsdp: FSDP2 with the codecs beside fp32 FSDP2 and DDP; rank 0 prints and writes."""
    from lab.experiments import fsdp_training, in_torchrun

    kw = dict(weights_codec=config["weights_codec"], grads_codec=config["grads_codec"], hpz=config["hpz"],
              baselines=config["baselines"], backend=config["backend"], timeout=timeout, trace=config.get("trace"),
              overlap=config["overlap"], all_gather=config["all_gather"], reduce_scatter=config["reduce_scatter"])
    config["torchrun"] = in_torchrun()
    if in_torchrun():
        res = fsdp_training(cfg, procs, ranks_per_node=config["ranks_per_node"], **kw)
        if res is None:
            return
    else:
        with session("train", config, out, as_json) as s:
            s.what, s.shape = "curve points", lambda pts: {"summary": _partial_fsdp_summary(pts), "curve": pts}
            res = fsdp_training(cfg, procs, link_rate=config["link_rate"], ranks_per_node=config["ranks_per_node"],
                                progress=s.progress, on_point=lambda r: s.add([r], f"{r['variant']}: evaluation at "
                                                                                  f"epoch {r['epoch']:.2f}"), **kw)
    payload = result("train", config, summary=res.summary, curve=res.curve, runs=res.runs,
                     collectives=res.collectives, groups=res.groups)
    if emit(payload, out, as_json):
        return
    print_frame(res.runs, f"FSDP2 on {res.summary['procs']} processes, {cfg.dataset}: every run, same data and seeds")
    print_frame(res.collectives, "bytes per step per collective, sent by all ranks (counted on the wire)")
    s = res.summary
    if "bytes_ratio" in s:
        console.print(f"{s['label']} against FSDP2 fp32: {s['bytes_ratio']:.3f}x the bytes, {s['speedup']:.2f}x the "
                      f"speed per step ({s['cpu_ratio']:.2f}x the CPU seconds), test loss {s['test_loss_ratio']:.4f}x "
                      f"after {s['steps']} steps ({s['late_test_loss_ratio']:.4f}x over the last half of the "
                      f"evaluations)", highlight=False)
    if s.get("split"):
        cols = ["rank", "seconds", "compute_s", "codec_s", "comm_s", "python_s", "encode_s", "decode_s", "add_s",
                "recv_wait_s"]
        rows = [dict(variant=sp["variant"], **{c: sp.get(c, 0.0) for c in cols}) for sp in s["split"]]
        print_frame(pd.DataFrame(rows), f"where a training step's time went per rank (median of steps 3..5, traced; "
                                        f"traces in {config['trace']}/<run>)")


def _partial_fsdp_summary(points: list[dict]) -> dict:
    """A stopped FSDP run's summary: rank 0's curves so far (final = the last evaluation)."""
    last = points[-1]
    return {"label": last.get("variant"), "mode": "fsdp", "final_test_error": last["test_error"],
            "best_test_error": min(p["test_error"] for p in points), "bytes": last["bytes"],
            "steps": last["step"], "parameters": None}


def _partial_ddp_summary(cfg, points: list[dict]) -> dict:
    """A stopped DDP run's summary: rank 0's curve so far (final = the last evaluation)."""
    return {"label": cfg.label(), "mode": "ddp", "final_test_error": points[-1]["test_error"],
            "best_test_error": min(p["test_error"] for p in points), "bytes": points[-1]["bytes"],
            "steps": points[-1]["step"], "wall_s": points[-1]["wall_s"], "parameters": None}


def _reproduce(which: str, seeds: int, cfg, smoke: bool, out: Optional[Path], as_json: bool) -> None:
    from dataclasses import asdict

    from lab.experiments import reproduction

    config = {"reproduce": which, "seeds": seeds, "smoke": smoke, **_config("sim", cfg)}
    with session("train", config, out, as_json) as s:
        s.what, s.shape = "runs", _partial_reproduction
        rep = reproduction(which, seeds=seeds, smoke=smoke, progress=s.progress,
                           on_run=lambda r: s.add([r], f"{r['type']} seed {r['seed']}"), **asdict(cfg))
    # rows: one per type (mean and 99% CI over seeds); runs: every run
    if emit(result("train", config, rows=rep.summary, runs=rep.runs, anova=rep.anova), out, as_json):
        return
    print_frame(rep.runs, f"Dettmers 2016 §3.4 {which}: every run")
    print_frame(rep.summary, f"{which}: final test error (%) by type, mean and 99% CI over {seeds} seeds")
    a, p = rep.anova, rep.anova["paper"]
    console.print(f"one-way ANOVA across 32-bit and the four 8-bit types: F({a['df_between']}, {a['df_within']}) = "
                  f"{a['F']:.2f}, p = {a['p']:.2f} {a['note']}   (paper, MNIST: F({p['df_between']}, {p['df_within']})"
                  f" = {p['F']}, p = {p['p']})", highlight=False)


def _config(mode: str, cfg) -> dict:
    """The run's config for --json/--out: the command's --mode (sim|ddp|fsdp|a parallelism) as `mode`, the codec's own
    mode (TrainConfig.mode: auto|allreduce|gather) as `codec_mode`."""
    from dataclasses import asdict

    fields = asdict(cfg)
    fields["codec_mode"] = fields["mode"]
    fields["mode"] = mode
    return fields

