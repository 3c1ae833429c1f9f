"""Silence the known third-party messages that would otherwise land in `paralab`'s output.

Only the exact messages listed here are dropped (a logging filter on the logger that emits each, a
warnings filter on each message); everything else still reaches the user. Imported by `lab.cli`
before anything that may import bitsandbytes or torch.compile's helpers.
"""
from __future__ import annotations

import logging
import warnings

# (logger name, start of the message): logged once at import on CPUs with AVX512-BF16 when the
# optional `kernels` package (a Hugging Face Hub download) is missing. ParaLab never uses 4-bit GEMM.
KNOWN_LOG_MESSAGES = (
    ("bitsandbytes.backends.cpu.ops", "Failed to load CPU gemm_4bit_forward from kernels-community"),
    # torchao (the codec benchmark's to_mx baseline) tries its CUDA extensions at import, on every machine
    ("torchao", "Failed to load "),
    # torchao registers its Enum configs with torch's pytree at import; torch 2.10 calls that deprecated
    ("torch.utils._pytree", "%s is an Enum subclass and is now natively supported"),
)
# (category, regex on the start of the message): raised by torch's own modules that torch.compile
# imports (torch/utils/mkldnn.py), not by anything ParaLab calls.
KNOWN_WARNINGS = (
    (DeprecationWarning, r"`torch\.jit\.script_method` is deprecated"),
)


class _DropKnown(logging.Filter):
    """Drops the records whose message starts with one of `prefixes`; passes every other one."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


def install() -> None:
    """Add the filters (idempotent)."""
    by_logger: dict[str, list[str]] = {}
    for name, prefix in KNOWN_LOG_MESSAGES:
        by_logger.setdefault(name, []).append(prefix)
    for name, prefixes in by_logger.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnown) for f in logger.filters):
            logger.addFilter(_DropKnown(tuple(prefixes)))
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


install()
