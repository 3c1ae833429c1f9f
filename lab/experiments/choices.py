"""What the UIs offer, read from the lab's registries and presets (docs/design.md rule 3: app/, notebooks/
and lab/cli/ import lab.experiments, lab.plots and lab.backend only). Names here are the ones the
pages, notebooks and CLI options show; nothing is listed twice."""
from __future__ import annotations

from pickle import UnpicklingError

from lab.augment.color_casting import SHIFTS as COLOR_SHIFTS
from lab.augment.distortion import DEGREES as DISTORTION_DEGREES, KINDS as DISTORTION_KINDS
from lab.augment.distortion import MAX_DEGREE as MAX_DISTORTION_DEGREE
from lab.augment.rotating import ANGLES as ROTATION_ANGLES
from lab.codecs import TableCodec, codec_help, codec_names, get_codec
from lab.comm.base import CommError
from lab.comm.algorithms import algorithm_names
from lab.comm.cost import LINKS, custom_link
from lab.data import CORPORA, DATASETS, DataError
from lab.dropout import check_rate
from lab.plan import DEVICES, MODELS, STRATEGIES, crossover, custom_device, get_model, link_presets, resolve_link
from lab.train.consistency import GRAPHS as CONSISTENCY_GRAPHS, KINDS as CONSISTENCY_KINDS

# Errors the lab raises for bad input: a UI shows their message, never a traceback. TypeError is not
# one of them: it is a bug in the caller, and hiding it would hide the bug. OSError covers a file the user
# named that is missing or unreadable (FileNotFoundError, PermissionError, IsADirectoryError); UnpicklingError
# a file that is not what it claims to be.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, OSError, UnpicklingError, CommError,
                                                DataError)



def __getattr__(name: str):
    if name == "ALGORITHMS":  # live: every registered algorithm's name now, a plugin registered later included
        return tuple(algorithm_names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALGORITHMS", "LINKS", "custom_link", "codec_names", "codec_help", "get_codec", "TableCodec",
           "DATASETS", "CORPORA", "DataError", "CommError", "USER_ERRORS", "check_rate", "CONSISTENCY_KINDS", "CONSISTENCY_GRAPHS",
           "DEVICES", "MODELS", "STRATEGIES", "crossover", "custom_device", "get_model", "link_presets",
           "resolve_link", "COLOR_SHIFTS", "ROTATION_ANGLES", "DISTORTION_DEGREES", "DISTORTION_KINDS",
           "MAX_DISTORTION_DEGREE"]
