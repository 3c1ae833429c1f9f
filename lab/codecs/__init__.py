"""Low-bit codecs: the paper's 8-bit types, user bit layouts, hardware formats, gradient
compressors, and error feedback. `get_codec(name, **options)` builds any of them by name."""
from __future__ import annotations

from typing import Any

from . import onebit, qsgd, sparsify, tables, terngrad  # noqa: F401  (registers the compressors)
from . import mx, nvfp4  # noqa: F401  (registers the block-scaled formats)
from .error_feedback import ErrorFeedback
from .base import Codec, Encoded, codec_help, codec_names, get_codec, register
from .native import FP8, CastCodec, Fp8Codec, Int8Codec
from .table_codec import TableCodec
from .tables import Layout, ValueTable


def _table_options(kw: dict[str, Any]) -> dict[str, Any]:
    allowed = {"rounding", "scale", "block_size", "nonfinite", "search"}
    bad = set(kw) - allowed
    if bad:
        raise TypeError(f"unexpected option(s) {sorted(bad)}; allowed: {sorted(allowed)}")
    return kw


@register("dynamic_tree", "8-bit dynamic tree (Dettmers 2016 §3.1): absmax scaling, 1e-6..1")
def _dynamic_tree(**kw: Any) -> Codec:
    return TableCodec(tables.dynamic_tree(), **_table_options(kw))


@register("linear", "8-bit linear quantization (Dettmers 2016 §3.1): absmax scaling, k/127")
def _linear(**kw: Any) -> Codec:
    return TableCodec(tables.linear(), **_table_options(kw))


@register("mantissa", "8-bit mantissa (Dettmers 2016 §3.1): 3-bit exponent + 4-bit integer mantissa; "
                      "option offset (default 1: 10^1); unscaled: beyond 15·10^offset saturates (counted)")
def _mantissa(offset: int = 1, **kw: Any) -> Codec:
    kw.setdefault("scale", "none")
    return TableCodec(tables.mantissa(offset), name="mantissa", **_table_options(kw))


@register("static_tree", "8-bit static tree (Dettmers 2016 §3.1): 3-bit exponent + 4-bit bisection tree; "
                         "option offset (default 1: 10^1); the lowest pattern codes 0 (docs/codecs.md); "
                         "unscaled: beyond the top leaf saturates (counted)")
def _static_tree(offset: int = 1, **kw: Any) -> Codec:
    kw.setdefault("scale", "none")
    return TableCodec(tables.static_tree(offset), name="static_tree", **_table_options(kw))


@register("bnb_dynamic", "bitsandbytes' dynamic map (create_dynamic_map), nearest rounding")
def _bnb_dynamic(**kw: Any) -> Codec:
    return TableCodec(tables.bnb_dynamic(), **_table_options(kw))


@register("layout", "any bit layout: total_bits, signed, exponent_bits, base, offset, mantissa, dynamic")
def _layout(total_bits: int = 8, signed: bool = True, exponent_bits: int = 0, base: int = 10,
            offset: int = 0, mantissa: str = "tree", dynamic: bool = True, **kw: Any) -> Codec:
    layout = Layout(total_bits, signed, exponent_bits, base, offset, mantissa, dynamic)
    return TableCodec(layout.table(), **_table_options(kw))


for _fmt in CastCodec.FORMATS:
    register(_fmt, f"{_fmt} cast (summable); beyond the format's range saturates (counted)")(
        lambda _f=_fmt, **kw: CastCodec(_f, **kw))
for _fmt in FP8:
    register(_fmt, f"{_fmt} with a per-tensor scale to the format's maximum")(
        lambda _f=_fmt, **kw: Fp8Codec(_f, **kw))
register("int8", "symmetric absmax int8 (-127..127)")(lambda **kw: Int8Codec(**kw))

__all__ = ["Codec", "Encoded", "ErrorFeedback", "TableCodec", "Layout", "ValueTable", "CastCodec", "Fp8Codec",
           "Int8Codec", "get_codec", "codec_names", "codec_help", "register", "tables"]
