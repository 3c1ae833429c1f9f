"""Low-bit codecs: the paper's 8-bit types, user bit layouts, hardware formats, gradient
compressors, error-feedback memory, their wire format and fused hops. Each codec module registers
a `CodecInfo` (lab/codecs/registry.py); `parse_spec('dynamic_tree:rounding=paper')` or
`get_codec(name, **options)` builds any of them."""
from __future__ import annotations

from . import native, onebit, qsgd, sparsify, table_codec, terngrad  # noqa: F401  (register themselves)
from . import mx, nvfp4  # noqa: F401  (the block-scaled formats register themselves)
from . import powersgd  # noqa: F401  (PowerSGD, Vogels et al. 2019)
from .error_feedback import ErrorFeedback
from .base import Codec, Encoded
from .native import FP8, CastCodec, Fp8Codec, Int8Codec
from .registry import (CodecInfo, OptionSpec, WorkModel, codec_help, codec_info, codec_infos, codec_names,
                       format_spec, get_codec, parse_spec, register, unregister)
from .table_codec import TableCodec
from .tables import BitLayout, ValueTable
from . import tables  # noqa: F401

__all__ = ["Codec", "Encoded", "ErrorFeedback", "TableCodec", "BitLayout", "ValueTable", "CastCodec", "Fp8Codec",
           "Int8Codec", "CodecInfo", "OptionSpec", "WorkModel", "codec_infos", "codec_info", "parse_spec",
           "format_spec", "register", "unregister", "get_codec", "codec_names", "codec_help", "tables"]
