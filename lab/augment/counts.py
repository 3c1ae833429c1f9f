"""Table 1 of Wu et al. 2015: the number of possible changes per augmentation, computed from the
parameter grids the ops draw from (each module's `count()`), beside the paper's figures."""
from __future__ import annotations

import math

import pandas as pd

from . import color_casting, cropping, distortion, flipping, rotating, vignetting
from .common import grid_label

PAPER_TABLE1: dict[str, int] = {"color_cast": 68920, "vignette": 1960, "lens_distortion": 260,
                                "rotation": 20, "flip": 2, "crop": 82944}


def table1_counts(image_size=cropping.PAPER_IMAGE, crop_size=cropping.PAPER_CROP, channels: int = 3) -> pd.DataFrame:
    """Columns: augmentation, possible_changes (from the grids), paper (Table 1; crop only for 224 of
    512), matches, grid (what is drawn). A last row multiplies them: the distinct augmented crops."""
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ValueError(f"channels must be an int >= 1, got {channels!r}")
    sizes = (cropping.size_pair(image_size, "image size"), cropping.size_pair(crop_size, "crop size"))
    (H, W), (h, w) = sizes
    paper_crop = sizes == ((512, 512), (224, 224))
    rows = [
        ("color_cast", color_casting.count(channels),
         f"per channel: alter (p={color_casting.ALTER_P:g}) by {color_casting.SHIFTS[0]}..+{color_casting.SHIFTS[-1]}; "
         f"{channels} channels, identity excluded"),
        ("vignette", vignetting.count(), f"area {grid_label(vignetting.AREAS)} x strength {grid_label(vignetting.STRENGTHS)}"),
        ("lens_distortion", distortion.count(),
         f"{' / '.join(distortion.KINDS)} x degree {grid_label(distortion.DEGREES)}"),
        ("rotation", rotating.count(), f"angle {grid_label(rotating.ANGLES)} degrees"),
        ("flip", flipping.count(), "unflipped, flipped"),
        ("crop", cropping.count((H, W), (h, w)),
         f"{h}x{w} from {H}x{W}: {len(cropping.offsets(H, h))} x {len(cropping.offsets(W, w))} offsets"),
    ]
    out = []
    for a, n, g in rows:
        paper = PAPER_TABLE1[a] if (a != "crop" or paper_crop) and (a != "color_cast" or channels == 3) else None
        out.append({"augmentation": a, "possible_changes": n, "paper": paper,
                    "matches": None if paper is None else bool(n == paper), "grid": g})
    total = math.prod(int(r["possible_changes"]) for r in out)
    out.append({"augmentation": "all (product)", "possible_changes": total, "paper": None, "matches": None,
                "grid": "every combination of the above"})
    df = pd.DataFrame(out)
    return df[["augmentation", "possible_changes", "paper", "matches", "grid"]]


__all__ = ["PAPER_TABLE1", "table1_counts"]
