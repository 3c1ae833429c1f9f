"""Data sets and text corpora, offline: MNIST-format IDX images (else Fashion-MNIST, else
scikit-learn's digits) and word corpora for the LSTM language model. Shared by `lab.train` and
`lab.dropout`; depends on nothing else in the lab.

Names load on first use (PEP 562): `lab.data.system` (where the OS's data is looked for) imports no torch."""
from __future__ import annotations

import importlib
from typing import Any

# module -> the names it gives this package
_EXPORTS = {"images": ("DATASETS", "Dataset", "DataError", "load_dataset"),
            "text": ("CORPORA", "CORPUS_HELP", "Corpus", "available_corpora", "load_corpus")}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'lab.data' has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_MODULE_OF[name]}")
    globals().update({n: getattr(module, n) for n in _EXPORTS[_MODULE_OF[name]]})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
