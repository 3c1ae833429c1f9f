"""The codec catalog for the UIs (docs/design.md rule 3): every registered codec with its options, flags
and planner work model, straight from the registry (`lab.codecs.registry`), and the spec-string
helpers a UI needs to turn widget values into a codec."""
from __future__ import annotations

from typing import Any, Mapping

from lab.codecs.registry import CodecInfo, OptionSpec, codec_infos, format_spec, split_spec


def codec_catalog() -> list[CodecInfo]:
    """Every registered codec (name, summary, options, flags), sorted by name."""
    return codec_infos()


def codec_spec(name: str, options: Mapping[str, Any] | None = None, *, error_feedback: bool = False) -> str:
    """The spec string of a codec choice and its option values (defaults left out)."""
    return format_spec(name, options, error_feedback=error_feedback)


def check_codec_spec(spec: str) -> str:
    """`spec` if it names a registered codec with valid options; ValueError naming what is wrong."""
    split_spec(spec)
    return spec


__all__ = ["codec_catalog", "codec_spec", "check_codec_spec", "CodecInfo", "OptionSpec"]
