"""Throughput of the augmentations: one batched call per op against a plain per-image loop over
the same images and parameters, measured in the same run on the same device (docs/design.md
"Measuring": medians after warm-up, CUDA events on a GPU)."""
from __future__ import annotations

from typing import Callable

import pandas as pd
import torch

from lab import backend

from . import cropping
from .pipeline import OPS, Params, apply_op, apply_params, sample_params
from .common import make_generator
from lab.backend import Progress



def _loop(fn: Callable[[torch.Tensor, Params], torch.Tensor], images: torch.Tensor, params: Params) -> torch.Tensor:
    return torch.cat([fn(images[i:i + 1], params[i]) for i in range(images.shape[0])])


def throughput(*, batch: int = 32, image_size: int = 512, crop_size: int = 224, channels: int = 3,
               device: torch.device | str | None = None, repeats: int = 3, seed: int = 0,
               progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Images/s of each op (and the whole pipeline) batched vs per-image loop, same run.

    Random uint8 images of image_size²; crop works on them, every other op on the crops (§4.1).
    Rows: op, batch, input (HxW), batched_img_s, loop_img_s, speedup (batched / loop),
    same_output (the two paths give identical bytes). Returns (rows, run info)."""
    for what, v, lo in (("batch", batch, 1), ("image_size", image_size, 1), ("crop_size", crop_size, 1),
                        ("repeats", repeats, 1), ("channels", channels, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{what} must be an int >= {lo}, got {v!r}")
    if crop_size > image_size:
        raise ValueError(f"crop_size {crop_size} is larger than image_size {image_size}")
    dev = torch.device(device) if device is not None else backend.default_device()
    gen = make_generator(seed)
    full = torch.randint(0, 256, (batch, channels, image_size, image_size), dtype=torch.uint8, generator=gen).to(dev)
    params = sample_params(batch, channels, image_size, crop_size, gen=gen, p=1.0)
    crops = cropping.apply(full, crop_size, params.top, params.left)
    cases = [(op, full if op == "crop" else crops, lambda x, p, op=op: apply_op(op, x, p, crop_size)) for op in OPS]
    cases.append(("all", full, lambda x, p: apply_params(x, p, crop_size)))
    rows = []
    for i, (op, x, fn) in enumerate(cases):
        if progress:
            progress(i / len(cases), f"{op}")
        same = torch.equal(fn(x, params), _loop(fn, x, params))
        tb = backend.time_fn(lambda: fn(x, params), dev, warmup=1, repeats=repeats).median
        tl = backend.time_fn(lambda: _loop(fn, x, params), dev, warmup=1, repeats=repeats).median
        rows.append({"op": op, "batch": batch, "input": f"{x.shape[2]}x{x.shape[3]}",
                     "batched_img_s": batch / tb, "loop_img_s": batch / tl, "speedup": tl / tb,
                     "batched_ms": tb * 1e3, "loop_ms": tl * 1e3, "same_output": same})
    if progress:
        progress(1.0, "done")
    info = {"device": backend.device_name(dev), "versions": backend.versions(), "batch": batch,
            "image_size": image_size, "crop_size": crop_size, "channels": channels, "dtype": "uint8",
            "repeats": repeats, "seed": seed, "threads": torch.get_num_threads(),
            "timing": "median seconds per call after one warm-up; img/s = batch / median; "
                      "speedup = per-image loop time / batched time, same run, same parameters"}
    return pd.DataFrame(rows), info


__all__ = ["throughput"]
