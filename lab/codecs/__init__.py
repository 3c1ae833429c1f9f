"""Low-bit codecs: the paper's 8-bit types, user bit layouts, hardware formats, gradient
compressors, error-feedback memory, their wire format and fused hops. Each codec module registers
a `CodecInfo` (lab/codecs/registry.py); the registry finds them (every module of this package,
entry points `paralab.codecs`, see lab/plugins.py), so no list of them is kept here.
`parse_spec('dynamic_tree:rounding=paper')` or `get_codec(name, **options)` builds any of them."""
from __future__ import annotations

from . import tables
from .base import Codec, Encoded
from .error_feedback import ErrorFeedback
from .native import FP8, CastCodec, Fp8Codec, Int8Codec
from .registry import (FP32_ALIASES, CodecInfo, OptionSpec, WorkModel, canonical_spec, codec_help, codec_info,
                       codec_infos, codec_names, format_spec, get_codec, parse_spec, register, unregister)
from .table_codec import TableCodec
from .tables import BitLayout, ValueTable
from .wire import WireFormat

__all__ = ["Codec", "Encoded", "ErrorFeedback", "TableCodec", "BitLayout", "ValueTable", "CastCodec", "Fp8Codec",
           "Int8Codec", "FP8", "CodecInfo", "OptionSpec", "WorkModel", "WireFormat", "codec_infos", "codec_info",
           "parse_spec", "format_spec", "register", "unregister", "get_codec", "codec_names", "codec_help", "tables",
           "canonical_spec", "FP32_ALIASES"]
