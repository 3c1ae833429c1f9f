"""`paralab plan | augment | fusion | bench augment`: Deep Image (Wu et al. 2015) and the parallelism planner."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch
import typer

from .base import (ABOVE_ZERO, app, bench_app, bench_out, check_results_dir, console, device_option, emit, fail, json_option, numbers, out_option, print_frame, result,
                   session)
from .names import RegistryHelp


@app.command(cls=RegistryHelp)
def plan(model: str = typer.Option("alexnet", help="alexnet | deep_image | vgg16 | resnet50 | gpt2_small"),
         gpus: str = typer.Option("1,2,4,8,16,32,64", help="GPU counts P, comma-separated"),
         link: str = typer.Option("pcie3", help="link preset (pcie3, nvlink4, ib_fdr, eth10g, ...; dettmers2016: "
                                                "7 GiB/s and 0.5 ms per message, as Dettmers 2016 computes) or a "
                                                "bench/results/collectives-*.json with a fitted link"),
         strategy: str = typer.Option("data", help="data | model | hybrid | pipeline | fsdp, or several "
                                                   "comma-separated (fsdp: ZeRO-3 / FSDP, see --zero-pp)"),
         zero_pp: str = typer.Option("none", "--zero-pp", help="with --strategy fsdp: ZeRO++ switches, any of qwz "
                                                               "(codec on the weights' all-gather), qgz (one-shot "
                                                               "all-to-all gradients), hpz (backward all-gather "
                                                               "inside the node), comma-separated, or none"),
         device: str = typer.Option("v100", help="gtx_titan | dettmers2016 | k40m | v100 | a100 | h100. "
                                                 "dettmers2016 is Dettmers' assumed 100 ms AlexNet pass of 128 "
                                                 "images (5.56 TFLOP/s achieved, above any 2013 card's peak); "
                                                 "gtx_titan is the physical card at 40 % of peak (309 ms)"),
         batch: Optional[int] = typer.Option(None, "--batch", min=1, max=1 << 24, help="samples per GPU (default 128); the step's "
                                                                   "mini-batch is P x batch"),
         global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1, max=1 << 34, help="fixed mini-batch split over the "
                                                                                  "GPUs instead of --batch"),
         algorithm: str = typer.Option("ring", help="allreduce algorithm: {algorithms}"),
         codec: str = typer.Option("none", help="codec for every gradient allreduce (none, dynamic_tree, onebit, ...)"),
         activation_codec: str = typer.Option("none", "--activation-codec",
                                              help="codec for model-parallel / pipeline activations"),
         overlap: bool = typer.Option(False, "--overlap/--no-overlap", help="Deep Image's lazy update: overlap "
                                                                            "each allreduce with later compute"),
         micro_batches: Optional[int] = typer.Option(None, "--micro-batches", min=1, max=1 << 20, help="pipeline micro-batches "
                                                                                   "(default 4P)"),
         layers: bool = typer.Option(False, "--layers", help="also print the per-layer breakdown at the largest P"),
         advice: bool = typer.Option(False, "--advice", help="also print codec advice per layer at the largest P"),
         cluster: Optional[str] = typer.Option(None, "--cluster", help="a two-level machine NODESxGPUS (e.g. 8x8) "
                                               "instead of --link: P fills whole nodes; --algorithm may then be any "
                                               "the cluster model prices: {cluster_algorithms}"),
         intra: str = typer.Option("nvlink4", "--intra", help="with --cluster: link inside a node (nvlink3 | nvlink4 "
                                                              "| nvlink5 | pcie3 | pcie4_x16 | pcie5_x16)"),
         inter: str = typer.Option("ib_ndr", "--inter", help="with --cluster: one NIC between nodes (ib_hdr | ib_ndr "
                                                             "| eth10g | eth100g ...; aliases ndr400, hdr, 100gbe)"),
         nics: Optional[int] = typer.Option(None, "--nics-per-node", min=1, max=1024, help="with --cluster: NICs per node "
                                                                         "(default: one per GPU)"),
         as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Predicted step time of data / model / hybrid / pipeline parallelism vs P: compute and communication
    breakdown, speedup and scaling efficiency (lab.plan; communication from lab.comm.cost)."""
    from lab.experiments.plan import (advice_time_to_accuracy, planner_advice, planner_breakdown, planner_cluster,
                                      planner_sweep)
    from lab.experiments import factor_table, get_model, parse_zero_pp, resolve_link

    Ps = numbers(gpus, "--gpus", int)
    strategies = [s.strip() for s in strategy.split(",") if s.strip()]
    if batch is not None and global_batch is not None:
        fail("give --batch or --global-batch, not both")
    if cluster is not None and advice:
        fail("--advice times codecs on one --link; drop --cluster or --advice")
    kw = dict(device=device, batch_per_gpu=None if global_batch is not None else (128 if batch is None else batch),
              global_batch=global_batch, algorithm=algorithm)
    try:
        spec = get_model(model)
        lk = resolve_link(link)
        two = planner_cluster(cluster, intra, inter, nics)
        if two is not None:
            kw["cluster"] = two
        zp = parse_zero_pp(zero_pp)
        if zp and "fsdp" not in strategies:
            fail(f"--zero-pp {zero_pp} is for --strategy fsdp (ZeRO++); strategies given: {', '.join(strategies)}")
            return
        df = planner_sweep(spec, Ps, strategies=strategies, link=lk, codec=codec, activation_codec=activation_codec,
                           overlap=overlap, micro_batches=micro_batches, zero_pp=zp, **kw)
        fs = df[df["strategy"] == "fsdp"]
        if len(fs) and not fs["feasible"].any():
            fail(f"--strategy fsdp: {fs['note'].iloc[0]} (--gpus {gpus})")
            return
        ok = df[df["feasible"]]
        top = {s: int(ok[ok["strategy"] == s]["P"].max()) for s in strategies if (ok["strategy"] == s).any()}
        lay = [(s, top[s], planner_breakdown(spec, top[s], strategy=s, link=lk, codec=codec,
                                             activation_codec=activation_codec, overlap=overlap,
                                             micro_batches=micro_batches if s == "pipeline" else None,
                                             zero_pp=zp if s == "fsdp" else (), **kw))
               for s in top] if layers else []
        adv = [(s, top[s], planner_advice(spec, top[s], strategy=s, link=lk, **kw)) for s in top
               if s not in ("pipeline", "fsdp")] if advice else []
        tta = (top.get("data") or max(top.values())) if advice and top else None
        tta = (tta, advice_time_to_accuracy(spec, tta, link=lk, **kw)) if tta else None
        fac = None
        if advice and top and any(l.kind == "fc" for l in spec.layers):  # send the factors, not ∇w (Hoefler)
            fP = top.get("data") or max(top.values())
            fac = (fP, factor_table(spec, batch=kw["batch_per_gpu"] or -(-kw["global_batch"] // fP), gpus=fP))
    except ValueError as e:
        fail(str(e))
        return
    config = {"model": model, "gpus": Ps, "link": link, "strategy": strategies, "device": device, "batch": batch,
              "global_batch": global_batch, "algorithm": algorithm, "codec": codec,
              "activation_codec": activation_codec, "overlap": overlap, "micro_batches": micro_batches}
    if "fsdp" in strategies:
        config["zero_pp"] = zero_pp
    if two is not None:
        config.update(cluster=cluster, intra=intra, inter=inter, nics_per_node=nics)
    where = two.name if two is not None else f"{lk.name} ({lk.bandwidth_Bps / 1e9:g} GB/s)"
    extra = {"model": spec.describe(), "link": two.name if two is not None else lk.name}
    if lay:
        extra["layers"] = {s: {"P": P, "rows": b.layers} for s, P, b in lay}
    if adv:
        extra["advice"] = {s: {"P": P, "rows": a} for s, P, a in adv}
    if fac:
        extra["factors"] = {"P": fac[0], "rows": fac[1]}
    if tta:
        extra["advice_time_to_accuracy"] = {"P": tta[0], "rows": tta[1], "accuracy": tta[1].attrs["accuracy"]}
    if emit(result("plan", config, rows=df, **extra), out, as_json):
        return
    cols = ["strategy", "P", "global_batch", "compute_ms", "comm_ms", "exposed_comm_ms", "idle_ms", "step_ms",
            "images_per_s", "speedup", "efficiency", "memory_GB", "fits", "note"]
    print_frame(df[cols].fillna(""), f"{spec.describe()} on {device} over {where}, "
                                     f"{algorithm} allreduce, overlap {'on' if overlap else 'off'}")
    for s, P, b in lay:
        print_frame(b.layers, f"{s} parallelism, P = {P}: per layer")
    for s, P, a in adv:
        print_frame(a, f"codec advice, {s} parallelism, P = {P} (fastest end to end, saving vs fp32; a codec whose "
                       "measured penalty says it never reaches the target is not advised)")
    if fac:
        P, f = fac
        print_frame(f[["layer", "c_in", "c_out", "grad_values", "factor_values", "crossover", "crossover_8bit",
                       "powersgd_values", "down_crossover", "best_up"]],
                    f"send the factors, not the gradient: FC layers at B = {f.attrs['batch']} per worker, P = {P} "
                    f"(B·(Cin+Cout) values up instead of Cin·Cout; smaller while B < crossover B* = Cin·Cout/(Cin+Cout); "
                    f"PowerSGD rank {f.attrs['rank']} beside)")
    if tta:
        P, t = tta
        shown = t.drop(columns=["penalty_source", "steps_penalty_ci_low", "steps_penalty_ci_high"]).astype(object)
        shown["steps_penalty"] = [a if a in ("not measured", "never reaches the target") else f"{p:.2f}"
                                  for a, p in zip(t["accuracy"], t["steps_penalty"])]
        shown["time_to_accuracy_speedup"] = [a if a == "not measured" else "never" if x == 0 else f"{x:.2f}x"
                                             for a, x in zip(t["accuracy"], t["time_to_accuracy_speedup"])]
        print_frame(shown, f"time to accuracy, data parallelism, P = {P}: each codec on every gradient, per step "
                           "and x its measured steps penalty, vs fp32")
        console.print(t.attrs["accuracy"], highlight=False, soft_wrap=True)


@app.command()
def augment(image_size: int = typer.Option(512, "--image-size", min=1, max=1 << 16, help="input image side, px"),
            crop: int = typer.Option(224, min=1, max=1 << 16, help="crop side, px"),
            channels: int = typer.Option(3, min=1, max=64, help="colour channels"),
            as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """Deep Image Table 1: possible changes per augmentation, computed from the grids the ops draw from."""
    from lab.experiments.deep_image import augmentation_counts

    try:
        df = augmentation_counts(image_size, crop, channels)
    except ValueError as e:
        fail(str(e))
        return
    config = {"image_size": image_size, "crop": crop, "channels": channels}
    if emit(result("augment", config, rows=df), out, as_json):
        return
    shown = df.assign(possible_changes=df["possible_changes"].astype(str),
                      paper=[("" if p is None or p != p else str(int(p))) for p in df["paper"]])
    print_frame(shown.fillna(""),
                f"Wu et al. 2015 Table 1: possible changes ({crop}x{crop} crops of {image_size}x{image_size})")


@app.command()
def fusion(smoke: bool = typer.Option(False, "--smoke", help="digits at 16 and 32 px, seconds on a CPU"),
           dataset: str = typer.Option("auto", help="auto | mnist | fashion-mnist | digits"),
           data_path: Optional[Path] = typer.Option(None, "--data-path", help="directory of MNIST-format IDX files"),
           scales: str = typer.Option("28,56", help="input sizes in px, comma-separated"),
           epochs: int = typer.Option(8, min=1, max=10_000, help="epochs per model"),
           train_size: int = typer.Option(10000, "--train-size", min=0, max=1 << 31, help="training images (0 = all)"),
           test_size: int = typer.Option(2000, "--test-size", min=0, max=1 << 31, help="test images (0 = all)"),
           lr: float = typer.Option(3e-3, min=ABOVE_ZERO, max=1000.0, help="Adam peak learning rate (one-cycle schedule)"),
           seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
           out: Optional[Path] = out_option(), as_json: bool = json_option()) -> None:
    """Deep Image §4.2: one small CNN per input scale, fused by averaging softmax posteriors; test errors."""
    from lab.experiments.deep_image import multiscale_fusion
    from lab.experiments import DataError, check_dataset

    try:  # before any work; --smoke trains on the digits, its --dataset is checked all the same
        check_dataset(dataset, locate=False)
        check_dataset("digits" if smoke else dataset, data_path)
    except DataError as e:
        fail(str(e))
    config = {"smoke": smoke, "dataset": dataset, "scales": scales, "epochs": epochs, "train_size": train_size,
              "test_size": test_size, "lr": lr, "seed": seed}
    try:
        with session("fusion", config, out, as_json) as s:
            # a stopped run: the trained scales' rows (no fused row, so no vs_best_single) and the curves so far
            s.extra.update(info=None, agreement=None, curves=[])
            r = multiscale_fusion(on_point=s.extra["curves"].append,
                                  on_row=lambda row: s.add([{**row, "vs_best_single": None}], row["model"]),
                                  dataset=dataset, scales=numbers(scales, "--scales", int), epochs=epochs,
                                  train_size=train_size or None, test_size=test_size or None, lr=lr, seed=seed,
                                  smoke=smoke, data_path=data_path, progress=s.progress)
    except (ValueError, DataError) as e:
        fail(str(e))
        return
    # rows: each model's test error, the fused one last
    if emit(result("fusion", config, rows=r.table, info=r.info, agreement=r.agreement, curves=r.curves), out,
            as_json):
        return
    print_frame(r.table.fillna(""), f"Multi-scale fusion on {r.info['dataset']} ({r.info['train']} train, "
                                    f"{r.info['test']} test, {r.info['epochs']} epochs, seed {seed})")
    print_frame(r.agreement, "Where the two scales agree")
    verdict = "better" if r.info["fused_better_than_each"] else "not better"
    console.print(f"fused model {verdict} than each single-scale model (Wu et al. 2015 §4.2: 6.97% vs 7.96% and "
                  "7.42% top-5)", highlight=False)


@bench_app.command("augment")
def bench_augment(batch: int = typer.Option(32, min=1, max=1 << 16, help="images per batch"),
                  image_size: int = typer.Option(512, "--image-size", min=1, max=1 << 16, help="input side, px (uint8 RGB)"),
                  crop: int = typer.Option(224, min=1, max=1 << 16, help="crop side, px"),
                  repeats: int = typer.Option(7, min=1, max=10_000, help="timed calls per contestant (median reported)"),
                  device: Optional[str] = device_option(),
                  seed: int = typer.Option(0, min=0, max=2**32 - 1, help="random seed"),
                  as_json: bool = json_option(),
                  out: Optional[Path] = out_option(" (default bench/results/augment-<device>.json)")) -> None:
    """Deep Image augmentations: images/s batched vs a per-image loop, same run, same parameters."""
    from lab import backend
    from lab.experiments.deep_image import augmentation_throughput

    dev = torch.device(device) if device else backend.default_device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda needs a CUDA GPU")
    check_results_dir(out, as_json)
    config = {"batch": batch, "image_size": image_size, "crop": crop, "repeats": repeats, "device": dev.type,
              "seed": seed}
    try:
        with session("bench augment", config, out, as_json) as s:
            df, info = augmentation_throughput(batch=batch, image_size=image_size, crop_size=crop, device=dev,
                                               repeats=repeats, seed=seed, progress=s.progress)
    except ValueError as e:
        fail(str(e))
        return
    path = bench_out(out, as_json, f"augment-{backend.device_slug(dev)}")
    if emit(result("bench augment", config, rows=df, **info), path, as_json):
        return
    print_frame(df, f"Augmentation throughput on {info['device']}, batch {batch}, {crop} of {image_size} px "
                    "(speedup: per-image loop time / batched time)")
