"""Word-level text corpora for the LSTM language-model experiment (Song et al. §IV-C), offline.

Sources, in the order `name="auto"` tries them:

* Penn Treebank (Mikolov's preprocessed `ptb.train.txt`, `ptb.valid.txt`, `ptb.test.txt`) from a
  directory the user gives (`path`); the paper's data set.
* Debian's `fortunes` (/usr/share/games/fortunes: plain text, fortunes separated by lines "%"):
  fortunes are shuffled with the seed and split 90/5/5.
* Debian's `bible-kjv` through its `bible` command (verses; every 20th chapter is validation,
  the one after it test).
* The English prose every Python installation ships: the language reference and library topics
  of `pydoc_data.topics` (what `help("topics")` shows, about 450 K characters); paragraphs
  (grammar rules and >>> sessions left out) are shuffled with the seed and split 90/5/5. Always
  there, so the experiment runs on a fresh machine; `Corpus.source` and the tables say which
  corpus was used.

Debian's data is looked for under $PARALAB_SYSTEM_DATA_ROOT when set (`lab.data.system`).

Text is lowercased and split into words and punctuation; every line (PTB), fortune or verse
ends with <eos>; words outside the `vocab_size - 2` most frequent training words become <unk>.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import torch

from .system import system_path, system_which

FORTUNES_DIR = Path("/usr/share/games/fortunes")  # Debian's path; fortunes_dir() honours the system root
PTB_FILES = ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")
CORPORA = ("auto", "ptb", "fortunes", "bible", "pydoc")
CORPUS_HELP = {"auto": "Penn Treebank when a path is given, else fortunes, else bible, else pydoc",
               "ptb": "Penn Treebank (the paper's): a directory with ptb.{train,valid,test}.txt",
               "fortunes": "Debian's fortunes (apt install fortunes)",
               "bible": "Debian's bible-kjv (apt install bible-kjv)",
               "pydoc": "the Python documentation topics that ship with Python (always available)"}
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


def fortunes_dir() -> Path:
    """Debian's fortunes directory (under $PARALAB_SYSTEM_DATA_ROOT when set)."""
    return system_path(FORTUNES_DIR)


def bible_command() -> Optional[str]:
    """Path of bible-kjv's `bible` command, or None when it is not installed."""
    return system_which("bible")


def available_corpora() -> list[str]:
    """The corpora that can be loaded without a path here, in `auto`'s order of preference."""
    out = ["fortunes"] if fortunes_dir().is_dir() else []
    return out + (["bible"] if bible_command() else []) + (["pydoc"] if _pydoc_topics() else [])


def _shuffled_split(docs: list[list[str]], seed: int) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Documents shuffled with the seed and split 90/5/5 (train, valid, test)."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(docs), generator=g).tolist()
    n_val = n_test = max(1, len(docs) // 20)
    valid = [docs[i] for i in order[:n_val]]
    test = [docs[i] for i in order[n_val:n_val + n_test]]
    train = [docs[i] for i in order[n_val + n_test:]]
    return train, valid, test


def _fortunes(seed: int) -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    d = fortunes_dir()
    files = sorted(f for f in d.iterdir()
                   if f.is_file() and not f.is_symlink() and f.suffix not in (".dat", ".u8"))
    if not files:
        raise FileNotFoundError(f"no fortune files in {d} (apt install fortunes)")
    docs: list[list[str]] = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for chunk in re.split(r"^%\s*$", text, flags=re.M):
            toks = tokenize(chunk)
            if toks:
                docs.append(toks + [EOS])
    return (*_shuffled_split(docs, seed), f"{d} ({len(files)} files, {len(docs)} fortunes)")


def _pydoc_topics() -> dict[str, str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:  # a stripped-down Python without its documentation data
        return {}
    return topics


def _pydoc(seed: int) -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    topics = _pydoc_topics()
    if not topics:
        raise FileNotFoundError("this Python has no pydoc_data.topics (its documentation data was left out)")
    docs: list[list[str]] = []
    for name in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[name]):
            if "::=" in para or ">>>" in para:  # grammar rules and interactive sessions are not prose
                continue
            toks = tokenize(para)
            if toks:
                docs.append(toks + [EOS])
    version = ".".join(map(str, sys.version_info[:2]))
    return (*_shuffled_split(docs, seed),
            f"Python {version} documentation topics (pydoc_data.topics: {len(topics)} topics, {len(docs)} paragraphs)")


def _bible() -> tuple[list[list[str]], list[list[str]], list[list[str]], str]:
    exe = bible_command()
    if exe is None:
        raise FileNotFoundError("the `bible` command is not installed (apt install bible-kjv, or use corpus "
                                "'pydoc' or 'auto')")
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
    """Load a word-level corpus by name (`CORPORA`; see the module docstring): 'auto' takes the
    Penn Treebank at `path` when one is given, else the first of fortunes, bible, pydoc that is
    installed. `max_train_tokens` truncates the training split for quick runs (validation/test
    are cut to a tenth of it). Raises FileNotFoundError naming what to install or pass."""
    if name not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}, got {name!r}")
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be >= 3, got {vocab_size}")
    if max_train_tokens is not None and max_train_tokens < 2:
        raise ValueError(f"max_train_tokens must be >= 2, got {max_train_tokens}")
    ptb = _ptb_dir(path)
    if name == "ptb" or (name == "auto" and path is not None):
        if path is None:
            raise FileNotFoundError(f"corpus 'ptb' needs the Penn Treebank directory ({', '.join(PTB_FILES)}); "
                                    "without one use 'auto'")
        if ptb is None:
            raise FileNotFoundError(f"no Penn Treebank at {path!r}: need a directory with {', '.join(PTB_FILES)}")
        name = "ptb"
    elif name == "auto":
        found = available_corpora()
        if not found:
            raise FileNotFoundError("no corpus: give a Penn Treebank directory, or install Debian's "
                                    "fortunes or bible-kjv (this Python has no pydoc_data.topics either)")
        name = found[0]
    if name == "ptb":
        train, valid, test, source = _ptb(ptb)
    elif name == "fortunes":
        if not fortunes_dir().is_dir():
            raise FileNotFoundError(f"{fortunes_dir()} not found (apt install fortunes, or use corpus "
                                    "'pydoc' or 'auto')")
        train, valid, test, source = _fortunes(seed)
    elif name == "pydoc":
        train, valid, test, source = _pydoc(seed)
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
