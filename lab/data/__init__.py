"""Data sets and text corpora, offline: MNIST-format IDX images (else Fashion-MNIST, else
scikit-learn's digits) and word corpora for the LSTM language model. Shared by `lab.train` and
`lab.dropout`; depends on nothing else in the lab."""
from .images import DATASETS, Dataset, DataError, load_dataset
from .text import CORPORA, CORPUS_HELP, Corpus, available_corpora, load_corpus

__all__ = ["DATASETS", "Dataset", "DataError", "load_dataset", "CORPORA", "CORPUS_HELP", "Corpus",
           "available_corpora", "load_corpus"]
