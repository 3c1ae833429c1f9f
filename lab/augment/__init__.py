"""Deep Image's data augmentations (Wu et al. 2015 §4.1, Table 1) as batched, seeded torch ops that
run wherever the images are (CPU or GPU): color casting, vignetting, lens distortion, rotation,
horizontal flip and random crop, and the counts of Table 1 computed from the grids they draw from.
One module per op (color_casting, vignetting, distortion, rotating, flipping, cropping), each with
its grid, `count()`, `sample`, `apply` and a seeded front function."""
from __future__ import annotations

from . import color_casting, cropping, distortion, flipping, rotating, vignetting
from .color_casting import color_cast
from .counts import PAPER_TABLE1, table1_counts
from .cropping import random_crop
from .distortion import lens_distortion
from .flipping import flip
from .pipeline import OPS, Params, apply_params, deep_image_augment, sample_params
from .rotating import rotate
from .vignetting import vignette

MODULES = {"color_cast": color_casting, "vignette": vignetting, "lens_distortion": distortion,
           "rotation": rotating, "flip": flipping, "crop": cropping}

__all__ = ["color_cast", "vignette", "lens_distortion", "rotate", "flip", "random_crop", "deep_image_augment",
           "sample_params", "apply_params", "Params", "OPS", "MODULES", "table1_counts", "PAPER_TABLE1"]
