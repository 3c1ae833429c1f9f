"""Word-level text corpora for the LSTM language-model experiment (Song et al. §IV-C), offline.

Sources, in the order `name="auto"` tries them:

* Penn Treebank (Mikolov's preprocessed `ptb.train.txt`, `ptb.valid.txt`, `ptb.test.txt`) from a
  directory the user gives (`path`); the paper's data set.
* Debian's `fortunes` (/usr/share/games/fortunes: plain text, fortunes separated by lines "%"):
  fortunes are shuffled with the seed and split 90/5/5.
* Debian's `bible-kjv` through its `bible` command (verses; every 20th chapter is validation,
  the one after it test).

Text is lowercased and split into words and punctuation; every line (PTB), fortune or verse
ends with <eos>; words outside the `vocab_size - 2` most frequent training words become <unk>.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import torch

FORTUNES_DIR = Path("/usr/share/games/fortunes")
PTB_FILES = ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")
CORPORA = ("auto", "ptb", "fortunes", "bible")
EOS, UNK = "<eos>", "<unk>"
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


@dataclass
class Corpus:
    """Token ids of the three splits and the vocabulary (id -> word)."""

    name: str
    source: str
    vocab: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def decode(self, ids: torch.Tensor) -> str:
        return " ".join(self.vocab[i] for i in ids.tolist())


def tokenize(text: str) -> list[str]:
    """Lowercase words (with an apostrophe suffix such as n't/'s kept) and single punctuation marks."""
    return _TOKEN.findall(text.lower())


def _ptb_dir(path: Optional[str | os.PathLike]) -> Optional[Path]:
    if path is None:
        return None
    p = Path(path).expanduser()
    for d in (p, p / "data", p / "simple-examples" / "data"):
        if all((d / f).is_file() for f in PTB_FILES):
            return d
    return None


def _fortunes(seed: int) -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    files = sorted(f for f in FORTUNES_DIR.iterdir()
                   if f.is_file() and not f.is_symlink() and f.suffix not in (".dat", ".u8"))
    if not files:
        raise FileNotFoundError(f"no fortune files in {FORTUNES_DIR} (apt install fortunes)")
    docs: list[list[str]] = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for chunk in re.split(r"^%\s*$", text, flags=re.M):
            toks = tokenize(chunk)
            if toks:
                docs.append(toks + [EOS])
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(docs), generator=g).tolist()
    n_val = n_test = max(1, len(docs) // 20)
    valid = [docs[i] for i in order[:n_val]]
    test = [docs[i] for i in order[n_val:n_val + n_test]]
    train = [docs[i] for i in order[n_val + n_test:]]
    return train, valid, test, f"{FORTUNES_DIR} ({len(files)} files, {len(docs)} fortunes)"


def _bible() -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    exe = shutil.which("bible")
    if exe is None:
        raise FileNotFoundError("the `bible` command is not installed (apt install bible-kjv)")
    out = subprocess.run([exe, "-l0", "Ge1:1-Re22:21"], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    splits: tuple[list, list, list] = ([], [], [])
    chapter = -1
    for line in out.splitlines():
        m = re.match(r"^\s+\d+\s+(.*)$", line)
        if m:
            toks = tokenize(m.group(1))
            if toks:
                k = chapter % 20
                splits[1 if k == 18 else 2 if k == 19 else 0].append(toks + [EOS])
        elif line.strip():
            chapter += 1
        # continuation lines of a wrapped verse are not produced with -l0
    return splits[0], splits[1], splits[2], f"{exe} (KJV, {chapter + 1} chapters)"


def _ptb(d: Path) -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    splits = []
    for f in PTB_FILES:
        lines = (d / f).read_text(encoding="utf-8").splitlines()
        splits.append([line.split() + [EOS] for line in lines if line.strip()])
    return splits[0], splits[1], splits[2], str(d)


def _encode(docs: list[list[str]], index: dict[str, int]) -> torch.Tensor:
    unk = index[UNK]
    return torch.tensor([index.get(w, unk) for doc in docs for w in doc], dtype=torch.long)


def load_corpus(name: str = "auto", path: Optional[str | os.PathLike] = None, *, vocab_size: int = 10_000,
                max_train_tokens: Optional[int] = None, seed: int = 0) -> Corpus:
    """Load a word-level corpus (see the module docstring); `max_train_tokens` truncates the
    training split for quick runs (validation/test are cut to a tenth of it)."""
    if name not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}, got {name!r}")
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be >= 3, got {vocab_size}")
    if max_train_tokens is not None and max_train_tokens < 2:
        raise ValueError(f"max_train_tokens must be >= 2, got {max_train_tokens}")
    ptb = _ptb_dir(path)
    if name == "ptb" or (name == "auto" and path is not None):
        if ptb is None:
            raise FileNotFoundError(f"no Penn Treebank at {path!r}: need a directory with {', '.join(PTB_FILES)}")
        name = "ptb"
    elif name == "auto":
        if FORTUNES_DIR.is_dir():
            name = "fortunes"
        elif shutil.which("bible"):
            name = "bible"
        else:
            raise FileNotFoundError("no corpus: give a Penn Treebank directory, or install Debian's "
                                    "fortunes or bible-kjv")
    if name == "ptb":
        train, valid, test, source = _ptb(ptb)
    elif name == "fortunes":
        if not FORTUNES_DIR.is_dir():
            raise FileNotFoundError(f"{FORTUNES_DIR} not found (apt install fortunes)")
        train, valid, test, source = _fortunes(seed)
    else:
        train, valid, test, source = _bible()
    counts = Counter(w for doc in train for w in doc)
    counts.pop(EOS, None)
    counts.pop(UNK, None)
    vocab = [EOS, UNK] + [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:vocab_size - 2]]
    index = {w: i for i, w in enumerate(vocab)}
    tr, va, te = _encode(train, index), _encode(valid, index), _encode(test, index)
    if max_train_tokens is not None:
        tr = tr[:max_train_tokens]
        va = va[:max(2, max_train_tokens // 10)]
        te = te[:max(2, max_train_tokens // 10)]
    return Corpus(name, source, vocab, tr, va, te)


def batchify(data: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(T, batch) columns of consecutive text, the tail that does not fill a column dropped."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = data.numel() // batch_size
    if n < 2:
        raise ValueError(f"{data.numel()} tokens are too few for batch size {batch_size}")
    return data[:n * batch_size].view(batch_size, n).t().contiguous()


def bptt_batches(columns: torch.Tensor, bptt: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(input, target) windows of `bptt` steps over batchified columns; target = input shifted by one."""
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    for i in range(0, columns.shape[0] - 1, bptt):
        n = min(bptt, columns.shape[0] - 1 - i)
        yield columns[i:i + n], columns[i + 1:i + 1 + n]
