"""`paralab operators`: the operator level of Ben-Nun & Hoefler 2018 — work, depth and average parallelism of a
convolutional and a fully connected layer, each convolution method checked against F.conv2d and timed here, with
the batch split into micro-batches (µ-cuDNN)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .base import app, console, device_option, emit, fail, json_option, numbers, out_option, print_frame, result


@app.command()
def operators(batch: int = typer.Option(8, "--batch", "-n", min=1, max=4096, help="batch N"),
              c_in: int = typer.Option(32, "--c-in", min=1, max=4096, help="input channels C_in"),
              c_out: int = typer.Option(32, "--c-out", min=1, max=4096, help="output channels C_out (the "
                                                                              "survey's K)"),
              height: int = typer.Option(32, "--height", min=1, max=4096, help="input height H, px"),
              width: int = typer.Option(32, "--width", min=1, max=4096, help="input width W, px"),
              kernel: int = typer.Option(3, "--kernel", "-k", min=1, max=31, help="k x k kernel (Winograd "
                                                                                  "F(2x2, 3x3) needs 3)"),
              stride: int = typer.Option(1, "--stride", min=1, max=16, help="stride (FFT and Winograd need 1)"),
              padding: int = typer.Option(1, "--padding", min=0, max=30, help="zero padding per side, below k"),
              fc_in: int = typer.Option(1024, "--fc-in", min=1, max=1 << 20, help="FC layer: input features C_in"),
              fc_out: int = typer.Option(1024, "--fc-out", min=1, max=1 << 20, help="FC layer: output features "
                                                                                    "C_out (its batch is --batch)"),
              splits: str = typer.Option("1", "--splits", help="micro-batch counts k to time, comma-separated, "
                                                               "each 1..N (µ-cuDNN: the batch split into k)"),
              repeats: int = typer.Option(5, "--repeats", min=3, max=100, help="timed runs per method and split"),
              no_time: bool = typer.Option(False, "--no-time", help="the formulas only: time nothing"),
              device: Optional[str] = device_option(),
              as_json: bool = json_option(), out: Optional[Path] = out_option()) -> None:
    """W, D and W/D per convolution method (direct, im2col, FFT, Winograd) and per FC operator (forward, ∇w, ∇o),
    the multiplications each method performs, and each method timed on the device against F.conv2d."""
    import torch

    from lab import backend
    from lab.experiments.operators import (conv_work_depth_table, fc_work_depth_table, operator_layer,
                                           operators_takeaway, threads, time_conv_methods)

    ks = numbers(splits, "--splits", int)
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        shape = operator_layer(batch, c_in, c_out, height, width, kernel, stride, padding)
        wd = conv_work_depth_table(shape)
        fc = fc_work_depth_table(batch, fc_in, fc_out)
        if dev.startswith("cuda") and not torch.cuda.is_available():
            fail(f"--device {dev}: no GPU here; allowed: cpu")
        timings = None if no_time else time_conv_methods(shape, splits=ks, repeats=repeats, device=dev)
    except ValueError as e:
        fail(str(e))
        return
    n_threads, how = threads(dev)
    config = {"batch": batch, "c_in": c_in, "c_out": c_out, "height": height, "width": width, "kernel": kernel,
              "stride": stride, "padding": padding, "fc_in": fc_in, "fc_out": fc_out, "splits": ks,
              "repeats": repeats, "time": not no_time, "device": dev}
    takeaway = operators_takeaway(wd, n_threads, timings)
    extra = {"fc": fc, "threads": n_threads, "threads_counted": how, "takeaway": takeaway}
    if timings is not None:
        extra.update(timings=timings.table, timing_info=timings.info)
    if emit(result("operators", config, device=backend.device_name(dev), rows=wd, **extra), out, as_json):
        return
    print_frame(wd.drop(columns=["label"]).fillna(""),
                f"Convolution N={batch}, {c_in}→{c_out} channels, {height}x{width}, {kernel}x{kernel} kernel, "
                f"stride {stride}, padding {padding}: W, D (Ben-Nun & Hoefler 2018's convolution table) and multiplications")
    print_frame(fc, f"Fully connected {fc_in}→{fc_out}, batch {batch}: W and D (the survey's FC table)")
    if timings is not None:
        t = timings.table.drop(columns=["label", "coverage"])
        print_frame(t, f"Timed on {timings.info['device']} ({timings.info['isa']}), median of {repeats} with the "
                       "interval of the median (its coverage in --json); error relative to F.conv2d's largest |output|")
    console.print(f"Threads: {how}.", highlight=False, soft_wrap=True)
    console.print(takeaway, highlight=False, soft_wrap=True)
