"""Deep Image experiments (Wu et al. 2015) as tidy results for the UIs: a preview grid of the §4.1
augmentations, Table 1's counts, their throughput batched vs per image, and §4.2's multi-scale
fusion (the same small CNN trained at two input scales, softmax posteriors averaged)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd
import torch
import torch.nn.functional as F

from lab.augment import (color_cast, deep_image_augment, flip, lens_distortion, random_crop, rotate, table1_counts,
                         vignette)
from lab.augment.common import check_images
from lab.data.images import load_dataset
from lab.train.models import SmallCNN
from lab.backend import Progress, RowSink
from lab.plan.papers import DEEP_IMAGE_PAPER, deep_image_scaling



# -- augmentations

def test_card(size: int = 256) -> torch.Tensor:
    """A (1, 3, size, size) uint8 synthetic photo: colour gradients, a grid (shows distortion and
    rotation) and a bright disc off-centre (shows flips and crops). Deterministic."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    y, x = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.stack((0.25 + 0.6 * x, 0.3 + 0.5 * y, 0.85 - 0.5 * x * y))
    lines = ((torch.arange(size) % max(2, size // 8)) < max(1, size // 96))
    grid = lines[None, :] | lines[:, None]
    img = torch.where(grid, torch.tensor([0.1, 0.1, 0.15])[:, None, None], img)
    disc = (x - 0.68) ** 2 + (y - 0.32) ** 2 < 0.015
    img = torch.where(disc, torch.tensor([0.95, 0.85, 0.2])[:, None, None], img)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8)[None]


@dataclass
class Preview:
    """Panels of the preview grid: one row per augmentation, `samples` draws each (uint8, (n, C, h, w))."""

    original: torch.Tensor
    panels: dict[str, torch.Tensor] = field(default_factory=dict)
    seed: int = 0


def augmentation_preview(image: torch.Tensor | None = None, *, samples: int = 4, crop_size: int | None = None,
                         seed: int = 0) -> Preview:
    """Each §4.1 augmentation drawn `samples` times (seeded) on one image (default: `test_card(256)`),
    plus the whole pipeline. Crop size defaults to 7/8 of the image (224 of 256)."""
    img = test_card(256) if image is None else image
    check_images(img)
    if img.shape[0] != 1:
        raise ValueError(f"preview takes one image (1, C, H, W), got a batch of {img.shape[0]}")
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 16:
        raise ValueError(f"samples must be an int in 1..16, got {samples!r}")
    H, W = img.shape[2:]
    crop = crop_size if crop_size is not None else (H * 7 // 8, W * 7 // 8)
    batch = img.expand(samples, -1, -1, -1).contiguous()
    centre = random_crop(batch, crop, top=(H - (crop if isinstance(crop, int) else crop[0])) // 2,
                         left=(W - (crop if isinstance(crop, int) else crop[1])) // 2)
    panels = {
        "crop": random_crop(batch, crop, seed=seed),
        "color_cast": color_cast(centre, seed=seed + 1),
        "vignette": vignette(centre, seed=seed + 2),
        "lens_distortion": lens_distortion(centre, seed=seed + 3),
        "rotation": rotate(centre, seed=seed + 4),
        "flip": flip(centre, flips=torch.arange(samples) % 2 == 1),
        "all": deep_image_augment(batch, crop, seed=seed + 5),
    }
    return Preview(img, panels, seed)


def augmentation_settings(image: torch.Tensor | None = None, *, crop_size: int | None = None,
                          top: int | None = None, left: int | None = None, shifts: Sequence[int] = (0, 0, 0),
                          area: float = 0.0, strength: float = 0.0, kind: str = "barrel", degree: float = 0.0,
                          angle: float = 0.0, flipped: bool = False) -> Preview:
    """Each §4.1 augmentation at parameters the caller picks, on one image, and all of them in the
    pipeline's order (crop first, the rest on the crop). One image per panel; zeros are the identity.

    crop_size: side of the square crop (default 7/8 of the image), top/left its offset (default:
    centred); shifts: per-channel colour-cast offsets in 8-bit steps; area/strength: vignette;
    kind ('barrel' | 'pincushion') and degree: lens distortion; angle: rotation in degrees."""
    img = test_card(256) if image is None else image
    check_images(img)
    if img.shape[0] != 1:
        raise ValueError(f"settings preview takes one image (1, C, H, W), got a batch of {img.shape[0]}")
    H, W = img.shape[2:]
    crop = crop_size if crop_size is not None else min(H, W) * 7 // 8
    if isinstance(crop, bool) or not isinstance(crop, int) or not 1 <= crop <= min(H, W):
        raise ValueError(f"crop size must be an int in 1..{min(H, W)} (the image is {H}x{W}), got {crop!r}")
    top = (H - crop) // 2 if top is None else top
    left = (W - crop) // 2 if left is None else left
    cropped = random_crop(img, crop, top=[top], left=[left])
    shifts = list(shifts)
    if len(shifts) != img.shape[1]:
        raise ValueError(f"shifts: one colour-cast offset per channel ({img.shape[1]}), got {len(shifts)}")
    ops = {
        "color_cast": lambda x: color_cast(x, shifts=torch.tensor(shifts)),
        "vignette": lambda x: vignette(x, area=[area], strength=[strength]),
        "lens_distortion": lambda x: lens_distortion(x, kind=kind, degree=[degree]),
        "rotation": lambda x: rotate(x, degrees=[angle]),
        "flip": lambda x: flip(x, flips=torch.tensor([bool(flipped)])),
    }
    panels = {"crop": cropped}
    out = cropped
    for name, op in ops.items():
        panels[name] = op(cropped)
        out = op(out)
    panels["all"] = out
    return Preview(img, panels, 0)


def augmentation_counts(image_size: int = 512, crop_size: int = 224, channels: int = 3) -> pd.DataFrame:
    """Table 1: possible changes per augmentation from the grids the ops draw from, paper beside."""
    return table1_counts(image_size, crop_size, channels)


def augmentation_throughput(*, batch: int = 32, image_size: int = 512, crop_size: int = 224,
                            device: torch.device | str | None = None, repeats: int = 3, seed: int = 0,
                            progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Images/s per op, batched vs a per-image loop in the same run (`lab.augment.bench`)."""
    from lab.augment.bench import throughput

    return throughput(batch=batch, image_size=image_size, crop_size=crop_size, device=device, repeats=repeats,
                      seed=seed, progress=progress)


# -- multi-scale fusion (§4.2)

@dataclass
class FusionResult:
    """`table`: model (each scale, then the fusion), scale_px, test_error (%); `curves`: per model and
    epoch, train loss and test error; `agreement`: test samples both right / only one / both wrong."""

    table: pd.DataFrame
    curves: pd.DataFrame
    agreement: pd.DataFrame
    dataset: str
    info: dict


def _resize(x: torch.Tensor, shape: tuple[int, int], size: int) -> torch.Tensor:
    imgs = x.view(-1, 1, *shape)
    if (size, size) == tuple(shape):
        return imgs.contiguous()
    return F.interpolate(imgs, size=(size, size), mode="bilinear", align_corners=False,
                         antialias=size < min(shape)).contiguous()


def _posteriors(model: torch.nn.Module, x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return torch.cat([torch.softmax(model(x[i:i + batch]), dim=1) for i in range(0, len(x), batch)])


def multiscale_fusion(*, dataset: str = "auto", scales: Sequence[int] = (28, 56), epochs: int = 8,
                      train_size: int | None = 10000, test_size: int | None = 2000, batch: int = 64,
                      lr: float = 3e-3, seed: int = 0, smoke: bool = False, data_path=None,
                      progress: Progress | None = None, on_point: RowSink | None = None,
                      on_row: RowSink | None = None) -> FusionResult:
    """Wu et al. 2015 §4.2: train one model per input scale, fuse by averaging softmax posteriors.

    The same SmallCNN (two conv + pool stages, dropout, one dense layer; Adam with a one-cycle
    learning rate peaking at `lr`) is trained on the images resized to each scale (bilinear).
    Reading: the paper's scales are 256 and 512 px crops of ImageNet; here upsampling adds no detail,
    what changes is how large the digit or garment is against the network's fixed 3x3 kernels and
    pooling, the complementarity §4.2 relies on. Test error (and NLL) of each model and of the
    fusion; seeded. Smoke mode's digits test set has 449 images (one error = 0.22 points), too few
    to show the fusion's edge reliably; Fashion-MNIST at 28 and 56 px does (docs/deep_image.md).
    smoke=True: scikit-learn's digits at 16 and 32 px, 8 epochs (seconds on one CPU core).
    Each epoch's curve point streams through `on_point`, each scale's model row (model, scale_px,
    test_error, test_nll, train_s) through `on_row` when that model is trained."""
    if smoke:
        dataset, scales, epochs, train_size, test_size, lr = "digits", (16, 32), 8, None, None, 3e-3
    scales = [int(s) for s in scales]
    if len(scales) < 2 or any(s < 4 for s in scales) or len(set(scales)) != len(scales):
        raise ValueError(f"scales: give at least two different sizes >= 4 px, got {scales}")
    for what, v in (("epochs", epochs), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{what} must be an int >= 1, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    data = load_dataset(dataset, data_path, seed=seed).subset(train_size, test_size, seed=seed)
    shape = data.image_shape
    steps_total = len(scales) * epochs
    done = 0
    posts, curves, train_s = [], [], []

    def nll(p: torch.Tensor) -> float:
        return float(-p.clamp_min(1e-12).log().gather(1, data.test_y[:, None]).mean())

    def error(p: torch.Tensor) -> float:
        return 100.0 * float((p.argmax(1) != data.test_y).float().mean())

    for k, s in enumerate(scales):
        xtr, xte = _resize(data.train_x, shape, s), _resize(data.test_x, shape, s)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed * 1000 + k)
            model = SmallCNN((s, s), data.classes)
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            per_epoch = -(-len(xtr) // batch)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * per_epoch)
            g = torch.Generator().manual_seed(seed * 1000 + k)
            t0 = time.perf_counter()
            for ep in range(epochs):
                model.train()
                order = torch.randperm(len(xtr), generator=g)
                total, n = 0.0, 0
                for i in range(0, len(order), batch):
                    idx = order[i:i + batch]
                    loss = F.cross_entropy(model(xtr[idx]), data.train_y[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    sched.step()
                    total += float(loss.detach()) * len(idx)
                    n += len(idx)
                p = _posteriors(model, xte)
                err = 100.0 * float((p.argmax(1) != data.test_y).float().mean())
                curves.append({"model": f"{s} px", "scale_px": s, "epoch": ep + 1, "train_loss": total / n,
                               "test_error": err})
                if on_point:
                    on_point(dict(curves[-1]))
                done += 1
                if progress:
                    progress(done / steps_total, f"{s} px epoch {ep + 1}: test error {err:.2f}%")
            train_s.append(time.perf_counter() - t0)
        posts.append(p)
        if on_row:
            on_row({"model": f"{s} px", "scale_px": s, "test_error": error(p), "test_nll": nll(p),
                    "train_s": train_s[-1]})
    fused = torch.stack(posts).mean(0)
    rows = [{"model": f"{s} px", "scale_px": s, "test_error": error(p), "test_nll": nll(p), "train_s": t}
            for s, p, t in zip(scales, posts, train_s)]
    fused_err = error(fused)
    rows.append({"model": "fused (mean of softmax)", "scale_px": None, "test_error": fused_err, "test_nll": nll(fused),
                 "train_s": sum(train_s)})
    table = pd.DataFrame(rows)
    best_single = float(table["test_error"].iloc[:-1].min())
    table["vs_best_single"] = table["test_error"] - best_single
    right = torch.stack([p.argmax(1) == data.test_y for p in posts[:2]])
    agreement = pd.DataFrame([
        {"outcome": f"both right ({scales[0]} and {scales[1]} px)", "fraction": float((right[0] & right[1]).float().mean())},
        {"outcome": f"only {scales[0]} px right", "fraction": float((right[0] & ~right[1]).float().mean())},
        {"outcome": f"only {scales[1]} px right", "fraction": float((~right[0] & right[1]).float().mean())},
        {"outcome": "both wrong", "fraction": float((~right[0] & ~right[1]).float().mean())}])
    info = {"dataset": data.name, "source": data.source, "train": len(data.train_y), "test": len(data.test_y),
            "scales": scales, "epochs": epochs, "batch": batch, "lr": lr, "seed": seed, "smoke": smoke,
            "native_px": list(shape), "fused_better_than_each": bool(fused_err < best_single)}
    return FusionResult(table, pd.DataFrame(curves), agreement, data.name, info)


# -- the parallelism behind it: Figure 2 (§3.3) as communication time

@dataclass
class Figure2:
    """Wu et al. 2015 Figure 2 as the planner predicts it: `sweep` (data and hybrid on every P of `gpus`, with
    compute, communication and step time in ms), the P from which data parallelism stays faster (`crossover`,
    on that dense grid), the paper's (beyond 16 GPUs), and the images per GPU at which the model's crossover
    falls to the paper's P (`batch_for_paper`, None when no batch up to 4096 does it)."""

    sweep: pd.DataFrame
    crossover: int | None
    paper_crossover: int
    batch_per_gpu: int
    batch_for_paper: int | None
    compute_ms: float


def deep_image_figure2(*, gpus: Sequence[int] = tuple(range(1, 129)), batch_per_gpu: int = 64,
                       overlap: bool = False) -> Figure2:
    """Figure 2 (§3.3): data vs hybrid parallelism of the Table 2 network on K40m and FDR InfiniBand with
    butterfly synchronisation, 64 images per GPU. Communication is what differs (compute per GPU is the
    same for both, 3.5 s); the crossover is found on every P, and the batch per GPU that moves it to the
    paper's 16 GPUs by bisection (the hybrid's activations grow with the batch, data's gradients do not)."""
    paper_P = int(DEEP_IMAGE_PAPER["crossover_gpus"])
    sweep, cross = deep_image_scaling(tuple(gpus), batch_per_gpu=batch_per_gpu, overlap=overlap)

    def data_wins_at_paper(b: int) -> bool:
        s, _ = deep_image_scaling((paper_P, paper_P + 1, 2 * paper_P), batch_per_gpu=b, overlap=overlap)
        t = s.pivot(index="P", columns="strategy", values="step_ms")
        return bool((t["data"] < t["hybrid"]).all())

    lo, hi = batch_per_gpu, 4096
    found: int | None = None
    if data_wins_at_paper(lo):
        found = lo
    elif data_wins_at_paper(hi):
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if data_wins_at_paper(mid) else (mid, hi)
        found = hi
    compute = float(sweep[(sweep["strategy"] == "data") & (sweep["P"] == 1)]["compute_ms"].iloc[0])
    return Figure2(sweep, cross, paper_P, batch_per_gpu, found, compute)


__all__ = ["Figure2", "deep_image_figure2", "test_card", "Preview", "augmentation_preview", "augmentation_settings", "augmentation_counts",
           "augmentation_throughput", "FusionResult", "multiscale_fusion"]
