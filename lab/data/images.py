"""Image data sets for the training experiments: MNIST-format IDX files, or scikit-learn's digits.

`load_dataset("auto")` takes real MNIST when its IDX files are found, else Fashion-MNIST (Debian's
`dataset-fashion-mnist` installs it in /usr/share/datasets/fashion-mnist/), else scikit-learn's
bundled 8x8 digits (1,797 images, instant). A directory is searched for the four standard files
`{train,t10k}-{images-idx3,labels-idx1}-ubyte`, gzipped or not (also torchvision's `.idx3-ubyte`
spelling). Pixels become float32 in [0, 1], flattened; labels int64.
"""
from __future__ import annotations

import gzip
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .system import system_path

if TYPE_CHECKING:
    import numpy as np

DATASETS = ("auto", "mnist", "fashion-mnist", "digits")
ENV_PATH = "PARALAB_DATA"
FASHION_DEBIAN = Path("/usr/share/datasets/fashion-mnist")
_IDX_DTYPES = {0x08: torch.uint8, 0x09: torch.int8, 0x0B: torch.int16, 0x0C: torch.int32,
               0x0D: torch.float32, 0x0E: torch.float64}
_IDX_ITEM = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}
_SPLITS = {"train": "train", "test": "t10k"}


class DataError(ValueError):
    """A data set is missing, unreadable or not what its name says."""


@dataclass(frozen=True)
class Dataset:
    """Train and test splits: x float32 (N, D) in [0, 1], y int64 (N,)."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: int
    image_shape: tuple[int, int]
    source: str

    @property
    def features(self) -> int:
        return self.train_x.shape[1]

    def subset(self, train: int | None = None, test: int | None = None, seed: int = 0) -> "Dataset":
        """A seeded random subset of each split (None keeps a split whole): for quick runs."""
        g = torch.Generator().manual_seed(seed)

        def take(x: torch.Tensor, y: torch.Tensor, k: int | None) -> tuple[torch.Tensor, torch.Tensor]:
            if k is None or k >= len(y):
                return x, y
            if k < 1:
                raise ValueError(f"subset size {k}; it must be >= 1")
            idx = torch.randperm(len(y), generator=g)[:k]
            return x[idx], y[idx]

        trx, try_ = take(self.train_x, self.train_y, train)
        tex, tey = take(self.test_x, self.test_y, test)
        return Dataset(self.name, trx, try_, tex, tey, self.classes, self.image_shape, self.source)


def read_idx(path: str | Path) -> torch.Tensor:
    """One IDX file (gzipped or raw) as a tensor of its stored dtype and shape."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"cannot read IDX file {path}: {e}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataError(f"{path} is not an IDX file: expected the magic bytes 00 00 <type> <ndim> "
                        f"(type one of {', '.join(hex(t) for t in _IDX_DTYPES)}), got {raw[:4].hex(' ')}")
    kind, ndim = raw[2], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: truncated IDX header ({len(raw)} bytes, {ndim} dimensions need {header})")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    count = 1
    for s in shape:
        count *= s
    need = header + count * _IDX_ITEM[kind]
    if len(raw) != need:
        raise DataError(f"{path}: IDX shape {shape} needs {need} bytes, the file has {len(raw)} "
                        f"({'truncated' if len(raw) < need else 'trailing data'})")
    dtype = _IDX_DTYPES[kind]
    data = bytearray(raw[header:])
    t = torch.frombuffer(data, dtype=torch.uint8) if count else torch.empty(0, dtype=torch.uint8)
    if dtype != torch.uint8:
        t = t.view(dtype)
        if _IDX_ITEM[kind] > 1:  # IDX is big-endian
            t = t.view(torch.uint8).view(-1, _IDX_ITEM[kind]).flip(1).reshape(-1).view(dtype)
    return t.reshape(shape)


def write_idx(path: str | Path, t: torch.Tensor) -> Path:
    """Write a tensor as an IDX file (gzipped when the name ends in .gz); the inverse of read_idx."""
    kinds = {v: k for k, v in _IDX_DTYPES.items()}
    if t.dtype not in kinds:
        raise ValueError(f"IDX stores {', '.join(map(str, kinds))}; got {t.dtype}")
    kind = kinds[t.dtype]
    body = t.contiguous().cpu()
    if _IDX_ITEM[kind] > 1:
        body = body.view(torch.uint8).view(-1, _IDX_ITEM[kind]).flip(1)
    raw = bytes([0, 0, kind, t.dim()]) + struct.pack(f">{t.dim()}I", *t.shape) + body.numpy().tobytes()
    path = Path(path)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def find_idx(directory: str | Path, split: str, what: str) -> Path | None:
    """The IDX file for split ('train'|'test') and what ('images'|'labels') in directory, or None."""
    d = Path(directory)
    stem = f"{_SPLITS[split]}-{what}-idx{3 if what == 'images' else 1}-ubyte"
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (d / name).is_file():
            return d / name
    return None


