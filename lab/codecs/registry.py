"""The codec registry: every codec's name, options (types, ranges, defaults), flags and planner
work model, and the one spec-string parser every entry point uses (docs/design.md rule 6).

A codec is one module that calls `register(CodecInfo(...))`. A spec string names a configured
codec: `name[:option=value,...]`, optionally behind `ef:` for error-feedback memory, e.g.
`dynamic_tree:rounding=paper,block_size=4096`, `ef:onebit`, `topk:ratio=0.01`.
Codecs are found the way algorithms are (`lab.plugins`): every module of this package, the entry
points of group `paralab.codecs`, modules named in $PARALAB_CODECS, and modules whose codecs were
registered at run time (carried to the rank processes `lab.comm.launch` starts). Nothing lists them.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .. import plugins

from .base import NONFINITE, Codec, check_nonfinite
from .error_feedback import ErrorFeedback

EF_PREFIX = "ef"
PLUGINS_ENV = "PARALAB_CODECS"
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True)
class OptionSpec:
    """One codec option: its type (bool, int, float or str), default, and either `choices` or a
    closed range `(min, max)` (None for an open end). `optional`: None is a value too (meaning
    `default`'s absence, e.g. block_size=None for one scale per tensor)."""

    name: str
    type: type
    default: Any
    choices: tuple[Any, ...] | None = None
    range: tuple[float | None, float | None] | None = None
    help: str = ""
    optional: bool = False

    def check(self, value: Any) -> Any:
        """`value` validated (ints accepted for floats); ValueError naming the option and what is allowed."""
        if value is None and (self.optional or self.default is None):
            return None
        t = self.type
        ok = (isinstance(value, bool) if t is bool else
              isinstance(value, int) and not isinstance(value, bool) if t is int else
              isinstance(value, (int, float)) and not isinstance(value, bool) if t is float else
              isinstance(value, t))
        if not ok:
            raise ValueError(f"option {self.name}={value!r}; allowed: {self.allowed()}")
        if t is float:
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"option {self.name}={value!r}; allowed: {self.allowed()}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"option {self.name}={value!r}; allowed: {self.allowed()}")
        if self.range is not None:
            lo, hi = self.range
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ValueError(f"option {self.name}={value!r}; allowed: {self.allowed()}")
        return value

    def parse(self, text: str) -> Any:
        """The value a spec string's text stands for, checked."""
        s = text.strip()
        if s.lower() == "none" and (self.optional or self.default is None):
            return None
        try:
            if self.type is bool:
                if s.lower() not in _TRUE + _FALSE:
                    raise ValueError
                value: Any = s.lower() in _TRUE
            elif self.type is int:
                value = int(s)
            elif self.type is float:
                value = float(s)
            else:
                value = s
        except ValueError:
            raise ValueError(f"option {self.name}={text!r}; allowed: {self.allowed()}") from None
        return self.check(value)

    def allowed(self) -> str:
        """What the option takes, in words."""
        if self.choices is not None:
            text = ", ".join(map(str, self.choices))
        elif self.range is not None:
            lo, hi = self.range
            text = f"{self.type.__name__} in [{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        else:
            text = "true or false" if self.type is bool else f"a {self.type.__name__}"
        return text + (" or none" if self.optional or self.default is None else "")


@dataclass(frozen=True)
class WorkModel:
    """Codec work as the planner models it (`lab.plan.wire`): bytes read and written per value are
    4 + w (encode) and w + 4 (decode), w the measured wire bytes per value, plus
    `extra_encode_bytes`; `encode_kernels` / `decode_kernels` launches per message.
    `raw`: the codec is uncompressed fp32 (no work, no codec on the wire)."""

    extra_encode_bytes: float = 0.0
    encode_kernels: int = 2
    decode_kernels: int = 1
    raw: bool = False


@dataclass(frozen=True)
class CodecInfo:
    """A registered codec: `factory(**options)` builds it.

    Declared here: `gradient_only` (a gradient compressor; model parallelism cannot use it on
    activations, Dettmers 2016 §2.2), `two_stage` (the planner runs it as a two-encoding allreduce,
    Seide et al.'s 1-bit SGD), `table` (a value-table codec with the fused CUDA hop), `work` (the
    planner's work model). Read from the codec class (declared once, there; a codec built with
    default options answers): `summable` (payloads add on the wire), `stochastic` (random rounding or
    sampling; seeded), `phased` (runs its own collective: fp32 sums of what it computes, e.g.
    PowerSGD's low-rank factors; neither re-encoded per hop nor gathered), `gather_only` (neither
    re-encoded at every hop nor phased: collectives gather it)."""

    name: str
    summary: str
    factory: Callable[..., Codec]
    options: tuple[OptionSpec, ...] = ()
    gradient_only: bool = False
    two_stage: bool = False
    table: bool = False
    work: WorkModel = field(default_factory=WorkModel)

    @functools.cached_property
    def probe(self) -> Codec:
        """The codec built with default options (its class's flags answer the questions below)."""
        return self.build()

    @property
    def summable(self) -> bool:
        return bool(self.probe.summable)

    @property
    def stochastic(self) -> bool:
        return bool(self.probe.stochastic)

    @property
    def phased(self) -> bool:
        return bool(self.probe.phases)

    @property
    def gather_only(self) -> bool:
        return not self.probe.requantize and not self.probe.phases

    def option(self, name: str) -> OptionSpec:
        for o in self.options:
            if o.name == name:
                return o
        raise ValueError(f"bad options for codec {self.name!r}: no option {name!r}; "
                         f"allowed: {', '.join(o.name for o in self.options) or 'none'}")

    def defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def build(self, **options: Any) -> Codec:
        """The codec with `options` (checked against the specs first)."""
        checked = {k: self.option(k).check(v) for k, v in options.items()}
        return self.factory(**checked)


def _module(info: CodecInfo) -> str:
    """The module that defines the codec (where its factory lives)."""
    return getattr(info.factory, "__module__", "") or ""


def _check(info: CodecInfo) -> None:
    if not info.name or not info.name.replace("_", "").isalnum() or info.name == EF_PREFIX:
        raise ValueError(f"codec name {info.name!r}; allowed: letters, digits and '_', not {EF_PREFIX!r}")
    if info.name in REGISTRY.items:
        raise ValueError(f"codec name {info.name!r} registered twice")
    names = [o.name for o in info.options]
    if len(set(names)) != len(names):
        raise ValueError(f"codec {info.name!r} declares an option twice: {names}")


#: every codec found (`lab.plugins`): a codec module registers its codecs at import; an entry point may
#: also give a CodecInfo or a list of them
REGISTRY: plugins.Registry[CodecInfo] = plugins.Registry(
    "codecs", __name__.rsplit(".", 1)[0], "paralab.codecs", PLUGINS_ENV, CodecInfo, attr=None,
    key=lambda i: i.name, label=lambda i: f"codec {i.name!r}", module_of=_module, check=_check,
    protect_builtins=False)


def register(info: CodecInfo) -> CodecInfo:
    """Make a codec reachable by name from every entry point (CLI, dashboard, DDP hook, allreduce,
    planner). A name is registered once. The module of a codec registered at run time is carried to
    the rank processes `lab.comm.launch` starts (`lab.plugins`); nothing is written to the environment."""
    return REGISTRY.register(info)


def unregister(name: str) -> None:
    """Remove a codec (tests that register a temporary one)."""
    info = REGISTRY.items.get(name)
    if info is not None:
        REGISTRY.remove(info)


def codec_infos() -> list[CodecInfo]:
    """Every registered codec, sorted by name."""
    return REGISTRY.ordered()


def codec_info(name: str) -> CodecInfo:
    """The CodecInfo of `name`; ValueError listing the known names."""
    return REGISTRY.lookup(name, "unknown codec {key!r}; known codecs: {known}")


def codec_names() -> list[str]:
    """Every registered codec name, sorted."""
    return REGISTRY.names()


def codec_help() -> dict[str, str]:
    """name -> one-line description."""
    return {i.name: i.summary for i in codec_infos()}


def get_codec(name: str, **options: Any) -> Codec:
    """Build a codec by name or spec string with keyword options on top, e.g.
    get_codec('dynamic_tree', rounding='paper', block_size=4096) or get_codec('ef:topk:ratio=0.1')."""
    if not isinstance(name, str):
        raise ValueError(f"codec={name!r}; allowed: a codec name or spec string")
    ef, base, opts = split_spec(name)
    info = codec_info(base)
    opts.update(options)
    try:
        codec = info.build(**opts)
    except TypeError as e:
        raise ValueError(f"bad options for codec {base!r}: {e}") from None
    if ef:
        codec = ErrorFeedback(codec)
    return codec


def split_spec(spec: str) -> tuple[bool, str, dict[str, Any]]:
    """(error feedback?, codec name, parsed options) of a spec string `[ef:]name[:k=v,...]`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"codec spec {spec!r}; allowed: '[ef:]name[:option=value,...]', names: "
                         f"{', '.join(codec_names())}")
    parts = spec.strip().split(":", 2 if spec.strip().startswith(EF_PREFIX + ":") else 1)
    ef = parts[0] == EF_PREFIX and len(parts) > 1
    if ef:
        parts = parts[1:]
    name = parts[0].strip()
    info = codec_info(name)
    opts: dict[str, Any] = {}
    if len(parts) > 1 and parts[1].strip():
        for item in parts[1].split(","):
            key, eq, text = item.partition("=")
            if not eq:
                raise ValueError(f"codec spec {spec!r}: {item!r} is not option=value; options of {name!r}: "
                                 f"{', '.join(o.name for o in info.options) or 'none'}")
            key = key.strip()
            if key in opts:
                raise ValueError(f"codec spec {spec!r}: option {key!r} given twice")
            opts[key] = info.option(key).parse(text)
    return ef, name, opts


def parse_spec(spec: str) -> Codec:
    """The codec a spec string names: 'dynamic_tree:rounding=paper,block_size=4096', 'ef:onebit'."""
    return get_codec(spec)


def format_spec(name: str, options: Mapping[str, Any] | None = None, *, error_feedback: bool = False) -> str:
    """The spec string of codec `name` with `options` (defaults left out); parse_spec reads it back."""
    ef = name.startswith(EF_PREFIX + ":")
    if ef:
        name = name[len(EF_PREFIX) + 1:]
    info = codec_info(name)
    items = []
    for key, value in (options or {}).items():
        o = info.option(key)
        value = o.check(value)
        if value == o.default and type(value) is type(o.default):
            continue
        items.append((key, "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)))
    order = {o.name: i for i, o in enumerate(info.options)}
    items.sort(key=lambda kv: order[kv[0]])
    text = name + (":" + ",".join(f"{k}={v}" for k, v in items) if items else "")
    return f"{EF_PREFIX}:{text}" if ef or error_feedback else text


FP32_ALIASES = ("fp32", "none", "32-bit", "")
"""Spellings of 'no codec: plain fp32 gradients' in a codec spec (any case)."""


def canonical_spec(spec: str) -> str:
    """One key per codec a spec builds, for matching spellings: 'fp32' for fp32 (FP32_ALIASES), else
    `[ef:]name:opt=value,...` with every option at the value the built codec holds, sorted ('topk' and
    'topk:ratio=0.01' share a key), then '@N' for an fp32 warm-up of N > 0 steps ('@0' is none).
    ValueError for an unknown codec, a bad option or a bad '@N'."""
    raw = str(spec).strip()
    body, at, warm = raw.rpartition("@") if "@" in raw else (raw, "", "")
    warm = warm.strip()
    if at and not warm.isdigit():
        raise ValueError(f"codec spec {raw!r}: '@{warm}' must be '@N', N >= 0 steps of fp32 warm-up")
    if body.strip().lower() in FP32_ALIASES:
        return "fp32"
    ef, name, opts = split_spec(body)
    info = codec_info(name)
    try:
        built = info.build(**opts)
    except TypeError as e:
        raise ValueError(f"bad options for codec {name!r}: {e}") from None
    vals = {o.name: getattr(built, o.name, opts.get(o.name, o.default)) for o in info.options}
    key = (f"{EF_PREFIX}:" if ef else "") + name + ":" + ",".join(f"{k}={vals[k]!r}" for k in sorted(vals))
    return key + (f"@{int(warm)}" if at and int(warm) else "")


def nonfinite_option() -> OptionSpec:
    return OptionSpec("nonfinite", str, "raise", NONFINITE, help="NaN/Inf in the input: raise a ValueError "
                                                                 "or saturate (NaN -> 0, ±Inf -> ± the largest value)")


def seed_option() -> OptionSpec:
    return OptionSpec("seed", int, 0, range=(0, 2**63 - 1), help="random seed of the codec's generator")


def options(*specs: OptionSpec | Iterable[OptionSpec]) -> tuple[OptionSpec, ...]:
    """Flatten option specs (helper for codec modules)."""
    out: list[OptionSpec] = []
    for s in specs:
        out.extend([s] if isinstance(s, OptionSpec) else s)
    return tuple(out)


__all__ = ["OptionSpec", "WorkModel", "CodecInfo", "register", "unregister", "codec_infos", "codec_info",
           "codec_names", "codec_help", "get_codec", "parse_spec", "format_spec", "split_spec", "canonical_spec", "FP32_ALIASES",
           "check_nonfinite",
           "nonfinite_option", "seed_option", "NONFINITE", "PLUGINS_ENV"]