def load_idx_dir(directory: str | Path, name: str = "mnist") -> Dataset:
    """The four MNIST-format files of one directory as a Dataset; a clear error naming what is missing."""
    d = Path(directory)
    if not d.is_dir():
        raise DataError(f"{d} is not a directory; expected one holding train-images-idx3-ubyte[.gz], "
                        "train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]")
    parts = {}
    for split in _SPLITS:
        for what in ("images", "labels"):
            p = find_idx(d, split, what)
            if p is None:
                raise DataError(f"{d} has no {_SPLITS[split]}-{what}-idx{3 if what == 'images' else 1}-ubyte"
                                "[.gz]; an MNIST-format directory holds the train and t10k images and labels")
            parts[split, what] = read_idx(p)
    out = {}
    for split in _SPLITS:
        x, y = parts[split, "images"], parts[split, "labels"]
        if x.dim() != 3 or x.dtype != torch.uint8:
            raise DataError(f"{d}: {split} images have shape {tuple(x.shape)} of {x.dtype}; expected (N, H, W) uint8")
        if y.dim() != 1 or len(y) != len(x):
            raise DataError(f"{d}: {len(x)} {split} images but labels of shape {tuple(y.shape)}")
        out[split] = (x.reshape(len(x), -1).float().div_(255.0), y.long())
    classes = int(max(out["train"][1].max(), out["test"][1].max())) + 1 if len(out["train"][1]) else 0
    h, w = parts["train", "images"].shape[1:]
    return Dataset(name, *out["train"], *out["test"], classes, (h, w), str(d))


def digits_table() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits as `sklearn.datasets.load_digits()` gives them: (data (1797, 64) float64 pixel
    counts 0-16, target (1797,) int). Read from the file scikit-learn ships them in (sklearn/datasets/data/
    digits.csv.gz, parsed as load_digits parses it) without importing scikit-learn, whose import, with SciPy's,
    cost ~2 core-seconds in every process that trained on the digits (rank processes included); load_digits
    itself where that file is not found."""
    import importlib.util

    import numpy as np

    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        csv = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if csv.is_file():
            table = np.loadtxt(csv, delimiter=",")
            return table[:, :-1], table[:, -1].astype(int, copy=False)
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    return bunch.data, bunch.target


def load_digits(seed: int = 0, test_fraction: float = 0.25) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1,797 images), split with a seeded shuffle."""
    data, target = digits_table()
    x = torch.tensor(data, dtype=torch.float32) / 16.0
    y = torch.tensor(target, dtype=torch.int64)
    idx = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(len(y) * test_fraction))
    te, tr = idx[:n_test], idx[n_test:]
    return Dataset("digits", x[tr], y[tr], x[te], y[te], 10, (8, 8), "sklearn.datasets.load_digits")


def candidate_dirs(name: str, path: str | Path | None = None) -> list[Path]:
    """Where an IDX data set is looked for, in order: the given path, $PARALAB_DATA (itself and
    its <name>/ subfolder), ~/.cache/paralab/<name>, torchvision's ./data/<Name>/raw, Debian's
    (under $PARALAB_SYSTEM_DATA_ROOT when set, see `lab.data.system`)."""
    out: list[Path] = []
    tv = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}[name]
    for base in (path, os.environ.get(ENV_PATH)):
        if base:
            out += [Path(base), Path(base) / name, Path(base) / tv / "raw"]
    out += [Path.home() / ".cache" / "paralab" / name, Path("data") / tv / "raw",
            Path.home() / ".cache" / "torchvision" / tv / "raw", system_path(Path("/usr/share/datasets") / name)]
    if name == "fashion-mnist":
        out.append(system_path(FASHION_DEBIAN))
    return out


def _locate(name: str, path: str | Path | None) -> Path | None:
    dirs = candidate_dirs(name, path)
    if path is not None:  # a path the user gave is the only place looked
        dirs = dirs[:3]
    for d in dirs:
        if all(find_idx(d, s, w) for s in _SPLITS for w in ("images", "labels")):
            return d
    return None


def locate_dataset(name: str = "auto", path: str | Path | None = None) -> tuple[str, Path | None]:
    """Where `load_dataset(name, path)` reads from, found without reading it: (the data set's name, its
    IDX folder), or ('digits', None) for scikit-learn's digits. DataError, naming where it looked, when
    the name is unknown or no IDX files are found (a folder given is the only place looked)."""
    if name not in DATASETS:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
    if path is not None and name == "digits":
        raise DataError("the digits data set ships with scikit-learn; path= is for MNIST-format IDX files")
    if path is not None and not Path(path).is_dir():
        raise DataError(f"data path {path} is not a directory")
    if name == "digits":
        return "digits", None
    names = ("mnist", "fashion-mnist") if name == "auto" else (name,)
    for candidate in names:
        d = _locate(candidate, path)
        if d is not None:
            return candidate, d
    if name == "auto" and path is None:
        return "digits", None
    looked = dict.fromkeys(d for n in names for d in candidate_dirs(n, path)[:3 if path is not None else None])
    hint = " (Debian: apt install dataset-fashion-mnist)" if name == "fashion-mnist" else ""
    what = " or ".join(names)
    raise DataError(f"no {what} IDX files found; looked in: {', '.join(map(str, looked))}{hint}")


def load_dataset(name: str = "auto", path: str | Path | None = None, seed: int = 0) -> Dataset:
    """A data set by name: 'mnist', 'fashion-mnist', 'digits', or 'auto' (the first that exists
    of MNIST, Fashion-MNIST, digits). `path` is a directory of IDX files, and then the only place
    looked; `seed` only shuffles the digits split."""
    found, d = locate_dataset(name, path)
    return load_digits(seed) if d is None else load_idx_dir(d, found)


__all__ = ["DATASETS", "Dataset", "DataError", "read_idx", "write_idx", "find_idx", "load_idx_dir", "load_digits",
           "load_dataset", "locate_dataset", "candidate_dirs"]
